/// \file
/// The CPU schedule pass: decides each kernel's ir::CpuSchedule (which outer
/// loops run under cppi_parallel_for and with what grain, whether a lone
/// reduction is split across threads, which loop is vectorised and how wide)
/// from the kernel's loops and access patterns and the target CPU. The
/// printer (cpu_codegen/printer) prints exactly what this decides.
///
/// The rules, in order:
/// - Work = product of outer extents x sum over stages of the product of the
///   stage's extents (size symbols count as CpuTarget::symbol_hint).
/// - Vectorisation. Candidate loops: the innermost loop of every stage that
///   has loops (a row reduction or a softmax row), else/otherwise the
///   innermost outer loop (plain pointwise kernels; column reductions, whose
///   reduction loop is not the contiguous one, vectorise across outputs;
///   so do stage loops shorter than a full vector, when the outer loop
///   reads whole or strided vectors: sums of groups of 2 to 4). A
///   candidate is taken when every store is stride-1 or of another constant
///   stride in that loop (stored lane by lane: a norm over the channels of
///   an NCHW tensor written channels-last) and the loads are mostly
///   stride-1, broadcast (stride 0) or strided_load (a stride of 2 to 4,
///   read as whole vectors): gathers (other strides, non-affine indices,
///   masked loads, random numbers whose counters do not step evenly along
///   the loop: philox_lane_step) and strided stores together may be at most
///   half as many as contiguous and strided loads. Width = vector bytes / the widest lane (4-byte
///   minimum: fp16/bf16/int8 compute in float lanes anyway): 16 floats or 8
///   doubles on AVX-512, 8 / 4 on AVX2; narrowed to 8 or 4 when the loop has a
///   constant extent below the width, none below 4. Stage loops that would
///   read only strided vectors give way to the outer loop (x.sum(0) of n x
///   3 reads each row once). Tail: a scalar loop; with AVX-512, a stage
///   loop's or a short or symbolic outer loop's last partial vector is one
///   masked vector (the narrowest that covers a loop shorter than a vector),
///   and a constant outer loop of more than a vector ends in a vector
///   overlapping the one before.
/// - Rows in lanes. A kernel whose every stage loop is one reduction or
///   pointwise loop of constant extent R from 2 to fewer than a vector of
///   floats (softmax, layer_norm, var_mean over rows of 7), nothing
///   accumulated, tries the outer loop first with row_blocks: loads and
///   stores of whole rows laid end to end (row_block_access) count as whole
///   vectors, R of them per vector of rows. It is taken when every row is
///   shorter than the width, and every buffer stored as rows is stored and
///   loaded as the same rows only, loaded only after a stage stores it (the
///   rows live in registers until the end of the outer iteration); else the
///   kernel is scheduled as without. One masked vector per row pays a
///   horizontal step per row; rows in lanes need none (var_mean and
///   softmax over 10^6 rows of 7 to 15 floats are faster in lanes).
/// - Parallelism. Work below CpuTarget::min_parallel_work stays serial,
///   unless an outer extent is a size symbol: the work is then a guess and
///   the grain decides at run time (a dynamic 16M-float relu ran on one
///   thread). A kernel of reductions (plus loop-less stores; no pointwise stage with
///   loops, no scratch) whose outer iterations are fewer than the threads,
///   or do not divide among them (at most 4 per thread, each giving a
///   thread 4 x min_parallel_work), splits each reduction loop of each
///   outer iteration in turn (parallel_reduction: a softmax row's max, then
///   its sum of exp; partials combined in order). Under a vectorised outer
///   loop the outer iterations count in vectors and each thread keeps a
///   vector of partial states (a column sum of 7 columns over 10^6 rows).
///   Otherwise the fewest
///   leading outer loops whose product reaches 4 x threads are collapsed into
///   cppi_parallel_for, with grain = min_parallel_work / work per iteration,
///   so each chunk carries at least that much work. A vectorised outer loop is
///   parallel only when it is the only outer loop (its iterations then count
///   in vectors).
/// - Column-reduction tiling. A vectorised outer loop whose first stage is a
///   reduction over loops and whose other stages have none is tiled:
///   column_block = vectors per ~4 KiB, row_block = 16 (when there is more
///   than one vector and more than 16 rows), so each row step reads whole
///   cache lines.
/// - Cascaded accumulation. A float sum or Welford stage that may add more
///   than 4096 terms into one accumulator (or a symbolic number) gets
///   cascade_block = 4096: accumulators restart every 4096 terms per lane and
///   merge into a running total, as eager's cascade sum does. A column
///   reduction under a vectorised outer loop (one term per row per lane)
///   cascades every 64 rows once it has more: a 4096-row column sum lands
///   within 1.6x of eager's distance from float64 (14x without).
/// - Transposed tiles. A kernel of loop-less pointwise stages with two or
///   more outer loops, some of whose loads are transposed_load along the two
///   innermost, is vectorised along the innermost when it would be with
///   those loads counted contiguous: transpose_tile, W x W tiles (W = the
///   width, at most both extents), tiles of rows counted as one parallel
///   iteration. Untiled, x.t() + y on 2048^2 floats is a scalar loop that
///   reads one element per cache line of x (Inductor tiles the same way).
/// - Pieces. A vectorised, non-parallel loop of constant extent in a kernel
///   of loop-less pointwise stages, along which comparisons of the loop
///   variable with constants change value (cat, constant padding), gets
///   vector_loop_splits at those points; the width is taken from the folded
///   pieces (their int64 lane indices are gone).
/// - Prefaulting. A parallel kernel whose every store writes its buffer
///   densely in the order of the outer loops then its stage's loops (constant
///   extents), outputs of at least 4 MiB: prefault_outputs, each chunk faults
///   in its output ranges in one batch when the pages are fresh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lowering/ir/kernel.h"
#include "support/cpu_isa.h"

namespace cppi::cpu {

struct CpuTarget {
  /// Bytes per vector register: 64 (AVX-512), 32 (AVX/AVX2), 16 (SSE).
  int vector_bytes = 64;
  int num_threads = 1;
  /// Elements of work below which a kernel runs on one thread.
  int64_t min_parallel_work = 32768;
  /// The value assumed for a size symbol in the estimates above.
  int64_t symbol_hint = 1024;
  /// Constants of the rules below that max-autotune varies
  /// (schedule_candidates.h); these defaults are the heuristic's.
  /// Vector accumulators of a vectorised sum, max or min.
  int vector_accumulators = 4;
  /// Column-reduction tiles: bytes of each row a tile covers (a quarter of
  /// it where the kernel passes over the tile again), and rows per step.
  int64_t column_block_bytes = 4096;
  int64_t row_block = 16;

  /// The running CPU's hardware threads, with the vectors of `isa` (the
  /// cpu_isa option made concrete for the host: support/cpu_isa.h).
  static CpuTarget host(const CpuIsaTarget& isa);
};

/// The counter step between neighbouring lanes of a Random whose loop over
/// `var` is vectorised, when the vector Philox (cppi_vrand/cppi_vrandn) takes
/// it: a constant c in [0, 2^28] (so c * 15 < 2^32: any width up to 16 lanes). Other
/// offsets (a symbolic or negative step, floordiv/mod along var) are drawn
/// lane by lane, and the schedule counts them as gathers.
std::optional<uint32_t> philox_lane_step(const ir::IndexExpr& offset, const std::string& var);

/// The step between neighbouring lanes of cast<int32>(IndexValue(index))
/// in a vector loop over `var`, when the vector printer makes it an int32
/// iota (cppi_viota_step on int32 lanes; modular arithmetic makes that the
/// cast of the int64 iota lane by lane): a constant step and no indirect
/// leaves. Such a value keeps the loop at int32's width, not int64's.
std::optional<int64_t> int32_iota_step(const ir::Cast& cast, const std::string& var);

/// Whether a vector loop over `vector_var` reads a load at `index` from a
/// transposed tile whose rows run along `tile_var`
/// (CpuSchedule::transpose_tile): an unmasked load without indirect leaves whose index is affine in both,
/// stride exactly 1 along `tile_var` and any stride but 0 and 1 along
/// `vector_var` (x.t()'s in x.t() + y: 1 along the output's rows, the row
/// length along its columns).
bool transposed_load(const ir::IndexExpr& index, bool masked, const std::string& vector_var,
                     const std::string& tile_var);

/// The stride S of an unmasked load without indirect leaves whose index
/// steps by a constant 2, 3 or 4 along `vector_var` (a pooling window's
/// columns, x[..., ::2]): a vector loop reads it as S whole vectors and
/// picks the lanes out in registers (cppi_vload_strided). nullopt otherwise.
std::optional<int> strided_load(const ir::IndexExpr& index, bool masked, const std::string& vector_var);

/// The repeat R (2, 4 or 8) of an unmasked load without indirect leaves
/// whose index moves by 1 every R steps of `vector_var`, from each multiple of
/// R (nearest upsampling's x[..., i // 2]): a vector loop reads W / R
/// elements and spreads each over R lanes (cppi_vload_repeat). nullopt
/// otherwise.
std::optional<int> repeated_load(const ir::IndexExpr& index, bool masked, const std::string& vector_var);

/// The row length R of an access that walks whole rows laid end to end along
/// a vectorised outer loop: of `element`s of 4 or 8 bytes (float32/64,
/// int32/64: a row block moves them whole), unmasked, no indirect leaves, its index affine
/// with stride 1 along `row_loop` (a stage loop of constant extent R >= 2)
/// and stride R along `vector_var` (softmax over rows of 7: x[7*x0 + r0]).
/// With CpuSchedule::row_blocks a vector of W rows reads such a load as R
/// vectors, element k of every row in vector k (cppi_vload_rows). nullopt
/// otherwise.
std::optional<int64_t> row_block_access(DType element, const ir::IndexExpr& index, bool masked,
                                        const std::string& vector_var, const ir::Loop& row_loop);
/// Where a row block's rows start: `index` at the first step of `row_loop`.
/// Two stages that walk the same rows under different loop names (a
/// softmax's r0 and x1) give the same start.
ir::IndexExpr row_block_start(const ir::IndexExpr& index, const ir::Loop& row_loop);

/// The kernel with its CPU schedule decided (its GPU schedule kept).
ir::KernelPtr schedule_for_cpu(const ir::KernelPtr& kernel, const CpuTarget& target);

/// How many leading outer loops of `k` may run in parallel: all of them,
/// unless an accumulating store (ir::Store::accumulate) could add into one
/// element from two of their points (ir::selects_disjoint_elements).
/// Upsampling's backward adds into out[n, c, h // 2, w // 2]: each (n, c)
/// plane is its own, so threads may split n and c. An embedding's backward
/// adds rows at positions read from memory: 0, serial.
size_t parallel_loops_without_races(const ir::Kernel& k);

/// One line saying what schedule_for_cpu decided and why, for remarks.
std::string explain_cpu_schedule(const ir::Kernel& kernel, const CpuTarget& target);

}  // namespace cppi::cpu
