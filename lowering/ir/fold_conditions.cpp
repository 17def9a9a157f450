#include "lowering/ir/fold_conditions.h"

#include <algorithm>
#include <set>

#include "lowering/ir/index_affine.h"

namespace cppi::ir {
namespace {

std::optional<bool> known_bool(const Expr& e) {
  const auto* c = e.as<Constant>();
  if (!c || c->dtype != DType::Bool) return std::nullopt;
  return c->int_value != 0;
}

Expr zero_of(DType t) {
  if (t == DType::Bool) return const_bool(false);
  if (is_floating(t)) return Constant::make_float(0.0, t);
  return Constant::make_int(0, t);
}

/// An index value without indirect terms, or an integer constant, as an
/// index expression.
std::optional<IndexExpr> direct_index(const Expr& e) {
  if (const auto* iv = e.as<IndexValue>()) {
    if (!indirect_terms(iv->index).empty()) return std::nullopt;
    return iv->index;
  }
  const auto* c = e.as<Constant>();
  if (!c || !is_integral(c->dtype, /*include_bool=*/false)) return std::nullopt;
  return index_const(c->int_value);
}

class RangeFolder : public ConditionFolder {
 public:
  explicit RangeFolder(const VarRanges& ranges) : ranges_(ranges) {}

 protected:
  std::optional<bool> decide(const Compare& n) override {
    auto a = direct_index(n.lhs), b = direct_index(n.rhs);
    if (!a || !b) return std::nullopt;
    CompareOp op = n.op;
    if (op == CompareOp::Gt || op == CompareOp::Ge) {  // b < a, b <= a
      std::swap(a, b);
      op = mirrored(op);
    }
    switch (op) {
      case CompareOp::Lt:
        if (prove_lt(*a, *b, ranges_)) return true;
        if (prove_le(*b, *a, ranges_)) return false;
        break;
      case CompareOp::Le:
        if (prove_le(*a, *b, ranges_)) return true;
        if (prove_lt(*b, *a, ranges_)) return false;
        break;
      case CompareOp::Eq:
      case CompareOp::Ne:
        if (prove_lt(*a, *b, ranges_) || prove_lt(*b, *a, ranges_)) return op == CompareOp::Ne;
        break;
      default: break;
    }
    return std::nullopt;
  }

 private:
  const VarRanges& ranges_;
};

}  // namespace

Expr ConditionFolder::visit(const Compare& n) {
  if (auto v = decide(n)) return const_bool(*v);
  return ExprMutator::visit(n);
}

Expr ConditionFolder::visit(const Unary& n) {
  if (n.op == UnaryOp::LogicalNot || (n.op == UnaryOp::BitwiseNot && n.dtype == DType::Bool)) {
    if (auto v = known_bool(mutate(n.operand))) return const_bool(!*v);
  }
  return ExprMutator::visit(n);
}

Expr ConditionFolder::visit(const Binary& n) {
  const bool bool_and = n.dtype == DType::Bool && (n.op == BinaryOp::LogicalAnd || n.op == BinaryOp::BitwiseAnd);
  const bool bool_or = n.dtype == DType::Bool && (n.op == BinaryOp::LogicalOr || n.op == BinaryOp::BitwiseOr);
  if (bool_and || bool_or) {
    const Expr a = mutate(n.lhs), b = mutate(n.rhs);
    for (const auto& [known, other] : {std::pair{a, b}, std::pair{b, a}}) {
      auto v = known_bool(known);
      if (!v) continue;
      // false & x = false, true & x = x; true | x = true, false | x = x.
      if (bool_and) return *v ? other : const_bool(false);
      return *v ? const_bool(true) : other;
    }
  }
  return ExprMutator::visit(n);
}

Expr ConditionFolder::visit(const Where& n) {
  if (auto v = known_bool(mutate(n.cond))) return mutate(*v ? n.then_value : n.else_value);
  return ExprMutator::visit(n);
}

Expr ConditionFolder::visit(const Load& n) {
  if (n.mask.defined()) {
    if (auto v = known_bool(mutate(n.mask))) {
      if (!*v) return zero_of(n.dtype);
      return mutate(Load::make(n.buffer, n.index));
    }
  }
  return ExprMutator::visit(n);
}

Expr fold_range_conditions(const Expr& e, const VarRanges& ranges) {
  RangeFolder f(ranges);
  return f.mutate(e);
}

CompareOp mirrored(CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return CompareOp::Gt;
    case CompareOp::Le: return CompareOp::Ge;
    case CompareOp::Gt: return CompareOp::Lt;
    case CompareOp::Ge: return CompareOp::Le;
    default: return op;
  }
}

std::optional<VarComparison> var_comparison(const Compare& n, const VarRanges& ranges) {
  auto a = direct_index(n.lhs), b = direct_index(n.rhs);
  if (!a || !b) return std::nullopt;
  for (const bool swapped : {false, true}) {
    const IndexExpr& moving = swapped ? *b : *a;
    const IndexExpr& bound = swapped ? *a : *b;
    const std::set<std::string> bound_vars = free_vars(bound);
    if (std::any_of(bound_vars.begin(), bound_vars.end(), [&](const std::string& v) { return ranges.count(v) > 0; }))
      continue;
    const std::set<std::string> vars = free_vars(moving);
    if (vars.size() != 1 || !ranges.count(*vars.begin())) continue;
    const std::string& v = *vars.begin();
    auto form = affine_form(moving, {ir::var(v)});
    if (!form || !form->strides[0].is_constant(1)) continue;
    return VarComparison{v, swapped ? mirrored(n.op) : n.op, simplify(bound - form->offset)};
  }
  return std::nullopt;
}

std::optional<IndexExpr> change_point(const VarComparison& c) {
  switch (c.op) {
    case CompareOp::Lt:
    case CompareOp::Ge: return c.at;
    case CompareOp::Le:
    case CompareOp::Gt: return simplify(c.at + 1);
    case CompareOp::Eq:
    case CompareOp::Ne: break;
  }
  return std::nullopt;
}

namespace {

/// Narrows `out` by one comparison of a loop variable (var_comparison).
void narrow_by(const Compare& n, const VarRanges& ranges, std::map<std::string, VarInterval>* out) {
  auto c = var_comparison(n, ranges);
  if (!c || c->op == CompareOp::Ne) return;
  auto it = out->find(c->var);
  VarInterval cur = it != out->end() ? it->second : VarInterval{index_const(0), ranges.at(c->var)};
  if (c->op == CompareOp::Eq) {
    cur.lo = simplify(max(cur.lo, c->at));
    cur.hi = simplify(min(cur.hi, c->at + 1));
  } else if (c->op == CompareOp::Lt || c->op == CompareOp::Le) {  // true below the change
    cur.hi = simplify(min(cur.hi, *change_point(*c)));
  } else {
    cur.lo = simplify(max(cur.lo, *change_point(*c)));
  }
  (*out)[c->var] = cur;
}

void collect_intervals(const Expr& mask, const VarRanges& ranges, std::map<std::string, VarInterval>* out) {
  if (const auto* b = mask.as<Binary>()) {
    if (b->dtype == DType::Bool && (b->op == BinaryOp::LogicalAnd || b->op == BinaryOp::BitwiseAnd)) {
      collect_intervals(b->lhs, ranges, out);
      collect_intervals(b->rhs, ranges, out);
    }
    return;
  }
  if (const auto* c = mask.as<Compare>()) narrow_by(*c, ranges, out);
}

}  // namespace

std::map<std::string, VarInterval> mask_intervals(const Expr& mask, const VarRanges& ranges) {
  std::map<std::string, VarInterval> out;
  if (mask.defined()) collect_intervals(mask, ranges, &out);
  return out;
}

}  // namespace cppi::ir
