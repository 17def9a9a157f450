#include "lowering/fusion/loop_merge.h"

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::lowering::fusion {
namespace {

using ir::IndexExpr;

/// Every index stage `s` computes: its loads', index values', random
/// offsets' and stores' (indirect leaves' values included).
void collect_indices(const ir::Stage& s, std::vector<IndexExpr>& out) {
  auto record = [&](const ir::Expr& e) {
    ir::map_indices(e, [&](const IndexExpr& index) {
      out.push_back(index);
      return index;
    });
  };
  if (const auto* r = std::get_if<ir::ReductionStage>(&s)) {
    record(r->body);
    return;
  }
  const auto* scan = std::get_if<ir::ScanStage>(&s);
  if (scan) record(scan->body);
  for (const auto& st : scan ? scan->stores : std::get<ir::PointwiseStage>(s).stores) {
    record(st.value);
    out.push_back(st.index);
    for (const auto& v : ir::indirect_values(st.index)) record(v);
  }
}

/// Whether every index walks loops `outer` and `inner` (extent `inner_extent`) as one.
bool walks_as_one(const std::vector<IndexExpr>& indices, const IndexExpr& outer, const IndexExpr& inner,
                  const IndexExpr& inner_extent) {
  for (const auto& index : indices) {
    auto form = ir::affine_form(index, {outer, inner});
    if (!form || !(form->strides[0] == form->strides[1] * inner_extent)) return false;
  }
  return true;
}

/// The stage with `outer`'s variable gone from every index: with the checks
/// above, offset + s_o * o + s_i * i becomes offset + s_i * i over the merged i.
ir::Stage without_var(const ir::Stage& s, const std::string& var) {
  const std::map<std::string, IndexExpr> zero = {{var, ir::index_const(0)}};
  if (const auto* r = std::get_if<ir::ReductionStage>(&s)) {
    return ir::ReductionStage::make(r->loops, r->kind, ir::substitute_indices(r->body, zero), r->results);
  }
  if (const auto* scan = std::get_if<ir::ScanStage>(&s)) {
    ir::ScanStage out = *scan;
    out.body = ir::substitute_indices(scan->body, zero);
    for (auto& st : out.stores) st = st.with(ir::substitute(st.index, zero), ir::substitute_indices(st.value, zero));
    return out;
  }
  ir::PointwiseStage p = std::get<ir::PointwiseStage>(s);
  for (auto& st : p.stores) st = st.with(ir::substitute(st.index, zero), ir::substitute_indices(st.value, zero));
  return p;
}

std::vector<ir::Loop>& loops_of_mut(ir::Stage& s) {
  return std::visit([](auto& st) -> std::vector<ir::Loop>& { return st.loops; }, s);
}

/// Merges one pair of outer loops; false when none qualifies.
bool merge_one_outer(std::vector<ir::Loop>& outer, std::vector<ir::Stage>& stages) {
  std::vector<IndexExpr> indices;
  for (const auto& s : stages) collect_indices(s, indices);
  for (size_t i = outer.size(); i-- > 1;) {
    const ir::Loop &o = outer[i - 1], &in = outer[i];
    if (!walks_as_one(indices, o.var, in.var, in.extent)) continue;
    const std::string gone = o.var.as<ir::IndexVar>()->name;
    for (auto& s : stages) s = without_var(s, gone);
    outer[i].extent = o.extent * in.extent;
    outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(i - 1));
    return true;
  }
  return false;
}

/// Merges one pair of stage-loop positions in every looped stage; false when none qualifies.
bool merge_one_in_stages(std::vector<ir::Stage>& stages) {
  const std::vector<ir::Loop>* shape = ir::first_stage_loops(stages);
  if (!shape || shape->size() < 2 || !ir::uniform_stage_loops(stages)) return false;
  const size_t n = shape->size();
  for (size_t i = n; i-- > 1;) {
    bool all = true;
    for (const auto& s : stages) {
      const auto& loops = ir::loops_of(s);
      if (loops.empty()) continue;
      std::vector<IndexExpr> indices;
      collect_indices(s, indices);
      all = all && walks_as_one(indices, loops[i - 1].var, loops[i].var, loops[i].extent);
    }
    if (!all) continue;
    for (auto& s : stages) {
      if (ir::loops_of(s).empty()) continue;
      const std::string gone = ir::loops_of(s)[i - 1].var.as<ir::IndexVar>()->name;
      s = without_var(s, gone);
      auto& loops = loops_of_mut(s);
      loops[i].extent = loops[i - 1].extent * loops[i].extent;
      loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(i - 1));
    }
    return true;
  }
  return false;
}

}  // namespace

ir::KernelPtr merge_contiguous_loops(const ir::KernelPtr& k) {
  if (!k) return k;
  std::vector<ir::Loop> outer = k->outer;
  std::vector<ir::Stage> stages = k->stages;
  bool changed = false;
  while (merge_one_outer(outer, stages)) changed = true;
  while (merge_one_in_stages(stages)) changed = true;
  if (!changed) return k;
  return ir::Kernel::make(k->name, k->device, std::move(outer), std::move(stages), k->schedule, k->origins);
}

}  // namespace cppi::lowering::fusion
