/// \file
/// The CPU kernel printer's class, shared by the files that implement it
/// (private to cpu_codegen/printer; the public entry is cpu_printer.h):
///   cpu_printer.cpp         module, kernel prologue (header comment, arguments)
///   cpu_loops.cpp           the kernel's loop nest and its stages' own
///                           loops (cpu_codegen/schedule/loops: parallel
///                           chunks, loops, tails, pieces, transposed tiles,
///                           cascade blocks, groups of vectors, tiled
///                           column blocks) as they are given
///   cpu_stages.cpp          the stages inside them: pointwise stores,
///                           scans, hoisted invariants, store forwarding,
///                           the row blocks cpu::open_row_blocks opens
///   cpu_reductions.cpp      reduction stages: the accumulators
///                           cpu::place_accumulators places around and in
///                           the loops cpu::lower_reduction_loops builds,
///                           states, updates, combines, horizontal steps
///   cpu_vector_values.cpp   expressions in vector form (the vector op table
///                           applied, casts, masks, loads, gathers)
///
/// Shapes of the code it prints:
///
/// - Outer loops: the first `parallel_loops` are collapsed into one
///   cppi_parallel_for over their product (chunk bounds begin/end, the loop
///   variables recovered with / and %); the rest are plain for loops.
/// - Vectorised loop (vector_width W): a main loop stepping by W with vector
///   values (prelude vector types; unaligned cppi_vload/cppi_vstore for
///   stride-1 accesses; scalars that do not depend on the loop variable stay
///   scalar and are splat where a vector op needs them; other strides and
///   masked loads are lane-wise gathers), then a scalar tail loop running the
///   same body for the remaining extent % W iterations. Both carry
///   CPPI_NO_AUTOVEC: the compiler must not vectorise them again (that only
///   costs compile time).
///   * InnermostOuter: the innermost outer loop is vectorised; every stage
///     runs on W outer iterations at once, so a reduction over its own loops
///     keeps one accumulator per lane (column sums: no horizontal step).
///     With column_block/row_block (column reductions), the vector loop runs
///     in blocks of column_block vectors: the accumulators of a block live in
///     an array, and each reduction's first loop, split into blocks of
///     row_block iterations, is interchanged with the vectors of the block;
///     a pointwise stage's loops run outside the vectors of the block. The
///     stages with loops run one after another over the block (a softmax
///     over columns: the max tile, exp(x - max) stored, the sum tile over
///     it, the stored values scaled), and the loop-less stages after them
///     run per vector on the results. With row_blocks (as cpu::open_row_blocks
///     records them in the loop IR), a stage first reads each row-block load
///     as an array of R vectors (`rows0_in_x[R]`, cppi_vload_rows: element r
///     of the W rows in vector r) unless an earlier stage opened it; its loop
///     reads and stores array element r at step r, and after the last stage
///     the stored arrays go back to memory (cppi_vstore_rows). The masked last vector of rows uses the
///     _partial forms.
///   * InnermostOfEachStage: each stage's innermost loop is vectorised; a
///     reduction keeps vector accumulators (vector_accumulators of them for
///     sum, max and min) plus a scalar one for the tail and combines them
///     after the loop (accumulators pairwise, lanes in order, then the tail).
///     Independent reductions over the same loops fold in one pass
///     (one_pass_end), each with its own accumulators.
/// - A scan kernel (ir::ScanStage): the outer loops as above, around one
///   serial loop that updates a running value and stores it every step; in
///   InnermostOuter mode the running value is a vector, one column per lane.
/// - parallel_reduction: the reduction stage's first loop is split with
///   cppi_parallel_reduce; each chunk returns its partial state and the
///   partials are combined in chunk order (deterministic for a thread count).
/// - cascade_block (float sums, Welford): the innermost reduction loop runs
///   in blocks; every cascade_block terms per accumulator lane the
///   accumulators merge into a `_total` state and restart.
/// - argmax/argmin keep {value, index} (first index on ties, NaN wins);
///   Welford keeps {mean, m2, weight} and merges with Chan's formula.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/c_printer.h"
#include "codegen/loop_stmt.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "lowering/ir/kernel.h"
#include "support/status.h"

namespace cppi::cpu::detail {

using namespace codegen::printer_names;

[[noreturn]] inline void fail(const std::string& message) { codegen::printer_error("cpu", message); }

using codegen::Bound;

/// Store forwarding between the masked last vectors of one outer iteration's
/// stages (cpu::choose_forward_slots chooses the slots; the printer's
/// declare_forward_slots, forward_store, forwarded_load): a store that a
/// later stage loads again at the same elements also goes into a vector
/// variable, which the later load reads instead of memory. The core does not forward a masked store to a masked
/// load of it: softmax over rows of 7 stalled a third of its time on the
/// reload of exp(x - max). What a masked last vector stored, and where:
struct Forwarded {
  std::string var;    // the stage loop's variable
  int64_t first;      // the masked vector's first iteration
  std::string lanes;  // how many of its lanes are on
  CValue value;
};

/// What the stages of one outer iteration (print_stage_range) keep in
/// registers for the stages after them, owned by that iteration's printing:
/// the forwarded vectors, keyed by access (CpuKernelPrinter::access_key).
/// (Its row blocks are the loop IR's: Place::row_blocks.)
struct IterationRegisters {
  std::map<std::string, Forwarded> forwarded;
};

class ReductionCore;

/// Where a scope's values print (codegen::LoopPlace): what the loops the
/// printer has opened around them make of the code. The loop printers
/// (cpu_loops.cpp, and the stages' own loops) open a scope with a changed
/// copy for the body of each loop that changes it; stages and values read it
/// from their scope.
struct Place : codegen::LoopPlace {
  /// The vectorised loop's variable (C name); empty: scalar code.
  std::string vector_var;
  /// In a masked last vector (TailKind::Masked, a partial block of rows): how
  /// many of its lanes are on, as C text; empty otherwise.
  std::string tail_lanes;
  /// In the masked last vector of a stage loop of constant bounds: its first
  /// iteration.
  std::optional<int64_t> masked_rest_first;
  /// In the whole vectors of a stage loop of constant bounds: where its
  /// masked last vector starts.
  std::optional<int64_t> whole_vectors_end;
  /// Inside a stage's vectorised loop (a stage_loop of the loop IR).
  bool stage_loop = false;
  /// The kernel's invariants (print_invariants): math on one value runs as
  /// eager runs it on a 0-d tensor (libm), not through the vector form of the
  /// kernel's lanes.
  bool invariants = false;
  /// CpuSchedule::row_blocks: the row blocks the stages printing walk
  /// (cpu::open_row_blocks' RowBlocks around them); null outside them.
  const codegen::RowBlocks* row_blocks = nullptr;
  /// The loop of the stage printing now, when it walks row blocks
  /// (open_row_blocks).
  std::optional<Loop> row_loop;
  /// In a whole transposed tile (lower_loop_nest's TileRow): the row's first
  /// element in the tiles, as C text; empty otherwise (the loads gather).
  std::string tile_row;
  /// CpuSchedule::reduction_trees: while a block's row prints its
  /// reductions, the row's position in the block (C text); each accumulator
  /// goes to `<result>_vaccs[row]` for the block's tree instead of reducing
  /// across its lanes.
  std::string tree_row;
  /// The registers of the outer iteration printing (print_stage_range);
  /// null outside one.
  IterationRegisters* registers = nullptr;
  /// The kernel's forwarding slots (cpu::choose_forward_slots' ForwardSlots
  /// around the nest); null where it has none.
  const codegen::ForwardSlots* kernel_forward_slots = nullptr;
  /// The stage printing now: the vector variables its stores forward into,
  /// by access (declare_forward_slots); null where it forwards none.
  const std::map<std::string, std::string>* forward_slots = nullptr;
  /// The reduction run whose nest prints (schedule_reduction_loops): its
  /// accumulators' nodes and its updates print through it; null outside a
  /// run's nest.
  ReductionCore* reduction = nullptr;
  /// Whether a value varies along vector_var (CpuKernelPrinter::varying),
  /// remembered per vector loop.
  std::shared_ptr<std::unordered_map<const ExprNode*, bool>> varying;

  bool in_vector() const { return !vector_var.empty(); }
  /// This place inside the vector loop over `var`.
  Place vectorized(const std::string& var) const {
    Place p = *this;
    p.vector_var = var;
    p.varying = std::make_shared<std::unordered_map<const ExprNode*, bool>>();
    return p;
  }
};

class CpuKernelPrinter : public codegen::CPrinterBase {
  friend class ReductionCore;  // print_reduction_core's accumulators (cpu_reductions.cpp)
  struct TransposedLoad {
    BufferPtr buffer;
    IndexExpr index;
    std::string tile;
  };
  static std::unordered_map<std::string, std::string> argument_pointers(const KernelSignature& sig);
  std::vector<TransposedLoad> transposed_loads() const;

 public:
  CpuKernelPrinter(const Kernel& k, const std::vector<std::string>& graph_symbols, const PrintOptions& options)
      : CPrinterBase(k.var_ranges(), codegen::sincos_operands(k)),
        k_(k),
        sched_(k.schedule.cpu),
        graph_symbols_(graph_symbols),
        options_(options),
        sig_(signature(k)),
        pointers_(argument_pointers(sig_)),
        invariants_(nullptr, &invariants_place_),
        kernel_scope_(&invariants_, &kernel_place_),
        transposed_(transposed_loads()) {
    out_ = codegen::SourceWriter("CPPI_ROLLED");  // outer loops stay rolled (see SourceWriter)
  }

  std::string print(PrintedKernel* info);

 protected:
  std::string pointer_name(const std::string& buffer) const override {
    auto it = pointers_.find(buffer);
    if (it == pointers_.end()) fail(cat("kernel ", k_.name, ": buffer ", buffer, " is not an argument"));
    return it->second;
  }
  CValue local_value(const LocalRef& ref) const override {
    auto it = locals_.find(ref.name);
    if (it == locals_.end()) fail(cat("kernel ", k_.name, ": local ", ref.name, " used before its stage"));
    return it->second;
  }
  /// In a vectorised kernel, a math function (exp, atan2, ...) on a scalar
  /// runs the vector implementation on a splat and takes lane 0: SLEEF and
  /// libm may differ in the last bit, and a scalar tail must give the bits
  /// its vector body gives (eager's kernels run their tails through the
  /// vector code too). argmax over atan2(x, x) of 5 elements, vector body of
  /// 4 and a libm tail: the tail's pi/4 was one ulp above SLEEF's and won
  /// the tie that eager gives to the first element.
  std::string scalar_unary(ir::UnaryOp op, DType t, const std::string& x, const ValueScope& scope) const override;
  std::string scalar_binary(ir::BinaryOp op, DType t, const std::string& a, const std::string& b,
                            const ValueScope& scope) const override;
  /// Out-of-range indices reach the runtime, which raises IndexError after
  /// the kernel as eager does (cppi_check_index, the prelude).
  void print_index_check(const std::string& value, const std::string& lowest, const std::string& size) override {
    out_.line(cat("cppi_check_index(", value, ", ", lowest, ", ", size, ");"));
  }

 private:
  // --- prologue ------------------------------------------------------------------
  void print_arguments();
  /// Values that depend on no loop variable and read only what the kernel
  /// does not write, from buffers that cannot be empty (an optimizer's bias
  /// correction from a 0-d step: pow, sqrt and divisions on one element),
  /// computed once before the loops into invariants_, which every loop's
  /// scope has as its ancestor. The C compiler cannot hoist them itself: its
  /// stores might alias the loads.
  void print_invariants();
  std::string local_name(const std::string& result) const;

  // --- the loop nest ------------------------------------------------------------------
  /// The kernel's loop nest (cpu_codegen/schedule/loops/loop_nest.h), each
  /// statement inside `at`.
  void print_loops(const codegen::Stmt& s, const ValueScope& at);
  void print_loop_node(const codegen::For& l, const ValueScope& at);
  void print_loop_node(const codegen::ParallelChunks& c, const ValueScope& at);
  void print_loop_node(const codegen::Collapsed& c, const ValueScope& at);
  void print_loop_node(const codegen::Let& let, const ValueScope& at);
  void print_loop_node(const codegen::Block& b, const ValueScope& at);
  void print_loop_node(const codegen::If& i, const ValueScope& at);
  void print_loop_node(const codegen::Comment& c, const ValueScope& at);
  void print_loop_node(const codegen::MaskedLanes& m, const ValueScope& at);
  void print_loop_node(const codegen::TileRow& t, const ValueScope& at);
  /// All stages of one outer iteration (of a vector of them in a vector
  /// loop), or a piece's (split_vector_loop_pieces) with its index
  /// conditions folded.
  void print_loop_node(const codegen::Stages& s, const ValueScope& at);
  /// The parts the nest leaves to the printer (cpu::part).
  void print_loop_node(const codegen::TargetPart& p, const ValueScope& at);
  /// A stage loop's masked last vector, and a pointwise stage's stores
  /// (cpu::lower_stage_loops).
  void print_loop_node(const codegen::VectorAt& v, const ValueScope& at);
  void print_loop_node(const codegen::StageStores& s, const ValueScope& at);
  /// A reduction run's updates and cascade blocks (cpu::lower_reduction_loops),
  /// printed by the run (Place::reduction).
  void print_loop_node(const codegen::Accumulate& a, const ValueScope& at);
  void print_loop_node(const codegen::CascadeBlockDone& d, const ValueScope& at);
  /// A reduction run's accumulators around its loops, a full cascade
  /// block's merge and the final states after the loops
  /// (cpu::place_accumulators), printed by the run (Place::reduction).
  void print_loop_node(const codegen::Accumulators& a, const ValueScope& at);
  void print_loop_node(const codegen::MergeIntoTotals& m, const ValueScope& at);
  void print_loop_node(const codegen::FinishAccumulators& f, const ValueScope& at);
  /// A parallel reduction's chunks around its run's nest, one
  /// cppi_parallel_reduce (cpu::split_reduction_chunks), printed by the run.
  void print_loop_node(const codegen::ReductionChunks& c, const ValueScope& at);
  /// The row blocks around a vector of outer iterations' stages, and a
  /// stored one's store after them (cpu::open_row_blocks).
  void print_loop_node(const codegen::RowBlocks& r, const ValueScope& at);
  void print_loop_node(const codegen::StoreRowBlock& s, const ValueScope& at);
  /// The nest with the kernel's forwarding slots (cpu::choose_forward_slots).
  void print_loop_node(const codegen::ForwardSlots& f, const ValueScope& at);
  /// A column tiles' block's tiles, their slots' starts, merges and folds,
  /// the cascade's counters and its full blocks, a reduction's rows in
  /// chunks, and in a vector of the block the tiles' results read and a
  /// reduction into its tile (cpu::lower_column_blocks).
  void print_loop_node(const codegen::TileArrays& t, const ValueScope& at);
  void print_loop_node(const codegen::SetTileSlots& s, const ValueScope& at);
  void print_loop_node(const codegen::Counters& c, const ValueScope& at);
  void print_loop_node(const codegen::TileCascadeDone& d, const ValueScope& at);
  void print_loop_node(const codegen::TileChunks& c, const ValueScope& at);
  void print_loop_node(const codegen::TileResults& r, const ValueScope& at);
  void print_loop_node(const codegen::TileReduction& r, const ValueScope& at);
  ReductionCore& reduction_printing(const ValueScope& at) const;
  /// What the loop-nest passes read (cpu_codegen/schedule/loops/loop_nest.h).
  LoopNestInput loop_input() const {
    return LoopNestInput{k_, sched_, [this](const IndexExpr& e) { return index(e); },
                         [this](const std::string& result) { return local_name(result); }};
  }
  void print_let(const codegen::Let& let);
  /// Kernel-local scratch: allocated where it is private to one thread (per
  /// parallel chunk, else per call) and freed at the end of that block.
  void print_scratch_alloc();
  void print_scratch_free();
  /// With prefault_outputs: faults in what the chunk's outer iterations
  /// [lo, hi) write, `inner` elements of each output per iteration.
  void print_prefault(const std::string& lo, const std::string& hi, const std::string& inner);
  /// Opens the loop over a parallel chunk [begin, end) of the collapsed
  /// iteration space of `units` (C variable name, extent), row-major, and
  /// declares each unit's variable in it. Closed by the caller.
  void open_collapsed_loop(const std::vector<std::pair<std::string, IndexExpr>>& units);
  /// transpose_tile: each transposed load's tile of the rows from
  /// `first_row` (C text), at the column of the vector loop; the stages then
  /// read row Place::tile_row of it.
  void print_transpose_tiles(const std::string& first_row);
  Bound extent(const Loop& l) const {
    auto c = l.extent.constant();
    return Bound{index(l.extent), c};
  }
  static std::string var_name(const Loop& l) { return codegen::loop_var(l); }

  // --- stages --------------------------------------------------------------------------
  /// Stages [first, end) of one outer iteration (or of a vector of them).
  void print_stage_range(size_t first, size_t end, bool vector_outer, const ValueScope& at);
  /// CpuSchedule::epilogue_in_lanes: the innermost outer loop `l` over
  /// [lo, hi) in blocks of W rows; each row of a block runs the stages before
  /// the epilogue (cpu::epilogue_start) and leaves the scalars the epilogue
  /// reads in arrays (`name_rows[W]`), then the epilogue runs once as a
  /// vector of the block's rows (masked in a partial block).
  void print_epilogue_in_lanes(const Loop& l, const Bound& lo, const Bound& hi, const ValueScope& at);
  /// CpuSchedule::reduction_trees: stages [0, end) of a block of rows `v`
  /// from `block`, `rows` of them: each reduction run over the block's rows
  /// in turn, then a tree per reduction into `<result>_rows`.
  void print_reduction_trees(size_t end, const std::string& v, const std::string& block, const std::string& rows);
  void print_pointwise(const PointwiseStage& s, size_t index, const ValueScope& at);
  /// The values of a stage's body that stay the same across its loops and
  /// call a math function (free of its loop variables, loads and random
  /// numbers), computed once before the loops into `scope`, which the loop
  /// bodies then take as their parent: log_softmax's
  /// log(sum) was a 16-lane log in every vector of its row. Computed
  /// outside the stage's loops, such math on a row's own values calls libm.
  void hoist_stage_invariants(const Stage& s, ValueScope& scope);
  /// Declares the vector variables stage `stage` forwards its stores into
  /// (Place::forward_slots), by access: its slots of
  /// Place::kernel_forward_slots.
  std::map<std::string, std::string> declare_forward_slots(size_t stage, const Place& at);
  void print_stores(const std::vector<Store>& stores, ValueScope& scope);
  /// "buffer[index]" of a direct access; "" for an indirect one.
  std::string access_key(const BufferPtr& buffer, const IndexExpr& at);
  /// After a store of `v`: forgets the forwarded vectors it may overwrite and
  /// forwards its own, where it is a masked last vector with a slot.
  void forward_store(const Store& st, const CValue& v, const Place& at);
  /// The forwarded vector a load in a masked last vector reads, if any.
  const CValue* forwarded_load(const Load& n, const Place& at);
  /// row_blocks: before the loop of stage `stage` inside `at`, declares the
  /// row blocks of Place::row_blocks that it opens, loading those it loads;
  /// returns `at` with its loop as Place::row_loop where it walks them.
  Place open_row_blocks(size_t stage, const Place& at);
  /// The open row block a load or store at `index` of `buffer` at `at`
  /// walks, if any.
  const codegen::RowBlock* row_block_of(const BufferPtr& buffer, const IndexExpr& index, bool masked, const Place& at);
  /// A row block's array (C name).
  std::string row_block_array(const codegen::RowBlock& b) {
    return cat("rows", b.number, "_", pointer_name(b.buffer->name));
  }
  /// A scan stage: its running value (one per lane in a vector loop) from
  /// the identity, updated and stored at every step of its serial loop.
  void print_scan(const ScanStage& s, const ValueScope& at);
  /// Reduction stages [first, end): one stage, or a run of one_pass_end.
  void print_reductions(size_t first, size_t end, const ValueScope& at);
  /// print_reductions' loops and results, inside `at` (the stages' invariants).
  void print_reduction_run(const std::vector<const ReductionStage*>& run, const ValueScope& at);
  /// Prints the accumulation over the loops of `run` (stages of one pass,
  /// see cpu::one_pass_end; the first loop over [lo0, hi0)) inside `at`, its
  /// accumulators as cpu::place_accumulators places them, and returns the C
  /// name of each stage's final state: scalar (horizontal and scalar modes;
  /// with `named_results` a one-value stage's is declared under its
  /// result's name) or the per-lane vector state (lane mode, one stage). In
  /// lane mode, the vector state starts from `lane_init` when given.
  std::vector<std::string> print_reduction_core(const std::vector<const ReductionStage*>& run, const Bound& lo0,
                                                const Bound& hi0, const ValueScope& at, bool named_results,
                                                const std::string& lane_init = "");
  /// print_reduction_core of one stage.
  std::string print_reduction_core(const ReductionStage& s, const Bound& lo0, const Bound& hi0, const ValueScope& at,
                                   const std::string& lane_init = "");
  /// Lane mode: declares the stage's results as vector locals read from the
  /// vector state `state`, for the expressions after it.
  void bind_lane_results(const ReductionStage& s, const std::string& state);

  // --- vector values -------------------------------------------------------------------
  /// The Place of `scope` (every scope of a kernel's body has one).
  static const Place& place(const ValueScope& scope) { return static_cast<const Place&>(*scope.place()); }
  /// Whether `e` varies along the vector loop of `at`.
  bool varying(const Expr& e, const Place& at) const;
  /// `e` at its scope's place: a vector if it varies with the vector loop
  /// variable, else a scalar.
  CValue value(const Expr& e, ValueScope& scope);
  CValue vector_node(const Expr& e, ValueScope& scope);
  /// A load along the vector loop: whole, strided, repeated, from a row block
  /// or a transposed tile, forwarded from a store, masked, or lane by lane.
  CValue vector_load(const Load& n, ValueScope& scope);
  /// Text of `v` as a vector of its dtype (splat if scalar).
  std::string as_vector(const CValue& v);
  /// Text of a bool `v` as a lane mask of `bytes`-wide lanes.
  std::string as_mask(const CValue& v, int bytes);
  std::string vector_cast(DType from, DType to, const CValue& x);
  /// A lambda of the vector loop variable `var` returning `body_expr`.
  static std::string lane_lambda(const std::string& var, const std::string& body_expr);

  /// Whether scalar math printed at `at` computes what vector lanes of this
  /// kernel compute at other positions, and so goes through the vector form
  /// on a splat (the same bits at every position; fuzzer seed 1790): inside a
  /// stage's innermost loop (its scalar tail) and anywhere in a kernel whose
  /// outer loop is vectorised (its scalar remainder). Elsewhere (a row's
  /// loop-less stages, the hoisted invariants) every row computes it alike,
  /// so it calls libm: log of a row sum through a splat of 16 lanes took
  /// 17 ns, logf 7.
  bool scalar_math_beside_lanes(const Place& at) const;
  /// In a masked tail: a mask of `bytes`-wide lanes, on for the first
  /// `lanes` (Place::tail_lanes).
  std::string tail_mask(int bytes, const std::string& lanes) const;
  /// A load in a masked tail: only the lanes that are on read memory.
  std::string masked_tail_load(const Load& n, const std::string& mem_type, bool contiguous, ValueScope& scope);
  /// A reduction's value in a masked tail of `lanes` lanes: the identity in
  /// the lanes that are off.
  CValue identity_where_tail_is_off(ReductionKind kind, DType t, const CValue& v, const std::string& lanes);

  // --- types ---------------------------------------------------------------------------
  std::string width() const { return std::to_string(sched_.vector_width); }
  /// Vector type of a value dtype (bool: not a value type, see mask_type).
  std::string vtype(DType t) const;
  std::string mask_type(int bytes) const { return "cppi_i" + std::to_string(bytes * 8) + "x" + width(); }
  /// Lane width in bytes of a dtype's vector (reduced floats: 2).
  static int lane_bytes(DType t) { return t == DType::Bool ? 4 : dtype_size(t); }
  /// Element expression of one lane read from memory (bits for reduced floats).
  std::string lane_element(const Load& n, ValueScope& scope);
  /// index(e, scope) for an access in the (possibly vectorised) body. The
  /// schedule never vectorises along a variable an indirect leaf depends on,
  /// so the leaves are scalars computed once per vector iteration.
  std::string access_index(const IndexExpr& e, ValueScope& scope);

  // --- reductions ------------------------------------------------------------------------
  std::string state_type(ReductionKind kind, DType t) const;
  std::string state_identity(ReductionKind kind, DType t) const;
  std::string scalar_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                            const std::string& pos) const;
  std::string state_combine(ReductionKind kind, DType t, const std::string& a, const std::string& b) const;
  std::vector<std::string> state_results(ReductionKind kind, const std::string& state) const;
  std::string vstate_type(ReductionKind kind, DType t) const;
  std::string vstate_identity(ReductionKind kind, DType t) const;
  std::string vector_update(ReductionKind kind, DType t, const std::string& acc, const CValue& v,
                            const std::string& pos);
  std::string horizontal(ReductionKind kind, DType t, const std::string& acc) const;
  /// Lane-wise merge of two vector states, `a` holding the earlier
  /// positions (cascade totals, parallel_reduction's per-thread states).
  std::string vstate_combine(ReductionKind kind, DType t, const std::string& a, const std::string& b) const;
  std::string identity_value(ReductionKind kind, DType t) const;
  IndexExpr reduction_position(const ReductionStage& s) const;

  const Kernel& k_;
  const CpuSchedule& sched_;
  const std::vector<std::string>& graph_symbols_;
  const PrintOptions& options_;
  const KernelSignature sig_;
  /// Each argument buffer's (and kernel-local scratch buffer's) pointer name.
  const std::unordered_map<std::string, std::string> pointers_;
  std::unordered_map<std::string, CValue> locals_;
  const Place invariants_place_{[] {
    Place p;
    p.invariants = true;
    return p;
  }()};
  const Place kernel_place_;
  /// The kernel's invariants (print_invariants), the ancestor of every scope.
  ValueScope invariants_;
  /// The scope of the kernel's loops: the parent of the outer loops' scopes.
  const ValueScope kernel_scope_;
  std::set<std::string> reserved_;
  /// transpose_tile: the transposed loads, each once, in the order the
  /// stores read them, with the tile each is read from
  /// (print_transpose_tiles); empty without transpose_tile.
  const std::vector<TransposedLoad> transposed_;
};

}  // namespace cppi::cpu::detail
