// Shared IR fixtures for the ir tests: a pointwise node, a reduction node and
// a fused softmax kernel, built the way lowerings and fusion will build them.
#pragma once

#include "lowering/ir/expr.h"
#include "lowering/ir/kernel.h"
#include "lowering/ir/node.h"

namespace cppi::ir::testing {

/// out[i, j] = relu(a[i, j] + b[j]) over a (s0, 64) float32 input, b broadcast.
inline PointwiseNodePtr add_relu_node(const BufferPtr& a, const BufferPtr& b, const BufferPtr& out) {
  IndexExpr x0 = pointwise_var(0), x1 = pointwise_var(1);
  Expr sum = binary(BinaryOp::Add, load(a, a->layout.index({x0, x1})), load(b, b->layout.index({x1})));
  Expr relu = binary(BinaryOp::Maximum, sum, const_float(0));
  return PointwiseNode::make("add_relu", out, relu, {"add", "relu"});
}

/// The fused softmax over the last dim of a (rows, cols) buffer.
inline KernelPtr softmax_kernel(const BufferPtr& in, const BufferPtr& out, const IndexExpr& rows,
                                const IndexExpr& cols) {
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, in->layout.index({x0, r0}));
  auto amax = ReductionStage::make({{r0, cols}}, ReductionKind::Max, x, {"amax"});
  Expr shifted_exp = unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result()));
  auto denom = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, shifted_exp, {"denom"});
  PointwiseStage normalize{{{r0, cols}},
                           {Store::make(out, out->layout.index({x0, r0}),
                                        binary(BinaryOp::TrueDiv, shifted_exp, denom.result()))}};
  return Kernel::make("softmax_kernel", in->device, {{x0, rows}}, {amax, denom, normalize}, Schedule{},
                      {"amax", "sub", "exp", "sum", "div"});
}

}  // namespace cppi::ir::testing
