/// \file
/// Internal to lowering/ir: the polynomial view of a canonical index
/// expression (monomial -> coefficient) that the factories, the simplifier and
/// the affine decomposition share. Not part of the IR's public API.
#pragma once

#include <map>
#include <vector>

#include "lowering/ir/index_expr.h"

namespace cppi::ir::detail {

/// A product of atoms (Symbol, Var, FloorDiv, Mod, Min, Max, Indirect), sorted by
/// compare(); the empty monomial is the constant term.
using Monomial = std::vector<IndexExpr>;

/// Canonical order of the terms of a sum: terms over loop variables first
/// (ordered by their variables), then terms over symbols only, the constant last.
struct TermLess {
  bool operator()(const Monomial& a, const Monomial& b) const;
};

struct Poly {
  std::map<Monomial, int64_t, TermLess> terms;  // no zero coefficients

  void add_term(const Monomial& m, int64_t c);
  void add(const Poly& other, int64_t scale = 1);
  int64_t constant() const;
  bool is_zero() const { return terms.empty(); }
};

Poly to_poly(const IndexExpr& e);
IndexExpr from_poly(const Poly& p);
Poly poly_mul(const Poly& a, const Poly& b);
/// Merges two sorted monomials.
Monomial monomial_mul(const Monomial& a, const Monomial& b);
/// If `divisor` (a monomial with coefficient `dc` > 0) divides c*m, the quotient.
bool monomial_divides(const Monomial& dm, int64_t dc, const Monomial& m, int64_t c,
                      Monomial* qm, int64_t* qc);

int64_t wrap_add(int64_t a, int64_t b);
int64_t wrap_mul(int64_t a, int64_t b);
int64_t py_floordiv(int64_t a, int64_t b);
int64_t py_mod(int64_t a, int64_t b);
bool is_atom(const IndexExpr& e);
/// Throws an internal CompilerError naming `what` when `e` is null.
void require_defined(const IndexExpr& e, const char* what);

}  // namespace cppi::ir::detail
