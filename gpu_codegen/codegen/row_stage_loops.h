/// \file
/// The stages of one row (RowPerWarp, RowPerBlock) or one column group
/// (ColumnReduction with row slices) in the scheduled loop IR
/// (codegen/loop_stmt.h): lower_row_stage_loops builds them, in order, with
/// each stage's or pass's loop over the positions the thread owns, and
/// lower_row_loops / lower_column_group_loops put them inside their loop.
/// The CUDA printer (cuda_print_row_stages.cpp) walks them; a row cached
/// in vectors stores a stage's values in a loop over its slot groups
/// (row_cache_loops.h' slot_groups), whose leaves cuda_print_row_cache.cpp
/// prints.
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The parts of a row's stages the printer prints whole (codegen::TargetPart::what;
/// args are stage numbers).
namespace row_stage_part {
/// Stages [args[0], args[1]) at the position of the GpuRowPositions or
/// GpuRowSlots loop around it: a pointwise stage's stores, or a pass's
/// (ir::pass_run_end) reductions' updates and pointwise stages' stores,
/// their bodies over stage args[0]'s loop variables. The only statement of
/// such a loop: it names the stages whose loops the loop walks.
inline constexpr const char* kPassAt = "the stages at the position, [first, end) =";
/// The accumulator of reduction stage args[0], before its pass.
inline constexpr const char* kAccumulator = "declare the accumulator of stage";
/// Loop-less reduction stage args[0]: its one update, and its results.
inline constexpr const char* kUpdateOnce = "update once and declare the results of stage";
/// The reductions of stages [args[0], args[1]) after their pass: across the
/// row's threads (or the group's slices, split rows' or groups' blocks),
/// then their results.
inline constexpr const char* kCombine = "combine the threads' accumulators of stages [first, end) =";
/// Loop-less pointwise stage args[0]: its stores, by one thread of the row.
inline constexpr const char* kStoreOnce = "store once, stage";
/// Looped pointwise stage args[0] of a row cached in vectors
/// (GpuSchedule::cache_vector > 1), before its slot groups: what its values
/// compute the same all along the row (layer_norm's mean and rstd),
/// computed once.
inline constexpr const char* kRowInvariants = "compute once what does not change along the row, stage";
/// At a slot group of stage args[0]: its other loads that stride 1 along
/// the row (layer_norm's weight and bias), one vector each from the group's
/// first position, and its stored vectors and their offsets, declared.
inline constexpr const char* kGroupVectors = "load and declare the slot group's vectors, stage";
/// At a slot of the group (a GpuLanes loop's lane vl): stage args[0]'s
/// values into lane vl of its stored vectors, and their offsets at lane 0.
inline constexpr const char* kLaneValues = "the stored vectors' lane at the slot, stage";
/// After a slot group's lanes: stage args[0]'s stored vectors, one vector
/// store each.
inline constexpr const char* kStoreVectors = "store the slot group's vectors, stage";
}  // namespace row_stage_part

/// The stages of a row or column group, in order: a looped pointwise stage
/// or a pass over stages [first, end) (a cached row's pair of sums, a
/// column group's reduction run, a row's ir::pass_run_end) is a
/// GpuRowPositions loop over its positions (a cached row: a GpuRowSlots
/// loop over the slots) around a kPassAt leaf, a pass's accumulators
/// declared before it and combined after it. A looped pointwise stage of a
/// row cached in vectors (GpuSchedule::cache_vector > 1): a slot_groups
/// loop (row_cache_loops.h) whose groups load and declare their vectors
/// (kGroupVectors), fill their lanes in a GpuLanes loop (kLaneValues) and
/// store them (kStoreVectors), after kRowInvariants. `index`: the
/// printer's C form of an index expression.
codegen::Stmt lower_row_stage_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                                    const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
