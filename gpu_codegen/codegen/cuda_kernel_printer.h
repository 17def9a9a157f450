/// \file
/// The CUDA kernel printer's class, shared by the files that print its parts
/// (internal to gpu_codegen/codegen; the interface is cuda_printer.h):
/// cuda_printer.cpp (the kernel's prologue, parameters, checks, the module),
/// cuda_print_grid_stride.cpp (the grid-stride mappings' loop nest, built
/// by grid_stride_loops.h, walked; serial stages),
/// cuda_print_rows.cpp (row and column-group mappings, split rows; the
/// loop over the rows built by row_loops.h, walked),
/// cuda_print_row_stages.cpp (the stages inside a row or column group, their
/// loops over its positions built by row_stage_loops.h, walked),
/// cuda_print_row_cache.cpp (a cached row's filling, built by
/// row_cache_loops.h, and the vector stores of a row cached in vectors:
/// the leaves of their slot loops),
/// cuda_print_scans.cpp (the block mappings of a scan kernel) and
/// cuda_print_reductions.cpp (reduction states, updates and combines).
///
/// It derives from the C printer (codegen/c_printer.h) and
/// overrides only what differs on the GPU. Shapes of the code it prints
/// (gpu_schedule.h has the contract of each mapping):
///
/// - GridStridePointwise / ColumnReduction:
///     for (int64_t idx = (int64_t)blockIdx.x * B + threadIdx.x; idx < n;
///          idx += (int64_t)gridDim.x * B) { x1 = ...; x0 = ...; stages }
///   with the stages printed serially, as the C printer's scalar path would.
///   With V elements per thread, idx steps by V, each stride-1 access is one
///   cppi_vec<T, V> load or store (a uniformly masked load: lane 0's mask
///   picks the vector or zeros), and the body runs in an unrolled lane loop
///   (`vl`), the innermost loop variable replaced by x + vl; values that do
///   not depend on it are computed once, before the lane loop. flat_vector:
///   each loop variable x has a lane copy fx, stepped with carries after
///   each lane, and the dense accesses are the vectors.
/// - ColumnReduction with threads_per_column S > 1: a block-strided loop over
///   groups of 32 columns (`idx = base + lane`, `valid = idx < n`); the S
///   slices of a column (`tid` = threadIdx.x / 32) walk the stage loops as a
///   row kernel's threads do (`pos = tid, tid + S, ...`), reductions combine
///   across slices with cppi_column_reduce, loop-less stages run on slice 0.
///   Split column groups (row_splits P > 1): `group` and `split` from
///   blockIdx.x, slices start at split * S and step P S, and after the
///   combines the partials go to `<kernel>_partials<stage>[split * n + idx]`;
///   the group's last block folds them.
/// - A scan kernel: GridStridePointwise prints its stage serially (a running
///   value per thread); RowPerBlock loops over rows, each in chunks of E x T
///   positions: `prefix[slot]` holds a thread's running values over its E
///   positions, cppi_block_exclusive_scan gives what comes before them, the
///   stores read `before` combined with each, and `carry` holds the rows'
///   value before the chunk.
/// - Reduction stages that form a run (ir::reduction_run_end; in rows also
///   the independent pointwise stages of ir::pass_run_end) share one loop
///   over their positions, their bodies over the first stage's loop
///   variables, so an element both read is loaded once (not in cached rows,
///   which read registers).
/// - RowPerWarp / RowPerBlock: a loop over rows (warp- or block-strided),
///   inside which every stage walks its flattened loops with
///   `pos = tid, tid + T, ...` (cached rows: an unrolled `slot` loop over
///   register arrays filled once per row), reductions fold per thread and
///   then combine with cppi_warp_reduce / cppi_block_reduce from the prelude.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/c_printer.h"
#include "codegen/loop_stmt.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "lowering/ir/expr_visitor.h"

namespace cppi::gpu::cuda_print {

using namespace codegen::printer_names;

[[noreturn]] inline void fail(const std::string& message) { codegen::printer_error("cuda", message); }

inline IndexExpr product_of(const std::vector<Loop>& loops) {
  std::vector<IndexExpr> ex;
  for (const auto& l : loops) ex.push_back(l.extent);
  return product(ex);
}

inline std::string var_name(const Loop& l) { return codegen::loop_var(l); }

/// The names of the variables of `loops`.
inline std::set<std::string> loop_var_names(const std::vector<Loop>& loops) {
  std::set<std::string> out;
  for (const auto& l : loops) out.insert(l.var.as<IndexVar>()->name);
  return out;
}

/// The per-thread state type of a reduction over `t` (cuda_print_reductions.cpp).
std::string shuffle_type(DType t);

inline bool is_row_mapping(GpuMapping m) { return m == GpuMapping::RowPerWarp || m == GpuMapping::RowPerBlock; }

/// How a kernel's stages walk their loops, fixed by its schedule: a row per
/// warp or block (print_rows), column groups (print_column_groups: a
/// ColumnReduction split across row slices), or neither (pointwise kernels,
/// and scans' block mappings, which walk their own nest, print_scans).
enum class RowWalk { None, Rows, ColumnGroups };
RowWalk row_walk(const Kernel& k, const GpuSchedule& g);
/// The threads sharing a row (a warp or a block), or a column group's row
/// slices; 0 for RowWalk::None.
int threads_per_row(RowWalk walk, const GpuSchedule& g);
/// The ranges of the variables a kernel's printed indices hold: its loops',
/// a vectorised grid-stride kernel's lane `vl` (and, over the flattened
/// loops, each lane's copies f<var> of the outer variables), a cached row's
/// canonical variables.
ir::VarRanges cuda_var_ranges(const Kernel& k, const GpuSchedule& g);

/// What print_gemm_epilogue needs besides the kernel (gemm_epilogue.h).
struct GemmEpilogue {
  std::string result;               // the buffer holding the matmul's result
  std::vector<Expr> result_loads;   // the kernel's loads of it, each at its iteration's element
  std::vector<Loop> loops;          // the iterations, row-major over the result's elements
  int64_t columns = 0;              // the result's row length
  bool bias = false;                // addmm's: gemm_bias[n] added before the rounding
  std::string scale;                // _scaled_mm's factor on gemm_acc (of gemm_scale_a, gemm_scale_b), or empty
  int threads = 0, min_blocks = 1;  // __launch_bounds__
  bool tensor_maps = false;         // A and B as cppi_gemm::TensorMaps (by value), not pointers
  int cluster = 1;                  // __cluster_dims__(1, cluster, 1) when above 1
  std::string describe;             // the header comment's schedule line
  std::string call;                 // the template's call, passing `epilogue`
};

class CudaKernelPrinter : public codegen::CPrinterBase {
 public:
  CudaKernelPrinter(const Kernel& k, const GpuSchedule& g, std::string name,
                    const std::vector<std::string>& graph_symbols, const CudaPrintOptions& options)
      : CPrinterBase(cuda_var_ranges(k, g), codegen::sincos_operands(k)),
        k_(k),
        g_(g),
        name_(std::move(name)),
        graph_symbols_(graph_symbols),
        options_(options),
        sig_(signature(k)),
        pointers_(argument_pointers(sig_)),
        walk_(row_walk(k, g)),
        threads_per_row_(threads_per_row(walk_, g)),
        cached_elements_(walk_ == RowWalk::Rows ? g.elements_per_thread : 0),
        cached_(cached_elements_ > 0 ? row_cache(k) : RowCache{}) {}

  std::string print(PrintedCudaKernel* info);
  /// The GEMM template's call with this kernel's one pointwise stage as its
  /// epilogue (gemm_epilogue.h; cuda_print_gemm.cpp).
  std::string print_gemm_epilogue(const GemmEpilogue& g);
  /// in_<buffer> or out_<buffer>, by buffer name.
  static std::unordered_map<std::string, std::string> argument_pointers(const KernelSignature& sig);

 protected:
  std::string pointer_name(const std::string& buffer) const override {
    auto it = pointers_.find(buffer);
    if (it == pointers_.end()) fail(cat("kernel ", k_.name, ": buffer ", buffer, " is not an argument"));
    return it->second;
  }
  /// An index eager would reject fails the kernel (cppi_index_assert, as
  /// eager's device-side assert) before the clamp.
  void print_index_check(const std::string& value, const std::string& lowest, const std::string& size) override {
    out_.line(cat("if (", value, " < ", lowest, " || ", value, " >= ", size, ") cppi_index_assert(", value, ", ", size,
                  ");"));
  }
  /// NVRTC has no __builtin_inff / __builtin_nanf: non-finite floats are bit patterns.
  std::string literal(const Constant& c) const override {
    const double v = c.float_value;
    if ((c.dtype == DType::Float32 || c.dtype == DType::Float64) && !std::isfinite(v)) {
      const bool single = c.dtype == DType::Float32;
      if (std::isnan(v)) return single ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
      if (v > 0) return single ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
      return single ? "__int_as_float(0xff800000)" : "__longlong_as_double(0xfff0000000000000LL)";
    }
    return CPrinterBase::literal(c);
  }
  CValue local_value(const LocalRef& ref) const override {
    auto it = locals_.find(ref.name);
    if (it == locals_.end()) fail(cat("kernel ", k_.name, ": local ", ref.name, " used before its stage"));
    return it->second;
  }
  /// By a constant: a shift and a mask for powers of two, cppi_udiv_magic
  /// otherwise, so no unravelled index relies on NVVM to strength-reduce
  /// its division (it does not under --Ofast-compile).
  std::string nonnegative_div(const std::string& x, const IndexExpr& d, const std::string& d_text) const override;
  std::string nonnegative_mod(const std::string& x, const IndexExpr& d, const std::string& d_text) const override;
  /// The same for the printer's own arithmetic on block and ticket numbers
  /// (split rows and scans): `x` an int64_t expression >= 0.
  std::string div_by(const std::string& x, int64_t d) const { return nonnegative_div(x, d, std::to_string(d)); }
  std::string mod_by(const std::string& x, int64_t d) const { return nonnegative_mod(x, d, std::to_string(d)); }
  /// sin(x) and cos(x) of the same x (sin + cos, rotary embeddings) are one
  /// sincos: one argument reduction instead of two, and half the libdevice
  /// code for NVRTC to optimise.
  std::optional<CValue> fused_value(const Expr& e, ValueScope& scope) override {
    const DType t = e.dtype();
    if (!is_sincos_half(e, scope) || (t != DType::Float32 && t != DType::Float64)) return std::nullopt;
    return print_sincos(e, scalar_value(e.as<Unary>()->operand, scope), scalar_type(t), scope);
  }

 private:
  void check_schedule() const;
  std::string parameters(PrintedCudaKernel* info);
  /// A pointer to each by-value parameter (info.by_value, which parameters()
  /// fills), so loads read it as any buffer.
  void print_host_scalars(const PrintedCudaKernel& info);
  /// Declares the loop variables of `loops` (those in `used`, when given)
  /// from the row-major flat index `flat`.
  void unravel(const std::vector<Loop>& loops, const std::string& flat, const std::set<std::string>* used = nullptr);
  /// Loop variables a stage's values and store indices use.
  std::set<std::string> used_vars(const Stage& s) const;
  /// Declares the outer loop variables any stage uses from the flat index `flat`.
  void unravel_outer(const std::string& flat);
  /// Records what a `width`-element vector access of `buffer` at `index`
  /// (affine in `vars`, stride 1 in the last) needs at launch: the base
  /// pointer aligned to the vector, the offset and every other stride
  /// divisible by `width`. A `dense` access (flat_vector: row-major over
  /// `vars`, its position a multiple of `width` at lane 0) needs the offset only.
  void add_vector_check(PrintedCudaKernel* info, const BufferPtr& buffer, const IndexExpr& index,
                        const std::vector<IndexExpr>& vars, int width, bool dense = false) const;
  std::string extent_text(const IndexExpr& e) const {
    const bool simple = e.as<IndexConst>() || e.as<IndexSymbol>() || e.as<IndexVar>();
    return simple ? index(e) : "(" + index(e) + ")";
  }

  /// A mapping's lowering to its loop nest (grid_stride_loops.h, row_loops.h,
  /// column_group_loops.h, scan_loops.h).
  using NestLowering = codegen::Stmt (*)(const ir::Kernel&, const ir::GpuSchedule&,
                                         const std::function<std::string(const IndexExpr&)>&);
  /// `lower`'s nest for this kernel, with this printer's C form of indices;
  /// its text into info->loop_ir, after `pass`, when the dumps are asked for.
  codegen::Stmt lowered_nest(NestLowering lower, const char* pass, PrintedCudaKernel* info);

  // --- grid-stride mappings ---------------------------------------------------------------
  /// The kernel's grid-stride loop nest (grid_stride_loops.h), walked; its
  /// text into info->loop_ir for the debug dump.
  void print_grid_stride(PrintedCudaKernel* info);
  /// What a vectorised kernel's lane loops share: values computed before
  /// them (lane-invariant, or lane 0's), the vector loads read so far
  /// (cppi_vec vN), and whether the lanes' copies fX are declared
  /// (flat_vector: the first lane loop declares them).
  struct VectorLanes {
    ValueScope outer;
    std::vector<std::pair<Expr, std::string>> loads;
    bool lane_copies = false;
  };
  /// `lanes`: inside a vectorised kernel's grid-stride loop, else null.
  void print_grid_stride_stmt(const codegen::Stmt& s, VectorLanes* lanes);
  void print_grid_stride_part(const codegen::TargetPart& p);
  void print_grid_stride_loop(const codegen::For& l);
  /// A store's lanes (codegen::LoopKind::GpuLanes): its vector loads, the
  /// values the lanes share, the lane loop and the vector store.
  void print_lane_loop(const codegen::For& l, VectorLanes& lanes);
  void print_vector_loads(const Store& st, VectorLanes& lanes);
  /// Each varying loop variable at lane `lane` (by the innermost loop: x +
  /// lane; flat_vector: every variable's lane copy fX).
  std::map<std::string, IndexExpr> lane_vars(const std::string& lane) const;
  std::string vector_type(DType t) const;
  /// The lane loop of a store's `value`, one lane an iteration.
  void print_single_lanes(const codegen::For& l, const Expr& value, const std::map<std::string, IndexExpr>& at_lane,
                          VectorLanes& lanes, const std::string& sv);
  /// Two lanes' values of one shape (lane0 in scope0, lane1 in scope1):
  /// prints each rounding to 16 bits of lane 0 with its twin of lane 1 as
  /// one packed conversion (cppi_float2_to_bf16), their operands first, and
  /// binds the results in the scopes; the rest prints as either lane needs it.
  void pair_roundings(const Expr& lane0, const Expr& lane1, ValueScope& scope0, ValueScope& scope1);
  /// Two lanes' rounding to 16 bits of a float add, subtract or multiply
  /// whose operands are values of that type widened (or constants it holds
  /// exactly): printed as one packed operation on the 16-bit values
  /// (cppi_bf16x2_op), which rounds as the float operation and its rounding
  /// do, and bound in the scopes. false (nothing printed) for other values.
  bool print_packed_pair(const Expr& lane0, const Expr& lane1, ValueScope& scope0, ValueScope& scope1);
  /// The lane loop of a vectorised store two lanes at a time, each rounding
  /// to 16 bits of lane vl and its twin of lane vl + 1 one packed
  /// conversion (cppi_float2_to_bf16): one F2FP for two elements. GPT-2's
  /// gelu_new rounds seven intermediates per element, as eager does, and
  /// the roundings bound the kernel. `at_lane`: each varying loop variable
  /// at lane vl; `sv` the vector stored.
  void print_lane_pairs(const codegen::For& l, const Expr& value, const std::map<std::string, IndexExpr>& at_lane,
                        VectorLanes& lanes, const std::string& sv);
  /// Steps each lane's copies of the outer loop variables (f<var>) to the
  /// next flattened iteration (flat_vector).
  void print_lane_carry();
  void print_serial_stages();
  /// `innermost` inside plain serial for-loops over `loops`.
  void print_serial_loops(const std::vector<Loop>& loops, const std::function<void()>& innermost);
  void print_serial_reduction(const ReductionStage& s, size_t i);
  void print_serial_pointwise(const PointwiseStage& s);
  /// A scan stage on one thread: its running value over its loop, stored every step.
  void print_serial_scan(const ScanStage& s);
  /// A scan kernel's block mapping (RowPerBlock: per row, chunks of E x T
  /// positions, each thread folding its E, a block scan of the threads'
  /// totals; ColumnReduction: per group of 32 columns, chunks of S x E rows,
  /// each slice folding its E, the slices' totals scanned in shared memory;
  /// then the stores, and the chunk's total carried on): the nest
  /// lower_scan_loops builds (scan_loops.h, scan_chunk_loops.h), walked;
  /// its text into info->loop_ir for the debug dump.
  void print_scans(PrintedCudaKernel* info);
  /// What a scan chunk's leaves declare for its slot loops: each vector
  /// load with the name of its array, each store's array of vectors of values.
  struct ScanChunkValues {
    std::vector<std::pair<Expr, std::string>> loads;
    std::vector<std::string> stored;
  };
  /// `chunk`: inside a chunk (the body of the loop over the block's chunks), else null.
  void print_scan_stmt(const codegen::Stmt& s, ScanChunkValues* chunk);
  /// A scan's chunk loop (Serial), its rows' or groups' loop (GpuBlockRows,
  /// GpuColumnGroups: `idx` and `valid` at its top) or its split tile
  /// (GpuTickets: the ticket, no loop); inside a chunk, a GpuScanSlots loop.
  void print_scan_loop(const codegen::For& l, ScanChunkValues* chunk);
  /// A chunk's GpuScanSlots loop, unrolled: the scan's loop variable at the
  /// slot's first position, from `pos`.
  void print_scan_slots(const codegen::For& l, ScanChunkValues& chunk);
  void print_scan_part(const codegen::TargetPart& p);
  /// A chunk's leaf (scan_chunk_loops.h); print_scan_slot_part prints
  /// those at a slot of the GpuScanSlots loop around them.
  void print_scan_chunk_part(const codegen::TargetPart& p, ScanChunkValues& chunk);
  void print_scan_slot_part(const codegen::TargetPart& p, const ScanChunkValues& chunk);
  /// `column` = lane's column of `group`, and `valid`: whether it is below `columns`.
  void print_group_column(const std::string& column, const std::string& group, const std::string& columns);
  /// The slices' `value`s of each column combined in slice order: `before`
  /// (the slices before this one) and `total`.
  void print_slice_totals(const std::string& value);
  /// Split scans (row_splits P > 1): the block's ticket, `epoch` (which
  /// launch), `tile` (row or group x P + split) and `split` for `units`
  /// rows or groups.
  void print_scan_split_start(int64_t units);
  /// The block's share [start, stop) of the scan: split, whole chunks of
  /// `chunk` positions; unsplit, the whole scan.
  void print_scan_share(int64_t chunk);
  /// `writer` threads store `carry` at `total_slot` of the module's totals,
  /// then the block's ready flag is set for this launch.
  void print_scan_publish(const std::string& total_slot, const std::string& writer);
  /// `earlier`: this thread's fold of the totals of splits `thread`,
  /// `thread` + `threads`, ... before this one (tiles from `first_tile`),
  /// each waited for; the caller combines the threads' in a fixed order.
  void print_scan_look_back(const std::string& first_tile, const std::string& total_slot, const std::string& thread,
                            int threads);
  void print_stores(const std::vector<Store>& stores, ValueScope& scope);
  /// Evaluates into `outer`, where the printer stands, the largest
  /// subexpressions of `roots` that use no variable named in `vars` (loop
  /// invariants: a vector's bias, a row's rstd), so a loop over those
  /// variables computes them once. Expressions in `leave` (loads a row
  /// cache serves) are not looked into: their indices are not computed.
  void hoist_invariants(const std::vector<Expr>& roots, const std::set<std::string>& vars, ValueScope& outer,
                        const std::vector<Expr>& leave = {});

  // --- row mappings ---------------------------------------------------------------------------
  /// What a stage of a cached row reads from the register cache (each value
  /// with its vcacheN[slot] text, each load with its cacheN[slot]) and the
  /// loop variables the rest needs.
  struct RowCacheReads {
    std::vector<std::pair<Expr, std::string>> from_cache;
    std::set<std::string> used;
  };
  /// The stores of a stage of a row cached in vectors as its slot groups'
  /// leaves print them (row_stage_loops.h): what it reads from the cache,
  /// what it computes once (kRowInvariants), a group's vector loads and the
  /// vectors it stores with their offsets (kGroupVectors).
  struct CachedVectorStores {
    size_t stage = 0;
    RowCacheReads reads;
    ValueScope invariant;
    std::vector<std::pair<Expr, std::string>> loads;
    std::vector<std::string> values, offsets;
  };
  /// What a row nest's leaves hand on to the leaves after them, within one
  /// walk of the nest: where the row cache's loads read (its kDeclare
  /// part's), and the vector stores of the stage being stored.
  struct RowLeaves {
    std::vector<std::string> cache_at;
    std::optional<CachedVectorStores> stores;
  };
  /// The kernel's loop over its rows (row_loops.h), walked; its text into
  /// info->loop_ir for the debug dump.
  void print_rows(PrintedCudaKernel* info);
  void print_row_stmt(const codegen::Stmt& s, RowLeaves& leaves);
  void print_row_part(const codegen::TargetPart& p, RowLeaves& leaves);
  /// A GpuWarpRows or GpuBlockRows loop, `tid` (the thread's place in its
  /// row) before it; split rows: `row` and `split` from the block, no loop.
  void print_row_loop(const codegen::For& l, RowLeaves& leaves);
  /// The kernel's loop over its columns (column_group_loops.h), walked as
  /// a row nest; its text into info->loop_ir for the debug dump.
  void print_column_groups(PrintedCudaKernel* info);
  /// A GpuColumnGroups loop, `lane` (the column in its group) and `tid`
  /// (the row slice) before it, the column and `valid` at its top; split
  /// groups: `group` and `split` from the block, no loop.
  void print_column_group_loop(const codegen::For& l, RowLeaves& leaves);

  // --- a cached row (row_cache_loops.h; cuda_print_row_cache.cpp) ------------------------
  /// A GpuRowSlotGroups loop over a cached row's slot groups, or a GpuLanes
  /// loop over a group's slots, unrolled.
  void print_slot_loop(const codegen::For& l, RowLeaves& leaves);
  /// A part of a cached row's filling (row_cache_part), printed whole.
  void print_row_cache_part(const codegen::TargetPart& p, RowLeaves& leaves);
  /// The row cache's arrays, and where its loads read into leaves.cache_at.
  void declare_row_cache(RowLeaves& leaves);
  /// Cached load `c`, read at `at`, into the slot group's slots.
  void print_cache_load(size_t c, const std::string& at);
  /// The cached row's values (RowCache::values) at each of `slots` (one,
  /// or two whose roundings pair), each into vcacheN[slot], from the loads
  /// the filling cached there.
  void print_row_cache_values(const std::vector<std::string>& slots);
  /// A part of the vector stores of stage `stage` of a row cached in
  /// vectors (row_stage_part::kRowInvariants, kGroupVectors, kLaneValues,
  /// kStoreVectors), printed whole.
  void print_cached_store_part(const std::string& what, size_t stage, RowLeaves& leaves);
  /// At a slot group: the stage's vector loads and stored vectors (kGroupVectors).
  void print_group_vectors(const PointwiseStage& s, CachedVectorStores& stores);
  /// At the group's slot vl: the stage's values into lane vl (kLaneValues).
  void print_lane_values(const PointwiseStage& s, CachedVectorStores& stores);
  RowCacheReads row_cache_reads(size_t stage) const;
  /// Whether a load at `index` in stage `stage` of a row cached in vectors
  /// is affine with stride 1 along the row.
  bool row_vector_access(size_t stage, const IndexExpr& index) const;
  /// The loads of looped store stage `stage` that its slot groups read as
  /// one vector each (kGroupVectors; and the launch checks): unmasked,
  /// row_vector_access, not served by the row cache, each once.
  std::vector<Expr> row_vector_loads(size_t stage) const;
  /// The outer loop variables, then the canonical row variables.
  std::vector<IndexExpr> row_vector_vars() const;

  // --- the stages of a row or column group (row_stage_loops.h) ---------------------------
  /// A part of the stages' nest (row_stage_part), printed whole.
  void print_row_stage_part(const codegen::TargetPart& p, RowLeaves& leaves);
  const ReductionStage& reduction_stage(size_t i) const;
  const PointwiseStage& pointwise_stage(size_t i) const;
  std::string accumulator(const ReductionStage& s) const { return local_name(s.results[0]) + "_acc"; }
  /// What a pass over stages [first, end) computes at each position: each
  /// reduction's body (undefined for a pointwise stage) and each pointwise
  /// stage's stores, over stage first's loop variables, and the loop
  /// variables they use (a lone pointwise stage: its own).
  struct StagePass {
    std::vector<Expr> bodies;
    std::vector<std::vector<Store>> stores;
    std::set<std::string> used;
  };
  StagePass stage_pass(size_t first, size_t end) const;
  /// A GpuRowPositions or GpuRowSlots loop around its kPassAt leaf.
  void print_position_loop(const codegen::For& l);
  /// A cached row's slot loop: runs `body` for every slot this thread holds,
  /// the loads of stages [first, end) served from the cache (their loops
  /// must have the same names) and what does not change along the row
  /// computed before the loop.
  void print_row_slots(const codegen::For& l, size_t first, size_t end, const std::function<void(ValueScope&)>& body);
  /// Runs `body` for every position of stage `first`'s loops this thread
  /// owns; `used`: the loop variables the body needs.
  void print_row_positions(const codegen::For& l, size_t first, const std::set<std::string>& used,
                           const std::function<void(ValueScope&)>& body);
  /// Stages [first, end) at one position: the updates of every
  /// accumulator, the stores of the pointwise stages.
  void print_pass_at(size_t first, size_t end, const StagePass& pass, ValueScope& scope);
  /// After the pass over stages [first, end): the reductions combined
  /// across the row's threads (or group's slices and split blocks), and
  /// their results.
  void print_pass_combine(size_t first, size_t end);
  /// Split rows: stores this block's partial; the row's last block folds all.
  void print_split_combine(const ReductionStage& s, const std::string& acc, const std::string& scratch);
  /// Split column groups: stores this block's partials of stages [0, end);
  /// the group's last block folds them (accs: the stages' accumulators).
  void print_column_split_combine(size_t end, const std::vector<std::string>& accs);
  std::string column_partials(size_t stage) const { return cat(name_, "_partials", stage); }

  // --- reductions -------------------------------------------------------------------------------
  std::string state_type(ReductionKind kind, DType t) const;
  std::string state_identity(ReductionKind kind, DType t) const;
  std::string state_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                           const std::string& pos) const;
  std::string combine_op(ReductionKind kind) const;
  void declare_results(const ReductionStage& s, const std::string& acc);
  std::string local_name(const std::string& result) const { return "red_" + codegen::c_identifier(result); }

  const Kernel& k_;
  const GpuSchedule g_;
  const std::string name_;
  const std::vector<std::string>& graph_symbols_;
  const CudaPrintOptions& options_;
  const KernelSignature sig_;
  /// Each argument buffer's pointer name.
  const std::unordered_map<std::string, std::string> pointers_;
  std::unordered_map<std::string, CValue> locals_;
  const RowWalk walk_;
  /// The threads of a row (Rows) or the row slices of a column group.
  const int threads_per_row_;
  const int cached_elements_;  // E of a cached row; 0 = stages read global memory
  const RowCache cached_;  // a cached row's loads and values
};

}  // namespace cppi::gpu::cuda_print
