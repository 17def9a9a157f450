/// \file
/// The contract between the stages after import: what lowering produces,
/// what fusion turns it into, and how buffers map to the runtime's slots.
///
///   lower_graph(Graph)      -> LoweredGraph  (lowering/ops, lowering/lower_graph.cpp)
///   fuse(LoweredGraph)      -> FusedGraph    (lowering/fusion)
///   schedule + codegen      -> compiled kernels (cpu_codegen, gpu_codegen)
///   the pipeline driver     -> CompiledGraph steps (backend/pipeline.cpp)
///
/// Program items are in execution order. An AtenItem runs one FX node through
/// ATen at run time: an extern call (mm, convolution, ...) or a fallback
/// (no lowering; the reason is also a Remark). View ops (view, permute,
/// expand, slice, ...) are folded into the indices of the kernels that read
/// them; when the runtime itself needs the view as a tensor (a graph output
/// that aliases an input, an argument of an ATen item) lowering emits an
/// AtenItem for the view too, so the runtime returns real views as eager does.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "lowering/ir/kernel.h"
#include "lowering/ir/node.h"

namespace cppi::lowering {

/// Run graph node `graph_node` through ATen.
struct AtenItem {
  int graph_node = -1;
  bool is_extern = false;
  /// The graph nodes whose values the call reads (its arguments, in order of
  /// appearance). Fusion keeps exactly these values in memory for it.
  std::vector<int> reads;
  /// The value was computed in compute nodes (a view, an alias, a symbolic
  /// value): ATen only makes it again for what reads it at run time.
  bool recomputes = false;
};

/// Where a buffer's tensor lives at run time. Graph-node buffers use the
/// node's slot (a placeholder, a fallback's result, a graph output, ...);
/// internal intermediates get slots after the graph's nodes. A buffer that
/// is a graph node's value has exactly that node's FX sizes and strides.
struct BufferBinding {
  ir::BufferPtr buffer;
  int graph_node = -1;  // -1: an internal intermediate (allocated by the wrapper) or a seed
  /// The buffer is the graph's random seed on its device: one int64 that the
  /// runtime draws afresh from torch's generator of that device on every call
  /// (random ops read it as their Philox key; see ir::Random).
  bool is_seed = false;
  int device_index = 0;  // is_seed: which CUDA device
};

struct LoweredGraph {
  using Item = std::variant<ir::ComputeNode, AtenItem>;
  std::vector<Item> program;
  /// Every buffer a compute node reads or writes.
  std::vector<BufferBinding> buffers;
};

struct FusedGraph {
  using Item = std::variant<ir::KernelPtr, AtenItem>;
  std::vector<Item> program;
  /// The buffers kernels still read or write (fusion drops the ones it made
  /// unnecessary; they are never allocated).
  std::vector<BufferBinding> buffers;
};

}  // namespace cppi::lowering
