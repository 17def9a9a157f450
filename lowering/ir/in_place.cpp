#include "lowering/ir/in_place.h"

#include <algorithm>
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

IndexExpr stage_loop_var(size_t i) { return var(cat("stage_loop", i)); }

/// `index` with the stage's own loops renamed by position
/// (rename_stage_loops), and the extents of the variables it may then name.
Seen canonical(const IndexExpr& index, const Kernel& k, size_t stage) {
  VarRanges ranges;
  for (const Loop& l : k.outer) ranges[l.var.as<IndexVar>()->name] = l.extent;
  const std::vector<Loop>& loops = loops_of(k.stages[stage]);
  for (size_t i = 0; i < loops.size(); ++i) ranges[stage_loop_var(i).as<IndexVar>()->name] = loops[i].extent;
  return {rename_stage_loops(k, stage, index, stage_loop_var), ranges};
}

bool same_extents(const IndexExpr& f, const VarRanges& a, const VarRanges& b) {
  for (const std::string& v : free_vars(f)) {
    auto x = a.find(v), y = b.find(v);
    if (x == a.end() || y == b.end() || x->second != y->second) return false;
  }
  return true;
}

}  // namespace

bool can_write_over(const Kernel& k, const std::string& read, const std::string& written) {
  // An overlapped tail computes some elements twice: the second time would
  // load what the first stored.
  if (k.schedule.cpu.tail == TailKind::Overlapped) return false;
  // Not proven for scans: a GPU block scan loads a chunk of the row ahead
  // of the stores that carry the running value into it.
  if (scan_of(k)) return false;
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
  const auto& stage_loops = loops_of(k.stages[stored_stage]);
  std::vector<Loop> loops = k.outer;
  for (size_t i = 0; i < stage_loops.size(); ++i) loops.push_back({stage_loop_var(i), stage_loops[i].extent});
  // Each element of the stage's iteration space stores a distinct element.
  std::vector<IndexExpr> vars;
  for (const Loop& l : loops) vars.push_back(l.var);
  return indirect_values(stored->index).empty() && selects_disjoint_elements(stored->index, vars, stored->ranges);
}

}  // namespace cppi::ir
