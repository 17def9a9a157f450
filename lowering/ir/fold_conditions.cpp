#include "lowering/ir/fold_conditions.h"

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
    switch (n.op) {
      case CompareOp::Lt:
        if (prove_lt(*a, *b, ranges_)) return true;
        if (prove_le(*b, *a, ranges_)) return false;
        break;
      case CompareOp::Le:
        if (prove_le(*a, *b, ranges_)) return true;
        if (prove_lt(*b, *a, ranges_)) return false;
        break;
      case CompareOp::Gt:
        if (prove_lt(*b, *a, ranges_)) return true;
        if (prove_le(*a, *b, ranges_)) return false;
        break;
      case CompareOp::Ge:
        if (prove_le(*b, *a, ranges_)) return true;
        if (prove_lt(*a, *b, ranges_)) return false;
        break;
      case CompareOp::Eq:
      case CompareOp::Ne:
        if (prove_lt(*a, *b, ranges_) || prove_lt(*b, *a, ranges_)) return n.op == CompareOp::Ne;
        break;
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

namespace {

/// Narrows `out` by one comparison `lhs op rhs` if it is var + c against a
/// bound free of loop variables (either side).
void narrow_by(const Compare& n, const VarRanges& ranges, std::map<std::string, VarInterval>* out) {
  auto a = direct_index(n.lhs), b = direct_index(n.rhs);
  if (!a || !b) return;
  auto loop_free = [&](const IndexExpr& e) {
    for (const auto& v : free_vars(e)) {
      if (ranges.count(v)) return false;
    }
    return true;
  };
  for (const bool swapped : {false, true}) {
    const IndexExpr& moving = swapped ? *b : *a;
    const IndexExpr& bound = swapped ? *a : *b;
    if (!loop_free(bound)) continue;
    const std::set<std::string> vars = free_vars(moving);
    if (vars.size() != 1 || !ranges.count(*vars.begin())) continue;
    const std::string& v = *vars.begin();
    auto form = affine_form(moving, {ir::var(v)});
    if (!form || !form->strides[0].is_constant(1)) continue;
    // v + c  op  bound, op as seen from the variable's side.
    CompareOp op = n.op;
    if (swapped) {
      if (op == CompareOp::Lt) op = CompareOp::Gt;
      else if (op == CompareOp::Le) op = CompareOp::Ge;
      else if (op == CompareOp::Gt) op = CompareOp::Lt;
      else if (op == CompareOp::Ge) op = CompareOp::Le;
    }
    const IndexExpr at = bound - form->offset;  // v op at
    auto it = out->find(v);
    VarInterval cur = it != out->end() ? it->second : VarInterval{index_const(0), ranges.at(v)};
    switch (op) {
      case CompareOp::Lt: cur.hi = simplify(min(cur.hi, at)); break;
      case CompareOp::Le: cur.hi = simplify(min(cur.hi, at + 1)); break;
      case CompareOp::Gt: cur.lo = simplify(max(cur.lo, at + 1)); break;
      case CompareOp::Ge: cur.lo = simplify(max(cur.lo, at)); break;
      case CompareOp::Eq:
        cur.lo = simplify(max(cur.lo, at));
        cur.hi = simplify(min(cur.hi, at + 1));
        break;
      case CompareOp::Ne: return;
    }
    (*out)[v] = cur;
    return;
  }
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
