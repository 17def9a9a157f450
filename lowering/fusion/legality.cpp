#include "lowering/fusion/legality.h"

#include <algorithm>
#include <map>

#include "lowering/fusion/fusion_node.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/fold_conditions.h"
#include "lowering/ir/index_affine.h"

namespace cppi::lowering::fusion {

using ir::ComputeNode;
using ir::IndexExpr;

std::optional<std::vector<IndexExpr>> writer_point(const IndexExpr& write_index,
                                                   const std::vector<IndexExpr>& writer_ranges,
                                                   const IndexExpr& read_index, const ir::VarRanges& reader_ranges) {
  size_t n = writer_ranges.size();
  auto vars = ir::pointwise_vars(n);
  auto form = ir::affine_form(write_index, vars);
  if (!form) return std::nullopt;
  // A dense store walks the elements as a mixed-radix number: starting at
  // stride 1, each next dimension's stride is the previous stride times its
  // extent. That order (innermost first) undoes the linearisation.
  std::vector<bool> used(n, false);
  IndexExpr expected = ir::index_const(1);
  size_t outermost = n;
  for (size_t step = 0; step < n; ++step) {
    size_t found = n;
    for (size_t j = 0; j < n && found == n; ++j) {
      if (!used[j] && form->strides[j] == expected) found = j;
    }
    if (found == n) return std::nullopt;
    used[found] = true;
    expected = expected * writer_ranges[found];
    outermost = found;
  }
  // Loads only read elements the program wrote (a masked load: where its
  // mask holds), so the outermost coordinate needs no wrap-around; keeping
  // it bare lets a shifted read (padding, x0 - 1) map exactly.
  IndexExpr relative = read_index - form->offset;
  std::vector<IndexExpr> point(n);
  IndexExpr recomposed = form->offset;
  for (size_t j = 0; j < n; ++j) {
    IndexExpr coordinate = ir::floordiv(relative, form->strides[j]);
    if (j != outermost) coordinate = ir::mod(coordinate, writer_ranges[j]);
    point[j] = ir::simplify(coordinate, reader_ranges);
    recomposed = recomposed + form->strides[j] * point[j];
  }
  // The decomposition is only a candidate; it must rebuild the read index.
  if (ir::simplify(recomposed, reader_ranges) != ir::simplify(read_index, reader_ranges)) return std::nullopt;
  return point;
}

std::optional<std::vector<IndexExpr>> writer_point_where_loaded(const IndexExpr& write_index,
                                                                const std::vector<IndexExpr>& writer_ranges,
                                                                const IndexExpr& read_index,
                                                                const std::vector<ir::Expr>& masks,
                                                                const ir::VarRanges& reader_ranges) {
  std::map<std::string, ir::VarInterval> common;
  for (size_t i = 0; i < masks.size(); ++i) {
    if (!masks[i].defined()) return std::nullopt;  // read everywhere
    auto intervals = ir::mask_intervals(masks[i], reader_ranges);
    if (i == 0) {
      common = std::move(intervals);
      continue;
    }
    for (auto it = common.begin(); it != common.end();) {
      auto other = intervals.find(it->first);
      const bool same = other != intervals.end() && other->second.lo == it->second.lo && other->second.hi == it->second.hi;
      it = same ? std::next(it) : common.erase(it);
    }
  }
  std::map<std::string, IndexExpr> shift, unshift;
  ir::VarRanges narrowed = reader_ranges;
  for (const auto& [v, in] : common) {
    const IndexExpr extent = ir::simplify(in.hi - in.lo);
    if (!ir::prove_positive(extent)) continue;  // (an empty or unknown interval: no narrowing)
    const std::string shifted = v + "_where_loaded";
    shift[v] = ir::var(shifted) + in.lo;
    unshift[shifted] = ir::var(v) - in.lo;
    narrowed.erase(v);
    narrowed[shifted] = extent;
  }
  if (shift.empty()) return std::nullopt;
  auto point = writer_point(write_index, writer_ranges, ir::substitute(read_index, shift), narrowed);
  if (!point) return std::nullopt;
  for (auto& coordinate : *point) coordinate = ir::simplify(ir::substitute(coordinate, unshift));
  return point;
}

std::optional<std::vector<IndexExpr>> read_point(const IndexExpr& write_index,
                                                 const std::vector<IndexExpr>& writer_ranges,
                                                 const IndexExpr& read_index, const std::vector<ir::Expr>& masks,
                                                 const ir::VarRanges& reader_ranges) {
  auto point = writer_point(write_index, writer_ranges, read_index, reader_ranges);
  if (point || masks.empty()) return point;
  return writer_point_where_loaded(write_index, writer_ranges, read_index, masks, reader_ranges);
}

namespace {

/// The masks of `reader`'s loads of `buffer` at `index` (an undefined Expr
/// for an unmasked one).
std::vector<ir::Expr> load_masks(const ComputeNode& reader, const std::string& buffer, const IndexExpr& index) {
  struct Finder : ir::ExprVisitor {
    const std::string& buffer;
    const IndexExpr& index;
    std::vector<ir::Expr> masks;
    Finder(const std::string& b, const IndexExpr& i) : buffer(b), index(i) {}
    void visit(const ir::Load& n) override {
      if (n.buffer->name == buffer && n.index == index) masks.push_back(n.mask);
      ExprVisitor::visit(n);
    }
  } finder(buffer, index);
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&reader)) {
    finder.walk((*p)->store.value);
    for (const auto& v : ir::indirect_values((*p)->store.index)) finder.walk(v);
  } else {
    finder.walk(value_of(reader));
  }
  return finder.masks;
}

std::optional<IndexExpr> write_index_of(const ComputeNode& writer, const std::string& buffer) {
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&writer)) {
    if ((*p)->store.buffer->name == buffer) return (*p)->store.index;
    return std::nullopt;
  }
  if (auto sc = std::get_if<ir::ScanNodePtr>(&writer)) {
    if ((*sc)->output->name == buffer) return (*sc)->index;
    return std::nullopt;
  }
  for (const auto& out : std::get<ir::ReductionNodePtr>(writer)->outputs) {
    if (out.buffer && out.buffer->name == buffer) return out.index;
  }
  return std::nullopt;
}

bool is_permutation(const std::vector<IndexExpr>& point) {
  std::set<std::string> seen;
  for (const auto& e : point) {
    auto v = e.as<ir::IndexVar>();
    if (!v || !seen.insert(v->name).second) return false;
  }
  return true;
}

bool is_prefix(const std::vector<IndexExpr>& prefix, const std::vector<IndexExpr>& of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

std::string item_name(const Program& p, size_t item) {
  if (p.nodes[item]) return display_name(*p.nodes[item]);
  return cat("graph node ", p.aten[item] ? p.aten[item]->graph_node : -1);
}

/// Why `reader` cannot run in the same outer iteration (the first `depth`
/// loops) as the `writer` point it reads.
std::optional<std::string> why_not_same_iteration(const ComputeNode& writer, const ComputeNode& reader,
                                                  const std::string& buffer, size_t depth) {
  ReadMap map;
  if (auto why = why_unmappable(writer, reader, buffer, &map)) return why;
  for (size_t i = 0; i < map.points.size(); ++i) {
    if (is_identity(map.points[i], depth)) continue;
    if (is_permutation(map.points[i])) return cat("consumer reads the producer transposed (", buffer, ")");
    return cat("consumer reads ", buffer, " at a different index than written (", map.accesses[i].index, " vs ",
               *write_index_of(writer, buffer), "): it needs the whole producer done first");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> why_unmappable(const ComputeNode& writer, const ComputeNode& reader,
                                          const std::string& buffer, ReadMap* out) {
  auto write_index = write_index_of(writer, buffer);
  if (!write_index) return cat(display_name(writer), " does not write ", buffer);
  auto ranges = var_ranges_of(reader);
  for (const auto& a : ir::reads(reader)) {
    if (a.buffer->name != buffer) continue;
    auto point = read_point(*write_index, ranges_of(writer), a.index,
                            a.masked ? load_masks(reader, buffer, a.index) : std::vector<ir::Expr>{}, ranges);
    if (!point) {
      return cat("consumer reads ", buffer, " at ", a.index, ", which the producer's loops ",
                 format_ranges(ranges_of(writer)), " storing at ", *write_index, " cannot express");
    }
    out->accesses.push_back(a);
    out->points.push_back(std::move(*point));
  }
  return std::nullopt;
}

bool is_identity(const std::vector<IndexExpr>& point, size_t depth) {
  if (point.size() < depth) return false;
  for (size_t j = 0; j < depth; ++j) {
    if (point[j] != ir::pointwise_var(static_cast<int>(j))) return false;
  }
  return true;
}

std::optional<std::string> why_not_inline(const Program& p, size_t producer, size_t reader, ReadMap* map) {
  const auto& prod = *p.nodes[producer];
  const auto& read = *p.nodes[reader];
  if (device_of(prod) != device_of(read) && !computes_host_scalar(prod, device_of(read))) {
    return std::string("different devices");
  }
  if (accumulates(prod)) return std::string("the producer accumulates (a scatter-add): no element is final before it ends");
  // The reader would evaluate the producer's loads at its own position.
  for (size_t i = producer + 1; i < reader; ++i) {
    auto clobbered = first_common(p.reads[producer], p.writes[i]);
    if (clobbered.empty()) continue;
    if (p.aten[i]) return cat("an ATen call between them (", item_name(p, i), ") writes ", clobbered, ", which the producer reads");
    return cat(item_name(p, i), " between them overwrites ", clobbered, ", which the producer reads");
  }
  const auto& buffer = std::get<ir::PointwiseNodePtr>(prod)->store.buffer->name;
  return why_unmappable(prod, read, buffer, map);
}

std::optional<std::vector<IndexExpr>> joined_outer(const Program& p, const Group& group, size_t node,
                                                   std::string* reason) {
  const auto& n = *p.nodes[node];
  const auto& r = ranges_of(n);
  bool reads_a_reduction = false;
  for (int m : group.members) {
    if (is_reduction(*p.nodes[m]) && !first_common(p.writes[m], p.reads[node]).empty()) reads_a_reduction = true;
  }
  auto spaces = [&] { return cat("different iteration spaces: ", format_ranges(group.outer), " vs ", format_ranges(r)); };
  if (is_reduction(n)) {
    if (group.has_reduction ? r == group.outer : is_prefix(r, group.outer)) return r;
    bool shares_input = false;
    for (int m : group.members) {
      if (is_reduction(*p.nodes[m]) && !first_common(p.reads[m], p.reads[node]).empty()) shares_input = true;
    }
    *reason = shares_input || reads_a_reduction ? cat("reduction over a different axis (", spaces(), ")") : spaces();
    return std::nullopt;
  }
  if (group.has_reduction ? is_prefix(group.outer, r) : r == group.outer) return group.outer;
  *reason = reads_a_reduction ? cat("reduction over a different axis: the consumer's loops ", format_ranges(r),
                                    " do not start with the reduction's outer loops ", format_ranges(group.outer))
                              : spaces();
  return std::nullopt;
}

std::optional<MoveBarrier> latest_conflict(const Program& p, const Grouping& g, size_t node) {
  for (size_t s = g.slots.size(); s-- > 0;) {
    std::vector<size_t> items;
    if (g.slots[s].aten_item >= 0) items.push_back(g.slots[s].aten_item);
    if (g.slots[s].group >= 0) {
      for (int m : g.groups[g.slots[s].group].members) items.push_back(m);
    }
    for (size_t i : items) {
      auto who = [&] {
        return p.aten[i] ? cat("an ATen call between them (", item_name(p, i), ")")
                         : cat(item_name(p, i), " (another kernel) between them");
      };
      if (auto b = first_common(p.writes[i], p.reads[node]); !b.empty()) return MoveBarrier{s, cat(who(), " writes ", b)};
      if (auto b = p.first_read(i, p.writes[node]); !b.empty()) return MoveBarrier{s, cat(who(), " reads ", b)};
      if (auto b = first_common(p.writes[i], p.writes[node]); !b.empty()) return MoveBarrier{s, cat(who(), " also writes ", b)};
    }
  }
  return std::nullopt;
}

std::optional<std::string> why_not_join(const Program& p, const Grouping& g, size_t group, size_t node,
                                        const std::optional<MoveBarrier>& barrier) {
  const Group& grp = g.groups[group];
  const auto& n = *p.nodes[node];
  if (device_of(n) != grp.device) return std::string("different devices");
  // Its steps run one after another along the scan loop; every point of
  // another node's loops would wait on them.
  if (is_scan(n)) return std::string("a scan (cumsum, cumprod) runs in a kernel of its own");
  for (int m : grp.members) {
    if (is_scan(*p.nodes[m])) return cat(display_name(*p.nodes[m]), " is a scan: it runs in a kernel of its own");
  }
  // On the CPU a kernel's adds run only on the threads its accumulating
  // stores allow (parallel_loops_without_races), so an accumulating node
  // shares a kernel only with other accumulating nodes: no plain node loses
  // its threads. A GPU adds atomically, beside anything. Bilinear
  // upsampling's backward scatters into four buffers from one gradient: one
  // kernel reads it once (Inductor fuses them too).
  for (int m : grp.members) {
    const auto& mem = *p.nodes[m];
    // A scatter's adds stay out of the reduction mappings (rows cached in
    // registers and stored as vectors).
    if ((accumulates(n) && is_reduction(mem)) || (accumulates(mem) && is_reduction(n))) {
      return std::string("an accumulating scatter does not share a kernel with a reduction");
    }
    if (grp.device == ir::Device::CPU && accumulates(mem) != accumulates(n)) {
      return accumulates(n) ? std::string("an accumulating scatter shares a CPU kernel only with other scatters")
                            : cat(display_name(mem), " accumulates (a scatter-add): it shares a CPU kernel only with other scatters");
    }
    // No element is final before the whole scatter has run.
    if (accumulates(mem) && p.reads[node].count(std::get<ir::PointwiseNodePtr>(mem)->store.buffer->name)) {
      return cat(display_name(mem), " accumulates into what the consumer reads: no element is final before it ends");
    }
    if (accumulates(n) && p.reads[m].count(std::get<ir::PointwiseNodePtr>(n)->store.buffer->name)) {
      return cat("accumulates into what ", display_name(mem), " reads: no element is final before it ends");
    }
  }
  std::string reason;
  auto outer = joined_outer(p, grp, node, &reason);
  if (!outer) return reason;
  size_t depth = outer->size();
  for (int m : grp.members) {
    const auto& mem = *p.nodes[m];
    if (auto buf = first_common(p.writes[m], p.writes[node]); !buf.empty()) return cat("both write ", buf);
    for (const auto& buf : p.writes[m]) {
      if (!p.reads[node].count(buf)) continue;
      if (auto why = why_not_same_iteration(mem, n, buf, depth)) return why;
    }
    for (const auto& buf : p.writes[node]) {
      if (!p.reads[m].count(buf)) continue;
      if (auto why = why_not_same_iteration(n, mem, buf, depth)) {
        return cat("writes ", buf, ", which ", display_name(mem), " reads at other points (", *why, ")");
      }
    }
    // Two reductions over the same outer loops but reading a shared input
    // differently reduce along different axes.
    if (is_reduction(n) && is_reduction(mem)) {
      for (const auto& a : ir::reads(n)) {
        for (const auto& b : ir::reads(mem)) {
          if (a.buffer->name == b.buffer->name && a.index != b.index) {
            return cat("reduction over a different axis (", a.buffer->name, " read at ", b.index, " vs ", a.index, ")");
          }
        }
      }
    }
  }
  if (barrier && barrier->slot > grp.slot) return barrier->reason;
  return std::nullopt;
}

std::optional<ComputeNode> permuted_for_group(const Program& p, const Group& group, size_t node) {
  const auto* pw = std::get_if<ir::PointwiseNodePtr>(&*p.nodes[node]);
  if (!pw) return std::nullopt;
  const size_t depth = group.outer.size();
  const size_t n = (*pw)->ranges.size();
  // The reader's variable each of the group's outer loops must become.
  std::optional<std::vector<IndexExpr>> lead;
  for (int m : group.members) {
    const auto& mem = *p.nodes[m];
    if (!is_reduction(mem)) continue;
    for (const auto& buf : p.writes[m]) {
      if (!p.reads[node].count(buf)) continue;
      ReadMap map;
      if (why_unmappable(mem, *p.nodes[node], buf, &map)) return std::nullopt;
      for (const auto& point : map.points) {
        if (point.size() != depth || !is_permutation(point)) return std::nullopt;
        if (lead && *lead != point) return std::nullopt;
        lead = point;
      }
    }
  }
  if (!lead || is_identity(*lead, depth)) return std::nullopt;
  // New loop j runs over old variable order[j]: the lead variables, then the
  // rest in their old order.
  const auto vars = ir::pointwise_vars(n);
  std::vector<size_t> order;
  for (const auto& v : *lead) {
    const auto at = std::find(vars.begin(), vars.end(), v);
    if (at == vars.end()) return std::nullopt;
    order.push_back(static_cast<size_t>(at - vars.begin()));
  }
  for (size_t j = 0; j < n; ++j) {
    if (std::find(order.begin(), order.end(), j) == order.end()) order.push_back(j);
  }
  std::vector<IndexExpr> ranges;
  std::map<std::string, IndexExpr> renamed;
  for (size_t j = 0; j < n; ++j) {
    ranges.push_back((*pw)->ranges[order[j]]);
    renamed[vars[order[j]].as<ir::IndexVar>()->name] = vars[j];
  }
  const ir::Store& st = (*pw)->store;
  ir::Store moved = st.with(ir::substitute(st.index, renamed), ir::substitute_indices(st.value, renamed));
  return ComputeNode{ir::PointwiseNode::make_with_store((*pw)->name, std::move(ranges), std::move(moved),
                                                        (*pw)->origins)};
}

bool needs_own_stage(const Program& p, size_t earlier, size_t later) {
  const auto& a = *p.nodes[earlier];
  const auto& b = *p.nodes[later];
  auto full = [](const ComputeNode& w, const ComputeNode& r, const std::string& buf) {
    ReadMap map;
    if (why_unmappable(w, r, buf, &map)) return false;
    for (const auto& pt : map.points) {
      if (!is_identity(pt, pt.size())) return false;
    }
    return true;
  };
  for (const auto& buf : p.writes[earlier]) {
    if (p.reads[later].count(buf) && !full(a, b, buf)) return true;
  }
  for (const auto& buf : p.writes[later]) {
    if (p.reads[earlier].count(buf) && !full(b, a, buf)) return true;
  }
  return false;
}

bool same_position(const Program& p, size_t writer, size_t reader, const std::string& buffer, size_t depth) {
  const auto& w = *p.nodes[writer];
  const auto& r = *p.nodes[reader];
  if (is_reduction(w)) return true;
  ReadMap map;
  if (why_unmappable(w, r, buffer, &map)) return false;
  const auto& wranges = ranges_of(w);
  std::vector<IndexExpr> reader_vars, reader_extents;
  if (auto red = std::get_if<ir::ReductionNodePtr>(&r)) {
    reader_vars = (*red)->reduction_vars();
    reader_extents = (*red)->reduction_ranges;
  } else {
    const auto& rr = ranges_of(r);
    for (size_t j = depth; j < rr.size(); ++j) {
      reader_vars.push_back(ir::pointwise_var(static_cast<int>(j)));
      reader_extents.push_back(rr[j]);
    }
  }
  if (wranges.size() - depth != reader_extents.size()) return false;
  for (size_t j = depth; j < wranges.size(); ++j) {
    if (wranges[j] != reader_extents[j - depth]) return false;
  }
  for (const auto& point : map.points) {
    if (!is_identity(point, depth)) return false;
    for (size_t j = depth; j < point.size(); ++j) {
      if (point[j] != reader_vars[j - depth]) return false;
    }
  }
  return true;
}

std::vector<PlannedStage> plan_stages(const Program& p, const std::vector<int>& members, size_t outer_loops) {
  std::vector<PlannedStage> stages;
  for (int m : members) {
    const auto& node = *p.nodes[m];
    if (auto r = std::get_if<ir::ReductionNodePtr>(&node)) {
      stages.push_back({true, (*r)->reduction_ranges, {m}});
      continue;
    }
    const auto& ranges = ranges_of(node);
    std::vector<IndexExpr> inner(ranges.begin() + static_cast<long>(outer_loops), ranges.end());
    bool merge = !stages.empty() && !stages.back().reduction && stages.back().loops == inner;
    if (merge) {
      for (int x : stages.back().members) merge = merge && !needs_own_stage(p, x, m);
    }
    if (merge) {
      stages.back().members.push_back(m);
    } else {
      stages.push_back({false, inner, {m}});
    }
  }
  return stages;
}

}  // namespace cppi::lowering::fusion
