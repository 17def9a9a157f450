#include "lowering/ir/computed_positions.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/interpreter.h"

namespace cppi::ir {
namespace {

constexpr int64_t kMaxTabulated = 4096;
constexpr int64_t kMaxFactor = 16;

bool exact_unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::Trunc:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseNot:
      return true;
    default:
      return false;
  }
}

bool exact_binary(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
    case BinaryOp::TrueDiv:
    case BinaryOp::FloorDiv:
    case BinaryOp::TruncDiv:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
    case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr:
      return true;
    default:
      return false;
  }
}

/// Whether every node of `value` computes exactly (as the interpreter does)
/// from index values and constants.
bool computable(const Expr& value) {
  for (const Expr& e : post_order({value})) {
    switch (e.kind()) {
      case ExprKind::Constant:
      case ExprKind::Cast:
      case ExprKind::Compare:
      case ExprKind::Where:
        break;
      case ExprKind::IndexValue:
        if (has_indirect(e.as<IndexValue>()->index)) return false;
        break;
      case ExprKind::Unary:
        if (!exact_unary(e.as<Unary>()->op)) return false;
        break;
      case ExprKind::Binary:
        if (!exact_binary(e.as<Binary>()->op)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/// clamp((a * x + b) // k, lo, hi) as an index expression, without the
/// clamps the table does not need.
struct Fit {
  int64_t a, b, k;
  std::optional<int64_t> lo, hi;

  int64_t at(int64_t x) const {
    int64_t p = a * x + b;
    p = p >= 0 ? p / k : -((-p + k - 1) / k);  // floor
    if (lo) p = std::max(p, *lo);
    if (hi) p = std::min(p, *hi);
    return p;
  }
  IndexExpr expr(const IndexExpr& x) const {
    IndexExpr p = floordiv(x * a + b, index_const(k));
    if (lo) p = max(p, index_const(*lo));
    if (hi) p = min(p, index_const(*hi));
    return p;
  }
};

std::optional<Fit> fit(const std::vector<int64_t>& table) {
  const int64_t n = static_cast<int64_t>(table.size());
  const int64_t lo = *std::min_element(table.begin(), table.end());
  const int64_t hi = *std::max_element(table.begin(), table.end());
  // The middle of the table is where clamps are least likely to act: b
  // follows from it for each (a, k).
  const int64_t m = n / 2;
  for (int64_t k = 1; k <= kMaxFactor; ++k) {
    for (int64_t a = 1; a <= kMaxFactor; ++a) {
      for (int64_t r = 0; r < k; ++r) {
        const int64_t b = table[m] * k + r - a * m;
        for (int clamps = 0; clamps < 4; ++clamps) {
          Fit f{a, b, k, std::nullopt, std::nullopt};
          if (clamps & 1) f.lo = lo;
          if (clamps & 2) f.hi = hi;
          int64_t x = 0;
          while (x < n && f.at(x) == table[x]) ++x;
          if (x == n) return f;
        }
      }
    }
  }
  return std::nullopt;
}

IndexExpr resolve_leaf(const IndexExpr& leaf, const VarRanges& ranges) {
  const auto* n = leaf.as<IndexIndirect>();
  const auto size = n->size.constant();
  if (!size || *size < 1 || n->vars.size() != 1 || !n->symbols.empty()) return leaf;
  const std::string& v = *n->vars.begin();
  auto range = ranges.find(v);
  if (range == ranges.end()) return leaf;
  const auto extent = range->second.constant();
  if (!extent || *extent < 1 || *extent > kMaxTabulated) return leaf;
  const Expr value = n->value();
  if (!computable(value)) return leaf;
  std::vector<int64_t> table(static_cast<size_t>(*extent));
  InterpreterArgs args;
  for (int64_t x = 0; x < *extent; ++x) {
    auto r = evaluate_expr(value, args, {{v, x}});
    if (!r.ok()) return leaf;
    const int64_t p = r->i;
    // Out of the dimension: the compiled code's index check must report it.
    if (p >= *size || p < (n->wraps ? -*size : 0)) return leaf;
    table[static_cast<size_t>(x)] = indirect_position(p, *size, n->wraps);
  }
  auto f = fit(table);
  if (!f) return leaf;
  return simplify(f->expr(var(v)), ranges);
}

}  // namespace

IndexExpr resolve_computed_positions(const IndexExpr& index, const VarRanges& ranges) {
  if (!has_indirect(index)) return index;
  return map_indirect(index, [&](const IndexExpr& leaf) { return resolve_leaf(leaf, ranges); });
}

Expr resolve_computed_positions(const Expr& e, const VarRanges& ranges) {
  return map_indices(e, [&](const IndexExpr& index) { return resolve_computed_positions(index, ranges); });
}

}  // namespace cppi::ir
