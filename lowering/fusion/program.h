/// \file
/// Internal to lowering/fusion: the state the fusion layers look at — the
/// program (items in order, each compute node's current form, what each item
/// reads and writes, which buffers must stay in memory) and the kernels being
/// formed (groups of nodes, placed in slots between the ATen items).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lowering/lowered_graph.h"

namespace cppi::lowering::fusion {

struct BufferUse {
  ir::BufferPtr buffer;
  int graph_node = -1;
  /// Something other than a kernel may read it: a graph input or output, or
  /// a graph-node value with an ATen item after its writer (LoweredGraph does
  /// not say which values an ATen item reads, so any later one might).
  bool needed_outside = true;
};

struct Program {
  /// By item index: the node's current form (after unit loops were dropped
  /// and producers inlined into it); nullopt for an ATen item or a node that
  /// was inlined into its readers.
  std::vector<std::optional<ir::ComputeNode>> nodes;
  std::vector<std::optional<AtenItem>> aten;
  /// Buffer names each item reads / writes. An ATen item may read every
  /// graph-node value that exists when it runs (LoweredGraph does not name its
  /// arguments) and writes its own node's buffers.
  std::vector<std::set<std::string>> reads, writes;
  /// Item indices folded into each node (itself and the producers inlined into it).
  std::vector<std::vector<int>> absorbed;
  /// By item index: the FX origins of the node as lowered.
  std::vector<std::vector<std::string>> item_origins;
  std::map<std::string, BufferUse> buffers;

  static Program from(const LoweredGraph& lowered);
  size_t size() const { return nodes.size(); }
  bool needed_outside(const std::string& buffer) const;
  void set_node(size_t item, ir::ComputeNode node);
  void remove_node(size_t item);
};

/// Nodes that will form one kernel, in the order their stages run.
struct Group {
  ir::Device device = ir::Device::CPU;
  /// Extents of the kernel's outer loops (x0..): a prefix of every member's ranges.
  std::vector<ir::IndexExpr> outer;
  bool has_reduction = false;
  std::vector<int> members;  // item indices
  size_t slot = 0;
};

/// A position in the fused program: an ATen item or a group.
struct Slot {
  int aten_item = -1;
  int group = -1;
};

struct Grouping {
  std::vector<Slot> slots;
  std::vector<Group> groups;
};

}  // namespace cppi::lowering::fusion
