#include "lowering/ir/index_affine.h"

#include <algorithm>

#include "lowering/ir/index_poly.h"
#include "support/status.h"

namespace cppi::ir {

std::optional<AffineForm> affine_form(const IndexExpr& e, const std::vector<IndexExpr>& vars) {
  std::vector<std::string> names;
  for (const auto& v : vars) {
    auto n = v.as<IndexVar>();
    if (!n) throw CompilerError(Error::internal(cat("affine_form: ", v, " is not a loop variable")));
    names.push_back(n->name);
  }
  auto position = [&](const IndexExpr& atom) -> int {
    if (auto v = atom.as<IndexVar>()) {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == v->name) return static_cast<int>(i);
      }
    }
    return -1;
  };
  std::vector<detail::Poly> strides(vars.size());
  detail::Poly offset;
  for (const auto& [m, c] : detail::to_poly(e).terms) {
    int which = -1;
    detail::Monomial rest;
    for (const auto& atom : m) {
      int pos = position(atom);
      if (pos >= 0) {
        if (which >= 0) return std::nullopt;  // product of two requested vars
        which = pos;
        continue;
      }
      if (atom.kind() != IndexKind::Var && atom.kind() != IndexKind::Symbol) {
        for (const auto& name : names) {
          if (depends_on(atom, name)) return std::nullopt;
        }
      }
      rest.push_back(atom);
    }
    (which >= 0 ? strides[which] : offset).add_term(rest, c);
  }
  AffineForm out;
  for (const auto& s : strides) out.strides.push_back(detail::from_poly(s));
  out.offset = detail::from_poly(offset);
  return out;
}

std::optional<AffineForm> affine_form_over_gathers(const IndexExpr& e, const std::vector<IndexExpr>& vars) {
  if (vars.empty()) return affine_form(e, vars);
  const std::string inner = vars.back().as<IndexVar>() ? vars.back().as<IndexVar>()->name : "";
  std::vector<IndexExpr> with_leaves = vars;
  const IndexExpr opaque = map_indirect(e, [&](const IndexExpr& leaf) {
    if (depends_on(leaf, inner)) return leaf;
    with_leaves.push_back(var(cat("gathered_position", with_leaves.size() - vars.size())));
    return with_leaves.back();
  });
  return affine_form(opaque, with_leaves);
}

std::optional<IndexExpr> coefficient(const IndexExpr& e, const IndexExpr& v) {
  auto form = affine_form(e, {v});
  if (!form) return std::nullopt;
  return form->strides[0];
}

bool selects_disjoint_elements(const IndexExpr& e, const std::vector<IndexExpr>& vars, const VarRanges& ranges) {
  // A position read from memory lies in [0, size) whatever it was read at:
  // each leaf is a variable of its own over that range.
  VarRanges with_positions = ranges;
  int leaves = 0;
  const IndexExpr opaque = map_indirect(e, [&](const IndexExpr& leaf) {
    const std::string name = cat("indirect_position", leaves++);
    with_positions[name] = leaf.as<IndexIndirect>()->size;
    return var(name);
  });
  std::optional<AffineForm> form = affine_form(opaque, vars);
  if (!form) return false;
  const IndexBounds rest = bounds(form->offset, with_positions);
  if (!rest.lo || !rest.hi) return false;
  struct Term {
    IndexExpr stride, extent;
  };
  std::vector<Term> terms;
  bool all_constant = true;
  for (size_t i = vars.size(); i-- > 0;) {  // innermost first
    auto extent = ranges.find(vars[i].as<IndexVar>()->name);
    if (extent == ranges.end()) return false;
    if (extent->second.is_constant(1)) continue;
    terms.push_back({form->strides[i], extent->second});
    all_constant = all_constant && form->strides[i].constant().has_value();
  }
  if (all_constant) {
    std::stable_sort(terms.begin(), terms.end(),
                     [](const Term& a, const Term& b) { return *a.stride.constant() < *b.stride.constant(); });
  }
  IndexExpr span = simplify(*rest.hi - *rest.lo, with_positions);
  for (const Term& t : terms) {
    if (!prove_positive(t.stride - span, with_positions)) return false;
    span = simplify(span + t.stride * (t.extent - 1), with_positions);
  }
  return true;
}

}  // namespace cppi::ir
