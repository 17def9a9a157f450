// Scans: cumsum and cumprod, each one ir::ScanNode.
//
// The running value accumulates as eager's kernels do (at::acc_type): on the
// CPU float32 in float64 and float16/bfloat16 in float32, so each output is
// the double-precision prefix rounded once, as eager's; on CUDA float32 and
// the reduced floats in float32. Integers and bool in int64. A requested
// dtype= converts the input first, then accumulates as that dtype would.
// cummax/cummin (values and positions) and logcumsumexp stay with ATen.
#include "lowering/ir/expr_visitor.h"
#include "lowering/ops/registry.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {
namespace {

/// The running value's dtype for a scan whose result is `out` on `device`.
DType scan_accumulation_type(DType out, ir::Device device) {
  if (!is_floating(out)) return DType::Int64;
  if (device == ir::Device::CPU && out == DType::Float32) return DType::Float64;
  return opmath_type(out);
}

/// cumsum / cumprod(self, dim, *, dtype=None).
LowerFn scan(ir::ReductionKind kind) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
    CPPI_ASSIGN_OR_RETURN(dim_arg, c.int_const(1, "dim"));
    ir::BufferPtr out = c.result_buffer();
    if (x.device != out->device) return Error::unsupported("scan across devices");
    if (out->dtype == DType::Bool) return Error::unsupported("a bool scan result");
    // A 0-d tensor scans as one element.
    const size_t rank = x.rank();
    CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(dim_arg, std::max<size_t>(rank, 1)));
    std::vector<ir::IndexExpr> ranges;
    std::vector<ir::IndexExpr> coords(rank);
    const auto xs = ir::pointwise_vars(rank > 0 ? rank - 1 : 0);
    for (size_t d = 0, k = 0; d < rank; ++d) {
      if (static_cast<int>(d) == dim) {
        coords[d] = ir::reduction_var(0);
      } else {
        coords[d] = xs[k++];
        ranges.push_back(x.sizes[d]);
      }
    }
    const ir::IndexExpr scan_range = rank > 0 ? x.sizes[dim] : ir::index_const(1);
    const DType acc = scan_accumulation_type(out->dtype, out->device);
    // dtype= converts the input, then the scan runs in that dtype's accumulator.
    ir::Expr body = ir::cast(ir::cast(load(x, coords), out->dtype), acc);
    ir::VarRanges vr;
    for (size_t i = 0; i < xs.size(); ++i) vr[xs[i].as<ir::IndexVar>()->name] = ranges[i];
    vr["r0"] = scan_range;
    body = ir::simplify_indices(body, vr);
    ir::IndexExpr index = ir::simplify(out->layout.index(coords), vr);
    c.ctx.emit(ir::ScanNode::make(c.ctx.fresh_node_name(c.node.name), std::move(ranges), scan_range, kind, body, out,
                                  index, {c.node.name}));
    c.set_result_buffer(out);
    return Status::success();
  };
}

}  // namespace

void register_scan_lowerings(Registry& r) {
  r.add("aten.cumsum.default", scan(ir::ReductionKind::Sum));
  r.add("aten.cumprod.default", scan(ir::ReductionKind::Prod));
}

}  // namespace cppi::lowering
