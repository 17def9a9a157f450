#include "gpu_codegen/codegen/gpu_row_cache.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::gpu {

using namespace ir;

const std::vector<Loop>* row_cache_loops(const Kernel& k) {
  for (const auto& s : k.stages) {
    if (!loops_of(s).empty()) return &loops_of(s);
  }
  return nullptr;
}

IndexExpr row_cache_var(size_t i) { return var("rc" + std::to_string(i)); }

IndexExpr canonical_row_index(const Kernel& k, size_t stage, const IndexExpr& index) {
  return rename_stage_loops(k, stage, index, row_cache_var);
}

std::vector<CachedLoad> row_cached_loads(const Kernel& k) {
  std::vector<CachedLoad> out;
  const std::set<std::string> written = written_buffers(k);
  for (size_t i = 0; i < k.stages.size(); ++i) {
    const auto& loops = loops_of(k.stages[i]);
    if (loops.empty()) continue;
    for (const Expr& x : post_order(stage_values(k.stages[i]))) {
      const auto* l = x.as<Load>();
      if (!l) continue;
      if (l->mask.defined() || written.count(l->buffer->name)) continue;
      // A gather is cached only when it picks whole rows (an embedding's):
      // its positions are then computed once per row, before the fill.
      bool gathers_along_row = false;
      for (const auto& leaf : indirect_terms(l->index)) {
        for (const auto& lp : loops) gathers_along_row |= depends_on(leaf, lp.var.as<IndexVar>()->name);
      }
      if (gathers_along_row) continue;
      bool moves = false, per_row = false;
      for (const auto& lp : loops) moves |= depends_on(l->index, lp.var.as<IndexVar>()->name);
      for (const auto& lp : k.outer) per_row |= depends_on(l->index, lp.var.as<IndexVar>()->name);
      if (!moves || !per_row) continue;
      IndexExpr canon = canonical_row_index(k, i, l->index);
      bool seen = false;
      for (const auto& c : out) seen |= c.buffer->name == l->buffer->name && c.index == canon;
      if (!seen) out.push_back(CachedLoad{l->buffer, canon});
    }
  }
  return out;
}

std::optional<size_t> RowCache::load_at(const std::string& buffer, const IndexExpr& canonical_index) const {
  for (size_t c = 0; c < loads.size(); ++c) {
    if (loads[c].buffer->name == buffer && loads[c].index == canonical_index) return c;
  }
  return std::nullopt;
}

std::optional<size_t> RowCache::value_at(const Expr& canonical_value) const {
  for (size_t j = 0; j < values.size(); ++j) {
    if (ExprStructuralEqual{}(values[j], canonical_value)) return j;
  }
  return std::nullopt;
}

Expr canonical_row_value(const Kernel& k, size_t stage, const Expr& value) {
  std::map<std::string, IndexExpr> rename;
  const auto& loops = loops_of(k.stages.at(stage));
  for (size_t i = 0; i < loops.size(); ++i) rename[loops[i].var.as<IndexVar>()->name] = row_cache_var(i);
  return substitute_indices(value, rename);
}

namespace {

using ValueSet = std::unordered_set<Expr, ExprStructuralHash, ExprStructuralEqual>;

/// What a row cache's filling can compute of one stage's values: each node
/// made of cached loads and constants (through casts and arithmetic), with
/// its canonical form and whether it holds an operation other than a cast
/// and a load.
class StageValues {
 public:
  StageValues(const Kernel& k, size_t stage, const RowCache& cache) : roots_(stage_values(k.stages[stage])) {
    for (const Expr& x : post_order(roots_)) {
      Node n;
      switch (x.kind()) {
        case ExprKind::Constant: n.computable = true; break;
        case ExprKind::Load: {
          const auto* l = x.as<Load>();
          n.computable = !l->mask.defined() && cache.load_at(l->buffer->name, canonical_row_index(k, stage, l->index));
          n.loads = n.computable;
          break;
        }
        case ExprKind::Cast:
        case ExprKind::Unary:
        case ExprKind::Binary:
        case ExprKind::Compare:
        case ExprKind::Where: {
          n.computable = true;
          n.computes = x.kind() != ExprKind::Cast;
          for (const Expr& o : operands(x)) {
            const Node& on = nodes_.at(o.get());
            n.computable &= on.computable;
            n.computes |= on.computes;
            n.loads |= on.loads;
          }
          break;
        }
        default: break;
      }
      if (n.computable && n.computes && n.loads && !widens_candidate(x)) n.canonical = canonical_row_value(k, stage, x);
      nodes_.emplace(x.get(), std::move(n));
    }
  }

  const std::vector<Expr>& roots() const { return roots_; }

  /// A widening cast of a candidate (bfloat16 to float) is not one: the
  /// stages convert the cached value themselves, one shift, rather than
  /// keep it twice.
  bool widens_candidate(const Expr& x) const {
    const auto* c = x.as<Cast>();
    if (!c || !nodes_.at(c->value.get()).canonical.defined()) return false;
    const DType from = c->value.dtype(), to = c->dtype;
    return is_floating(from) && is_floating(to) && dtype_size(to) > dtype_size(from);
  }
  /// The canonical form of `x` when it is a candidate (computable, computes
  /// something, reads a load); undefined otherwise.
  const Expr& candidate(const Expr& x) const { return nodes_.at(x.get()).canonical; }

 private:
  struct Node {
    bool computable = false, computes = false, loads = false;
    Expr canonical;
  };
  std::vector<Expr> roots_;
  std::unordered_map<const ExprNode*, Node> nodes_;
};

}  // namespace

RowCache row_cache(const Kernel& k) {
  RowCache out;
  out.loads = row_cached_loads(k);
  if (out.loads.empty()) return out;
  std::vector<StageValues> stages;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    if (!loops_of(k.stages[i]).empty()) stages.emplace_back(k, i, out);
  }
  // How many stages compute each candidate.
  std::unordered_map<Expr, int, ExprStructuralHash, ExprStructuralEqual> stages_computing;
  for (const auto& s : stages) {
    ValueSet here;
    for (const Expr& x : post_order(s.roots())) {
      if (s.candidate(x).defined()) here.insert(s.candidate(x));
    }
    for (const Expr& c : here) ++stages_computing[c];
  }
  ValueSet chosen;
  for (const auto& s : stages) {
    auto shared = [&](const Expr& x) {
      const Expr& c = s.candidate(x);
      return c.defined() && stages_computing[c] >= 2;
    };
    for (const Expr& x : outermost_picks(s.roots(), shared)) {
      if (chosen.insert(s.candidate(x)).second) out.values.push_back(s.candidate(x));
    }
  }
  // The loads still read by the stages themselves.
  std::set<size_t> loads_read;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    if (loops_of(k.stages[i]).empty()) continue;
    auto outside = [&](const Expr& x) {
      return x.as<Load>() != nullptr || chosen.count(canonical_row_value(k, i, x)) > 0;
    };
    for (const Expr& x : outermost_picks(stage_values(k.stages[i]), outside)) {
      const auto* l = x.as<Load>();
      if (!l || l->mask.defined()) continue;
      if (auto c = out.load_at(l->buffer->name, canonical_row_index(k, i, l->index))) loads_read.insert(*c);
    }
  }
  out.live_arrays = out.values.size() + loads_read.size();
  return out;
}

namespace {

/// What a looped pointwise stage stores into a buffer with no other store.
struct StoredRow {
  size_t stage;
  IndexExpr index;  // canonical
  Expr value;
};

std::map<std::string, StoredRow> forwardable_stores(const Kernel& k) {
  const std::set<std::string> written = written_buffers(k);
  std::map<std::string, StoredRow> out;
  std::set<std::string> refused;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    const auto* p = std::get_if<PointwiseStage>(&k.stages[i]);
    const auto* scan = std::get_if<ScanStage>(&k.stages[i]);
    for (const Store& st : p ? p->stores : scan ? scan->stores : std::vector<Store>{}) {
      bool pure = p && !p->loops.empty() && !st.accumulate;
      for (const Expr& x : post_order({st.value})) {
        const auto* l = x.as<Load>();
        pure &= x.kind() != ExprKind::Random && !(l && written.count(l->buffer->name));
      }
      const std::string& name = st.buffer->name;
      if (!pure || out.count(name)) refused.insert(name);
      else out.emplace(name, StoredRow{i, canonical_row_index(k, i, st.index), st.value});
    }
  }
  for (const auto& name : refused) out.erase(name);
  return out;
}

/// Replaces, in stage `stage`'s values, the loads forwardable_stores serves.
class ForwardStores : public ExprMutator {
 public:
  ForwardStores(const Kernel& k, size_t stage, const std::map<std::string, StoredRow>& stored)
      : k_(k), stage_(stage), stored_(stored) {}

 protected:
  Expr visit(const Load& n) override {
    auto it = stored_.find(n.buffer->name);
    if (it == stored_.end() || n.mask.defined() || it->second.stage >= stage_ ||
        !(canonical_row_index(k_, stage_, n.index) == it->second.index)) {
      return ExprMutator::visit(n);
    }
    std::map<std::string, IndexExpr> rename;
    const auto& from = loops_of(k_.stages[it->second.stage]);
    const auto& to = loops_of(k_.stages[stage_]);
    for (size_t i = 0; i < from.size(); ++i) rename[from[i].var.as<IndexVar>()->name] = to[i].var;
    return substitute_indices(it->second.value, rename);
  }

 private:
  const Kernel& k_;
  const size_t stage_;
  const std::map<std::string, StoredRow>& stored_;
};

KernelPtr forward_once(const KernelPtr& kernel) {
  const Kernel& k = *kernel;
  if (!uniform_stage_loops(k.stages)) return kernel;
  const std::map<std::string, StoredRow> stored = forwardable_stores(k);
  if (stored.empty()) return kernel;
  bool changed = false;
  std::vector<Stage> stages = k.stages;
  for (size_t j = 0; j < stages.size(); ++j) {
    if (loops_of(stages[j]).empty()) continue;
    ForwardStores forward(k, j, stored);
    if (auto* r = std::get_if<ReductionStage>(&stages[j])) {
      const Expr body = forward.mutate(r->body);
      changed |= !body.same_as(r->body);
      r->body = body;
    } else if (auto* p = std::get_if<PointwiseStage>(&stages[j])) {
      for (Store& st : p->stores) {
        const Expr value = forward.mutate(st.value);
        changed |= !value.same_as(st.value);
        st = st.with(st.index, value);
      }
    }
  }
  if (!changed) return kernel;
  return Kernel::make(k.name, k.device, k.outer, std::move(stages), k.schedule, k.origins);
}

}  // namespace

KernelPtr forward_row_stores(const KernelPtr& kernel) {
  // A forwarded value may make another store's value pure (u = t + b once t
  // is computed in place): again until nothing changes, at most once per stage.
  KernelPtr k = kernel;
  for (size_t round = 0; round < kernel->stages.size(); ++round) {
    KernelPtr next = forward_once(k);
    if (next == k) break;
    k = std::move(next);
  }
  return k;
}

}  // namespace cppi::gpu
