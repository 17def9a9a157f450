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
#include <set>
#include <string>

#include "lowering/ir/expr.h"

namespace cppi::cpu {

/// The points p in (lo, hi) where a comparison in `e` of `var` plus a
/// constant with a constant integer changes value along var in [lo, hi)
/// (the first index of the piece where it changes).
std::set<int64_t> index_condition_splits(const ir::Expr& e, const std::string& var, int64_t lo, int64_t hi);

/// `e` with every such comparison that holds the same value over all of
/// var in [lo, hi) replaced by that constant, then folded: not / and / or
/// of known operands, where() with a known condition, masked loads with a
/// known mask (a true mask drops, a false one yields the zero it would).
/// `e` itself when nothing folds.
ir::Expr fold_index_conditions(const ir::Expr& e, const std::string& var, int64_t lo, int64_t hi);

}  // namespace cppi::cpu
