/// \file
/// Fusion: LoweredGraph (one compute node per lowered ATen op) -> FusedGraph
/// (kernels of outer loops and stages, ATen items in between).
///
///   FusedGraph fused = fuse(lowered, options, remarks);
///
/// Three layers, each const and tested alone (as in Inductor's scheduler):
/// legality.h (what keeps the program's meaning), choices.h (what is worth
/// it: recompute cost, which fusion to prefer) and capability.h (what the
/// device's codegen can emit, one BackendCapability per device in the
/// options). The pass:
/// 1. drops loops of extent 1 from every node;
/// 2. inlines pointwise producers whose output only kernels read into every
///    reader, when each read lands on a point the producer's loops express
///    and the recompute cost is bounded (pointwise chains, prologues of
///    reductions such as sum(x*y));
/// 3. walks the program in order and adds each remaining node to the best
///    kernel it may join — one whose producer it reads (reduction epilogues:
///    softmax, layer_norm, var_mean become one outer loop with several
///    stages), one sharing an input, or any with the same loops (horizontal
///    fusion) — or starts a kernel; a node never moves past an item it
///    depends on or that depends on it (ATen calls included);
/// 4. turns loads of per-row reduction results in later stages into
///    LocalRefs and drops stores and buffers nothing needs any more.
/// 5. orders a pointwise kernel's outer loops so its stores walk memory
///    contiguously (loop_order.h: `x.t() + 1` writes in the input's order),
///    then merges adjacent loops every access walks as one (loop_merge.h:
///    H and W of an NCHW tensor reduce as one loop of H x W).
/// Every refused pair of related nodes that ends up in different kernels
/// gets one FusionRefusal remark {a, b, reason}.
///
/// Kernels are named "kernel<i>_<first FX origin>" in program order; their
/// origins are all FX nodes fused in. Schedules are left default: the
/// scheduling passes (cpu_codegen/schedule, gpu_codegen) fill them. Should
/// the IR reject a kernel fusion built (a bug), the graph still runs: one
/// kernel per node and a remark "fusion failed (...)".
///
/// What an ATen item reads is not in LoweredGraph, so fusion assumes it may
/// read every graph-node value that exists when it runs: such values are
/// stored, never inlined away, when an ATen item follows their writer.
#pragma once

#include "lowering/fusion/capability.h"
#include "lowering/fusion/choices.h"
#include "lowering/lowered_graph.h"
#include "support/remarks.h"

namespace cppi::lowering {

struct FusionOptions {
  /// false: one kernel per node (ir::single_node_kernel), one remark "fusion disabled".
  bool enabled = true;
  fusion::BackendCapability cpu;
  fusion::BackendCapability cuda = fusion::BackendCapability::cuda_default();
  fusion::FusionHeuristics heuristics;

  const fusion::BackendCapability& capability(ir::Device d) const { return d == ir::Device::CUDA ? cuda : cpu; }
};

FusedGraph fuse(const LoweredGraph& lowered, const FusionOptions& options, Remarks& remarks);

}  // namespace cppi::lowering
