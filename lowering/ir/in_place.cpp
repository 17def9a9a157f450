#include "lowering/ir/in_place.h"

#include <algorithm>
#include <map>
#include <optional>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::ir {
namespace {

/// An access to compare with the stored index: its index and the extents
/// of the loop variables visible where it happens.
struct Seen {
  IndexExpr index;
  VarRanges ranges;
};

/// `index` with the stage's own loop variables renamed by position (two
/// stages may name their loops differently: a softmax reduces over r0 and
/// stores over x1), and the extents of all visible variables so renamed.
Seen canonical(const IndexExpr& index, const Kernel& k, size_t stage) {
  const std::vector<Loop>& loops =
      std::visit([](const auto& s) -> const std::vector<Loop>& { return s.loops; }, k.stages[stage]);
  std::map<std::string, IndexExpr> rename;
  VarRanges ranges;
  for (const Loop& l : k.outer) ranges[l.var.as<IndexVar>()->name] = l.extent;
  for (size_t i = 0; i < loops.size(); ++i) {
    std::string name = cat("stage_loop", i);
    rename[loops[i].var.as<IndexVar>()->name] = var(name);
    ranges[name] = loops[i].extent;
  }
  return {substitute(index, rename), ranges};
}

bool same_extents(const IndexExpr& f, const VarRanges& a, const VarRanges& b) {
  for (const std::string& v : free_vars(f)) {
    auto x = a.find(v), y = b.find(v);
    if (x == a.end() || y == b.end() || x->second != y->second) return false;
  }
  return true;
}

/// Each element of the stage's iteration space stores a distinct element:
/// f = offset + sum s_i * v_i with every stride positive and larger than the
/// span of the smaller ones (innermost loops first, or by constant stride).
bool injective(const IndexExpr& f, const std::vector<Loop>& loops, const VarRanges& ranges) {
  if (!indirect_values(f).empty()) return false;
  std::vector<IndexExpr> vars;
  for (const Loop& l : loops) vars.push_back(l.var);
  std::optional<AffineForm> form = affine_form(f, vars);
  if (!form) return false;
  struct Term {
    IndexExpr stride, extent;
  };
  std::vector<Term> terms;
  bool all_constant = true;
  for (size_t i = loops.size(); i-- > 0;) {  // innermost first
    if (loops[i].extent.is_constant(1)) continue;
    terms.push_back({form->strides[i], loops[i].extent});
    all_constant = all_constant && form->strides[i].constant().has_value();
  }
  if (all_constant) {
    std::stable_sort(terms.begin(), terms.end(),
                     [](const Term& a, const Term& b) { return *a.stride.constant() < *b.stride.constant(); });
  }
  IndexExpr span = index_const(0);
  for (const Term& t : terms) {
    if (!prove_positive(t.stride - span, ranges)) return false;
    span = simplify(span + t.stride * (t.extent - 1), ranges);
  }
  return true;
}

}  // namespace

bool can_write_over(const Kernel& k, const std::string& read, const std::string& written) {
  std::optional<Seen> stored;  // the first store of `written`
  size_t stored_stage = 0;
  std::vector<Seen> accesses;  // loads of `read`, later stores of `written`
  bool after_store = false;
  auto loads_of_read = [&](const Expr& e, const IndexExpr* store_index, size_t stage) {
    std::vector<Access> found = reads(e);
    if (store_index)
      for (const Expr& v : indirect_values(*store_index))
        for (Access& a : reads(v)) found.push_back(std::move(a));
    for (const Access& a : found) {
      if (a.buffer->name != read) continue;
      if (after_store) return false;
      accesses.push_back(canonical(a.index, k, stage));
    }
    return true;
  };
  for (size_t i = 0; i < k.stages.size(); ++i) {
    if (const auto* r = std::get_if<ReductionStage>(&k.stages[i])) {
      if (!loads_of_read(r->body, nullptr, i)) return false;
      continue;
    }
    const auto& p = std::get<PointwiseStage>(k.stages[i]);
    for (const Store& st : p.stores) {
      if (!loads_of_read(st.value, &st.index, i)) return false;
      if (st.buffer->name == read) return false;
      if (st.buffer->name != written) continue;
      if (stored) {
        accesses.push_back(canonical(st.index, k, i));
      } else {
        stored = canonical(st.index, k, i);
        stored_stage = i;
      }
      after_store = true;
    }
  }
  if (!stored) return false;
  for (const Seen& a : accesses)
    if (a.index != stored->index || !same_extents(a.index, a.ranges, stored->ranges)) return false;
  const auto& stage_loops = std::get<PointwiseStage>(k.stages[stored_stage]).loops;
  std::vector<Loop> loops = k.outer;
  for (size_t i = 0; i < stage_loops.size(); ++i) loops.push_back({var(cat("stage_loop", i)), stage_loops[i].extent});
  return injective(stored->index, loops, stored->ranges);
}

}  // namespace cppi::ir
