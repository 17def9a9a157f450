#include "lowering/ir/expr_visitor.h"

namespace cppi::ir {

// --- ExprVisitor -----------------------------------------------------------------

void ExprVisitor::walk(const Expr& e) {
  if (!e.defined() || !visited_.insert(e.get()).second) return;
  dispatch(e);
}

void ExprVisitor::visit(const Constant&) {}
void ExprVisitor::visit(const Load& node) {
  visit_index(node.index);
  walk(node.mask);
}
void ExprVisitor::visit(const IndexValue& node) { visit_index(node.index); }
void ExprVisitor::visit(const LocalRef&) {}
void ExprVisitor::visit(const Cast& node) { walk(node.value); }
void ExprVisitor::visit(const Unary& node) { walk(node.operand); }
void ExprVisitor::visit(const Binary& node) {
  walk(node.lhs);
  walk(node.rhs);
}
void ExprVisitor::visit(const Compare& node) {
  walk(node.lhs);
  walk(node.rhs);
}
void ExprVisitor::visit(const Where& node) {
  walk(node.cond);
  walk(node.then_value);
  walk(node.else_value);
}
void ExprVisitor::visit(const Random& node) {
  walk(node.seed);
  visit_index(node.offset);
}

// --- ExprMutator -----------------------------------------------------------------

Expr ExprMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second;
  Expr outer = std::move(current_);
  current_ = e;
  Expr out = dispatch(e);
  current_ = std::move(outer);  // visit() of the parent may still use current()
  memo_.emplace(e.get(), out);
  return out;
}

namespace {
// An index is "unchanged" when structurally equal, so mutate_index may rebuild freely.
bool same_index(const IndexExpr& a, const IndexExpr& b) { return a == b; }
}  // namespace

Expr ExprMutator::visit(const Constant&) { return current_; }

Expr ExprMutator::visit(const Load& node) {
  const Expr& self = current();
  BufferPtr buffer = mutate_buffer(node.buffer);
  IndexExpr index = mutate_index(node.index);
  Expr mask = mutate(node.mask);
  if (buffer == node.buffer && same_index(index, node.index) && mask.same_as(node.mask)) return self;
  return Load::make(buffer, index, mask);
}

Expr ExprMutator::visit(const IndexValue& node) {
  const Expr& self = current();
  IndexExpr index = mutate_index(node.index);
  if (same_index(index, node.index)) return self;
  return IndexValue::make(index);
}

Expr ExprMutator::visit(const LocalRef&) { return current_; }

Expr ExprMutator::visit(const Cast& node) {
  const Expr& self = current();
  Expr v = mutate(node.value);
  if (v.same_as(node.value)) return self;
  return cast(v, node.dtype);
}

Expr ExprMutator::visit(const Unary& node) {
  const Expr& self = current();
  Expr x = mutate(node.operand);
  if (x.same_as(node.operand)) return self;
  return Unary::make(node.op, x);
}

Expr ExprMutator::visit(const Binary& node) {
  const Expr& self = current();
  Expr a = mutate(node.lhs), b = mutate(node.rhs);
  if (a.same_as(node.lhs) && b.same_as(node.rhs)) return self;
  return Binary::make(node.op, a, b);
}

Expr ExprMutator::visit(const Compare& node) {
  const Expr& self = current();
  Expr a = mutate(node.lhs), b = mutate(node.rhs);
  if (a.same_as(node.lhs) && b.same_as(node.rhs)) return self;
  return Compare::make(node.op, a, b);
}

Expr ExprMutator::visit(const Where& node) {
  const Expr& self = current();
  Expr c = mutate(node.cond), a = mutate(node.then_value), b = mutate(node.else_value);
  if (c.same_as(node.cond) && a.same_as(node.then_value) && b.same_as(node.else_value)) return self;
  return Where::make(c, a, b);
}

Expr ExprMutator::visit(const Random& node) {
  const Expr& self = current();
  Expr seed = mutate(node.seed);
  IndexExpr offset = mutate_index(node.offset);
  if (seed.same_as(node.seed) && same_index(offset, node.offset)) return self;
  return Random::make(node.random_kind, seed, offset);
}

Expr substitute_indices(const Expr& e, const std::map<std::string, IndexExpr>& replacements) {
  return map_indices(e, [&](const IndexExpr& index) { return substitute(index, replacements); });
}

}  // namespace cppi::ir
