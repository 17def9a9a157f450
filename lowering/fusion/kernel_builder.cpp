#include "lowering/fusion/kernel_builder.h"

#include <algorithm>
#include <map>
#include <set>

#include "lowering/fusion/fusion_node.h"
#include "lowering/fusion/legality.h"
#include "lowering/ir/expr_visitor.h"

namespace cppi::lowering::fusion {

using ir::Expr;
using ir::IndexExpr;

namespace {

/// A reduction result an earlier stage of the kernel holds.
struct LocalResult {
  std::vector<IndexExpr> writer_ranges;
  IndexExpr write_index;
  Expr value;  // the LocalRef
};

/// A value stored earlier in the same pointwise stage.
struct Forward {
  IndexExpr index;
  Expr value;
};

Expr masked(const Expr& mask, const Expr& value) {
  if (!mask.defined()) return value;
  return ir::where(mask, value, ir::Constant::make(0.0, value.dtype()));
}

class StageRewriter : public ir::ExprMutator {
 public:
  StageRewriter(const std::map<std::string, LocalResult>& locals, const std::map<std::string, Forward>& forwards,
                const ir::VarRanges& ranges)
      : locals_(locals), forwards_(forwards), ranges_(ranges) {}

 protected:
  Expr visit(const ir::Load& node) override {
    Expr base = ExprMutator::visit(node);
    const auto* l = base.as<ir::Load>();
    if (!l) return base;
    if (auto it = locals_.find(l->buffer->name); it != locals_.end()) {
      // As the legality check found the point (why_unmappable): a masked
      // load's point may hold only under its mask, where it is read.
      auto point = read_point(it->second.write_index, it->second.writer_ranges, l->index,
                              l->mask.defined() ? std::vector<Expr>{l->mask} : std::vector<Expr>{}, ranges_);
      if (point && is_identity(*point, point->size())) return masked(l->mask, it->second.value);
      // The kernel stores the result after its stages: a load of the buffer
      // would read what is not written yet.
      throw CompilerError(Error::internal(cat("fusion: a stage reads ", l->buffer->name, " at ", l->index,
                                              ", a result of an earlier stage of the kernel it cannot map")));
    }
    if (auto it = forwards_.find(l->buffer->name); it != forwards_.end() && !l->mask.defined()) {
      if (ir::simplify(l->index, ranges_) == it->second.index) return it->second.value;
    }
    return base;
  }

 private:
  const std::map<std::string, LocalResult>& locals_;
  const std::map<std::string, Forward>& forwards_;
  const ir::VarRanges& ranges_;
};

std::vector<ir::Loop> loops_from(const std::vector<IndexExpr>& extents, size_t first, IndexExpr (*var_of)(int)) {
  std::vector<ir::Loop> loops;
  for (size_t j = first; j < extents.size(); ++j) loops.push_back({var_of(static_cast<int>(j)), extents[j]});
  return loops;
}

std::set<std::string> buffer_names(const std::vector<ir::Access>& accesses) {
  std::set<std::string> out;
  for (const auto& a : accesses) out.insert(a.buffer->name);
  return out;
}

bool disjoint(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::none_of(a.begin(), a.end(), [&](const std::string& x) { return b.count(x) > 0; });
}

/// Whether stages `a` and `b` may run in either order: neither reads a
/// reduction result or a buffer the other produces, and they store
/// different buffers.
bool commute(const ir::Stage& a, const ir::Stage& b) {
  auto results = [](const ir::Stage& s) {
    auto r = std::get_if<ir::ReductionStage>(&s);
    return r ? std::set<std::string>(r->results.begin(), r->results.end()) : std::set<std::string>{};
  };
  auto refs = [](const ir::Stage& s) {
    std::set<std::string> out;
    for (const auto& v : ir::stage_values(s)) {
      for (const auto& name : ir::local_refs(v)) out.insert(name);
    }
    return out;
  };
  const auto reads_a = buffer_names(ir::reads(a)), reads_b = buffer_names(ir::reads(b));
  const auto writes_a = buffer_names(ir::writes(a)), writes_b = buffer_names(ir::writes(b));
  return disjoint(refs(a), results(b)) && disjoint(refs(b), results(a)) && disjoint(reads_a, writes_b) &&
         disjoint(writes_a, reads_b) && disjoint(writes_a, writes_b);
}

bool same_extents(const std::vector<ir::Loop>& a, const std::vector<ir::Loop>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].extent == b[i].extent)) return false;
  }
  return true;
}

/// Moves each looped pointwise stage up behind an earlier reduction over the
/// same loop extents (and the stages already joined to it) when it commutes
/// with every stage it passes, so a backend can run them in one pass
/// (ir::pass_run_end). In program order, mse_loss's mean division comes
/// between the sum and the scaled difference its backward reads.
void hoist_into_reduction_passes(std::vector<ir::Stage>& stages) {
  for (size_t j = 1; j < stages.size(); ++j) {
    const auto* pw = std::get_if<ir::PointwiseStage>(&stages[j]);
    if (!pw || pw->loops.empty()) continue;
    size_t target = j;
    for (size_t i = j; i-- > 0;) {
      if (!commute(stages[i], stages[j])) break;
      const auto* r = std::get_if<ir::ReductionStage>(&stages[i]);
      if (r && same_extents(r->loops, pw->loops)) {
        target = i + 1;
        break;
      }
    }
    while (target < j && std::holds_alternative<ir::PointwiseStage>(stages[target]) &&
           same_extents(ir::loops_of(stages[target]), pw->loops)) {
      ++target;
    }
    if (target < j) std::rotate(stages.begin() + static_cast<long>(target), stages.begin() + static_cast<long>(j),
                                stages.begin() + static_cast<long>(j) + 1);
  }
}

}  // namespace

ir::KernelPtr build_kernel(const Program& p, const Group& group, std::string name, std::vector<std::string> origins) {
  if (group.members.size() == 1 && is_scan(*p.nodes[group.members.front()])) {
    auto k = ir::single_node_kernel(*p.nodes[group.members.front()]);
    return ir::Kernel::make(std::move(name), k->device, k->outer, k->stages, ir::Schedule{}, std::move(origins));
  }
  size_t depth = group.outer.size();
  auto outer = loops_from(group.outer, 0, &ir::pointwise_var);
  std::vector<ir::Stage> stages;
  std::map<std::string, LocalResult> locals;
  std::set<std::string> result_names;
  std::vector<ir::Store> pending;  // reduction results to store, in a loop-less stage
  auto flush = [&] {
    if (!pending.empty()) stages.push_back(ir::PointwiseStage{{}, std::move(pending)});
    pending.clear();
  };
  for (const auto& planned : plan_stages(p, group.members, depth)) {
    if (planned.reduction) {
      const auto& node = *std::get<ir::ReductionNodePtr>(*p.nodes[planned.members.front()]);
      const std::map<std::string, Forward> no_forwards;
      auto ranges = node.var_ranges();
      StageRewriter rewrite(locals, no_forwards, ranges);
      std::vector<std::string> names;
      for (const char* suffix : ir::result_suffixes(node.kind)) {
        std::string base = c_identifier(suffix[0] ? node.name + "_" + suffix : node.name);
        std::string unique = base;
        for (int i = 1; !result_names.insert(unique).second; ++i) unique = cat(base, "_", i);
        names.push_back(unique);
      }
      auto stage = ir::ReductionStage::make(loops_from(node.reduction_ranges, 0, &ir::reduction_var), node.kind,
                                            rewrite.mutate(node.body), names);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const auto& out = node.outputs[i];
        if (!out.buffer) continue;
        pending.push_back(ir::Store::make(out.buffer, out.index, stage.result(i)));
        locals[out.buffer->name] = LocalResult{node.ranges, out.index, stage.result(i)};
      }
      stages.push_back(std::move(stage));
      continue;
    }
    const auto& first = *std::get<ir::PointwiseNodePtr>(*p.nodes[planned.members.front()]);
    ir::PointwiseStage stage{loops_from(first.ranges, depth, &ir::pointwise_var), {}};
    if (stage.loops.empty()) {
      stage.stores = std::move(pending);
      pending.clear();
    }
    std::map<std::string, Forward> forwards;
    for (int m : planned.members) {
      const auto& node = *std::get<ir::PointwiseNodePtr>(*p.nodes[m]);
      auto ranges = node.var_ranges();
      StageRewriter rewrite(locals, forwards, ranges);
      Expr value = rewrite.mutate(node.store.value);
      const auto& written = node.store.buffer->name;
      stage.stores.push_back(node.store.with(node.store.index, value));
      // A forwarded value is evaluated where it is used: not past a store to
      // something it loads (a copy_ into an input it read).
      for (auto it = forwards.begin(); it != forwards.end();) {
        auto loads = ir::reads(it->second.value);
        bool clobbered = std::any_of(loads.begin(), loads.end(), [&](const ir::Access& a) { return a.buffer->name == written; });
        it = clobbered ? forwards.erase(it) : std::next(it);
      }
      forwards[written] = Forward{ir::simplify(node.store.index, ranges), value};
    }
    stages.push_back(std::move(stage));
  }
  // Reduction results nobody stored yet go last: every later use in this
  // kernel reads the LocalRef, so only other kernels need the memory.
  flush();
  hoist_into_reduction_passes(stages);
  return ir::Kernel::make(std::move(name), group.device, outer, std::move(stages), ir::Schedule{}, std::move(origins));
}

std::vector<ir::KernelPtr> remove_dead_stores(const std::vector<ir::KernelPtr>& input,
                                              const std::function<bool(const std::string&)>& needed_outside) {
  std::vector<ir::KernelPtr> kernels = input;
  for (bool changed = true; changed;) {
    changed = false;
    std::set<std::string> loaded;
    for (const auto& k : kernels) {
      if (!k) continue;
      for (const auto& s : k->stages) {
        for (const auto& a : ir::reads(s)) loaded.insert(a.buffer->name);
      }
    }
    for (auto& k : kernels) {
      if (!k) continue;
      std::vector<ir::Stage> stages;
      bool kernel_changed = false;
      for (const auto& s : k->stages) {
        auto* pw = std::get_if<ir::PointwiseStage>(&s);
        if (!pw) {
          stages.push_back(s);
          continue;
        }
        ir::PointwiseStage kept{pw->loops, {}};
        for (const auto& st : pw->stores) {
          if (needed_outside(st.buffer->name) || loaded.count(st.buffer->name)) kept.stores.push_back(st);
        }
        kernel_changed |= kept.stores.size() != pw->stores.size();
        if (!kept.stores.empty()) stages.push_back(std::move(kept));
      }
      // A reduction stage whose results no later stage uses does nothing.
      std::set<std::string> used;
      for (const auto& s : stages) {
        for (const auto& v : ir::stage_values(s)) {
          for (const auto& name : ir::local_refs(v)) used.insert(name);
        }
      }
      std::vector<ir::Stage> live;
      for (const auto& s : stages) {
        auto* r = std::get_if<ir::ReductionStage>(&s);
        bool dead = r != nullptr;
        if (r) {
          for (const auto& name : r->results) dead = dead && !used.count(name);
        }
        if (dead) {
          kernel_changed = true;
        } else {
          live.push_back(s);
        }
      }
      if (!kernel_changed) continue;
      changed = true;
      k = live.empty() ? nullptr
                       : ir::Kernel::make(k->name, k->device, k->outer, std::move(live), k->schedule, k->origins);
    }
  }
  return kernels;
}

}  // namespace cppi::lowering::fusion
