/// \file
/// Traversals over value expressions, generated from expr.def:
/// - ExprFunctor<R>: one pure virtual visit per node kind, so a class that
///   forgets a kind (or a kind added to expr.def) does not compile.
/// - ExprVisitor: walks every distinct node of a DAG once (children first
///   visited in field order); override the visits you care about and call the
///   base to keep walking. visit_index() sees every index expression; the
///   values inside indirect leaves (index_expr.h) are walked as operands of
///   the node whose index holds them.
/// - ExprMutator: rebuilds bottom-up, memoised per node, and returns the very
///   same node when nothing below it changed (so `out.same_as(in)` means
///   "unchanged"). mutate_index() and mutate_buffer() rewrite the index
///   expressions and buffers inside the expression. The values inside
///   indirect leaves are mutated like operands (so replace_loads reaches a
///   load of an index tensor) before mutate_index sees the index. To rewrite one kind,
///   override its visit() and call the base visit() for the nodes you keep:
///     Expr visit(const Unary& n) override {
///       if (n.op != UnaryOp::Exp) return ExprMutator::visit(n);
///       return unary(UnaryOp::Exp2, ...mutate(n.operand)...);
///     }
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lowering/ir/expr.h"
#include "lowering/ir/index_simplify.h"

namespace cppi::ir {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;

  R dispatch(const Expr& e) {
    switch (e.kind()) {
#define CPPI_EXPR_DISPATCH(Name) \
  case ExprKind::Name: return visit(*static_cast<const Name*>(e.get()));
      CPPI_FOR_EACH_EXPR_NODE(CPPI_EXPR_DISPATCH)
#undef CPPI_EXPR_DISPATCH
    }
    return visit(*static_cast<const Constant*>(e.get()));  // unreachable
  }

 protected:
#define CPPI_EXPR_VISIT(Name) virtual R visit(const Name& node) = 0;
  CPPI_FOR_EACH_EXPR_NODE(CPPI_EXPR_VISIT)
#undef CPPI_EXPR_VISIT
};

class ExprVisitor : public ExprFunctor<void> {
 public:
  /// Visits `e` unless it was already visited by this visitor.
  void walk(const Expr& e);

 protected:
  virtual void visit_index(const IndexExpr& index) {}
  /// Walks the values of the indirect leaves of `index`.
  void walk_indirect(const IndexExpr& index);

  void visit(const Constant& node) override;
  void visit(const Load& node) override;
  void visit(const IndexValue& node) override;
  void visit(const LocalRef& node) override;
  void visit(const Cast& node) override;
  void visit(const Unary& node) override;
  void visit(const Binary& node) override;
  void visit(const Compare& node) override;
  void visit(const Where& node) override;
  void visit(const Random& node) override;

 private:
  std::unordered_set<const ExprNode*> visited_;
};

class ExprMutator : public ExprFunctor<Expr> {
 public:
  /// The rewritten expression; memoised, so shared nodes stay shared.
  Expr mutate(const Expr& e);

 protected:
  virtual IndexExpr mutate_index(const IndexExpr& index) { return index; }
  virtual BufferPtr mutate_buffer(const BufferPtr& buffer) { return buffer; }
  /// True when mutate_index itself rewrites the values inside indirect
  /// leaves (substitute() and simplify() do), so they must not be mutated
  /// first as operands (that would apply a substitution twice).
  virtual bool mutate_index_reaches_indirect() const { return false; }
  /// mutate_index(), after mutating the values of indirect leaves unless
  /// mutate_index_reaches_indirect(). Use it for every index of a node.
  IndexExpr rewrite_index(const IndexExpr& index);
  /// The handle of the node whose visit() is running (also after mutating
  /// its children), e.g. to return it unchanged.
  const Expr& current() const { return current_; }

  Expr visit(const Constant& node) override;
  Expr visit(const Load& node) override;
  Expr visit(const IndexValue& node) override;
  Expr visit(const LocalRef& node) override;
  Expr visit(const Cast& node) override;
  Expr visit(const Unary& node) override;
  Expr visit(const Binary& node) override;
  Expr visit(const Compare& node) override;
  Expr visit(const Where& node) override;
  Expr visit(const Random& node) override;

 private:
  std::unordered_map<const ExprNode*, Expr> memo_;
  Expr current_;
};

/// Applies `f` to every index expression in `e` (Load indices, IndexValue,
/// Random offsets); returns `e` itself if `f` changed none of them. `f` is
/// applied to the outermost indices only and must reach into indirect
/// leaves itself, as substitute() and simplify() do.
template <typename F>
Expr map_indices(const Expr& e, F f) {
  struct Mapper : ExprMutator {
    F& fn;
    explicit Mapper(F& g) : fn(g) {}
    IndexExpr mutate_index(const IndexExpr& index) override { return fn(index); }
    bool mutate_index_reaches_indirect() const override { return true; }
  } mapper(f);
  return mapper.mutate(e);
}

/// Substitutes loop variables / symbols inside every index of `e`.
Expr substitute_indices(const Expr& e, const std::map<std::string, IndexExpr>& replacements);

/// simplify() (index_simplify.h) applied to every index of `e`, positions
/// computed from one loop variable turned into index arithmetic
/// (resolve_computed_positions in computed_positions.h), then the
/// comparisons of index values that the ranges decide folded
/// (fold_range_conditions in fold_conditions.h).
Expr simplify_indices(const Expr& e, const VarRanges& ranges);

/// Replaces every Load of the buffer named `buffer` by f(load); the result
/// must have the load's dtype. Fusion uses it to inline a producer's value
/// into its consumer (after mapping the load's index to the producer's
/// variables). Returns `e` itself when it has no such load.
Expr replace_loads(const Expr& e, const std::string& buffer, const std::function<Expr(const Load&)>& f);
/// The same inside the values of the indirect leaves of a (store) index.
IndexExpr replace_loads(const IndexExpr& index, const std::string& buffer, const std::function<Expr(const Load&)>& f);

/// The operands of a node in field order (Load: the values of the indirect
/// leaves of its index, then its mask if any; IndexValue: its indirect
/// values; Where: cond, then, else; Random: seed, then the offset's indirect
/// values). Index expressions are not operands.
std::vector<Expr> operands(const Expr& e);

/// Every distinct node reachable from `roots`, operands before users, in a
/// deterministic order (depth-first, operands in field order, roots in
/// order). Codegen emits one temporary per node in this order.
std::vector<Expr> post_order(const std::vector<Expr>& roots);

/// The outermost nodes under `roots` that `pick` accepts: depth-first from
/// each root in order, operands in field order, each node considered once;
/// an accepted node's operands are not visited, nor is anything `enter`
/// (when given) refuses. What invariant hoisting computes before a loop (the
/// CPU kernel's and a stage's invariants, the CUDA grid-stride loop's);
/// `pick` says what each may hoist.
std::vector<Expr> outermost_picks(const std::vector<Expr>& roots, const std::function<bool(const Expr&)>& pick,
                                  const std::function<bool(const Expr&)>& enter = {});

/// Common-subexpression elimination across `roots`: structurally equal
/// nodes become one shared node (so later passes and the codegens, which
/// name each distinct node once, compute it once). Returns the roots in
/// order; a root with nothing to merge comes back as the same node.
std::vector<Expr> cse(const std::vector<Expr>& roots);

/// Loop variables used by the indices in `e` (for hoisting loop-invariant
/// work out of inner loops), and the LocalRef names it reads.
std::set<std::string> free_vars(const Expr& e);
/// Size symbols used by the indices in `e`.
std::set<std::string> free_symbols(const Expr& e);
/// The values of the indirect leaves of `index` (indirect_terms order).
std::vector<Expr> indirect_values(const IndexExpr& index);
std::set<std::string> local_refs(const Expr& e);

/// Ops that call into a math library (exp, log, sin, erf, sigmoid, lgamma,
/// pow, atan2, hypot): tens of instructions per vector, where an add, a
/// compare, a division or a square root is one.
bool is_math_function(UnaryOp op);
bool is_math_function(BinaryOp op);
/// Whether `e` calls one of them.
bool calls_math_function(const Expr& e);
/// Whether `e` may raise on the values it reads: an integer division or
/// remainder by anything but a nonzero constant (a zero traps), or a
/// divisor check (nonzero_divisor reports ZeroDivisionError). Code that
/// runs such an expression where the program would not (lanes that are
/// off, a value hoisted out of a loop that may not run) must not.
bool may_raise(const Expr& e);

}  // namespace cppi::ir
