/// \file
/// Range-aware simplification of index expressions and the small prover it
/// rests on. The factories in index_expr.h already apply every rule that holds
/// for all integers; this file adds the rules that need to know that loop
/// variables range over [0, extent) and size symbols are >= 1:
///   x // c -> 0 and x % c -> x    when 0 <= x < c is provable,
///   min(a, b) -> a                when a <= b is provable (max alike),
///   c*(x // c) + x % c -> x       (recombining a split index).
/// Typical use: a view/reshape builds (x0*4 + x1) // 4 and (x0*4 + x1) % 4;
/// with x1 in [0, 4) they simplify to x0 and x1.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "lowering/ir/index_expr.h"

namespace cppi::ir {

/// Extent of each loop variable by name: the variable ranges over [0, extent).
/// Extents may contain size symbols but no loop variables.
using VarRanges = std::map<std::string, IndexExpr>;

/// Inclusive bounds lo <= e <= hi, each an expression over size symbols only
/// (no loop variables); nullopt where no bound is known.
struct IndexBounds {
  std::optional<IndexExpr> lo, hi;
};

/// Interval bounds of `e`. Variables without an entry in `ranges` are unbounded.
IndexBounds bounds(const IndexExpr& e, const VarRanges& ranges);

/// Sound but incomplete proofs (false means "could not prove").
bool prove_nonnegative(const IndexExpr& e, const VarRanges& ranges = {});
bool prove_positive(const IndexExpr& e, const VarRanges& ranges = {});
bool prove_lt(const IndexExpr& a, const IndexExpr& b, const VarRanges& ranges = {});
bool prove_le(const IndexExpr& a, const IndexExpr& b, const VarRanges& ranges = {});

/// Simplifies bottom-up with the range rules above. Returns `e` itself (the
/// same node) when nothing changed.
IndexExpr simplify(const IndexExpr& e, const VarRanges& ranges = {});

}  // namespace cppi::ir
