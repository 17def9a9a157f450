/// \file
/// Positions computed from one loop variable, turned back into index
/// arithmetic.
///
/// Upsampling decomposes into aten.index with index tensors computed from
/// arange: nearest 2x reads x[..., cast<int64>((float)x3 * 0.5)]. The
/// lowering makes that an indirect leaf (a position read from a value), so
/// every codegen treats the load as a gather whose position it computes
/// element by element; the CPU printer cannot vectorise a gather along its
/// vector loop at all. Over the variable's range the position is a plain
/// function of it (x3 // 2 here; bilinear's max((x3 - 1) // 2, 0)), which the
/// index machinery understands.
#pragma once

#include "lowering/ir/expr.h"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/index_simplify.h"

namespace cppi::ir {

/// `index` with each indirect leaf whose value is computed from one loop
/// variable of `ranges` alone replaced by the index expression that gives
/// the same position at every value of that variable:
/// clamp((a * x + b) // k, lo, hi), 1 <= a, k <= 16, the clamps only where
/// needed. The value must read no memory and use only exact arithmetic
/// (add, sub, mul, div, floor/ceil/trunc/round, min/max, casts, compares,
/// where): the position is tabulated over the variable's constant extent (at
/// most 4096) with the interpreter's arithmetic, which rounds as the compiled
/// code does. A leaf that matches no such expression, or whose value would
/// leave the dimension anywhere (an index error the compiled code reports),
/// is kept.
IndexExpr resolve_computed_positions(const IndexExpr& index, const VarRanges& ranges);
/// The same for every index in `e`. Fusion applies it where it inlines a
/// producer into a reader's positions (arange's values into index's).
Expr resolve_computed_positions(const Expr& e, const VarRanges& ranges);

}  // namespace cppi::ir
