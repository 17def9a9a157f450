#include "lowering/fusion/fusion.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "lowering/fusion/fusion_node.h"
#include "lowering/fusion/kernel_builder.h"
#include "lowering/fusion/legality.h"
#include "lowering/fusion/loop_merge.h"
#include "lowering/fusion/loop_order.h"
#include "lowering/fusion/program.h"
#include "lowering/ir/index_affine.h"

namespace cppi::lowering {

using fusion::Program;

namespace {

/// Candidate remarks, one per (a, b) pair, emitted at the end only for pairs
/// that did not end up in one kernel.
class RefusalLog {
 public:
  void add(const Program& p, size_t a, size_t b, std::string reason) {
    auto key = std::make_pair(a, b);
    auto it = index_.find(key);
    if (it == index_.end()) {
      index_[key] = entries_.size();
      entries_.push_back({a, b, fusion::display_name(*p.nodes[a]), fusion::display_name(*p.nodes[b]),
                          traffic_between(p, a, b), {}});
      it = index_.find(key);
    }
    auto& reasons = entries_[it->second].reasons;
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(std::move(reason));
  }

  /// `kernel_of[item]`: the kernels an item's computation ended up in.
  void emit(const std::vector<std::set<int>>& kernels_of, Remarks& remarks) const {
    // In program order of the later node, then of the earlier one.
    auto entries = entries_;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& x, const Entry& y) { return std::tie(x.b, x.a) < std::tie(y.b, y.a); });
    for (const auto& e : entries) {
      const auto& ka = kernels_of[e.a];
      const auto& kb = kernels_of[e.b];
      bool together = std::any_of(ka.begin(), ka.end(), [&](int k) { return kb.count(k) > 0; });
      if (together) continue;
      std::string reason;
      for (const auto& r : e.reasons) reason += (reason.empty() ? "" : "; ") + r;
      remarks.add(Remark{Remark::Kind::FusionRefusal, e.a_name, "", e.b_name, reason, e.bytes});
    }
  }

 private:
  struct Entry {
    size_t a, b;
    std::string a_name, b_name;
    int64_t bytes;
    std::vector<std::string> reasons;
  };

  /// Bytes written by `a` and read back by `b` (twice the intermediates' size;
  /// graph outputs are written anyway, so they count once); -1 if symbolic or none.
  static int64_t traffic_between(const Program& p, size_t a, size_t b) {
    int64_t total = 0;
    bool any = false;
    for (const auto& w : ir::writes(*p.nodes[a])) {
      if (!p.reads[b].count(w.buffer->name)) continue;
      const auto once = w.buffer->bytes().constant();
      if (!once) return -1;
      total += w.buffer->kind == ir::BufferKind::Intermediate ? 2 * *once : *once;
      any = true;
    }
    return any ? total : -1;
  }
  std::map<std::pair<size_t, size_t>, size_t> index_;
  std::vector<Entry> entries_;
};

std::string kernel_name(size_t index, const std::vector<std::string>& origins, const std::string& fallback) {
  std::string base = fusion::c_identifier(origins.empty() ? fallback : origins.front());
  if (base.front() == '_') base.erase(0, 1);
  return cat("kernel", index, "_", base);
}

ir::KernelPtr renamed(const ir::KernelPtr& k, std::string name) {
  return ir::Kernel::make(std::move(name), k->device, k->outer, k->stages, k->schedule, k->origins);
}

std::vector<BufferBinding> used_buffers(const LoweredGraph& lowered, const std::vector<FusedGraph::Item>& program) {
  std::set<std::string> used;
  for (const auto& item : program) {
    if (auto k = std::get_if<ir::KernelPtr>(&item)) {
      for (const auto& arg : ir::signature(**k).buffers) used.insert(arg.buffer->name);
    }
  }
  std::vector<BufferBinding> out;
  for (const auto& b : lowered.buffers) {
    if (used.count(b.buffer->name)) out.push_back(b);
  }
  return out;
}

FusedGraph one_kernel_per_node(const LoweredGraph& lowered) {
  FusedGraph out;
  size_t count = 0;
  for (const auto& item : lowered.program) {
    if (auto a = std::get_if<AtenItem>(&item)) {
      out.program.push_back(*a);
      continue;
    }
    const auto& node = std::get<ir::ComputeNode>(item);
    auto k = ir::single_node_kernel(node);
    out.program.push_back(renamed(k, kernel_name(count++, k->origins, k->name)));
  }
  out.buffers = lowered.buffers;
  return out;
}

/// The reader's loop variables a read point (one index per producer dim) uses.
std::set<std::string> vars_of_point(const std::vector<ir::IndexExpr>& point) {
  std::set<std::string> used;
  for (const auto& e : point) {
    for (const auto& v : ir::free_vars(e)) used.insert(v);
  }
  return used;
}

/// Whether some read repeats a producer element along a loop of its reader
/// (a reader loop of extent > 1 that the producer point does not use).
bool any_broadcast(const Program& p, const std::vector<size_t>& readers, const std::vector<fusion::ReadMap>& maps) {
  for (size_t r = 0; r < readers.size(); ++r) {
    const auto ranges = fusion::var_ranges_of(*p.nodes[readers[r]]);
    for (const auto& point : maps[r].points) {
      const std::set<std::string> used = vars_of_point(point);
      for (const auto& [var, extent] : ranges) {
        if (!used.count(var) && !extent.is_constant(1)) return true;
      }
    }
  }
  return false;
}

/// Distinct buffers `producer` loads element for element: with an index that
/// uses every one of its loop variables of extent other than 1 (a bias or a
/// row statistic it broadcasts costs little to load again).
int whole_loads(const ir::ComputeNode& producer) {
  std::set<std::string> loop_vars;
  for (const auto& [var, extent] : fusion::var_ranges_of(producer)) {
    if (!extent.is_constant(1)) loop_vars.insert(var);
  }
  std::set<std::string> buffers;
  for (const auto& a : ir::reads(fusion::value_of(producer))) {
    const auto used = ir::free_vars(a.index);
    if (std::includes(used.begin(), used.end(), loop_vars.begin(), loop_vars.end())) buffers.insert(a.buffer->name);
  }
  return static_cast<int>(buffers.size());
}

/// Whether some pointwise reader reads a producer element that varies along
/// the reader's last range (its innermost loop) and repeats along earlier
/// ones at least `min_repeats` times (a symbolic extent counts as many): no
/// loop-invariant hoisting can then save recomputing it.
bool any_outer_broadcast(const Program& p, const std::vector<size_t>& readers,
                         const std::vector<fusion::ReadMap>& maps, int64_t min_repeats) {
  for (size_t r = 0; r < readers.size(); ++r) {
    const auto* reader = std::get_if<ir::PointwiseNodePtr>(&*p.nodes[readers[r]]);
    if (!reader || (*reader)->ranges.size() < 2) continue;
    const auto vars = (*reader)->vars();
    const std::string inner = vars.back().as<ir::IndexVar>()->name;
    for (const auto& point : maps[r].points) {
      const std::set<std::string> used = vars_of_point(point);
      if (!used.count(inner)) continue;
      int64_t repeats = 1;
      for (size_t i = 0; i + 1 < vars.size(); ++i) {
        if (used.count(vars[i].as<ir::IndexVar>()->name)) continue;
        const auto extent = (*reader)->ranges[i].constant();
        repeats = extent ? repeats * std::min<int64_t>(*extent, min_repeats) : min_repeats;
        if (repeats >= min_repeats) return true;
      }
    }
  }
  return false;
}

/// Why no pointwise reader should recompute `producer` in an order that
/// takes the producer's innermost variable outward (a permuted read), or
/// nullopt. Work that does not depend on that variable (the position an
/// embedding row is gathered from, computed from the query and key of a
/// relative position bias) runs once per row in the producer's own kernel,
/// hoisted out of its innermost loop; in a reader whose innermost loop the
/// producer's value moves along it runs for every element. Stored once
/// instead where that work costs more than `turned_outward_cost`.
std::optional<std::string> why_not_turn_outward(const Program& p, const ir::PointwiseNode& producer,
                                                const std::vector<size_t>& readers,
                                                const std::vector<fusion::ReadMap>& maps,
                                                const fusion::FusionHeuristics& heuristics) {
  const auto producer_vars = producer.vars();
  if (producer_vars.size() < 2) return std::nullopt;
  const std::string inner = producer_vars.back().as<ir::IndexVar>()->name;
  const auto extent = producer.ranges.back().constant();
  const int64_t repeats = extent ? *extent : heuristics.outer_broadcast_repeats;
  const int cost = fusion::invariant_cost(producer.store.value, inner);
  if (repeats < 2 || cost <= heuristics.turned_outward_cost) return std::nullopt;
  for (size_t r = 0; r < readers.size(); ++r) {
    const auto* reader = std::get_if<ir::PointwiseNodePtr>(&*p.nodes[readers[r]]);
    if (!reader || (*reader)->ranges.empty()) continue;
    const std::string reader_inner = (*reader)->vars().back().as<ir::IndexVar>()->name;
    for (const auto& point : maps[r].points) {
      if (point.size() != producer_vars.size() || ir::free_vars(point.back()).count(reader_inner)) continue;
      // A value that does not move along the reader's innermost loop is
      // hoisted out of it whole.
      if (!vars_of_point(point).count(reader_inner)) continue;
      return cat("its reader loops over the producer's innermost dim outside its own innermost loop: work that "
                 "does not depend on that dim (cost ", cost, ") would run for each of its ", repeats, " positions");
    }
  }
  return std::nullopt;
}

/// The loop variable a node's innermost loop runs over: its last reduction
/// variable (a reduction's or a scan's stage loop), else its last range.
std::optional<std::string> innermost_var(const ir::ComputeNode& n) {
  if (const auto* r = std::get_if<ir::ReductionNodePtr>(&n); r && !(*r)->reduction_ranges.empty()) {
    return (*r)->reduction_vars().back().as<ir::IndexVar>()->name;
  }
  if (std::holds_alternative<ir::ScanNodePtr>(n)) return ir::reduction_vars(1).back().as<ir::IndexVar>()->name;
  const auto vars = std::visit([](const auto& node) { return node->vars(); }, n);
  if (vars.empty()) return std::nullopt;
  return vars.back().as<ir::IndexVar>()->name;
}

/// Why readers should not recompute `producer` (above cheap_cost, read at
/// more than one place) when it loads a buffer across a reader's innermost
/// loop, or nullopt (see FusionHeuristics::store_gathered_producers).
std::optional<std::string> why_not_gather_again(const Program& p, const ir::PointwiseNode& producer,
                                                const std::vector<size_t>& readers,
                                                const std::vector<fusion::ReadMap>& maps, int cost, int reads,
                                                const fusion::FusionHeuristics& heuristics) {
  if (!heuristics.store_gathered_producers || reads < 2 || cost <= heuristics.cheap_cost) return std::nullopt;
  if (producer.store.buffer->device == ir::Device::CUDA) {
    const auto elements = ir::product(producer.ranges).constant();
    if (elements && *elements < heuristics.cuda_min_gathered_producer_elements) return std::nullopt;
  }
  const auto producer_vars = producer.vars();
  const auto loads = ir::reads(producer.store.value);
  for (size_t r = 0; r < readers.size(); ++r) {
    const auto inner = innermost_var(*p.nodes[readers[r]]);
    if (!inner) continue;
    const ir::IndexExpr inner_var = ir::var(*inner);
    const auto unit_stride = [&](const ir::IndexExpr& index) {
      const auto c = ir::coefficient(index, inner_var);
      const auto stride = c ? c->constant() : std::nullopt;
      return stride && (*stride == 1 || *stride == -1);
    };
    for (size_t k = 0; k < maps[r].points.size(); ++k) {
      const auto& point = maps[r].points[k];
      // Only where the reader reads the producer's output contiguously: a
      // reader that reads it across rows itself (a column sum) is
      // vectorised along another loop, where the recompute's loads move
      // as its own do.
      if (point.size() != producer_vars.size() || !unit_stride(maps[r].accesses[k].index)) continue;
      const auto at = fusion::at_point(producer, point);
      for (const auto& load : loads) {
        const ir::IndexExpr index = ir::substitute(load.index, at);
        if (!ir::free_vars(index).count(*inner) || unit_stride(index)) continue;
        return cat("it is read at ", reads, " places and loads ", load.buffer->name,
                   " across the innermost loop a reader reads it along: each would gather it again and recompute ",
                   "its work (cost ", cost, ")");
      }
    }
  }
  return std::nullopt;
}

/// A producer that only transforms reductions' results (rsqrt(m2 / N + eps))
/// within `expensive_cost`: its value is fixed per outer position, so a
/// reader's inner loop computes it once after loop-invariant hoisting.
bool cheap_epilogue_of_reductions(const Program& p, const ir::PointwiseNode& producer,
                                  const fusion::FusionHeuristics& heuristics) {
  if (fusion::recompute_cost(producer.store.value) > heuristics.expensive_cost) return false;
  for (const auto& a : ir::reads(producer.store.value)) {
    auto w = p.writers.find(a.buffer->name);
    if (w == p.writers.end() || w->second.empty()) return false;
    for (size_t writer : w->second)
      if (!p.nodes[writer] || !fusion::is_reduction(*p.nodes[writer])) return false;
  }
  return true;
}

/// Step 2: substitute pointwise producers into their readers. A producer
/// whose buffer is needed outside (a graph output, an ATen call's input)
/// stays and is stored, but a cheap epilogue of reductions is still
/// substituted into its readers: layer_norm in training returns mean = sum / N, and a reader that
/// loaded it from a loop-less stage could not share the kernel on CUDA
/// (BackendCapability::stages_read_other_positions), which split the forward
/// norm into a stats kernel and a second pass over the rows.
void inline_producers(Program& p, const fusion::FusionHeuristics& heuristics, RefusalLog& log) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p.nodes[i] || !std::holds_alternative<ir::PointwiseNodePtr>(*p.nodes[i])) continue;
    auto producer = std::get<ir::PointwiseNodePtr>(*p.nodes[i]);
    const std::string& buffer = producer->store.buffer->name;
    const bool keep = p.needed_outside(buffer);
    if (keep && !cheap_epilogue_of_reductions(p, *producer, heuristics)) continue;
    bool sole_writer = p.writers[buffer] == std::set<size_t>{i};
    std::vector<size_t> readers(p.readers[buffer].begin(), p.readers[buffer].end());
    bool readers_after = readers.empty() || readers.front() > i;
    if (!sole_writer || !readers_after || readers.empty()) continue;
    std::vector<fusion::ReadMap> maps(readers.size());
    bool refused = false;
    int reads = 0;
    for (size_t r = 0; r < readers.size(); ++r) {
      if (auto why = fusion::why_not_inline(p, i, readers[r], &maps[r])) {
        log.add(p, i, readers[r], *why);
        refused = true;
      }
      reads += static_cast<int>(maps[r].accesses.size());
    }
    if (refused) continue;
    // An exact comparison next to other readers: each kernel would recompute
    // the value on its own, and vector math of another width (or the scalar
    // tail) may round its last bit otherwise, so `x == amin(x)` could find no
    // match and amin's gradient divide by zero.
    if (readers.size() > 1 && fusion::varies_across_kernels(producer->store.value)) {
      for (size_t r : readers) {
        if (!fusion::compares_exactly(fusion::value_of(*p.nodes[r]), buffer)) continue;
        for (size_t o : readers) {
          log.add(p, i, o, "an exact comparison (eq/ne) reads it: recomputed in several kernels, its math may round "
                           "its last bit differently");
        }
        refused = true;
        break;
      }
    }
    if (refused) continue;
    // A host scalar's arithmetic in a CUDA kernel costs a few instructions
    // a thread; left on the CPU it is a kernel of its own, compiled for one
    // element (g++ where the build has no JIT).
    const bool host_scalar = fusion::computes_host_scalar(*p.nodes[i], ir::Device::CUDA) &&
                             std::all_of(readers.begin(), readers.end(), [&](size_t r) {
                               return fusion::device_of(*p.nodes[r]) == ir::Device::CUDA;
                             });
    int cost = fusion::recompute_cost(producer->store.value);
    // CPU only: the GPU's column kernels have idle ALUs next to their loads,
    // and keep Inductor's rule.
    const bool outer_broadcast =
        producer->store.buffer->device == ir::Device::CPU &&
        any_outer_broadcast(p, readers, maps, heuristics.outer_broadcast_repeats);
    auto why = fusion::why_not_recompute(heuristics, cost, reads, any_broadcast(p, readers, maps), outer_broadcast);
    if (!why) {
      why = fusion::why_not_reload(heuristics, whole_loads(*p.nodes[i]), reads,
                                   producer->store.buffer->device == ir::Device::CUDA);
    }
    if (!why && producer->store.buffer->device == ir::Device::CPU) {
      why = why_not_turn_outward(p, *producer, readers, maps, heuristics);
    }
    if (!why) why = why_not_gather_again(p, *producer, readers, maps, cost, reads, heuristics);
    if (why && !host_scalar) {
      for (size_t r : readers) log.add(p, i, r, *why);
      continue;
    }
    std::vector<ir::ComputeNode> inlined;
    for (size_t r = 0; r < readers.size() && !refused; ++r) {
      size_t j = readers[r];
      auto origins = fusion::origins_of(*p.nodes[j]);
      for (const auto& o : producer->origins) {
        if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
      }
      inlined.push_back(fusion::inline_producer(*p.nodes[j], *producer, maps[r].accesses, maps[r].points, origins));
      // A load the substitution cannot reach (inside an indirect index) would
      // read a buffer that is no longer written.
      if (fusion::read_buffers(inlined.back()).count(buffer)) {
        log.add(p, i, j, "consumer reads the producer where it cannot be inlined (inside an indirect index)");
        refused = true;
      }
    }
    if (refused) continue;
    for (size_t r = 0; r < readers.size(); ++r) {
      size_t j = readers[r];
      p.set_node(j, inlined[r]);
      if (!keep) p.absorbed[j].insert(p.absorbed[j].end(), p.absorbed[i].begin(), p.absorbed[i].end());
    }
    if (!keep) p.remove_node(i);
  }
}

bool meets(const std::set<std::string>& a, const std::set<std::string>& b) { return !fusion::first_common(a, b).empty(); }

/// How strongly `node` relates to `group`, and the member it relates to most.
std::pair<fusion::Affinity, int> affinity(const Program& p, const fusion::Group& group, size_t node) {
  std::pair<fusion::Affinity, int> best{fusion::Affinity::None, -1};
  for (int m : group.members) {
    fusion::Affinity a = fusion::Affinity::None;
    if (meets(p.writes[m], p.reads[node])) {
      a = fusion::Affinity::Producer;
    } else if (meets(p.reads[m], p.reads[node]) || meets(p.reads[m], p.writes[node])) {
      a = fusion::Affinity::SharedRead;
    }
    if (a > best.first) best = {a, m};
  }
  return best;
}

/// Whether a pointwise node stores with stride 1 along its innermost loop
/// (reductions and loop-less nodes count as contiguous).
bool stores_contiguous(const ir::ComputeNode& n) {
  auto pw = std::get_if<ir::PointwiseNodePtr>(&n);
  if (!pw || (*pw)->ranges.empty()) return true;
  auto stride = ir::coefficient((*pw)->store.index, ir::pointwise_var(static_cast<int>((*pw)->ranges.size()) - 1));
  return stride && stride->is_constant(1);
}

/// Whether pointwise stage `stage` of a kernel without outer loops can run in
/// the pass of its one reduction (BackendCapability::pointwise_in_split_reductions):
/// a sum, max or min over the same loop extents, and no data flows between
/// the stage's nodes and the kernel's other nodes.
bool runs_in_reduction_pass(const Program& p, const std::vector<fusion::PlannedStage>& planned,
                            const fusion::PlannedStage& stage) {
  const fusion::PlannedStage* reduction = nullptr;
  for (const auto& s : planned) {
    if (!s.reduction) continue;
    if (reduction) return false;
    reduction = &s;
  }
  if (!reduction || stage.loops.empty() || reduction->loops != stage.loops) return false;
  const auto& red = *std::get<ir::ReductionNodePtr>(*p.nodes[reduction->members.front()]);
  if (red.kind != ir::ReductionKind::Sum && red.kind != ir::ReductionKind::Max && red.kind != ir::ReductionKind::Min)
    return false;
  for (const auto& other : planned) {
    if (&other == &stage) continue;
    for (int m : other.members) {
      for (int x : stage.members) {
        if (meets(p.reads[x], p.writes[m]) || meets(p.writes[x], p.reads[m]) || meets(p.writes[x], p.writes[m]))
          return false;
      }
    }
  }
  return true;
}

/// Why `node` should not join `group`, asking the three layers in turn.
std::optional<std::string> why_not_join(const Program& p, const fusion::Grouping& g, size_t group, size_t node,
                                        const std::optional<fusion::MoveBarrier>& barrier, fusion::Affinity affinity,
                                        const FusionOptions& options) {
  if (auto why = fusion::why_not_grow(options.heuristics, g.groups[group].members.size() + 1)) return why;
  if (affinity == fusion::Affinity::None) {
    bool contiguous = true;
    for (int m : g.groups[group].members) contiguous = contiguous && stores_contiguous(*p.nodes[m]);
    if (auto why = fusion::why_not_fuse_independent(contiguous, stores_contiguous(*p.nodes[node]))) return why;
    if (!options.capability(g.groups[group].device).horizontal_reductions &&
        (g.groups[group].has_reduction || fusion::is_reduction(*p.nodes[node]))) {
      return std::string("independent of the kernel, and a reduction is involved: the backend fuses reductions only "
                         "with what they share data with");
    }
  }
  if (auto why = fusion::why_not_join(p, g, group, node, barrier)) return why;
  std::string unused;
  auto outer = fusion::joined_outer(p, g.groups[group], node, &unused);
  auto members = g.groups[group].members;
  members.push_back(static_cast<int>(node));
  auto planned = fusion::plan_stages(p, members, outer->size());
  std::vector<fusion::StageShape> shapes;
  for (const auto& s : planned) shapes.push_back({s.reduction, s.loops.size()});
  const auto& capability = options.capability(g.groups[group].device);
  if (auto why = fusion::why_unsupported(capability, shapes)) return why;
  for (int m : g.groups[group].members) {
    for (const auto& buf : p.writes[m]) {
      if (!p.reads[node].count(buf)) continue;
      bool same = fusion::same_position(p, m, node, buf, outer->size());
      if (auto why = fusion::why_unsupported_dependency(capability, same)) return why;
    }
    for (const auto& buf : p.writes[node]) {
      if (!p.reads[m].count(buf)) continue;
      bool same = fusion::same_position(p, node, m, buf, outer->size());
      if (auto why = fusion::why_unsupported_dependency(capability, same)) return why;
    }
  }
  bool reduces = g.groups[group].has_reduction || fusion::is_reduction(*p.nodes[node]);
  for (const auto& s : planned) {
    if (!reduces || s.reduction) continue;
    std::optional<int64_t> elements = 1;
    for (const auto& loop : s.loops) {
      auto extent = loop.constant();
      elements = extent && elements ? std::optional<int64_t>(*elements * *extent) : std::nullopt;
    }
    if (auto why = fusion::why_not_loops_without_outer(options.heuristics, outer->size(), s.loops.size(), elements)) {
      if (capability.pointwise_in_split_reductions && runs_in_reduction_pass(p, planned, s)) continue;
      return why;
    }
  }
  return std::nullopt;
}

/// `node` with its loops reordered so that it joins `group` as an epilogue
/// (legality permuted_for_group), when the backend prints such kernels and
/// the heuristics allow it; else nullopt, with `why` set when the reordering
/// itself was refused (the caller logs the original refusal otherwise).
std::optional<ir::ComputeNode> permuted_join(Program& p, const fusion::Grouping& g, size_t group, size_t node,
                                             const std::optional<fusion::MoveBarrier>& barrier,
                                             fusion::Affinity affinity, const FusionOptions& options,
                                             std::string* why) {
  const auto& grp = g.groups[group];
  if (!grp.has_reduction || !options.capability(grp.device).permuted_epilogues) return std::nullopt;
  auto permuted = fusion::permuted_for_group(p, grp, node);
  if (!permuted) return std::nullopt;
  const auto& ranges = fusion::ranges_of(*permuted);
  std::optional<int64_t> elements = 1;
  for (size_t j = grp.outer.size(); j < ranges.size(); ++j) {
    auto extent = ranges[j].constant();
    elements = extent && elements ? std::optional<int64_t>(*elements * *extent) : std::nullopt;
  }
  std::optional<int64_t> rows, stride_bytes;
  if (grp.outer.size() < ranges.size()) {
    const auto& pw = std::get<ir::PointwiseNodePtr>(*permuted);
    rows = ranges[grp.outer.size()].constant();
    const auto stride = ir::coefficient(pw->store.index, ir::pointwise_var(static_cast<int>(grp.outer.size())));
    if (stride && stride->constant()) stride_bytes = *stride->constant() * dtype_size(pw->store.buffer->dtype);
  }
  const int cost = fusion::recompute_cost(std::get<ir::PointwiseNodePtr>(*permuted)->store.value);
  if (auto refused = fusion::why_not_permute(options.heuristics, cost, elements, rows, stride_bytes)) {
    *why = *refused;
    return std::nullopt;
  }
  // Asked with the reordered node in place; its reads and writes are the same.
  std::swap(*p.nodes[node], *permuted);
  auto refused = why_not_join(p, g, group, node, barrier, affinity, options);
  std::swap(*p.nodes[node], *permuted);
  if (refused) return std::nullopt;
  return permuted;
}

/// Step 3: form kernels in program order.
fusion::Grouping group_nodes(Program& p, const FusionOptions& options, RefusalLog& log) {
  constexpr size_t kMaxCandidates = 64;  // kernels looked back at, to bound compile time
  fusion::Grouping g;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.aten[i]) {
      g.slots.push_back({static_cast<int>(i), -1});
      continue;
    }
    if (!p.nodes[i]) continue;
    const auto& node = *p.nodes[i];
    auto barrier = fusion::latest_conflict(p, g, i);
    int best = -1;
    auto best_affinity = fusion::Affinity::None;
    std::optional<ir::ComputeNode> best_permuted;
    size_t first = g.groups.size() > kMaxCandidates ? g.groups.size() - kMaxCandidates : 0;
    for (size_t gi = g.groups.size(); gi-- > first;) {
      auto [aff, member] = affinity(p, g.groups[gi], i);
      if (aff == fusion::Affinity::None && !options.capability(fusion::device_of(node)).horizontal_fusion) continue;
      if (best >= 0 && aff <= best_affinity) continue;
      std::optional<ir::ComputeNode> permuted;
      if (auto why = why_not_join(p, g, gi, i, barrier, aff, options)) {
        std::string permute_refused;
        if (aff != fusion::Affinity::None) permuted = permuted_join(p, g, gi, i, barrier, aff, options, &permute_refused);
        if (!permuted) {
          if (aff != fusion::Affinity::None) log.add(p, member, i, permute_refused.empty() ? *why : permute_refused);
          continue;
        }
      }
      best = static_cast<int>(gi);
      best_affinity = aff;
      best_permuted = std::move(permuted);
    }
    if (best_permuted) p.set_node(i, std::move(*best_permuted));
    if (best >= 0) {
      auto& grp = g.groups[best];
      std::string unused;
      grp.outer = *fusion::joined_outer(p, grp, i, &unused);
      grp.has_reduction = grp.has_reduction || fusion::is_reduction(*p.nodes[i]);
      grp.members.push_back(static_cast<int>(i));
      continue;
    }
    fusion::Group grp;
    grp.device = fusion::device_of(node);
    grp.outer = fusion::ranges_of(node);
    grp.has_reduction = fusion::is_reduction(node);
    grp.members = {static_cast<int>(i)};
    grp.slot = g.slots.size();
    g.slots.push_back({-1, static_cast<int>(g.groups.size())});
    g.groups.push_back(std::move(grp));
  }
  return g;
}

/// The pass proper (steps 1-5 of fusion.h).
FusedGraph fuse_kernels(const LoweredGraph& lowered, const FusionOptions& options, Remarks& remarks) {
  Program p = Program::from(lowered);
  RefusalLog log;
  inline_producers(p, options.heuristics, log);
  fusion::Grouping g = group_nodes(p, options, log);

  std::vector<ir::KernelPtr> kernels;
  std::vector<std::set<int>> kernels_of(p.size());
  for (size_t gi = 0; gi < g.groups.size(); ++gi) {
    std::vector<int> items;
    for (int m : g.groups[gi].members) items.insert(items.end(), p.absorbed[m].begin(), p.absorbed[m].end());
    std::sort(items.begin(), items.end());
    std::vector<std::string> origins;
    for (int item : items) {
      kernels_of[item].insert(static_cast<int>(gi));
      for (const auto& o : p.item_origins[item]) {
        if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
      }
    }
    const auto& first = *p.nodes[g.groups[gi].members.front()];
    kernels.push_back(fusion::build_kernel(p, g.groups[gi], ir::node_name(first), origins));
  }
  kernels = fusion::remove_dead_stores(kernels, [&](const std::string& b) { return p.needed_outside(b); });
  for (auto& k : kernels) k = fusion::merge_contiguous_loops(fusion::order_loops_for_stores(k));

  FusedGraph out;
  size_t count = 0;
  for (const auto& slot : g.slots) {
    if (slot.aten_item >= 0) {
      out.program.push_back(*p.aten[slot.aten_item]);
    } else if (const auto& k = kernels[slot.group]) {
      out.program.push_back(renamed(k, kernel_name(count++, k->origins, k->name)));
    }
  }
  out.buffers = used_buffers(lowered, out.program);
  log.emit(kernels_of, remarks);
  return out;
}

}  // namespace

FusedGraph fuse(const LoweredGraph& lowered, const FusionOptions& options, Remarks& remarks) {
  if (!options.enabled) {
    remarks.add(Remark{Remark::Kind::FusionRefusal, "", "", "", "fusion disabled"});
    return one_kernel_per_node(lowered);
  }
  // A kernel the IR rejects is our bug; the graph still runs, unfused.
  try {
    return fuse_kernels(lowered, options, remarks);
  } catch (const CompilerError& e) {
    remarks.add(Remark{Remark::Kind::FusionRefusal, "", "", "", cat("fusion failed (", e.what(), "): one kernel per node")});
    return one_kernel_per_node(lowered);
  }
}

}  // namespace cppi::lowering
