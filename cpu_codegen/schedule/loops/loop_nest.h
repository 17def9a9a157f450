/// \file
/// A CPU kernel's loop nest in the scheduled loop IR (codegen/loop_stmt.h):
/// lower_loop_nest builds it from the kernel and its CpuSchedule, then each
/// schedule feature is one pass over it, in the order schedule_loop_nest
/// runs them:
///   vector_loop_pieces.cpp   CpuSchedule::vector_loop_splits: the vector
///                            loop in pieces, index conditions folded in each
///   column_tiles.cpp         CpuSchedule::column_block: the vector loop in
///                            blocks of tiles
///   vector_tails.cpp         CpuSchedule::tail: each vector loop's whole
///                            vectors split from the rest (a scalar loop, a
///                            masked vector, an overlapping vector)
/// The printer (cpu_codegen/printer/cpu_loops.cpp) prints the result. A
/// pointwise stage's own loops are a nest of their own (stage_loops.cpp:
/// lower_stage_loops, then split_vector_tails); the printer prints the
/// stage's values around it and its reductions' loops itself.
#pragma once

#include <functional>
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
}  // namespace part

/// The outer loops (parallel chunks, collapsed and serial loops), the
/// innermost one vectorised with the schedule's tail still in it, the
/// stages inside; transposed tiles (CpuSchedule::transpose_tile) as their
/// loops and tiles.
codegen::Stmt lower_loop_nest(const LoopNestInput& in);
codegen::Stmt split_vector_loop_pieces(const codegen::Stmt& s, const LoopNestInput& in);
codegen::Stmt tile_columns(const codegen::Stmt& s, const LoopNestInput& in);
codegen::Stmt split_vector_tails(const codegen::Stmt& s, const LoopNestInput& in);

/// A pointwise stage's loops inside the kernel's: serial, the first in
/// chunks on the threads under CpuSchedule::parallel_reduction, the
/// innermost vectorised (VectorizedLoop::InnermostOfEachStage) with its tail
/// still in it (a masked vector under TailKind::Masked, else a scalar loop);
/// its stores inside. Null for a stage without loops.
codegen::Stmt lower_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in);
/// The same after the passes that apply to a stage's loops (split_vector_tails).
codegen::Stmt schedule_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in);

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
