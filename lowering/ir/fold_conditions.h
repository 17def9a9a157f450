/// \file
/// Index comparisons: folding those whose outcome is known, and reading the
/// ranges of loop variables a mask confines a load to.
///
/// Folding covers the comparisons and the boolean structure around them: not / and / or of known operands, where() with a known
/// condition, masked loads with a known mask (a true mask drops, a false one
/// yields the zero the load would).
///
/// Lowerings guard every access that may leave its tensor (padding, cat,
/// pooling windows) with comparisons of index values; over the loop ranges
/// many of them always hold. avg_pool2d(x, 2) without padding checked
/// 0 <= 2*x2 + r0 < 56 on every load of every window, which kept the loads
/// masked and the kernel scalar.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "lowering/ir/expr_visitor.h"

namespace cppi::ir {

/// Folds what decide() settles, then the boolean structure above it.
class ConditionFolder : public ExprMutator {
 protected:
  /// The comparison's value wherever the folded expression is evaluated,
  /// if it has one.
  virtual std::optional<bool> decide(const Compare& n) = 0;

  Expr visit(const Compare& n) override;
  Expr visit(const Unary& n) override;
  Expr visit(const Binary& n) override;
  Expr visit(const Where& n) override;
  Expr visit(const Load& n) override;
};

/// `e` with every comparison between index values (or an index value and an
/// integer constant) that holds, or fails, for all values of the variables
/// in `ranges` folded. Comparisons of indirect positions (values read from
/// memory) are left alone: their range is only checked when they are used.
Expr fold_range_conditions(const Expr& e, const VarRanges& ranges);

/// op with its operands swapped: a < b is b > a.
CompareOp mirrored(CompareOp op);

/// A comparison of one loop variable: `var op at`, `at` free of loop
/// variables.
struct VarComparison {
  std::string var;
  CompareOp op;
  IndexExpr at;
};

/// `n` as a VarComparison when one side is an index value `var + c` (var
/// one of the loop variables of `ranges`, c free of them) and the other an
/// index value or integer constant free of them: cat's x1 >= 1024, or
/// 1024 <= x1 mirrored to it.
std::optional<VarComparison> var_comparison(const Compare& n, const VarRanges& ranges);

/// Where `c` changes value along its variable: the first value of the upper
/// side, at for var < at and var >= at, at + 1 for var <= at and var > at.
/// nullopt for == and != (they change twice, around one point).
std::optional<IndexExpr> change_point(const VarComparison& c);

/// Loop variable values [lo, hi), lo and hi over size symbols only.
struct VarInterval {
  IndexExpr lo, hi;
};

/// The intervals a mask confines loop variables of `ranges` to: the mask is
/// true only where each such variable lies in its interval (a superset:
/// comparisons the function does not read are ignored). It reads a
/// conjunction (and / bitwise and) of var_comparisons: cat's x1 >= 1024
/// gives x1 in [1024, extent). Variables the mask leaves at
/// their full range are absent.
std::map<std::string, VarInterval> mask_intervals(const Expr& mask, const VarRanges& ranges);

}  // namespace cppi::ir
