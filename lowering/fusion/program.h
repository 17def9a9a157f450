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
  /// The first item that writes it (program size: none).
  size_t first_write = 0;
};

/// The first name in both sets ("" if none).
std::string first_common(const std::set<std::string>& a, const std::set<std::string>& b);

struct Program {
  /// By item index: the node's current form (after unit loops were dropped
  /// and producers inlined into it); nullopt for an ATen item or a node that
  /// was inlined into its readers.
  std::vector<std::optional<ir::ComputeNode>> nodes;
  std::vector<std::optional<AtenItem>> aten;
  /// Buffer names each compute node reads and each item writes (an ATen
  /// item: its own graph node's buffers). What an ATen item reads is
  /// may_read(), from the graph nodes its AtenItem lists.
  std::vector<std::set<std::string>> reads, writes;
  /// The inverse: compute nodes reading / items writing each buffer (kept in step).
  std::map<std::string, std::set<size_t>> readers, writers;
  /// Item indices folded into each node (itself and the producers inlined into it).
  std::vector<std::vector<int>> absorbed;
  /// By item index: the FX origins of the node as lowered.
  std::vector<std::vector<std::string>> item_origins;
  std::map<std::string, BufferUse> buffers;

  static Program from(const LoweredGraph& lowered);
  size_t size() const { return nodes.size(); }
  bool needed_outside(const std::string& buffer) const;
  /// Whether `item` may read `buffer`: a compute node's loads, or an ATen
  /// item's arguments (the graph nodes its AtenItem lists).
  bool may_read(size_t item, const std::string& buffer) const;
  /// The first of `names` that `item` may read ("" if none).
  std::string first_read(size_t item, const std::set<std::string>& names) const;
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
