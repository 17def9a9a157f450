#include "lowering/ir/index_affine.h"

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

std::optional<IndexExpr> coefficient(const IndexExpr& e, const IndexExpr& v) {
  auto form = affine_form(e, {v});
  if (!form) return std::nullopt;
  return form->strides[0];
}

}  // namespace cppi::ir
