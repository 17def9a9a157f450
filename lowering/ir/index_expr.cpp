#include "lowering/ir/index_expr.h"

#include <algorithm>
#include <numeric>

#include "lowering/ir/index_poly.h"
#include "lowering/ir/printer.h"
#include "support/status.h"

namespace cppi::ir {

namespace {

size_t hash_mix(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

size_t hash_list(size_t seed, const std::vector<IndexExpr>& list) {
  for (const auto& e : list) seed = hash_mix(seed, e.hash());
  return seed;
}

size_t kind_seed(IndexKind k) { return hash_mix(0x51ed27, static_cast<size_t>(k)); }

IndexExpr make_node_floordiv(IndexExpr a, IndexExpr b) {
  return IndexExpr(std::make_shared<IndexFloorDiv>(std::move(a), std::move(b)));
}
IndexExpr make_node_mod(IndexExpr a, IndexExpr b) {
  return IndexExpr(std::make_shared<IndexMod>(std::move(a), std::move(b)));
}

}  // namespace

const char* to_string(IndexKind kind) {
  switch (kind) {
#define CPPI_INDEX_KIND_NAME(Name) \
  case IndexKind::Name: return #Name;
    CPPI_FOR_EACH_INDEX_NODE(CPPI_INDEX_KIND_NAME)
#undef CPPI_INDEX_KIND_NAME
  }
  return "?";
}

// --- nodes -----------------------------------------------------------------

IndexConst::IndexConst(int64_t v)
    : IndexNode(kKind, hash_mix(kind_seed(kKind), std::hash<int64_t>()(v))), value(v) {}
IndexSymbol::IndexSymbol(std::string n)
    : IndexNode(kKind, hash_mix(kind_seed(kKind), std::hash<std::string>()(n))), name(std::move(n)) {}
IndexVar::IndexVar(std::string n)
    : IndexNode(kKind, hash_mix(kind_seed(kKind), std::hash<std::string>()(n))), name(std::move(n)) {}
IndexAdd::IndexAdd(std::vector<IndexExpr> t, int64_t c)
    : IndexNode(kKind, hash_mix(hash_list(kind_seed(kKind), t), std::hash<int64_t>()(c))),
      terms(std::move(t)),
      constant(c) {}
IndexMul::IndexMul(int64_t c, std::vector<IndexExpr> f)
    : IndexNode(kKind, hash_list(hash_mix(kind_seed(kKind), std::hash<int64_t>()(c)), f)),
      coefficient(c),
      factors(std::move(f)) {}
#define CPPI_BINARY_INDEX_NODE_CTOR(Name)                                                     \
  Index##Name::Index##Name(IndexExpr a, IndexExpr b)                                         \
      : IndexNode(kKind, hash_mix(hash_mix(kind_seed(kKind), a.hash()), b.hash())), lhs(std::move(a)), \
        rhs(std::move(b)) {}
CPPI_BINARY_INDEX_NODE_CTOR(FloorDiv)
CPPI_BINARY_INDEX_NODE_CTOR(Mod)
CPPI_BINARY_INDEX_NODE_CTOR(Min)
CPPI_BINARY_INDEX_NODE_CTOR(Max)
#undef CPPI_BINARY_INDEX_NODE_CTOR
IndexIndirect::IndexIndirect(std::shared_ptr<const ExprNode> v, IndexExpr sz, std::set<std::string> vs,
                             std::set<std::string> ss, bool w)
    : IndexNode(kKind, hash_mix(hash_mix(hash_mix(kind_seed(kKind), v->hash), sz.hash()), w ? 1 : 0)),
      value_node(std::move(v)),
      size(std::move(sz)),
      vars(std::move(vs)),
      symbols(std::move(ss)),
      wraps(w) {}

// --- handle ----------------------------------------------------------------

IndexExpr IndexExpr::make_constant(int64_t value) { return IndexExpr(std::make_shared<IndexConst>(value)); }

std::optional<int64_t> IndexExpr::constant() const {
  if (auto c = as<IndexConst>()) return c->value;
  return std::nullopt;
}

std::string IndexExpr::str() const { return to_string(*this); }

bool natural_name_less(const std::string& a, const std::string& b) {
  auto digits_start = [](const std::string& s) {
    size_t i = s.size();
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
    return i;
  };
  size_t ia = digits_start(a), ib = digits_start(b);
  int c = a.compare(0, ia, b, 0, ib);
  if (c != 0) return c < 0;
  size_t na = a.size() - ia, nb = b.size() - ib;
  if (na != nb) return na < nb;  // no leading zeros in practice
  return a.compare(ia, na, b, ib, nb) < 0;
}

namespace {
int compare_names(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  return natural_name_less(a, b) ? -1 : 1;
}
int compare_ints(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }
int compare_lists(const std::vector<IndexExpr>& a, const std::vector<IndexExpr>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (int c = compare(a[i], b[i])) return c;
  }
  return compare_ints(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()));
}
}  // namespace

int compare(const IndexExpr& a, const IndexExpr& b) {
  if (a.same_as(b)) return 0;
  if (!a.defined() || !b.defined()) return a.defined() ? 1 : -1;
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  switch (a.kind()) {
    case IndexKind::Const: return compare_ints(a.as<IndexConst>()->value, b.as<IndexConst>()->value);
    case IndexKind::Symbol: return compare_names(a.as<IndexSymbol>()->name, b.as<IndexSymbol>()->name);
    case IndexKind::Var: return compare_names(a.as<IndexVar>()->name, b.as<IndexVar>()->name);
    case IndexKind::Add: {
      auto x = a.as<IndexAdd>(), y = b.as<IndexAdd>();
      if (int c = compare_lists(x->terms, y->terms)) return c;
      return compare_ints(x->constant, y->constant);
    }
    case IndexKind::Mul: {
      auto x = a.as<IndexMul>(), y = b.as<IndexMul>();
      if (int c = compare_lists(x->factors, y->factors)) return c;
      return compare_ints(x->coefficient, y->coefficient);
    }
#define CPPI_COMPARE_BINARY(Name)                             \
  case IndexKind::Name: {                                     \
    auto x = a.as<Index##Name>(), y = b.as<Index##Name>();   \
    if (int c = compare(x->lhs, y->lhs)) return c;            \
    return compare(x->rhs, y->rhs);                           \
  }
      CPPI_COMPARE_BINARY(FloorDiv)
      CPPI_COMPARE_BINARY(Mod)
      CPPI_COMPARE_BINARY(Min)
      CPPI_COMPARE_BINARY(Max)
#undef CPPI_COMPARE_BINARY
    case IndexKind::Indirect: {
      // Sizes, then value hashes, order deterministically; equal hashes are
      // decided structurally (a 64-bit hash collision between different
      // values falls back to pointer order, which only affects term order).
      auto x = a.as<IndexIndirect>(), y = b.as<IndexIndirect>();
      if (int c = compare(x->size, y->size)) return c;
      if (x->wraps != y->wraps) return x->wraps ? 1 : -1;
      if (x->value_node->hash != y->value_node->hash) return x->value_node->hash < y->value_node->hash ? -1 : 1;
      if (structurally_equal(x->value(), y->value())) return 0;
      return x->value_node.get() < y->value_node.get() ? -1 : 1;
    }
  }
  return 0;
}

bool operator==(const IndexExpr& a, const IndexExpr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.hash() != b.hash()) return false;
  return compare(a, b) == 0;
}

namespace detail {
void require_defined(const IndexExpr& e, const char* what) {
  if (!e.defined()) throw CompilerError(Error::internal(cat("null index expression passed to ", what)));
}
}  // namespace detail

using detail::from_poly;
using detail::Poly;
using detail::to_poly;
using detail::require_defined;

// --- factories ---------------------------------------------------------------

IndexExpr index_const(int64_t value) { return IndexExpr(value); }

IndexExpr sym(const std::string& name) {
  if (name.empty()) throw CompilerError(Error::internal("size symbol with an empty name"));
  return IndexExpr(std::make_shared<IndexSymbol>(name));
}

IndexExpr var(const std::string& name) {
  if (name.empty()) throw CompilerError(Error::internal("loop variable with an empty name"));
  return IndexExpr(std::make_shared<IndexVar>(name));
}

namespace {

// Fast paths for + and scaling by a constant: they walk the canonical terms
// directly instead of going through a Poly (a map of vectors), because
// lowerings build many affine indices.

// One non-constant term of a canonical expression: coefficient * factors[0..n).
struct TermRef {
  const IndexExpr* factors;
  size_t n;
  int64_t coefficient;
  const IndexExpr* expr;  // the term as an expression
};

void collect_terms(const IndexExpr& e, std::vector<TermRef>* out, int64_t* constant) {
  auto add_term = [&](const IndexExpr& t) {
    if (auto m = t.as<IndexMul>()) {
      out->push_back({m->factors.data(), m->factors.size(), m->coefficient, &t});
    } else {
      out->push_back({&t, 1, 1, &t});
    }
  };
  if (auto c = e.as<IndexConst>()) {
    *constant = c->value;
  } else if (auto a = e.as<IndexAdd>()) {
    for (const auto& t : a->terms) add_term(t);
    *constant = a->constant;
  } else {
    add_term(e);
    *constant = 0;
  }
}

// TermLess on factor spans (see detail::TermLess).
template <typename Keep>
int compare_factor_parts(const TermRef& a, const TermRef& b, Keep keep) {
  size_t i = 0, j = 0;
  auto skip = [&](size_t k, const TermRef& t) {
    while (k < t.n && !keep(t.factors[k])) ++k;
    return k;
  };
  i = skip(i, a);
  j = skip(j, b);
  bool ea = i == a.n, eb = j == b.n;
  if (ea || eb) return ea == eb ? 0 : (ea ? 1 : -1);
  while (i < a.n && j < b.n) {
    if (int c = compare(a.factors[i], b.factors[j])) return c;
    i = skip(i + 1, a);
    j = skip(j + 1, b);
  }
  if (i == a.n) return j == b.n ? 0 : -1;
  return 1;
}

int compare_terms(const TermRef& a, const TermRef& b) {
  if (int c = compare_factor_parts(a, b, [](const IndexExpr& f) { return f.kind() == IndexKind::Var; })) return c;
  return compare_factor_parts(a, b, [](const IndexExpr& f) { return f.kind() != IndexKind::Var; });
}

IndexExpr term_with_coefficient(const TermRef& t, int64_t c) {
  if (c == t.coefficient) return *t.expr;
  if (t.n == 1 && c == 1) return t.factors[0];
  return IndexExpr(std::make_shared<IndexMul>(c, std::vector<IndexExpr>(t.factors, t.factors + t.n)));
}

IndexExpr build_sum(std::vector<IndexExpr> terms, int64_t constant) {
  if (terms.empty()) return index_const(constant);
  if (terms.size() == 1 && constant == 0) return terms[0];
  return IndexExpr(std::make_shared<IndexAdd>(std::move(terms), constant));
}

IndexExpr add_canonical(const IndexExpr& a, const IndexExpr& b) {
  std::vector<TermRef> ta, tb;
  int64_t ca, cb;
  collect_terms(a, &ta, &ca);
  collect_terms(b, &tb, &cb);
  std::vector<IndexExpr> terms;
  terms.reserve(ta.size() + tb.size());
  size_t i = 0, j = 0;
  while (i < ta.size() || j < tb.size()) {
    int c = i == ta.size() ? 1 : (j == tb.size() ? -1 : compare_terms(ta[i], tb[j]));
    if (c < 0) {
      terms.push_back(*ta[i++].expr);
    } else if (c > 0) {
      terms.push_back(*tb[j++].expr);
    } else {
      int64_t coefficient = detail::wrap_add(ta[i].coefficient, tb[j].coefficient);
      if (coefficient != 0) terms.push_back(term_with_coefficient(ta[i], coefficient));
      ++i;
      ++j;
    }
  }
  return build_sum(std::move(terms), detail::wrap_add(ca, cb));
}

IndexExpr scale_canonical(const IndexExpr& e, int64_t k) {
  if (k == 0) return index_const(0);
  std::vector<TermRef> te;
  int64_t c;
  collect_terms(e, &te, &c);
  std::vector<IndexExpr> terms;
  terms.reserve(te.size());
  for (const auto& t : te) {
    int64_t coefficient = detail::wrap_mul(t.coefficient, k);
    if (coefficient != 0) terms.push_back(term_with_coefficient(t, coefficient));
  }
  return build_sum(std::move(terms), detail::wrap_mul(c, k));
}

}  // namespace

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b) {
  require_defined(a, "+");
  require_defined(b, "+");
  if (a.is_constant(0)) return b;
  if (b.is_constant(0)) return a;
  auto ca = a.constant(), cb = b.constant();
  if (ca && cb) return index_const(detail::wrap_add(*ca, *cb));
  return add_canonical(a, b);
}

IndexExpr operator-(const IndexExpr& a) { return a * index_const(-1); }
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b) { return a + (-b); }

IndexExpr operator*(const IndexExpr& a, const IndexExpr& b) {
  require_defined(a, "*");
  require_defined(b, "*");
  if (a.is_constant(1)) return b;
  if (b.is_constant(1)) return a;
  auto ca = a.constant(), cb = b.constant();
  if (ca && cb) return index_const(detail::wrap_mul(*ca, *cb));
  if (ca) return scale_canonical(b, *ca);
  if (cb) return scale_canonical(a, *cb);
  return from_poly(detail::poly_mul(to_poly(a), to_poly(b)));
}

IndexExpr sum(const std::vector<IndexExpr>& terms) {
  Poly p;
  for (const auto& t : terms) {
    require_defined(t, "sum");
    p.add(to_poly(t));
  }
  return from_poly(p);
}

IndexExpr product(const std::vector<IndexExpr>& factors) {
  IndexExpr out = index_const(1);
  for (const auto& f : factors) out = out * f;
  return out;
}

bool is_positive_monomial(const IndexExpr& e) {
  if (auto c = e.constant()) return *c > 0;
  if (e.kind() == IndexKind::Symbol) return true;
  if (auto m = e.as<IndexMul>()) {
    if (m->coefficient <= 0) return false;
    for (const auto& f : m->factors) {
      if (f.kind() != IndexKind::Symbol) return false;
    }
    return true;
  }
  return false;
}

namespace {

// The single term of a positive monomial.
void monomial_of(const IndexExpr& e, detail::Monomial* m, int64_t* c) {
  Poly p = to_poly(e);
  *m = p.terms.begin()->first;
  *c = p.terms.begin()->second;
}

int64_t gcd_of_terms(const Poly& p, int64_t start) {
  int64_t g = start;
  for (const auto& [m, c] : p.terms) g = std::gcd(g, c < 0 ? -c : c);
  return g;
}

Poly divided(const Poly& p, int64_t g) {
  Poly out;
  for (const auto& [m, c] : p.terms) out.add_term(m, c / g);
  return out;
}

// Splits `a` into (multiples of the divisor) and the rest, as the floordiv and
// mod factories need it. Returns false when `b` is not a positive monomial.
struct DivSplit {
  Poly quotient;  // a = b*quotient + rest
  Poly rest;
  detail::Monomial dm;
  int64_t dc = 1;
};

DivSplit split_by_divisor(const IndexExpr& a, const IndexExpr& b) {
  DivSplit s;
  monomial_of(b, &s.dm, &s.dc);
  for (const auto& [m, c] : to_poly(a).terms) {
    detail::Monomial qm;
    int64_t qc;
    if (m.empty() && s.dm.empty()) {
      s.quotient.add_term({}, detail::py_floordiv(c, s.dc));
      s.rest.add_term({}, detail::py_mod(c, s.dc));
    } else if (detail::monomial_divides(s.dm, s.dc, m, c, &qm, &qc)) {
      s.quotient.add_term(qm, qc);
    } else {
      s.rest.add_term(m, c);
    }
  }
  return s;
}

// Does positive monomial `d` divide positive monomial `n`?
bool monomial_expr_divides(const IndexExpr& d, const IndexExpr& n) {
  detail::Monomial dm, nm, qm;
  int64_t dc, nc, qc;
  monomial_of(d, &dm, &dc);
  monomial_of(n, &nm, &nc);
  return detail::monomial_divides(dm, dc, nm, nc, &qm, &qc);
}

}  // namespace

IndexExpr floordiv(const IndexExpr& a, const IndexExpr& b) {
  require_defined(a, "floordiv");
  require_defined(b, "floordiv");
  auto ca = a.constant(), cb = b.constant();
  if (cb) {
    if (*cb == 0) throw CompilerError(Error::internal(cat("index floordiv by zero: ", a)));
    if (ca) return index_const(detail::py_floordiv(*ca, *cb));
    if (*cb == 1) return a;
    if (*cb < 0) return floordiv(-a, -b);
  }
  if (!is_positive_monomial(b)) return make_node_floordiv(a, b);

  DivSplit s = split_by_divisor(a, b);
  IndexExpr quotient = from_poly(s.quotient);
  if (s.rest.is_zero()) return quotient;
  int64_t g = gcd_of_terms(s.rest, s.dc);
  if (g > 1) {
    s.rest = divided(s.rest, g);
    s.dc /= g;
  }
  IndexExpr num = from_poly(s.rest);
  IndexExpr den = detail::from_poly([&] {
    Poly p;
    p.add_term(s.dm, s.dc);
    return p;
  }());
  IndexExpr q;
  if (den.is_constant(1)) {
    q = num;
  } else if (num.constant() && den.constant()) {
    q = index_const(detail::py_floordiv(*num.constant(), *den.constant()));
  } else if (auto inner = num.as<IndexFloorDiv>(); inner && is_positive_monomial(inner->rhs)) {
    q = floordiv(inner->lhs, inner->rhs * den);
  } else {
    q = make_node_floordiv(num, den);
  }
  return quotient + q;
}

IndexExpr mod(const IndexExpr& a, const IndexExpr& b) {
  require_defined(a, "mod");
  require_defined(b, "mod");
  auto ca = a.constant(), cb = b.constant();
  if (cb) {
    if (*cb == 0) throw CompilerError(Error::internal(cat("index mod by zero: ", a)));
    if (ca) return index_const(detail::py_mod(*ca, *cb));
    if (*cb == 1) return index_const(0);
  }
  if (!is_positive_monomial(b)) return make_node_mod(a, b);

  DivSplit s = split_by_divisor(a, b);
  if (s.rest.is_zero()) return index_const(0);
  int64_t g = gcd_of_terms(s.rest, s.dc);
  if (g > 1) {
    Poly den;
    den.add_term(s.dm, s.dc / g);
    return index_const(g) * mod(from_poly(divided(s.rest, g)), from_poly(den));
  }
  IndexExpr num = from_poly(s.rest);
  if (num.constant() && b.constant()) return index_const(detail::py_mod(*num.constant(), *b.constant()));
  if (auto inner = num.as<IndexMod>(); inner && is_positive_monomial(inner->rhs)) {
    if (monomial_expr_divides(b, inner->rhs)) return mod(inner->lhs, b);
  }
  return make_node_mod(num, b);
}

namespace {
template <typename Node>
IndexExpr min_max(const IndexExpr& a, const IndexExpr& b, bool is_min) {
  require_defined(a, is_min ? "min" : "max");
  require_defined(b, is_min ? "min" : "max");
  if (a == b) return a;
  if (auto d = (a - b).constant()) return (*d <= 0) == is_min ? a : b;
  if (compare(a, b) < 0) return IndexExpr(std::make_shared<Node>(a, b));
  return IndexExpr(std::make_shared<Node>(b, a));
}
}  // namespace

IndexExpr min(const IndexExpr& a, const IndexExpr& b) { return min_max<IndexMin>(a, b, true); }
IndexExpr max(const IndexExpr& a, const IndexExpr& b) { return min_max<IndexMax>(a, b, false); }

}  // namespace cppi::ir
