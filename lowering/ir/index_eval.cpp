// Queries over index expressions: evaluation with concrete bindings,
// substitution, free names and indirect terms.
#include <functional>
#include <set>

#include "lowering/ir/index_expr.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_poly.h"
#include "support/status.h"

namespace cppi::ir {

using detail::require_defined;

// --- evaluation, substitution, free names -----------------------------------

int64_t indirect_position(int64_t value, int64_t size, bool wraps) {
  if (value < 0 && wraps) value = detail::wrap_add(value, size);
  return std::min(std::max<int64_t>(value, 0), size - 1);
}

int64_t evaluate(const IndexExpr& e, const IndexBindings& bindings) { return evaluate(e, bindings, nullptr); }

int64_t evaluate(const IndexExpr& e, const IndexBindings& bindings, const IndirectValueFn& indirect_value) {
  require_defined(e, "evaluate");
  auto evaluate = [&](const IndexExpr& x, const IndexBindings& b) { return ir::evaluate(x, b, indirect_value); };
  auto lookup = [&](const std::string& name) {
    auto it = bindings.find(name);
    if (it == bindings.end()) throw CompilerError(Error::internal(cat("no value for '", name, "' in ", e)));
    return it->second;
  };
  auto divisor = [&](const IndexExpr& d) {
    int64_t v = evaluate(d, bindings);
    if (v == 0) throw CompilerError(Error::internal(cat("division by zero evaluating ", e)));
    return v;
  };
  switch (e.kind()) {
    case IndexKind::Const: return e.as<IndexConst>()->value;
    case IndexKind::Symbol: return lookup(e.as<IndexSymbol>()->name);
    case IndexKind::Var: return lookup(e.as<IndexVar>()->name);
    case IndexKind::Add: {
      auto n = e.as<IndexAdd>();
      int64_t v = n->constant;
      for (const auto& t : n->terms) v = detail::wrap_add(v, evaluate(t, bindings));
      return v;
    }
    case IndexKind::Mul: {
      auto n = e.as<IndexMul>();
      int64_t v = n->coefficient;
      for (const auto& f : n->factors) v = detail::wrap_mul(v, evaluate(f, bindings));
      return v;
    }
    case IndexKind::FloorDiv: {
      auto n = e.as<IndexFloorDiv>();
      int64_t d = divisor(n->rhs);
      return detail::py_floordiv(evaluate(n->lhs, bindings), d);
    }
    case IndexKind::Mod: {
      auto n = e.as<IndexMod>();
      int64_t d = divisor(n->rhs);
      return detail::py_mod(evaluate(n->lhs, bindings), d);
    }
    case IndexKind::Min: {
      auto n = e.as<IndexMin>();
      return std::min(evaluate(n->lhs, bindings), evaluate(n->rhs, bindings));
    }
    case IndexKind::Max: {
      auto n = e.as<IndexMax>();
      return std::max(evaluate(n->lhs, bindings), evaluate(n->rhs, bindings));
    }
    case IndexKind::Indirect: {
      auto n = e.as<IndexIndirect>();
      if (!indirect_value) throw CompilerError(Error::internal(cat("evaluate: ", e, " reads memory")));
      int64_t size = evaluate(n->size, bindings);
      if (size < 1) throw CompilerError(Error::internal(cat("evaluate: ", e, " indexes a dimension of size ", size)));
      return indirect_position(indirect_value(*n), size, n->wraps);
    }
  }
  return 0;
}

IndexExpr substitute(const IndexExpr& e, const std::map<std::string, IndexExpr>& r) {
  require_defined(e, "substitute");
  if (r.empty()) return e;
  auto sub = [&](const IndexExpr& x) { return substitute(x, r); };
  switch (e.kind()) {
    case IndexKind::Const: return e;
    case IndexKind::Symbol: {
      auto it = r.find(e.as<IndexSymbol>()->name);
      return it == r.end() ? e : it->second;
    }
    case IndexKind::Var: {
      auto it = r.find(e.as<IndexVar>()->name);
      return it == r.end() ? e : it->second;
    }
    case IndexKind::Add: {
      auto n = e.as<IndexAdd>();
      std::vector<IndexExpr> terms;
      bool changed = false;
      for (const auto& t : n->terms) {
        terms.push_back(sub(t));
        changed |= !terms.back().same_as(t);
      }
      if (!changed) return e;
      terms.push_back(index_const(n->constant));
      return sum(terms);
    }
    case IndexKind::Mul: {
      auto n = e.as<IndexMul>();
      std::vector<IndexExpr> factors;
      bool changed = false;
      for (const auto& f : n->factors) {
        factors.push_back(sub(f));
        changed |= !factors.back().same_as(f);
      }
      if (!changed) return e;
      factors.push_back(index_const(n->coefficient));
      return product(factors);
    }
#define CPPI_SUBSTITUTE_BINARY(Name, make)                           \
  case IndexKind::Name: {                                            \
    auto n = e.as<Index##Name>();                                    \
    IndexExpr a = sub(n->lhs), b = sub(n->rhs);                      \
    if (a.same_as(n->lhs) && b.same_as(n->rhs)) return e;            \
    return make(a, b);                                               \
  }
      CPPI_SUBSTITUTE_BINARY(FloorDiv, floordiv)
      CPPI_SUBSTITUTE_BINARY(Mod, mod)
      CPPI_SUBSTITUTE_BINARY(Min, min)
      CPPI_SUBSTITUTE_BINARY(Max, max)
#undef CPPI_SUBSTITUTE_BINARY
    case IndexKind::Indirect: {
      auto n = e.as<IndexIndirect>();
      bool touched = false;
      for (const auto& [name, to] : r) touched |= n->vars.count(name) || n->symbols.count(name);
      if (!touched) return e;
      return indirect(substitute_indices(n->value(), r), sub(n->size), n->wraps);
    }
  }
  return e;
}

namespace {
void collect_names(const IndexExpr& e, IndexKind want, std::set<std::string>* out) {
  dispatch(e, [&](const auto& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, IndexSymbol> || std::is_same_v<N, IndexVar>) {
      if (N::kKind == want) out->insert(n.name);
    } else if constexpr (std::is_same_v<N, IndexIndirect>) {
      const auto& names = want == IndexKind::Var ? n.vars : n.symbols;
      out->insert(names.begin(), names.end());
    } else if constexpr (std::is_same_v<N, IndexAdd>) {
      for (const auto& t : n.terms) collect_names(t, want, out);
    } else if constexpr (std::is_same_v<N, IndexMul>) {
      for (const auto& f : n.factors) collect_names(f, want, out);
    } else if constexpr (std::is_same_v<N, IndexConst>) {
    } else {
      collect_names(n.lhs, want, out);
      collect_names(n.rhs, want, out);
    }
  });
}
}  // namespace

std::set<std::string> free_vars(const IndexExpr& e) {
  std::set<std::string> out;
  collect_names(e, IndexKind::Var, &out);
  return out;
}

std::set<std::string> free_symbols(const IndexExpr& e) {
  std::set<std::string> out;
  collect_names(e, IndexKind::Symbol, &out);
  return out;
}

namespace {
void collect_indirect(const IndexExpr& e, std::vector<IndexExpr>* out) {
  switch (e.kind()) {
    case IndexKind::Const:
    case IndexKind::Symbol:
    case IndexKind::Var: return;
    case IndexKind::Add:
      for (const auto& t : e.as<IndexAdd>()->terms) collect_indirect(t, out);
      return;
    case IndexKind::Mul:
      for (const auto& f : e.as<IndexMul>()->factors) collect_indirect(f, out);
      return;
#define CPPI_COLLECT_BINARY(Name)                      \
  case IndexKind::Name:                                \
    collect_indirect(e.as<Index##Name>()->lhs, out);   \
    collect_indirect(e.as<Index##Name>()->rhs, out);   \
    return;
      CPPI_COLLECT_BINARY(FloorDiv)
      CPPI_COLLECT_BINARY(Mod)
      CPPI_COLLECT_BINARY(Min)
      CPPI_COLLECT_BINARY(Max)
#undef CPPI_COLLECT_BINARY
    case IndexKind::Indirect:
      for (const auto& seen : *out) {
        if (seen == e) return;
      }
      out->push_back(e);
      return;
  }
}
}  // namespace

std::vector<IndexExpr> indirect_terms(const IndexExpr& e) {
  std::vector<IndexExpr> out;
  if (e.defined()) collect_indirect(e, &out);
  return out;
}

bool has_indirect(const IndexExpr& e) { return !indirect_terms(e).empty(); }

IndexExpr map_indirect(const IndexExpr& e, const std::function<IndexExpr(const IndexExpr&)>& f) {
  auto rebuild = [&](const std::vector<IndexExpr>& parts, std::vector<IndexExpr>* out) {
    bool changed = false;
    for (const auto& p : parts) {
      out->push_back(map_indirect(p, f));
      changed |= !out->back().same_as(p);
    }
    return changed;
  };
  switch (e.kind()) {
    case IndexKind::Const:
    case IndexKind::Symbol:
    case IndexKind::Var: return e;
    case IndexKind::Add: {
      auto n = e.as<IndexAdd>();
      std::vector<IndexExpr> terms;
      if (!rebuild(n->terms, &terms)) return e;
      terms.push_back(index_const(n->constant));
      return sum(terms);
    }
    case IndexKind::Mul: {
      auto n = e.as<IndexMul>();
      std::vector<IndexExpr> factors;
      if (!rebuild(n->factors, &factors)) return e;
      factors.push_back(index_const(n->coefficient));
      return product(factors);
    }
#define CPPI_MAP_BINARY(Name, make)                                          \
  case IndexKind::Name: {                                                    \
    auto n = e.as<Index##Name>();                                            \
    IndexExpr a = map_indirect(n->lhs, f), b = map_indirect(n->rhs, f);      \
    if (a.same_as(n->lhs) && b.same_as(n->rhs)) return e;                    \
    return make(a, b);                                                       \
  }
      CPPI_MAP_BINARY(FloorDiv, floordiv)
      CPPI_MAP_BINARY(Mod, mod)
      CPPI_MAP_BINARY(Min, min)
      CPPI_MAP_BINARY(Max, max)
#undef CPPI_MAP_BINARY
    case IndexKind::Indirect: return f(e);
  }
  return e;
}

bool depends_on(const IndexExpr& e, const std::string& name) {
  return free_vars(e).count(name) > 0 || free_symbols(e).count(name) > 0;
}
}  // namespace cppi::ir
