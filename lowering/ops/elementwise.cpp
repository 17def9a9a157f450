#include "lowering/ops/elementwise.h"

namespace cppi::lowering {

PromotionOperand Operand::promotion() const {
  if (tensor) {
    return {tensor->rank() == 0 ? PromotionOperand::Kind::ZeroDimTensor : PromotionOperand::Kind::Tensor,
            tensor->dtype};
  }
  return {PromotionOperand::Kind::Scalar, scalar.category()};
}

Expected<Operand> operand(const OpCall& call, size_t pos, std::string_view kw) {
  const Arg* a = call.arg(pos, kw);
  if (OpCall::node_of(a) >= 0 && call.ctx.value(OpCall::node_of(a)).kind == NodeValue::Kind::Tensor) {
    CPPI_ASSIGN_OR_RETURN(t, call.tensor(pos, kw));
    return Operand{t, {}};
  }
  // A symbolic float (var's backward scale 2 / (n - 1)) is an expression
  // like any other operand: promoted as a Python float, computed in the kernel.
  if (int n = OpCall::node_of(a); n >= 0) {
    const NodeValue& v = call.ctx.value(n);
    if (v.kind == NodeValue::Kind::Scalar && v.scalar.kind == Scalar::Kind::SymbolicFloat)
      return Operand{std::nullopt, v.scalar};
  }
  CPPI_ASSIGN_OR_RETURN(s, call.scalar(pos, kw));
  return Operand{std::nullopt, s};
}

Status lower_elementwise(const OpCall& call, const std::vector<Operand>& operands, const ElementwiseOptions& options,
                         const ElementwiseFn& fn) {
  if (call.node.value.kind != ValueInfo::Kind::Tensor) return Error::unsupported("result is not a tensor");
  std::vector<PromotionOperand> promoted;
  for (size_t i = 0; i < operands.size(); ++i) {
    bool keep = i < options.keep_dtype.size() && options.keep_dtype[i];
    if (!keep) promoted.push_back(operands[i].promotion());
  }
  PromotedTypes types = elementwise_dtypes(promoted, options.promotion);
  DType compute = options.compute.value_or(types.compute);
  DType out_dtype = call.meta().dtype;
  if (!options.compute && types.result != out_dtype) {
    return Error::unsupported(cat("type promotion gives ", dtype_name(types.result), " but eager returns ",
                                  dtype_name(out_dtype)));
  }
  const size_t rank = call.meta().rank();
  const std::vector<ir::IndexExpr> out_sizes = to_index(call.meta().sizes);
  for (const Operand& o : operands) {
    if (o.tensor) CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(*o.tensor, out_sizes));
  }
  // Build the body once, symbolically, to surface typing errors before
  // anything is emitted.
  auto body_at = [&](const std::vector<ir::IndexExpr>& x) -> Expected<ir::Expr> {
    std::vector<ir::Expr> args;
    for (size_t i = 0; i < operands.size(); ++i) {
      bool keep = i < options.keep_dtype.size() && options.keep_dtype[i];
      const Operand& o = operands[i];
      if (o.tensor) {
        ir::Expr v = load_broadcast(*o.tensor, x);
        args.push_back(keep ? (is_reduced_float(v.dtype()) ? ir::cast(v, DType::Float32) : v) : ir::cast(v, compute));
      } else {
        args.push_back(o.scalar.as_expr(keep ? opmath_type(o.scalar.category()) : compute));
      }
    }
    return fn(args, compute);
  };
  auto probe = body_at(ir::pointwise_vars(rank));
  if (!probe.ok()) return probe.error();
  ir::BufferPtr out = call.result_buffer();
  emit_pointwise(call.ctx, call.node.name, out, [&](const std::vector<ir::IndexExpr>&) { return *probe; });
  call.set_result_buffer(out);
  return Status::success();
}

}  // namespace cppi::lowering
