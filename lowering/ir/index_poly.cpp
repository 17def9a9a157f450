// The polynomial view of canonical index expressions (see index_poly.h):
// conversion to and from monomial -> coefficient maps, and their products.
#include "lowering/ir/index_poly.h"

#include <algorithm>

#include "lowering/ir/index_expr.h"

namespace cppi::ir {

namespace detail {

int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

bool is_atom(const IndexExpr& e) {
  switch (e.kind()) {
    case IndexKind::Symbol:
    case IndexKind::Var:
    case IndexKind::FloorDiv:
    case IndexKind::Mod:
    case IndexKind::Min:
    case IndexKind::Max:
    case IndexKind::Indirect: return true;
    case IndexKind::Const:
    case IndexKind::Add:
    case IndexKind::Mul: return false;
  }
  return false;
}

namespace {
// Compares the factors of `a` and `b` that satisfy `keep` (in order),
// lexicographically with a proper prefix first, but the empty list last.
template <typename Keep>
int compare_parts(const Monomial& a, const Monomial& b, Keep keep) {
  auto ia = a.begin(), ib = b.begin();
  auto skip = [&](Monomial::const_iterator it, const Monomial& m) {
    while (it != m.end() && !keep(*it)) ++it;
    return it;
  };
  ia = skip(ia, a);
  ib = skip(ib, b);
  bool ea = ia == a.end(), eb = ib == b.end();
  if (ea || eb) return ea == eb ? 0 : (ea ? 1 : -1);
  while (ia != a.end() && ib != b.end()) {
    if (int c = compare(*ia, *ib)) return c;
    ia = skip(ia + 1, a);
    ib = skip(ib + 1, b);
  }
  if (ia == a.end()) return ib == b.end() ? 0 : -1;
  return 1;
}
bool is_var(const IndexExpr& e) { return e.kind() == IndexKind::Var; }
bool is_not_var(const IndexExpr& e) { return e.kind() != IndexKind::Var; }
}  // namespace

bool TermLess::operator()(const Monomial& a, const Monomial& b) const {
  if (int c = compare_parts(a, b, is_var)) return c < 0;
  return compare_parts(a, b, is_not_var) < 0;
}

void Poly::add_term(const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto it = terms.find(m);
  if (it == terms.end()) {
    terms.emplace(m, c);
    return;
  }
  it->second = wrap_add(it->second, c);
  if (it->second == 0) terms.erase(it);
}

void Poly::add(const Poly& other, int64_t scale) {
  for (const auto& [m, c] : other.terms) add_term(m, wrap_mul(c, scale));
}

int64_t Poly::constant() const {
  auto it = terms.find(Monomial{});
  return it == terms.end() ? 0 : it->second;
}

Poly to_poly(const IndexExpr& e) {
  Poly p;
  switch (e.kind()) {
    case IndexKind::Const: p.add_term({}, e.as<IndexConst>()->value); break;
    case IndexKind::Mul: {
      auto m = e.as<IndexMul>();
      p.add_term(m->factors, m->coefficient);
      break;
    }
    case IndexKind::Add: {
      auto a = e.as<IndexAdd>();
      for (const auto& t : a->terms) p.add(to_poly(t));
      p.add_term({}, a->constant);
      break;
    }
    case IndexKind::Symbol:
    case IndexKind::Var:
    case IndexKind::FloorDiv:
    case IndexKind::Mod:
    case IndexKind::Min:
    case IndexKind::Max:
    case IndexKind::Indirect: p.add_term({e}, 1); break;
  }
  return p;
}

namespace {
IndexExpr term_expr(const Monomial& m, int64_t c) {
  if (m.empty()) return index_const(c);
  if (m.size() == 1 && c == 1) return m[0];
  return IndexExpr(std::make_shared<IndexMul>(c, m));
}
}  // namespace

IndexExpr from_poly(const Poly& p) {
  std::vector<IndexExpr> terms;
  int64_t constant = 0;
  for (const auto& [m, c] : p.terms) {
    if (m.empty()) {
      constant = c;
    } else {
      terms.push_back(term_expr(m, c));
    }
  }
  if (terms.empty()) return index_const(constant);
  if (terms.size() == 1 && constant == 0) return terms[0];
  return IndexExpr(std::make_shared<IndexAdd>(std::move(terms), constant));
}

Monomial monomial_mul(const Monomial& a, const Monomial& b) {
  Monomial out;
  out.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out),
             [](const IndexExpr& x, const IndexExpr& y) { return compare(x, y) < 0; });
  return out;
}

Poly poly_mul(const Poly& a, const Poly& b) {
  Poly out;
  for (const auto& [ma, ca] : a.terms) {
    for (const auto& [mb, cb] : b.terms) out.add_term(monomial_mul(ma, mb), wrap_mul(ca, cb));
  }
  return out;
}

bool monomial_divides(const Monomial& dm, int64_t dc, const Monomial& m, int64_t c, Monomial* qm,
                      int64_t* qc) {
  if (dc <= 0 || c % dc != 0) return false;
  Monomial rest;
  size_t i = 0;
  for (const auto& f : m) {
    if (i < dm.size() && compare(f, dm[i]) == 0) {
      ++i;
    } else {
      rest.push_back(f);
    }
  }
  if (i != dm.size()) return false;
  *qm = std::move(rest);
  *qc = c / dc;
  return true;
}

}  // namespace detail

}  // namespace cppi::ir
