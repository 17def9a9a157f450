#include "lowering/ir/expr_visitor.h"

#include "lowering/ir/computed_positions.h"
#include "lowering/ir/fold_conditions.h"
#include "lowering/ir/printer.h"
#include "support/status.h"

namespace cppi::ir {

// --- ExprVisitor -----------------------------------------------------------------

void ExprVisitor::walk(const Expr& e) {
  if (!e.defined() || !visited_.insert(e.get()).second) return;
  dispatch(e);
}

void ExprVisitor::walk_indirect(const IndexExpr& index) {
  for (const auto& v : indirect_values(index)) walk(v);
}

void ExprVisitor::visit(const Constant&) {}
void ExprVisitor::visit(const Load& node) {
  visit_index(node.index);
  walk_indirect(node.index);
  walk(node.mask);
}
void ExprVisitor::visit(const IndexValue& node) {
  visit_index(node.index);
  walk_indirect(node.index);
}
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
  walk_indirect(node.offset);
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

IndexExpr ExprMutator::rewrite_index(const IndexExpr& index) {
  IndexExpr out = index;
  if (!mutate_index_reaches_indirect()) {
    out = map_indirect(index, [&](const IndexExpr& leaf) {
      auto n = leaf.as<IndexIndirect>();
      Expr v = mutate(n->value());
      if (v.get() == n->value_node.get()) return leaf;
      return indirect(v, n->size, n->wraps);
    });
  }
  return mutate_index(out);
}

Expr ExprMutator::visit(const Constant&) { return current_; }

Expr ExprMutator::visit(const Load& node) {
  const Expr& self = current();
  BufferPtr buffer = mutate_buffer(node.buffer);
  IndexExpr index = rewrite_index(node.index);
  Expr mask = mutate(node.mask);
  if (buffer == node.buffer && same_index(index, node.index) && mask.same_as(node.mask)) return self;
  return Load::make(buffer, index, mask);
}

Expr ExprMutator::visit(const IndexValue& node) {
  const Expr& self = current();
  IndexExpr index = rewrite_index(node.index);
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
  IndexExpr offset = rewrite_index(node.offset);
  if (seed.same_as(node.seed) && same_index(offset, node.offset)) return self;
  return Random::make(node.random_kind, seed, offset);
}

Expr substitute_indices(const Expr& e, const std::map<std::string, IndexExpr>& replacements) {
  return map_indices(e, [&](const IndexExpr& index) { return substitute(index, replacements); });
}

Expr simplify_indices(const Expr& e, const VarRanges& ranges) {
  return fold_range_conditions(map_indices(e,
                                           [&](const IndexExpr& index) {
                                             return resolve_computed_positions(simplify(index, ranges), ranges);
                                           }),
                                ranges);
}

Expr replace_loads(const Expr& e, const std::string& buffer, const std::function<Expr(const Load&)>& f) {
  struct Replacer : ExprMutator {
    const std::string& name;
    const std::function<Expr(const Load&)>& fn;
    Replacer(const std::string& n, const std::function<Expr(const Load&)>& g) : name(n), fn(g) {}
    Expr visit(const Load& node) override {
      if (node.buffer->name != name) return ExprMutator::visit(node);
      Expr out = fn(node);
      if (!out.defined() || out.dtype() != node.dtype) {
        throw CompilerError(Error::internal(cat("replace_loads(", name, "): replacement has the wrong dtype")));
      }
      return out;
    }
  } replacer(buffer, f);
  return replacer.mutate(e);
}

IndexExpr replace_loads(const IndexExpr& index, const std::string& buffer, const std::function<Expr(const Load&)>& f) {
  return map_indirect(index, [&](const IndexExpr& leaf) {
    auto n = leaf.as<IndexIndirect>();
    Expr v = replace_loads(n->value(), buffer, f);
    return v.same_as(n->value()) ? leaf : indirect(v, n->size, n->wraps);
  });
}

std::vector<Expr> operands(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Constant:
    case ExprKind::LocalRef: return {};
    case ExprKind::IndexValue: return indirect_values(e.as<IndexValue>()->index);
    case ExprKind::Load: {
      auto l = e.as<Load>();
      std::vector<Expr> out = indirect_values(l->index);
      if (l->mask.defined()) out.push_back(l->mask);
      return out;
    }
    case ExprKind::Cast: return {e.as<Cast>()->value};
    case ExprKind::Unary: return {e.as<Unary>()->operand};
    case ExprKind::Binary: return {e.as<Binary>()->lhs, e.as<Binary>()->rhs};
    case ExprKind::Compare: return {e.as<Compare>()->lhs, e.as<Compare>()->rhs};
    case ExprKind::Where: {
      auto w = e.as<Where>();
      return {w->cond, w->then_value, w->else_value};
    }
    case ExprKind::Random: {
      std::vector<Expr> out{e.as<Random>()->seed};
      for (auto& v : indirect_values(e.as<Random>()->offset)) out.push_back(std::move(v));
      return out;
    }
  }
  return {};
}

std::vector<Expr> post_order(const std::vector<Expr>& roots) {
  std::vector<Expr> out;
  std::unordered_set<const ExprNode*> done;
  // Iterative, so deep chains do not overflow the stack.
  std::vector<std::pair<Expr, size_t>> stack;
  for (const auto& root : roots) {
    if (!root.defined() || done.count(root.get())) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      auto ops = operands(node);
      if (next < ops.size()) {
        Expr child = ops[next++];
        if (!done.count(child.get())) stack.emplace_back(child, 0);
        continue;
      }
      if (done.insert(node.get()).second) out.push_back(node);
      stack.pop_back();
    }
  }
  return out;
}

std::vector<Expr> outermost_picks(const std::vector<Expr>& roots, const std::function<bool(const Expr&)>& pick,
                                  const std::function<bool(const Expr&)>& enter) {
  std::vector<Expr> out;
  std::unordered_set<const ExprNode*> seen;
  std::function<void(const Expr&)> visit = [&](const Expr& e) {
    if ((enter && !enter(e)) || !seen.insert(e.get()).second) return;
    if (pick(e)) {
      out.push_back(e);
      return;
    }
    for (const Expr& o : operands(e)) visit(o);
  };
  for (const Expr& root : roots) visit(root);
  return out;
}

std::set<std::string> free_vars(const Expr& e) {
  struct Collector : ExprVisitor {
    std::set<std::string> out;
    void visit_index(const IndexExpr& index) override {
      for (auto& v : ir::free_vars(index)) out.insert(v);
    }
  } c;
  c.walk(e);
  return std::move(c.out);
}

std::set<std::string> free_symbols(const Expr& e) {
  struct Collector : ExprVisitor {
    std::set<std::string> out;
    void visit_index(const IndexExpr& index) override {
      for (auto& v : ir::free_symbols(index)) out.insert(v);
    }
  } c;
  c.walk(e);
  return std::move(c.out);
}

std::vector<Expr> indirect_values(const IndexExpr& index) {
  std::vector<Expr> out;
  for (const auto& leaf : indirect_terms(index)) out.push_back(leaf.as<IndexIndirect>()->value());
  return out;
}

IndexExpr indirect(Expr value, IndexExpr size, bool wraps) {
  if (!value.defined() || !size.defined()) throw CompilerError(Error::internal("indirect: null value or size"));
  if (!is_integral(value.dtype())) {
    throw CompilerError(Error::internal(cat("indirect: index value ", value, " is ", dtype_name(value.dtype()),
                                            ", not an integer")));
  }
  if (!ir::free_vars(size).empty()) {
    throw CompilerError(Error::internal(cat("indirect: size ", size, " uses a loop variable")));
  }
  if (auto n = size.constant(); n && *n < 1) {
    throw CompilerError(Error::internal(cat("indirect: dimension of size ", *n, " has no position")));
  }
  if (auto c = value.as<Constant>(); c && size.constant()) {
    return index_const(indirect_position(c->int_value, *size.constant(), wraps));
  }
  std::set<std::string> vars = free_vars(value), symbols = free_symbols(value);
  for (const auto& s : ir::free_symbols(size)) symbols.insert(s);
  return IndexExpr(std::make_shared<IndexIndirect>(value.node_ptr(), std::move(size),
                                                   std::move(vars), std::move(symbols), wraps));
}

std::set<std::string> local_refs(const Expr& e) {
  struct Collector : ExprVisitor {
    std::set<std::string> out;
    void visit(const LocalRef& n) override { out.insert(n.name); }
  } c;
  c.walk(e);
  return std::move(c.out);
}

bool is_math_function(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp: case UnaryOp::Exp2: case UnaryOp::Expm1: case UnaryOp::Log: case UnaryOp::Log2:
    case UnaryOp::Log10: case UnaryOp::Log1p: case UnaryOp::Sin: case UnaryOp::Cos: case UnaryOp::Tan:
    case UnaryOp::Asin: case UnaryOp::Acos: case UnaryOp::Atan: case UnaryOp::Sinh: case UnaryOp::Cosh:
    case UnaryOp::Tanh: case UnaryOp::Asinh: case UnaryOp::Acosh: case UnaryOp::Atanh: case UnaryOp::Sigmoid:
    case UnaryOp::Erf: case UnaryOp::Erfc: case UnaryOp::Erfinv: case UnaryOp::Lgamma: return true;
    default: return false;
  }
}

bool is_math_function(BinaryOp op) { return op == BinaryOp::Pow || op == BinaryOp::Atan2 || op == BinaryOp::Hypot; }

bool calls_math_function(const Expr& e) {
  for (const Expr& n : post_order({e})) {
    if (auto u = n.as<Unary>(); u && is_math_function(u->op)) return true;
    if (auto b = n.as<Binary>(); b && is_math_function(b->op)) return true;
  }
  return false;
}

bool may_raise(const Expr& e) {
  for (const Expr& n : post_order({e})) {
    if (auto u = n.as<Unary>(); u && u->op == UnaryOp::NonzeroDivisor) return true;
    auto b = n.as<Binary>();
    if (!b || !is_integral(b->lhs.dtype())) continue;
    if (b->op != BinaryOp::FloorDiv && b->op != BinaryOp::TruncDiv && b->op != BinaryOp::Fmod &&
        b->op != BinaryOp::Remainder) {
      continue;
    }
    const Constant* c = b->rhs.as<Constant>();
    if (!c || c->int_value == 0) return true;
  }
  return false;
}

std::vector<Expr> cse(const std::vector<Expr>& roots) {
  struct Cse : ExprMutator {
    std::unordered_set<Expr, ExprStructuralHash, ExprStructuralEqual> table;
    // Operands are already canonical, so equality below is shallow.
    Expr canonical(const Expr& e) { return *table.insert(e).first; }
#define CPPI_CSE_VISIT(Name) \
  Expr visit(const Name& n) override { return canonical(ExprMutator::visit(n)); }
    CPPI_FOR_EACH_EXPR_NODE(CPPI_CSE_VISIT)
#undef CPPI_CSE_VISIT
  } pass;
  std::vector<Expr> out;
  for (const auto& r : roots) out.push_back(pass.mutate(r));
  return out;
}

}  // namespace cppi::ir
