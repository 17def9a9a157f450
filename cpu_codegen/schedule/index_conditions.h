/// \file
/// Index comparisons along a vectorised loop (CpuSchedule::vector_loop_splits).
///
/// cat and constant padding lower to where(x1 < 1024, a[...], b[...]) with
/// masked loads: the comparison of the loop variable with a constant is
/// true on one side of a point and false on the other. Split there, every
/// piece of the loop knows each comparison's value, and folding it turns
/// the masked loads into plain ones (or zeros), drops the untaken branch of
/// the where and the int64 index vectors that fed the comparison.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// The points p in (0, extent), in order, where a comparison in a store of
/// `stages` (loop-less pointwise stages) of `var` plus a constant with a
/// constant integer changes value along var (the first index of the piece
/// where it changes).
std::vector<int64_t> index_condition_splits(const std::vector<ir::Stage>& stages, const std::string& var,
                                            int64_t extent);

/// `stages` (loop-less pointwise stages) for var in [lo, hi): every such
/// comparison that holds one value over the piece replaced by that
/// constant, and the conditions above it folded (ir::ConditionFolder).
std::vector<ir::PointwiseStage> fold_index_conditions(const std::vector<ir::Stage>& stages, const std::string& var,
                                                      int64_t lo, int64_t hi);

}  // namespace cppi::cpu
