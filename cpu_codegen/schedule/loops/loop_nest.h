/// \file
/// A CPU kernel's loop nest in the scheduled loop IR (codegen/loop_stmt.h):
/// lower_loop_nest builds it from the kernel and its CpuSchedule, then each
/// schedule feature is one pass over it, in the order schedule_loop_nest
/// runs them:
///   vector_loop_pieces.cpp   CpuSchedule::vector_loop_splits: the vector
///                            loop in pieces, index conditions folded in each
///   column_tiles.cpp         CpuSchedule::column_block: the vector loop
///                            marked to run in blocks of tiles
///   vector_tails.cpp         CpuSchedule::tail: each vector loop's whole
///                            vectors split from the rest (a scalar loop, a
///                            masked vector, an overlapping vector)
///   column_blocks.cpp        CpuSchedule::column_block: each vector loop
///                            in blocks of tiles as the loop over its blocks,
///                            in a block each stage's rows in row blocks
///                            around a loop over the block's vectors, a
///                            reduction's tile and its cascade around them
///   row_blocks.cpp           CpuSchedule::row_blocks: the row blocks a
///                            vector of outer iterations' stages walk, opened
///                            before the stage that first reads or stores
///                            each, the stored ones stored after the stages
///   forward_slots.cpp        CpuSchedule::tail Masked: the stores of each
///                            pointwise stage whose masked last vector also
///                            goes into a vector variable for a later
///                            stage's load (ForwardSlots, around the nest)
/// The printer (cpu_codegen/printer/cpu_loops.cpp) prints the result. A
/// pointwise stage's own loops are a nest of their own (stage_loops.cpp:
/// lower_stage_loops, then split_vector_tails), and so are a run of
/// reduction stages' (reduction_loops.cpp: lower_reduction_loops, then
/// split_vector_tails, vector_accumulators.cpp's group_vector_accumulators
/// and accumulators.cpp's place_accumulators: the run's accumulators declared
/// around its loops, merged at its cascade blocks and finished after them;
/// reduction_chunks.cpp's split_reduction_chunks: a parallel reduction's
/// chunks around them); the printer prints the stage's values around them
/// (in the column tiles' block, each reduction's nest over a row block).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// What the passes read: the kernel, its schedule, and the target's C form
/// of an index expression (bounds are C text, codegen/loop_stmt.h).
struct LoopNestInput {
  const ir::Kernel& k;
  const ir::CpuSchedule& s;
  std::function<std::string(const ir::IndexExpr&)> index;
  /// The target's C name of a stage's result (a reduction's accumulators
  /// are named after its first).
  std::function<std::string(const std::string&)> result_name;

  codegen::Bound extent(const ir::Loop& l) const;
  /// An internal error naming the kernel (an inconsistent schedule).
  [[noreturn]] void fail(const std::string& message) const;
};

/// The parts of a CPU loop nest its printer prints whole
/// (codegen::TargetPart::what).
namespace part {
inline constexpr const char* kScratch = "allocate kernel-local scratch";
inline constexpr const char* kFreeScratch = "free kernel-local scratch";
inline constexpr const char* kPrefault = "prefault outputs";  // args: first, end, elements per iteration
inline constexpr const char* kEpilogueInLanes = "epilogue in lanes";  // args: lo, hi of the last outer loop
inline constexpr const char* kTileBuffers = "transposed tile buffers";
inline constexpr const char* kTransposeTiles = "transpose tiles";  // args: the tiles' first row, column
inline constexpr const char* kPointwiseStage = "pointwise stage";  // args: its place in the kernel's stages
}  // namespace part

/// The outer loops (parallel chunks, collapsed and serial loops), the
/// innermost one vectorised with the schedule's tail still in it, the
/// stages inside; transposed tiles (CpuSchedule::transpose_tile) as their
/// loops and tiles.
codegen::Stmt lower_loop_nest(const LoopNestInput& in);
codegen::Stmt split_vector_loop_pieces(const codegen::Stmt& s, const LoopNestInput& in);
codegen::Stmt tile_columns(const codegen::Stmt& s, const LoopNestInput& in);
codegen::Stmt split_vector_tails(const codegen::Stmt& s, const LoopNestInput& in);
/// Each loop tile_columns marked (its tail split off) as the loop over its
/// blocks of column_block vectors; in a block, the kernel's stages in
/// order: a reduction's rows row_block at a time, each row block a loop over
/// the block's vectors that reduces into the reduction's tile (a vector
/// state per vector, which the later stages read; cascaded, its rows split
/// among the threads as the schedule says), a pointwise stage's loops inside
/// the loop over the block's vectors of each row block, a loop-less stage
/// once per vector.
codegen::Stmt lower_column_blocks(const codegen::Stmt& s, const LoopNestInput& in);
codegen::Stmt open_row_blocks(const codegen::Stmt& s, const LoopNestInput& in);
/// The row block of `r` that an access at `index` of `buffer` walks in the
/// stage loop `row_loop` inside the vector loop `vector_var`; null for an
/// access that walks none (an internal error for one that walks a block
/// `r` lacks).
const codegen::RowBlock* find_row_block(const codegen::RowBlocks& r, const ir::BufferPtr& buffer,
                                        const ir::IndexExpr& index, bool masked, const std::string& vector_var,
                                        const ir::Loop& row_loop, const LoopNestInput& in);

codegen::Stmt choose_forward_slots(const codegen::Stmt& s, const LoopNestInput& in);

/// A pointwise stage's loops inside the kernel's: serial, the first in
/// chunks on the threads under CpuSchedule::parallel_reduction, the
/// innermost vectorised (VectorizedLoop::InnermostOfEachStage) with its tail
/// still in it (a masked vector under TailKind::Masked, else a scalar loop);
/// its stores inside. Null for a stage without loops.
codegen::Stmt lower_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in);
/// The same after the passes that apply to a stage's loops (split_vector_tails).
codegen::Stmt schedule_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in);

/// A cascade (CpuSchedule::cascade_block) merges each block of terms into a
/// total, and each total into the next level's every kCascadeFanIn merges.
constexpr int64_t kCascadeFanIn = 64;

/// Levels of totals for `terms` terms (unknown: 3) merged every `block`, so
/// that the top level takes at most kCascadeFanIn merges (within 4 levels).
/// A single level added 62500 block sums of a 4M-row column sum one after
/// another: 34x eager's error; a column var over 2M rows, 177x.
inline int cascade_levels(std::optional<int64_t> terms, int64_t block) {
  if (!terms) return 3;
  int levels = 1;
  for (int64_t covered = block * kCascadeFanIn; covered < *terms && levels < 4; covered *= kCascadeFanIn) ++levels;
  return levels;
}

/// A run of reduction stages that accumulate in one loop nest (one stage,
/// or the stages of one_pass_end, which share their loops), and how: the
/// schedule's choices for where the run prints (reduction_run).
/// place_accumulators places the accumulators these describe in the nest,
/// and the target prints each codegen::Accumulate as their update.
struct ReductionRun {
  std::vector<const ir::ReductionStage*> stages;
  /// Inside a vector loop of outer iterations: a vector state per stage, a
  /// lane per outer iteration.
  bool lanes = false;
  /// The innermost loop vectorised (VectorizedLoop::InnermostOfEachStage):
  /// vector states, reduced across their lanes after the loop.
  bool horizontal = false;
  /// Per stage: the vector accumulators its updates spread over
  /// (CpuSchedule::vector_accumulators), and whether it cascades
  /// (CpuSchedule::cascade_block).
  std::vector<int> accumulators;
  std::vector<bool> cascades;
  /// Its first loop in chunks on the threads (CpuSchedule::parallel_reduction;
  /// not in the column tiles' block, which splits its rows itself).
  bool chunks = false;
  /// Terms of the innermost loop per cascade block (an accumulator lane
  /// sees one per vector); 0 when no stage cascades.
  int64_t cascade_terms = 0;
  /// What the code around the run makes of it (the printer's, not the
  /// schedule's; the defaults where nothing around it does): in lanes, the
  /// first vector states (C text; a tile's slots in the column tiles'
  /// block), else the identity; in a row of a block's reduction tree
  /// (CpuSchedule::reduction_trees), the row (C text); whether a one-value
  /// stage's final state takes its result's own name.
  std::string lane_init;
  std::string tree_row;
  bool named_results = false;
  /// The most accumulators a stage keeps: vectors per group.
  int group() const;
};
/// The run of `stages` printed in vector lanes (`lanes`) or not, and inside
/// the column tiles' block (`tiled`: they cascade per row block there).
ReductionRun reduction_run(std::vector<const ir::ReductionStage*> stages, bool lanes, bool tiled,
                           const LoopNestInput& in);
/// One past the last reduction stage that folds in one pass with stage
/// `first`: in horizontal mode (InnermostOfEachStage, not in lanes, not a
/// parallel reduction), the stages of ir::reduction_run_end whose loops are
/// named as the first's. A layer_norm's two sums of x - mean and its square,
/// or layer_norm backward's two gradient sums, then read each row once with
/// two chains of adds in flight. first + 1 otherwise.
size_t one_pass_end(const LoopNestInput& in, size_t first, bool lanes);
/// The run's loops, the first over [lo0, hi0): serial, the innermost in
/// cascade blocks where a stage cascades, and vectorised with its tail
/// still in it in horizontal mode; an Accumulate inside (alone for a run
/// without loops).
codegen::Stmt lower_reduction_loops(const ReductionRun& r, const codegen::Bound& lo0, const codegen::Bound& hi0,
                                    const LoopNestInput& in);
/// Each whole-vector loop of a reduction whose stages keep several vector
/// accumulators in groups of one vector per accumulator (after
/// split_vector_tails, once).
codegen::Stmt group_vector_accumulators(const codegen::Stmt& s, const LoopNestInput& in);
/// The run's accumulators around its loops (codegen::Accumulators: each
/// stage's states, totals and counters, declared before the loops), each
/// cascade block's merge into the totals when full (MergeIntoTotals under
/// each CascadeBlockDone), and their final states after the loops
/// (FinishAccumulators).
codegen::Stmt place_accumulators(const codegen::Stmt& s, const ReductionRun& r, const LoopNestInput& in);
/// A run in chunks (ReductionRun::chunks): its nest, placed accumulators
/// around it, as the body of each chunk (codegen::ReductionChunks), which
/// lower_reduction_loops was given the chunk's bounds for (chunk_bounds).
codegen::Stmt split_reduction_chunks(const codegen::Stmt& s, const ReductionRun& r, const LoopNestInput& in);
/// lower_reduction_loops after the passes that apply to it, in order
/// (split_vector_tails, group_vector_accumulators, place_accumulators,
/// split_reduction_chunks).
codegen::Stmt schedule_reduction_loops(const ReductionRun& r, const codegen::Bound& lo0, const codegen::Bound& hi0,
                                       const LoopNestInput& in);

/// The nest after every pass, and with `dumps` the text after each
/// (pass name, codegen::to_text).
struct ScheduledLoops {
  codegen::Stmt nest;
  std::vector<std::pair<std::string, std::string>> dumps;
};
ScheduledLoops schedule_loop_nest(const LoopNestInput& in, bool dumps);

/// The bounds of a parallel chunk of loop `l` (CpuSchedule::parallel_reduction)
/// as C names them.
std::pair<codegen::Bound, codegen::Bound> chunk_bounds(const ir::Loop& l);

/// Each Vector loop of `s` that still has its tail (the ones lower_loop_nest
/// built) replaced by `f(loop)`.
codegen::Stmt map_unsplit_vector_loops(const codegen::Stmt& s,
                                       const std::function<codegen::Stmt(const codegen::For&)>& f);

}  // namespace cppi::cpu
