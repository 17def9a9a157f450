/// \file
/// The lowering stage: an imported ATen graph (lowering/graph/graph.h) becomes a
/// LoweredGraph (lowering/lowered_graph.h): pre-fusion compute nodes for
/// every op with a lowering, views folded into the indices of their readers,
/// and an AtenItem (with a Remark saying why) for everything else.
///
/// What becomes what:
/// - placeholder / get_attr: a GraphInput buffer bound to the node's slot
///   (get_attr also gets an AtenItem: the runtime fetches the attribute).
/// - an op with a lowering: one or more compute nodes; the node's value is a
///   buffer bound to its slot with exactly the FX meta sizes and strides
///   (fixed layout), kind GraphOutput when the graph returns it.
/// - a view op: no compute, an index mapping onto its base buffer; an
///   AtenItem for it only when the runtime needs the view as a tensor (a
///   graph output, an argument of an ATen item), so outputs alias as in eager.
/// - extern ops (lowering/ops/externs.h): AtenItem{is_extern} + Remark Extern.
/// - everything else: AtenItem + Remark Fallback with the reason; its tensor
///   result is a buffer bound to its slot (kind GraphInput: compute nodes only
///   read it). Tuple results are read through their getitem nodes' slots.
/// - SymInt nodes (sym_size, operator.mul, ...): their SizeExpr becomes an
///   index expression wherever they are used as scalars.
#pragma once

#include "lowering/graph/graph.h"
#include "lowering/lowered_graph.h"
#include "support/remarks.h"
#include "support/status.h"

namespace cppi::lowering {

struct LoweringOptions {
  /// Devices that have a codegen; nodes on other devices run through ATen
  /// with reason "no codegen for <device>".
  bool cpu = true;
  bool cuda = false;
  /// Fault injection (Inductor's inject_relu_bug_TESTING_ONLY): relu lowers
  /// to the identity, so negative inputs come out unchanged. Tests use it to
  /// prove the accuracy checks catch a wrong kernel.
  bool inject_relu_bug_testing_only = false;
  /// torch.are_deterministic_algorithms_enabled() when the graph compiled:
  /// CUDA atomic adds (accumulating scatters) land in a varying order, so
  /// those ops run through ATen's deterministic kernels instead.
  bool deterministic = false;
};

/// Lowers every node of `graph`. Fallbacks and extern calls are recorded in
/// `remarks` (the caller turns them into errors under fallback="error"). An
/// Error means a bug or a malformed graph, not an unsupported op.
Expected<LoweredGraph> lower_graph(const Graph& graph, const LoweringOptions& options, Remarks& remarks);

}  // namespace cppi::lowering
