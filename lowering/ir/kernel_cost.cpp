#include "lowering/ir/kernel_cost.h"

#include <map>
#include <set>
#include <string>

#include "lowering/ir/expr_visitor.h"

namespace cppi::ir {
namespace {

/// The product of the extents of those variables of `ranges` that `names` holds.
IndexExpr iterations_over(const std::set<std::string>& names, const VarRanges& ranges) {
  std::vector<IndexExpr> extents;
  for (const auto& [name, extent] : ranges)
    if (names.count(name)) extents.push_back(extent);
  return product(extents);
}

std::set<std::string> loop_names(const std::vector<Loop>& loops) {
  std::set<std::string> out;
  for (const auto& l : loops) out.insert(l.var.as<IndexVar>()->name);
  return out;
}

/// The elements each buffer's distinct accesses touch, summed per buffer.
/// Accesses are told apart by their index with the stage's loops renamed by
/// position, so the three passes of a softmax over x[x0, r0] are one access.
class Footprints {
 public:
  void add(const Kernel& k, size_t stage, const Access& a) {
    if (a.buffer->kind == BufferKind::KernelLocal) return;
    const VarRanges ranges = k.var_ranges(stage);
    const IndexExpr touched = iterations_over(free_vars(a.index), ranges);
    const IndexExpr canonical =
        rename_stage_loops(k, stage, a.index, [](size_t i) { return var(cat("stage_loop", i)); });
    auto& entry = buffers_[a.buffer->name];
    entry.buffer = a.buffer;
    auto [it, fresh] = entry.accesses.emplace(canonical.str(), touched);
    if (!fresh) it->second = simplify(max(it->second, touched));  // loops of other extents
  }

  /// Bytes over all buffers, each at most its whole size.
  IndexExpr bytes() const {
    std::vector<IndexExpr> terms;
    for (const auto& [name, entry] : buffers_) {
      std::vector<IndexExpr> touched;
      for (const auto& [index, elements] : entry.accesses) touched.push_back(elements);
      terms.push_back(simplify(min(sum(touched) * dtype_size(entry.buffer->dtype), entry.buffer->bytes())));
    }
    return sum(terms);
  }

 private:
  struct Entry {
    BufferPtr buffer;
    std::map<std::string, IndexExpr> accesses;  // canonical index -> elements
  };
  std::map<std::string, Entry> buffers_;
};

bool floating_op(const Expr& e) {
  if (const auto* u = e.as<Unary>()) return is_floating(u->operand.dtype());
  if (const auto* b = e.as<Binary>()) return is_floating(b->lhs.dtype());
  if (const auto* c = e.as<Compare>()) return is_floating(c->lhs.dtype());
  return false;
}

/// Floating-point operations of one element folded into a `kind` reduction.
int combine_flops(ReductionKind kind, DType body) {
  if (!is_floating(body)) return 0;
  // cppi_welford_add: weight + 1, delta = v - mean, mean + delta / weight, m2 + delta * (v - mean).
  return kind == ReductionKind::Welford ? 7 : 1;
}

/// FLOPs of stage `stage` of `k` over all its iterations.
IndexExpr stage_flops(const Kernel& k, size_t stage) {
  const Stage& s = k.stages[stage];
  const VarRanges ranges = k.var_ranges(stage);
  const std::set<std::string> inner = loop_names(loops_of(s));
  const IndexExpr outer = iterations_over(loop_names(k.outer), ranges);
  const IndexExpr every = outer * iterations_over(inner, ranges);
  std::vector<IndexExpr> terms;
  for (const Expr& e : post_order(stage_values(s))) {
    if (!floating_op(e)) continue;
    std::set<std::string> varying;
    for (const auto& v : free_vars(e))
      if (inner.count(v)) varying.insert(v);
    terms.push_back(outer * iterations_over(varying, ranges));
  }
  if (const auto* r = std::get_if<ReductionStage>(&s)) terms.push_back(every * combine_flops(r->kind, r->body.dtype()));
  if (const auto* sc = std::get_if<ScanStage>(&s)) terms.push_back(every * combine_flops(sc->kind, sc->body.dtype()));
  if (const auto* p = std::get_if<PointwiseStage>(&s)) {
    for (const auto& st : p->stores)
      if (st.accumulate && is_floating(st.buffer->dtype)) terms.push_back(every);
  }
  return sum(terms);
}

}  // namespace

KernelCost kernel_cost(const Kernel& k) {
  Footprints read, written;
  std::vector<IndexExpr> flops;
  std::set<std::string> stored;  // by an earlier stage
  for (size_t i = 0; i < k.stages.size(); ++i) {
    for (const auto& a : reads(k.stages[i]))
      if (!stored.count(a.buffer->name)) read.add(k, i, a);
    for (const auto& a : writes(k.stages[i])) written.add(k, i, a);
    for (const auto& a : writes(k.stages[i])) stored.insert(a.buffer->name);
    flops.push_back(stage_flops(k, i));
  }
  return KernelCost{read.bytes(), written.bytes(), sum(flops)};
}

}  // namespace cppi::ir
