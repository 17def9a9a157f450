/// \file
/// Kernels: the unit that fusion produces and codegen prints.
///
/// A Kernel is a nest of outer loops (the parallelisable iteration space)
/// whose body is a sequence of stages, executed in order for every outer
/// iteration:
/// - ReductionStage: folds a body over its own inner loops into named scalar
///   results; later stages read them with LocalRef(name, dtype).
/// - PointwiseStage: runs its inner loops (possibly none) and performs its
///   stores in every iteration, in order.
/// - ScanStage: runs its one loop in order, folding a body into a running
///   value, and performs its stores (which read the running value) in every
///   iteration. A kernel with a scan stage has no other stage.
/// A fused softmax over rows reads:
///   for x0 in [0, rows):
///     reduce max over r0 in [0, cols) of x[x0, r0]              -> amax
///     reduce sum over r0 in [0, cols) of exp(x[x0, r0] - amax)  -> denom
///     pointwise over r0 in [0, cols): out[x0, r0] = exp(x[x0, r0] - amax) / denom
/// A plain pointwise kernel has all its loops outer and one pointwise stage
/// with no inner loops (or its innermost loop as the stage's loop). Horizontal
/// fusion puts several independent stages or stores under one outer loop.
///
/// Scoping: outer loop variables are visible to every stage; a stage's loop
/// variables only to that stage (two stages may reuse a name). Extents are
/// free of loop variables. A LocalRef must name a result of an earlier
/// ReductionStage with the same dtype. Devices: a kernel stores to buffers
/// on its device and loads from them, or from host scalars (is_host_scalar:
/// one-element CPU buffers a CUDA kernel takes by value). Kernel::make checks
/// all of this.
///
/// Schedule: what codegen prints and never decides (parallel loops, grain,
/// vectorised loop and width, tail handling, GPU thread mapping). The fusion
/// scheduler fills it; codegen asserts on anything it cannot honour.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "lowering/ir/buffer.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ir/node.h"
#include "lowering/ir/reduction.h"

namespace cppi::ir {

/// for var in [0, extent).
struct Loop {
  IndexExpr var;  // an IndexVar
  IndexExpr extent;
};

struct ReductionStage {
  std::vector<Loop> loops;
  ReductionKind kind = ReductionKind::Sum;
  Expr body;
  /// One name per result (num_results(kind)), visible to later stages as
  /// LocalRef(results[i], result_dtypes[i]).
  std::vector<std::string> results;
  std::vector<DType> result_dtypes;  // filled by make()

  /// Checks the body's dtype against the kind and the number of names.
  static ReductionStage make(std::vector<Loop> loops, ReductionKind kind, Expr body, std::vector<std::string> results);
  /// LocalRef to result i.
  Expr result(size_t i = 0) const;
};

struct PointwiseStage {
  std::vector<Loop> loops;  // may be empty: the stores run once per outer iteration
  std::vector<Store> stores;
};

/// for r in loop, in order: running = combine(running, body) (kind Sum or
/// Prod, from the identity, in the body's dtype); then the stores, which
/// read the running value as LocalRef(result, body dtype). A kernel that
/// holds a scan stage holds nothing else (Kernel::make checks), so a backend
/// prints it whole: the outer loops are independent, the loop is serial.
struct ScanStage {
  std::vector<Loop> loops;  // exactly one
  ReductionKind kind = ReductionKind::Sum;
  Expr body;
  std::string result;
  std::vector<Store> stores;

  static ScanStage make(Loop loop, ReductionKind kind, Expr body, std::string result, std::vector<Store> stores);
};

using Stage = std::variant<ReductionStage, PointwiseStage, ScanStage>;

// --- schedule annotations -----------------------------------------------------------

enum class VectorizedLoop : uint8_t {
  None,                  // scalar code
  InnermostOuter,        // the innermost outer loop (kernels whose stages have no loops)
  InnermostOfEachStage,  // the innermost loop of every stage that has loops
};
enum class TailKind : uint8_t {
  ScalarLoop,  // a scalar epilogue loop handles extent % vector_width
  // InnermostOuter only: one more whole vector ends at the loop's end,
  // overlapping the one before. Its lanes are independent columns, so the
  // ones computed twice store the same values again (see CpuSchedule::tail).
  Overlapped,
  // The vectorised loop's (each stage loop's, or the innermost outer
  // loop's) last extent % vector_width iterations run as one vector whose
  // lanes past the end are off: loads read only the lanes that are on
  // (zeros elsewhere), stores write only those, and a stage loop's
  // reductions take their identity in the others. One call of a vector exp
  // for a softmax row's 7 elements, not one per element; one 8-lane pass
  // down the rows of a 7-column sum. Not with transpose_tile or
  // vector_loop_splits.
  Masked,
};
enum class GpuMapping : uint8_t {
  None,                 // not scheduled for a GPU
  GridStridePointwise,  // flattened outer loops over all threads, grid-stride loop
  RowPerWarp,           // one outer iteration per warp, stages' loops over its lanes
  RowPerBlock,          // one outer iteration per block, stages' loops over its threads
  ColumnReduction,      // threads map to the innermost outer loop, each reduces a column
};
const char* to_string(VectorizedLoop v);
const char* to_string(TailKind t);
const char* to_string(GpuMapping m);

struct CpuSchedule {
  /// The outermost `parallel_loops` outer loops are collapsed into one
  /// `omp parallel for`; 0 = serial.
  int parallel_loops = 0;
  /// Iterations per chunk of the parallel loop; 0 = an even static split.
  int64_t grain_size = 0;
  /// When the work of one parallel iteration depends on size symbols (the
  /// inner outer loops' and the stage loops' extents): the elements a chunk
  /// should carry. The printed grain is then this over that work at run
  /// time, at least 1 (grain_size stays the estimate). 0 = grain_size as is.
  /// x.sum(-1) of a dynamic 3 x 4M took its estimated grain of 32 rows: one
  /// chunk, one thread.
  int64_t grain_work = 0;
  /// Split the (single) reduction stage's loops across threads with
  /// per-thread partials combined at the end (for kernels with few or no
  /// outer iterations).
  bool parallel_reduction = false;
  VectorizedLoop vectorized = VectorizedLoop::None;
  int vector_width = 1;  // elements per vector
  /// Overlapped: the innermost outer loop has a constant extent of at least
  /// one vector (not a whole number of them), and no buffer the kernel
  /// writes is one it reads, so computing a column twice is harmless. A
  /// column reduction's 8 columns past the last whole vector were 8 scalar
  /// walks down the rows. A parallel vector loop is split into whole vectors,
  /// the last chunk taking the rest, so no two threads compute one column.
  TailKind tail = TailKind::ScalarLoop;
  /// Column-reduction tiling (InnermostOuter kernels whose leading stages are
  /// reductions over loops and whose other stages have none): the vectorised
  /// outer loop runs in blocks of `column_block` vectors, each reduction's
  /// first loop in blocks of `row_block` iterations, the two interchanged, so
  /// each row step reads column_block x vector_width contiguous elements
  /// instead of one vector per row. The per-lane accumulation order is unchanged. 0 = off.
  int column_block = 0;
  int64_t row_block = 0;
  /// Cascaded accumulation of float sums and Welford reductions: every
  /// accumulator (scalar, or each vector lane) starts afresh after
  /// `cascade_block` updates and its block result merges into a running
  /// total. A float accumulator stops growing once the total is ~2^24 times
  /// the terms (a column mean over 16M rows came out 13% high; Welford's
  /// float weight stalls at 2^24), so no accumulator may see more terms than
  /// this. 0 = off (the reduction is short enough).
  int64_t cascade_block = 0;
  /// InnermostOfEachStage kernels: sum, max and min reductions keep this
  /// many vector accumulators, vector k of each group of them feeding
  /// accumulator k, merged before the horizontal step. One accumulator makes
  /// a chain of dependent adds or compare-selects, one per vector, each
  /// waiting on the last. Max and min give the same result in any order (NaN
  /// included); a sum adds in another order, as eager's (ATen's row sums
  /// keep four accumulators too). A stage whose body calls a math function
  /// (ir::calls_math_function) keeps one: the call takes longer per vector
  /// than the chain it feeds, and copies of it would only cost compile time.
  /// 1 = off.
  int vector_accumulators = 1;
  /// InnermostOuter kernels of loop-less pointwise stages only: the two
  /// innermost outer loops run in vector_width x vector_width tiles, and each
  /// load cpu::transposed_load names (stride 1 along the second-innermost
  /// loop, another along the vectorised one: x.t() in x.t() + y) is read a
  /// tile at a time along its rows and turned in registers
  /// (cppi_transpose_tile), so the vector loop loads it whole instead of lane
  /// by lane. Partial tiles at the edges run the plain vector loop, those
  /// loads gathered. The tiled loop's iterations count in tiles where it is
  /// parallel.
  bool transpose_tile = false;
  /// InnermostOuter kernels whose stage loops walk rows shorter than a
  /// vector (softmax, layer_norm, var_mean over rows of 7): a vector of W
  /// outer iterations reads each cpu::row_block_access load (x[7*x0 + r0])
  /// as R vectors before its stage's loop, element r of every row in vector
  /// r (cppi_vload_rows: R whole loads turned in registers), and the loop
  /// reads vector r at step r; a row-block store writes vector r and the W
  /// rows go back to memory in R whole stores after the last stage
  /// (cppi_vstore_rows). A later stage's load of what a stage stored reads
  /// the vectors (softmax's stashed exp). The schedule checks that every
  /// buffer so stored is stored and loaded as the same rows only, loaded
  /// only after its first store. Each row then reduces lane-wise, W rows at
  /// once, with no horizontal step.
  bool row_blocks = false;
  /// InnermostOfEachStage kernels whose last stages are loop-less stores
  /// calling a math function on a row's reductions (logsumexp's log of the
  /// row sum): the innermost outer loop runs in blocks of vector_width rows.
  /// Each row of a block runs the stages before those (its epilogue), the
  /// values the epilogue reads kept in an array, one element per row; then
  /// the epilogue runs once per block with a row in each lane (one vector
  /// log for W rows, not a libm call per row) and stores the W results whole
  /// (masked in a partial last block). cpu::epilogue_start says where the
  /// epilogue starts. Not where the rows' loop is collapsed with others into
  /// one parallel loop.
  bool epilogue_in_lanes = false;
  /// With epilogue_in_lanes, where every stage before the epilogue is a
  /// float sum, max or min over a row short enough that a block of W rows
  /// stays in L1 (var_mean, logsumexp, norms over short rows): each reduction
  /// (or one-pass run) goes over the block's rows in turn, keeping each row's
  /// vector accumulator, and one transposing tree (cppi_vtree_add/max/min)
  /// turns the W accumulators into a vector of the W rows' results, lane r
  /// row r's, instead of a horizontal reduction per row (a serial chain of
  /// shuffles and combines; var_mean over rows of 16 took 1.5x Inductor's
  /// time). Later reductions read a row's result from the block's array.
  bool reduction_trees = false;
  /// InnermostOuter kernels of loop-less pointwise stages whose vectorised
  /// loop is not parallel and has a constant extent: the loop runs as one
  /// vector loop (with its scalar tail) per piece [0, s0), [s0, s1), ...,
  /// [sk, extent), and in each piece the comparisons of the loop variable
  /// with constants are folded to their value there
  /// (cpu::fold_index_conditions): a cat's or a pad's masked loads become
  /// plain loads or zeros. Empty = one loop.
  std::vector<int64_t> vector_loop_splits;
  /// Each parallel chunk first faults in, in one batch, the range of every
  /// output it writes, if those pages are fresh (cppi_prefault_for_write).
  /// Only for kernels whose every store writes its buffer densely in the order
  /// of the outer loops and then its stage's loops, so a chunk's stores cover
  /// one contiguous range of each output.
  bool prefault_outputs = false;
};

/// The reductions `CpuSchedule::cascade_block` applies to: float sums and
/// Welford (max/min/arg*/any/all are exact, integer sums wrap exactly).
inline bool accumulates_in_cascade(ReductionKind kind, DType t) {
  return is_floating(t) && (kind == ReductionKind::Sum || kind == ReductionKind::Welford);
}

struct GpuSchedule {
  GpuMapping mapping = GpuMapping::None;
  int block_size = 0;           // threads per block
  int64_t grid_size = 0;        // blocks; 0 = derived from the outer extent at launch
  int elements_per_thread = 1;  // consecutive elements per thread (vectorised loads)
  /// ColumnReduction only: threads that split one column's reduction (a
  /// power of two; 1 = one thread per column). Above 1 the block is 32
  /// columns x threads_per_column row slices (block_size = 32 x it).
  int threads_per_column = 1;
  /// RowPerBlock: blocks that share one row (grid = rows x it), each
  /// folding a strided share of it; the last block to finish combines their
  /// partials in a fixed order (deterministic). 1 = a block per row.
  /// ColumnReduction with threads_per_column > 1: the same for each group of
  /// 32 columns (grid = groups x it), the rows split across the blocks.
  /// A scan (either block mapping): each block takes a contiguous share of
  /// the scan and looks back at the totals of the shares before it
  /// (gpu_schedule.h).
  int row_splits = 1;
  /// Cached rows (RowPerWarp / RowPerBlock with elements_per_thread E > 0)
  /// whose cached loads and looped stores are stride 1 along the row: row
  /// positions a thread fills with one vector load of each cached load (16
  /// bytes), and stores with one vector store per group of V slots; a
  /// divisor of E. Slot s holds position (s / V) * T * V + tid * V + s % V.
  /// 1 = scalar slots, s * T + tid. A RowPerBlock scan: its loads and
  /// stores stride 1 along the scan move V of a thread's E positions as one
  /// vector.
  int cache_vector = 1;
  /// GridStridePointwise with elements_per_thread V > 1: a thread's V
  /// consecutive iterations are taken over the flattened outer loops and may
  /// cross rows of the innermost one (whose extent is not a multiple of V);
  /// accesses dense over all outer loops move as vectors.
  bool flat_vector = false;
};

struct Schedule {
  CpuSchedule cpu;
  GpuSchedule gpu;
  /// Why the scheduler chose as it did, in a line ("parallel over 1 outer
  /// loop, grain 2048; vectorised outer loop x0 ..."): explain's kernel list
  /// and the printed kernel's header show it. Empty before scheduling.
  std::string why;
};

// --- kernel ---------------------------------------------------------------------------

class Kernel;
using KernelPtr = std::shared_ptr<const Kernel>;

class Kernel {
 public:
  /// Verifies scoping, dtypes and devices (see the file comment); throws
  /// CompilerError(internal) with the reason when the kernel is malformed.
  static KernelPtr make(std::string name, Device device, std::vector<Loop> outer, std::vector<Stage> stages,
                        Schedule schedule = {}, std::vector<std::string> origins = {});
  /// The same kernel with another schedule.
  KernelPtr with_schedule(Schedule schedule) const;

  const std::string name;
  const Device device;
  const std::vector<Loop> outer;
  const std::vector<Stage> stages;
  const Schedule schedule;
  const std::vector<std::string> origins;  // FX nodes fused into this kernel

  /// Extents of every loop variable (outer and all stages).
  VarRanges var_ranges() const;
  /// Extents visible inside stage i (outer + that stage's loops).
  VarRanges var_ranges(size_t stage) const;

 private:
  Kernel(std::string n, Device d, std::vector<Loop> o, std::vector<Stage> s, Schedule sc, std::vector<std::string> orig)
      : name(std::move(n)),
        device(d),
        outer(std::move(o)),
        stages(std::move(s)),
        schedule(sc),
        origins(std::move(orig)) {}
};

/// The kernel that runs one pre-fusion node unfused: its ranges become the
/// outer loops; a reduction becomes a reduction stage over r0.. whose results
/// (named after the node: "<name>", or "<name>_mean"/"_m2"/"_weight" for
/// welford) a loop-less pointwise stage stores. Device: the output's.
KernelPtr single_node_kernel(const ComputeNode& node);

/// Kernel::make's checks as a status.
Status verify(const Kernel& k);

/// What a kernel needs as arguments: the buffers it reads or writes (sorted by
/// name) and the size symbols it uses anywhere (natural order). KernelLocal
/// buffers are not arguments: they are listed in `scratch` for the kernel to
/// allocate itself.
struct KernelSignature {
  struct Arg {
    BufferPtr buffer;
    bool read = false;
    bool written = false;
  };
  std::vector<Arg> buffers;
  std::vector<std::string> symbols;
  std::vector<BufferPtr> scratch;
};
KernelSignature signature(const Kernel& k);

/// A stage's own loops (empty for a loop-less pointwise stage).
const std::vector<Loop>& loops_of(const Stage& s);

/// `index` with stage `stage`'s own loop variables renamed by position, loop
/// i to `var_for(i)`: two stages may name their loops differently (a softmax
/// reduces over r0 and stores over x1) and still walk the same elements.
IndexExpr rename_stage_loops(const Kernel& k, size_t stage, const IndexExpr& index,
                             const std::function<IndexExpr(size_t)>& var_for);

/// One past the last stage of the run of reduction stages that starts at
/// `first` and can fold in a single pass over their loops: consecutive
/// reduction stages with the same loop extents (loops matched by position,
/// as rename_stage_loops does) none of which reads a result of another stage
/// of the run. A printer may then update all of the run's accumulators in
/// one loop nest and read each shared element once (layer_norm backward's
/// weight and bias gradients, two sums over the same rows). first + 1 when
/// `first` is not a reduction with loops or starts no longer run.
size_t reduction_run_end(const Kernel& k, size_t first);

/// As reduction_run_end, but the run may also hold looped pointwise stages
/// over the same loop extents that read no result of the run and share no
/// buffer with it (none stores what a stage of the run loads or stores): one
/// pass then also stores them (mse_loss's forward folds the squared
/// difference and stores the scaled difference its backward reads).
size_t pass_run_end(const Kernel& k, size_t first);

/// The values a stage computes: a reduction's body, or a pointwise stage's
/// stored values (not their indices).
std::vector<Expr> stage_values(const Stage& s);

/// Loads in a stage (an accumulating store's own target included) / stores
/// of a stage.
std::vector<Access> reads(const Stage& s);
std::vector<Access> writes(const Stage& s);
/// The names of the buffers some stage of `k` stores to (scratch included).
std::set<std::string> written_buffers(const Kernel& k);
/// The buffers `k` both stores to and loads from (an in-place update, or a
/// value stored then read back).
std::set<std::string> read_back_buffers(const Kernel& k);
/// Whether some store of `k` accumulates (ir::Store::accumulate).
bool accumulates(const Kernel& k);
/// The scan stage of a scan kernel (its only stage), else null.
const ScanStage* scan_of(const Kernel& k);

}  // namespace cppi::ir
