#include "lowering/fusion/program.h"

#include <algorithm>

#include "lowering/fusion/fusion_node.h"

namespace cppi::lowering::fusion {

Program Program::from(const LoweredGraph& lowered) {
  Program p;
  size_t n = lowered.program.size();
  p.nodes.resize(n);
  p.aten.resize(n);
  p.reads.resize(n);
  p.writes.resize(n);
  p.absorbed.resize(n);
  p.item_origins.resize(n);
  for (const auto& b : lowered.buffers) p.buffers[b.buffer->name] = BufferUse{b.buffer, b.graph_node, true, n};
  for (size_t i = 0; i < n; ++i) {
    if (auto a = std::get_if<AtenItem>(&lowered.program[i])) {
      p.aten[i] = *a;
      for (const auto& [name, use] : p.buffers) {
        if (use.graph_node >= 0 && use.graph_node == a->graph_node) p.writes[i].insert(name);
      }
      for (const auto& name : p.writes[i]) p.writers[name].insert(i);
    } else {
      const auto& node = std::get<ir::ComputeNode>(lowered.program[i]);
      p.item_origins[i] = origins_of(node);
      p.set_node(i, drop_unit_loops(node));
    }
    p.absorbed[i] = {static_cast<int>(i)};
    for (const auto& name : p.writes[i]) {
      auto it = p.buffers.find(name);
      if (it != p.buffers.end()) it->second.first_write = std::min(it->second.first_write, i);
    }
  }
  // A buffer may stay out of memory only if it is internal to the kernels.
  std::vector<size_t> aten_positions;
  for (size_t i = 0; i < n; ++i) {
    if (p.aten[i]) aten_positions.push_back(i);
  }
  for (auto& [name, use] : p.buffers) {
    auto kind = use.buffer->kind;
    if (kind == ir::BufferKind::GraphInput || kind == ir::BufferKind::GraphOutput) continue;
    if (use.graph_node < 0) {
      use.needed_outside = false;
      continue;
    }
    size_t first_node_writer = n;
    for (size_t i : p.writers[name]) {
      if (p.nodes[i]) first_node_writer = std::min(first_node_writer, i);
    }
    bool aten_after = false;
    for (size_t a : aten_positions)
      aten_after = aten_after || (a > first_node_writer && p.may_read(a, name));
    use.needed_outside = first_node_writer == n || aten_after;
  }
  return p;
}

bool Program::may_read(size_t item, const std::string& buffer) const {
  if (!aten[item]) return reads[item].count(buffer) > 0;
  auto it = buffers.find(buffer);
  if (it == buffers.end() || it->second.graph_node < 0) return false;
  const auto& args = aten[item]->reads;
  return std::find(args.begin(), args.end(), it->second.graph_node) != args.end();
}

std::string Program::first_read(size_t item, const std::set<std::string>& names) const {
  if (!aten[item]) return first_common(reads[item], names);
  for (const auto& name : names) {
    if (may_read(item, name)) return name;
  }
  return "";
}

std::string first_common(const std::set<std::string>& a, const std::set<std::string>& b) {
  const auto& small = a.size() <= b.size() ? a : b;
  const auto& large = a.size() <= b.size() ? b : a;
  for (const auto& x : small) {
    if (large.count(x)) return x;
  }
  return "";
}

bool Program::needed_outside(const std::string& buffer) const {
  auto it = buffers.find(buffer);
  return it == buffers.end() || it->second.needed_outside;
}

void Program::set_node(size_t item, ir::ComputeNode node) {
  remove_node(item);
  reads[item] = read_buffers(node);
  writes[item] = written_buffers(node);
  for (const auto& name : reads[item]) readers[name].insert(item);
  for (const auto& name : writes[item]) writers[name].insert(item);
  nodes[item] = std::move(node);
}

void Program::remove_node(size_t item) {
  for (const auto& name : reads[item]) readers[name].erase(item);
  for (const auto& name : writes[item]) writers[name].erase(item);
  nodes[item].reset();
  reads[item].clear();
  writes[item].clear();
}

}  // namespace cppi::lowering::fusion
