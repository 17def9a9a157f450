#include "lowering/ir/index_simplify.h"

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_poly.h"

namespace cppi::ir {

namespace {

using detail::Monomial;
using detail::Poly;

bool nonnegative_var_free(const IndexExpr& e);

// An atom of a var-free expression that is provably >= 0.
bool atom_nonnegative(const IndexExpr& a) {
  switch (a.kind()) {
    case IndexKind::Symbol: return true;
    case IndexKind::FloorDiv: {
      auto n = a.as<IndexFloorDiv>();
      return nonnegative_var_free(n->lhs) && is_positive_monomial(n->rhs);
    }
    case IndexKind::Mod: return is_positive_monomial(a.as<IndexMod>()->rhs);
    case IndexKind::Min: {
      auto n = a.as<IndexMin>();
      return nonnegative_var_free(n->lhs) && nonnegative_var_free(n->rhs);
    }
    case IndexKind::Max: {
      auto n = a.as<IndexMax>();
      return nonnegative_var_free(n->lhs) || nonnegative_var_free(n->rhs);
    }
    case IndexKind::Indirect: return true;  // in [0, size) by definition
    case IndexKind::Const:
    case IndexKind::Var:
    case IndexKind::Add:
    case IndexKind::Mul: return false;
  }
  return false;
}

// For an expression over size symbols (each >= 1): substitute s = 1 + t with
// t >= 0; if every coefficient of the result is >= 0 (and every other atom is
// provably >= 0), the expression is >= 0. Proves e.g. s0*s1 - s0 >= 0.
bool nonnegative_var_free(const IndexExpr& e) {
  if (auto c = e.constant()) return *c >= 0;
  Poly shifted;
  for (const auto& [m, c] : detail::to_poly(e).terms) {
    Poly term;
    term.add_term({}, c);
    for (const auto& atom : m) {
      Poly f;
      if (atom.kind() == IndexKind::Symbol) {
        f.add_term({atom}, 1);
        f.add_term({}, 1);
      } else if (atom_nonnegative(atom)) {
        f.add_term({atom}, 1);
      } else {
        return false;
      }
      term = detail::poly_mul(term, f);
    }
    shifted.add(term);
  }
  for (const auto& [m, c] : shifted.terms) {
    if (c < 0) return false;
  }
  return true;
}

bool has_vars(const IndexExpr& e) {
  return dispatch(e, [](const auto& n) -> bool {
    using N = std::decay_t<decltype(n)>;
    // An indirect leaf varies like a loop variable (it is not a fixed
    // quantity over symbols), though it may not depend on any loop.
    if constexpr (std::is_same_v<N, IndexVar> || std::is_same_v<N, IndexIndirect>) {
      return true;
    } else if constexpr (std::is_same_v<N, IndexConst> || std::is_same_v<N, IndexSymbol>) {
      return false;
    } else if constexpr (std::is_same_v<N, IndexAdd>) {
      for (const auto& t : n.terms) {
        if (has_vars(t)) return true;
      }
      return false;
    } else if constexpr (std::is_same_v<N, IndexMul>) {
      for (const auto& f : n.factors) {
        if (has_vars(f)) return true;
      }
      return false;
    } else {
      return has_vars(n.lhs) || has_vars(n.rhs);
    }
  });
}

IndexBounds scale(const IndexBounds& b, int64_t c) {
  IndexBounds out;
  const auto& lo = c >= 0 ? b.lo : b.hi;
  const auto& hi = c >= 0 ? b.hi : b.lo;
  if (lo) out.lo = *lo * index_const(c);
  if (hi) out.hi = *hi * index_const(c);
  return out;
}

IndexBounds monomial_bounds(const Monomial& m, const VarRanges& ranges) {
  if (m.empty()) return {index_const(1), index_const(1)};
  if (m.size() == 1) return bounds(m[0], ranges);
  IndexExpr lo = index_const(1), hi = index_const(1);
  bool hi_known = true;
  for (const auto& f : m) {
    IndexBounds b = bounds(f, ranges);
    if (!b.lo || !nonnegative_var_free(*b.lo)) return {};
    lo = lo * *b.lo;
    if (b.hi) {
      hi = hi * *b.hi;
    } else {
      hi_known = false;
    }
  }
  IndexBounds out;
  out.lo = lo;
  if (hi_known) out.hi = hi;
  return out;
}

}  // namespace

IndexBounds bounds(const IndexExpr& e, const VarRanges& ranges) {
  switch (e.kind()) {
    case IndexKind::Const:
    case IndexKind::Symbol: return {e, e};
    case IndexKind::Var: {
      auto it = ranges.find(e.as<IndexVar>()->name);
      if (it == ranges.end()) return {};
      IndexBounds out;
      out.lo = index_const(0);
      if (!has_vars(it->second)) out.hi = it->second - 1;
      return out;
    }
    case IndexKind::Add:
    case IndexKind::Mul: {
      std::optional<IndexExpr> lo = index_const(0), hi = index_const(0);
      for (const auto& [m, c] : detail::to_poly(e).terms) {
        IndexBounds b = scale(monomial_bounds(m, ranges), c);
        if (lo && b.lo) {
          lo = *lo + *b.lo;
        } else {
          lo.reset();
        }
        if (hi && b.hi) {
          hi = *hi + *b.hi;
        } else {
          hi.reset();
        }
      }
      return {lo, hi};
    }
    case IndexKind::FloorDiv: {
      auto n = e.as<IndexFloorDiv>();
      if (has_vars(n->rhs) || !prove_positive(n->rhs)) return {};
      IndexBounds a = bounds(n->lhs, ranges), out;
      // Bounds are var-free, so simplify() only uses "symbols are >= 1" here,
      // e.g. (s0*s1 - 1) // s1 -> s0 + (-1 // s1) -> s0 - 1.
      if (a.lo) out.lo = simplify(floordiv(*a.lo, n->rhs));
      if (a.hi) out.hi = simplify(floordiv(*a.hi, n->rhs));
      return out;
    }
    case IndexKind::Mod: {
      auto n = e.as<IndexMod>();
      if (has_vars(n->rhs) || !prove_positive(n->rhs)) return {};
      return {index_const(0), n->rhs - 1};
    }
    case IndexKind::Min: {
      auto n = e.as<IndexMin>();
      IndexBounds a = bounds(n->lhs, ranges), b = bounds(n->rhs, ranges), out;
      if (a.lo && b.lo) out.lo = min(*a.lo, *b.lo);
      if (a.hi && b.hi) {
        out.hi = min(*a.hi, *b.hi);
      } else {
        out.hi = a.hi ? a.hi : b.hi;
      }
      return out;
    }
    case IndexKind::Max: {
      auto n = e.as<IndexMax>();
      IndexBounds a = bounds(n->lhs, ranges), b = bounds(n->rhs, ranges), out;
      if (a.hi && b.hi) out.hi = max(*a.hi, *b.hi);
      if (a.lo && b.lo) {
        out.lo = max(*a.lo, *b.lo);
      } else {
        out.lo = a.lo ? a.lo : b.lo;
      }
      return out;
    }
    case IndexKind::Indirect: return {index_const(0), e.as<IndexIndirect>()->size - 1};
  }
  return {};
}

bool prove_nonnegative(const IndexExpr& e, const VarRanges& ranges) {
  if (!has_vars(e)) return nonnegative_var_free(e);
  IndexBounds b = bounds(e, ranges);
  return b.lo && nonnegative_var_free(*b.lo);
}

bool prove_positive(const IndexExpr& e, const VarRanges& ranges) {
  return prove_nonnegative(e - 1, ranges);
}

bool prove_le(const IndexExpr& a, const IndexExpr& b, const VarRanges& ranges) {
  return prove_nonnegative(b - a, ranges);
}

bool prove_lt(const IndexExpr& a, const IndexExpr& b, const VarRanges& ranges) {
  return prove_positive(b - a, ranges);
}

namespace {

// The rule for one atom whose operands are already simplified; returns the
// atom itself when no rule applies.
IndexExpr apply_range_rule(const IndexExpr& atom, const VarRanges& ranges) {
  if (auto n = atom.as<IndexFloorDiv>()) {
    if (!prove_positive(n->rhs, ranges)) return atom;
    if (prove_nonnegative(n->lhs, ranges) && prove_lt(n->lhs, n->rhs, ranges)) return index_const(0);
    // -d <= n < 0 (e.g. (-1) // s0 in a bound): -1.
    if (prove_lt(n->lhs, 0, ranges) && prove_le(-n->rhs, n->lhs, ranges)) return index_const(-1);
  } else if (auto n = atom.as<IndexMod>()) {
    if (!prove_positive(n->rhs, ranges)) return atom;
    if (prove_nonnegative(n->lhs, ranges) && prove_lt(n->lhs, n->rhs, ranges)) return n->lhs;
    if (prove_lt(n->lhs, 0, ranges) && prove_le(-n->rhs, n->lhs, ranges)) return n->lhs + n->rhs;
  } else if (auto n = atom.as<IndexMin>()) {
    if (prove_le(n->lhs, n->rhs, ranges)) return n->lhs;
    if (prove_le(n->rhs, n->lhs, ranges)) return n->rhs;
  } else if (auto n = atom.as<IndexMax>()) {
    if (prove_le(n->lhs, n->rhs, ranges)) return n->rhs;
    if (prove_le(n->rhs, n->lhs, ranges)) return n->lhs;
  }
  return atom;
}

// Applies the range rules to the atoms of `e`'s top-level polynomial.
IndexExpr apply_range_rules(const IndexExpr& e, const VarRanges& ranges) {
  bool changed = false;
  std::vector<IndexExpr> terms;
  for (const auto& [m, c] : detail::to_poly(e).terms) {
    IndexExpr term = index_const(c);
    for (const auto& atom : m) {
      IndexExpr r = apply_range_rule(atom, ranges);
      changed |= !r.same_as(atom);
      term = term * r;
    }
    terms.push_back(term);
  }
  return changed ? sum(terms) : e;
}

// k*d*(x // d) + k*(x % d) -> k*x.
IndexExpr recombine_div_mod(const IndexExpr& e) {
  auto add = e.as<IndexAdd>();
  if (!add) return e;
  bool has_mod_term = false;
  for (const auto& t : add->terms) {
    auto m = t.as<IndexMul>();
    has_mod_term |= t.kind() == IndexKind::Mod || (m && m->factors.size() == 1 && m->factors[0].kind() == IndexKind::Mod);
  }
  if (!has_mod_term) return e;
  Poly p = detail::to_poly(e);
  for (const auto& [m, c] : p.terms) {
    if (m.size() != 1) continue;
    auto md = m[0].as<IndexMod>();
    if (!md) continue;
    IndexExpr div = floordiv(md->lhs, md->rhs);
    if (div.kind() != IndexKind::FloorDiv) continue;
    Poly want;
    want.add_term({div}, c);
    want = detail::poly_mul(want, detail::to_poly(md->rhs));
    bool present = true;
    for (const auto& [wm, wc] : want.terms) {
      auto it = p.terms.find(wm);
      if (it == p.terms.end() || it->second != wc) {
        present = false;
        break;
      }
    }
    if (!present) continue;
    Poly out = p;
    out.add(want, -1);
    out.add_term(m, -c);
    out.add(detail::to_poly(md->lhs), c);
    return recombine_div_mod(detail::from_poly(out));
  }
  return e;
}

}  // namespace

IndexExpr simplify(const IndexExpr& e, const VarRanges& ranges) {
  auto simp = [&](const IndexExpr& x) { return simplify(x, ranges); };
  switch (e.kind()) {
    case IndexKind::Const:
    case IndexKind::Symbol:
    case IndexKind::Var: return e;
    case IndexKind::Add: {
      auto n = e.as<IndexAdd>();
      std::vector<IndexExpr> terms;
      bool changed = false;
      for (const auto& t : n->terms) {
        terms.push_back(simp(t));
        changed |= !terms.back().same_as(t);
      }
      IndexExpr r = e;
      if (changed) {
        terms.push_back(index_const(n->constant));
        r = sum(terms);
      }
      IndexExpr out = recombine_div_mod(r);
      return out == e ? e : out;
    }
    case IndexKind::Mul: {
      auto n = e.as<IndexMul>();
      std::vector<IndexExpr> factors;
      bool changed = false;
      for (const auto& f : n->factors) {
        factors.push_back(simp(f));
        changed |= !factors.back().same_as(f);
      }
      if (!changed) return e;
      factors.push_back(index_const(n->coefficient));
      return product(factors);
    }
#define CPPI_SIMPLIFY_BINARY(Name, make)                               \
  case IndexKind::Name: {                                              \
    auto n = e.as<Index##Name>();                                      \
    IndexExpr a = simp(n->lhs), b = simp(n->rhs);                      \
    IndexExpr r = a.same_as(n->lhs) && b.same_as(n->rhs) ? e : make(a, b); \
    IndexExpr out = recombine_div_mod(apply_range_rules(r, ranges));   \
    return out == e ? e : out;                                         \
  }
      CPPI_SIMPLIFY_BINARY(FloorDiv, floordiv)
      CPPI_SIMPLIFY_BINARY(Mod, mod)
      CPPI_SIMPLIFY_BINARY(Min, min)
      CPPI_SIMPLIFY_BINARY(Max, max)
#undef CPPI_SIMPLIFY_BINARY
    case IndexKind::Indirect: {
      // Opaque: only the indices inside the value and the size simplify.
      auto n = e.as<IndexIndirect>();
      Expr v = simplify_indices(n->value(), ranges);
      IndexExpr size = simp(n->size);
      if (v.get() == n->value_node.get() && size.same_as(n->size)) return e;
      return indirect(v, size, n->wraps);
    }
  }
  return e;
}

}  // namespace cppi::ir
