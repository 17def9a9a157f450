/// \file
/// The GPU schedule pass: decides each CUDA kernel's ir::GpuSchedule (how its
/// loops map to threads, warps and blocks, the block size, how many elements
/// a thread handles) from the kernel's loops and access patterns and the
/// target GPU. The CUDA printer (cuda_printer.h) prints exactly what this
/// decides; the handle (gpu_codegen/cuda_kernels.h) derives the grid from it at launch.
///
/// What each mapping means (the printer's contract):
/// - GridStridePointwise: the outer loops, flattened row-major into one index
///   i over their product N, run in a grid-stride loop; each thread runs every
///   stage for its i (stage loops, if any, serially). elements_per_thread V > 1
///   (kernels without stage loops only): each thread takes V consecutive i, the
///   innermost outer loop's extent is a multiple of V, and the accesses that
///   are stride-1 in that loop (all stores must be; loads under a mask that
///   is the same for the V lanes too) move as one V-element vector (16 bytes
///   at most); other loads are per-lane scalars. flat_vector: the V
///   iterations may cross rows (the extent is not a multiple of V), and the
///   accesses dense over all outer loops move as vectors (all stores must
///   be), the others per lane. The alignment this needs (extent, or N, % V,
///   offsets and strides of the vector accesses and non-constant mask bounds
///   % V, base pointers aligned to the vector) is checked at launch; when it
///   fails the kernel's scalar twin (V = 1) runs instead.
///   grid_size 0: ceil(N / (block_size * V)) blocks, else min(grid_size, that).
/// - ColumnReduction: as GridStridePointwise with V = 1: threads map to the
///   flattened outer iterations, whose innermost loop is the contiguous one,
///   and each thread folds its reductions down its column serially.
///   threads_per_column S > 1: a block is 32 consecutive columns (outer
///   iterations) x S row slices (block_size = 32 S); slice s of a column
///   folds stage positions s, s + S, ... (each warp reads 32 contiguous
///   elements of one row), the S partials combine in shared memory by a fixed
///   tree (deterministic), and loop-less stages run on slice 0. Grid:
///   ceil(N / 32) blocks. Independent reductions over the same loops (a run
///   of ir::reduction_run_end) fold in one pass, each element read once.
///   row_splits P > 1 (S > 1, N constant, the looped stages one such run of
///   sums/max/min, loop-less stages after): exactly ceil(N / 32) x P blocks;
///   block b takes group b / P and slice positions (b % P) S + s, stepping
///   P S; each block stores its column partials into module-level arrays and
///   the group's last block folds the P partials in order (as split rows).
/// - RowPerWarp / RowPerBlock: one outer iteration (a row) per warp / per
///   block (warps or blocks stride over the rows). Each stage's loops,
///   flattened row-major into a position p over their product L, are split
///   across the warp's lanes / the block's threads (p = t, t + T, ...;
///   coalesced); reductions fold per thread, then combine with warp shuffles
///   (and a shared-memory step across warps for a block). Loop-less stages
///   (storing a reduction result) run on thread 0 of the row.
///   elements_per_thread E > 0: the row is cached in registers — L is a
///   constant <= E * T, every stage with loops has the same loop extents, and
///   each cacheable load (row_cached_loads) is read once into an E-slot
///   register array before the first stage (single pass over global memory).
///   E = 0: every stage re-reads global memory (multi-pass, one kernel).
///   row_splits P > 1 (RowPerBlock, E = 0, stage 0 a reduction and the
///   only looped stage but for pointwise stages of its pass, ir::pass_run_end,
///   which store as the pass visits): block b takes row b / P and positions (b % P) T + t,
///   stepping P T; each block stores its partial into a module-level array,
///   and the last of a row's P blocks to arrive (an atomic counter, reset by
///   it for the next launch) folds the P partials in order and runs the
///   loop-less stages. The arrays are the module's, so two launches of one
///   kernel must not overlap: has_module_state() says so, the handle loads
///   the kernel with module state, and the runtime (cuda_module.h, launch())
///   serialises its launches across streams with an event.
///
/// - A scan kernel (ir::ScanStage, the kernel's only stage) runs as
///   GridStridePointwise with V = 1, each thread walking its scan loop
///   serially, or as RowPerBlock with E = elements_per_thread: the block
///   walks its row's scan loop in chunks of E x T positions, thread t taking
///   E consecutive ones; it folds them, cppi_block_exclusive_scan combines
///   the threads' totals, and each thread stores its positions' running
///   values, the chunk's total carried into the next. Or as ColumnReduction
///   with S = threads_per_column and E: a block of 32 columns (the
///   innermost outer loop) x S row slices walks chunks of S x E positions,
///   slice s taking E consecutive ones, the slices' totals scanned per
///   column in shared memory in slice order. RowPerBlock with cache_vector
///   V > 1: the scan_vector_loads and the stores move V positions at a time
///   as one vector (the scan's length and the accesses' alignment checked
///   at launch, else the scalar twin runs). row_splits P > 1 (either block
///   mapping, constant outer extent): exactly rows (or groups) x P blocks,
///   block b taking ticket k (an atomic counter in the module: arrival
///   order) and with it tile k % (rows x P), launch k / (rows x P), row (or
///   group) tile / P and the tile % P-th share of whole chunks of the scan.
///   Each but the last of a row's blocks folds its share (first pass),
///   stores the total into a module-level array and sets its ready flag to
///   launch + 1; every block then waits for the flags of the shares before
///   its own (earlier tickets: they have started, and wait for nothing
///   before publishing), folds their totals in a fixed order (thread t
///   taking shares t, t + T, ..., then the block scan or the slices' fold),
///   and scans its share from that (second pass). Deterministic; no reset
///   between launches, which the runtime serialises (has_module_state).
///
/// The rules, in order:
/// - A scan along the dim its stores are contiguous in: RowPerBlock, E = 4,
///   T = the power of two in [32, 128] that covers the row in one chunk if
///   it can, doubled up to 512 while the row needs more and rows x T leave
///   resident threads idle; cache_vector = 16 bytes / the widest of the
///   stores and scan_vector_loads (at most E) when every store is stride 1
///   along the scan and affine, else 1. A scan whose stores are contiguous in the innermost outer loop:
///   ColumnReduction, E = 4, S = the smallest power of two <= 32 that fills
///   the resident threads (or 2 S E > the scan's length). Either splits
///   when its rows or groups fill at most a quarter of the resident
///   threads: P = resident threads / (their threads), at most the scan's
///   length / 4 chunks and 65536 blocks in all. Any other scan:
///   GridStridePointwise, block 128.
/// - No stage has loops and there is no reduction: GridStridePointwise,
///   block 128 (relu, sin + cos and gelu run at about a copy's speed, a
///   little faster than with block 256); V = 16 bytes / the widest element among the stores and the
///   stride-1 loads of the innermost outer loop (4 for float32, 8 for
///   float16/bfloat16) when every store is stride-1 there, nothing is
///   Random, and a constant innermost extent is a multiple of V; else
///   flat_vector when every store is dense and a constant N is a multiple
///   of V (V from the dense accesses).
/// - Stage loops whose loads are mostly stride-1 in the innermost outer loop
///   rather than in the stage's innermost loop: ColumnReduction. S = the
///   largest power of two <= 32 with S <= multiprocessors x 2048 / columns
///   (fill the GPU) and 16 S <= the stage length (each slice folds a run of
///   rows); S = 1 (block 128, one thread per column) when that is below 2 or
///   a looped stage reads a buffer the kernel writes.
/// - Otherwise a row kernel. L = the largest product of a stage's extents.
///   Constant L <= 1024: RowPerWarp, block 128 (4 rows per block), unless
///   32 threads cannot cache the row and the block below can. Longer
///   or symbolic rows: RowPerBlock with T = the power of two in [128, 1024]
///   nearest L / 16, at most 512 when the row can then be cached, and 256
///   instead of 512 when no looped stage stores and the row can still be
///   cached at 256 (1024 when the kernel has fewer rows than the GPU has
///   multiprocessors; 256 for symbolic L). E = ceil(L / T) when L is constant,
///   the row can be cached (see above) and E * (number of cached loads) <= 64
///   registers; else 0. Split rows (P > 1) when E = 0, rows are constant and
///   4 x rows <= multiprocessors, stage 0 is a sum/max/min of a 32- or 64-bit
///   number and the later stages are loop-less: P = min(2 x multiprocessors /
///   rows, T, L / 16 T).
/// - Column groups (S > 1) of a kernel that fits split column groups (above)
///   split when the groups alone leave resident threads unused:
///   P = min(multiprocessors x 2048 / (32 S) / groups, L / 16 S, 32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu_codegen/codegen/gpu_row_cache.h"
#include "lowering/ir/kernel.h"
#include "support/status.h"

namespace cppi::gpu {

struct GpuTarget {
  int multiprocessors = 132;  // H100/H200 SXM
  int max_threads_per_block = 1024;
  int compute_capability = 90;
  /// The value assumed for a size symbol in estimates.
  int64_t symbol_hint = 1024;
  /// Constants of the rules below that max-autotune varies
  /// (gpu_schedule_candidates.h); these defaults are the heuristic's.
  /// Threads per block of pointwise kernels.
  int pointwise_block = 128;
  /// Row-per-block kernels' threads per row, times 2^row_block_shift
  /// (within [64, max_threads_per_block]).
  int row_block_shift = 0;
  /// The most row slices of a column group.
  int max_column_slices = 32;
  /// Whether a few long rows (or column groups) may split across blocks.
  bool split_rows = true;

  /// The current CUDA device (gpu_codegen/runtime); Unsupported without one.
  static Expected<GpuTarget> current();
};

/// The kernel with its GPU schedule decided (its CPU schedule kept). The
/// kernel must be on Device::CUDA.
ir::KernelPtr schedule_for_gpu(const ir::KernelPtr& kernel, const GpuTarget& target);

/// Whether a kernel printed for `g` keeps state between launches in
/// module-level `__device__` arrays (split rows: partials and arrival
/// counters), so that its launches must be serialised across streams.
bool has_module_state(const ir::GpuSchedule& g);

/// Blocks per multiprocessor that `g`'s kernel must keep resident, 0 for no
/// demand. The printer passes it to __launch_bounds__, which caps the
/// registers per thread so that the compiler keeps them resident.
/// - Split rows launch one wave of blocks, two per multiprocessor; were fewer
///   resident (a kernel over 32 registers a thread fits one 1024-thread block
///   per multiprocessor, not two), the last half would run as a second wave
///   (the transformer training step's residual + mse_loss kernel, 40
///   registers, ran well below the memory bandwidth).
/// - Column slices (column groups and column scans) size their grid against
///   every resident thread, and rows streamed without a row cache hide their
///   loads' latency with resident threads: when the kernel's sizes are all
///   constants, both ask for 2048 threads per multiprocessor, 32 registers a
///   thread. Every such kernel of the benches fits 32 registers with no
///   spill at either NVRTC level; under --Ofast-compile=min some took 33 to
///   64 without the bound (a column var_mean of 16384^2, 512 blocks of 512
///   threads: 3 resident per multiprocessor instead of 4, two waves).
///   Symbolic sizes keep their registers: their
///   extents and strides live in registers too, and under the bound a
///   dynamic layer_norm backward's column kernel (51 registers without it)
///   spilled inside its loops.
int resident_blocks_assumed(const ir::Kernel& k, const ir::GpuSchedule& g);

/// One line saying what schedule_for_gpu decided and why, for remarks.
std::string explain_gpu_schedule(const ir::Kernel& kernel, const GpuTarget& target);



}  // namespace cppi::gpu

namespace cppi::gpu {

/// Whether a vectorised GridStridePointwise kernel (schedule `g`) moves the
/// access at `index` as one V-element vector. By the innermost loop: stride
/// 1 in it and affine in all outer loops (so its alignment can be checked at
/// launch). Over the flattened loops (g.flat_vector): dense row-major over the
/// outer loops, an offset aside.
bool is_vector_access(const ir::Kernel& kernel, const ir::GpuSchedule& g, const ir::IndexExpr& index);

/// When `mask` holds or fails for all V = `width` lanes of a vector by the
/// innermost loop together (its variable x runs from a multiple of V): every
/// comparison of x in it is x < b or x >= b (x <= b - 1, x > b - 1) with b a
/// multiple of V, combined by and / or / not; what does not read x is the
/// same for all lanes anyway. cat's x < 64 is, pad's x >= 3 is not. The
/// bounds b that are not constants come back for the launch to check
/// (% V); nullopt when lanes may differ.
std::optional<std::vector<ir::IndexExpr>> uniform_mask_bounds(const ir::Kernel& kernel, const ir::Expr& mask,
                                                              int width);

/// Whether a vectorised GridStridePointwise kernel (schedule `g`) reads
/// `load` as one vector: a vector access either unmasked or, by the
/// innermost loop, under a uniform mask (uniform_mask_bounds) and no wider
/// than 16 bytes. Its lanes are then loaded together where lane 0's mask
/// holds and are all zero where it fails (rotary embeddings' cat of halves
/// is much faster than with per-lane masked loads).
bool is_vector_load(const ir::Kernel& kernel, const ir::GpuSchedule& g, const ir::Load& load);

/// The variables a scan kernel's accesses are affine in: the outer loops'
/// then the scan loop's (the last, along which vectors run).
std::vector<ir::IndexExpr> scan_access_vars(const ir::Kernel& kernel);

/// The loads a RowPerBlock scan with cache_vector V > 1 reads as vectors of
/// V positions along the scan: in its body, unmasked, of buffers the kernel
/// does not write, stride 1 along the scan loop and affine in it and the
/// outer loops; each once, in first-use order.
std::vector<ir::Expr> scan_vector_loads(const ir::Kernel& kernel);

}  // namespace cppi::gpu
