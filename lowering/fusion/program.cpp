#include "lowering/fusion/program.h"

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
  for (const auto& b : lowered.buffers) p.buffers[b.buffer->name] = BufferUse{b.buffer, b.graph_node, true};
  // What an ATen item may read: any graph-node value that holds something
  // when it runs (a graph input, or written by an earlier item).
  std::set<std::string> graph_values;
  for (const auto& [name, use] : p.buffers) {
    if (use.graph_node >= 0 && use.buffer->kind == ir::BufferKind::GraphInput) graph_values.insert(name);
  }
  for (size_t i = 0; i < n; ++i) {
    if (auto a = std::get_if<AtenItem>(&lowered.program[i])) {
      p.aten[i] = *a;
      p.reads[i] = graph_values;
      for (const auto& [name, use] : p.buffers) {
        if (use.graph_node >= 0 && use.graph_node == a->graph_node) p.writes[i].insert(name);
      }
    } else {
      const auto& node = std::get<ir::ComputeNode>(lowered.program[i]);
      p.item_origins[i] = origins_of(node);
      p.set_node(i, drop_unit_loops(node));
    }
    p.absorbed[i] = {static_cast<int>(i)};
    for (const auto& name : p.writes[i]) {
      auto it = p.buffers.find(name);
      if (it == p.buffers.end() || it->second.graph_node >= 0) graph_values.insert(name);
    }
  }
  // A buffer may stay out of memory only if it is internal to the kernels.
  for (auto& [name, use] : p.buffers) {
    auto kind = use.buffer->kind;
    if (kind == ir::BufferKind::GraphInput || kind == ir::BufferKind::GraphOutput) continue;
    if (use.graph_node < 0) {
      use.needed_outside = false;
      continue;
    }
    size_t first_writer = n;
    for (size_t i = 0; i < n && first_writer == n; ++i) {
      if (p.nodes[i] && p.writes[i].count(name)) first_writer = i;
    }
    bool aten_after = false;
    for (size_t i = first_writer; i < n; ++i) aten_after |= p.aten[i].has_value();
    use.needed_outside = first_writer == n || aten_after;
  }
  return p;
}

bool Program::needed_outside(const std::string& buffer) const {
  auto it = buffers.find(buffer);
  return it == buffers.end() || it->second.needed_outside;
}

void Program::set_node(size_t item, ir::ComputeNode node) {
  reads[item] = read_buffers(node);
  writes[item] = written_buffers(node);
  nodes[item] = std::move(node);
}

void Program::remove_node(size_t item) {
  nodes[item].reset();
  reads[item].clear();
  writes[item].clear();
}

}  // namespace cppi::lowering::fusion
