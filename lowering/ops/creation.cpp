// Tensor creation (full, zeros, ones, scalar_tensor, arange, iota, empty,
// fill) and copies (clone, _to_copy, convert_element_type, copy, copy_).
#include "lowering/ops/elementwise.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::Expr;

bool same_device(const TensorRef& t, const TensorMeta& m) { return t.device == ir_device(m); }

/// out = value everywhere (value converted to the node's dtype).
Status fill_with(const OpCall& c, const Scalar& value) {
  if (c.node.value.kind != ValueInfo::Kind::Tensor) return Error::unsupported("result is not a tensor");
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<ir::IndexExpr>&) { return value.as_expr(t); });
  c.set_result_buffer(out);
  return Status::success();
}

/// full(size, value), full_like(x, value), new_full(x, size, value).
LowerFn full(size_t value_pos) {
  return [value_pos](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(v, c.scalar(value_pos, "fill_value"));
    return fill_with(c, v);
  };
}

LowerFn constant(double v) {
  return [v](const OpCall& c) -> Status { return fill_with(c, Scalar::of_float(v)); };
}

/// empty* has unspecified contents; filling it with zeros is one valid
/// choice and keeps every later read defined.
Status lower_empty(const OpCall& c) { return fill_with(c, Scalar::of_int(0)); }

/// fill.Tensor(x, value): value is a 0-dim tensor, broadcast.
Status lower_fill_tensor(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(v, c.tensor(1, "value"));
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(v, out->layout.sizes));
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<ir::IndexExpr>& x) {
    return ir::cast(load_broadcast(v, x), t);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// start + step * i. Integer ranges are exact index arithmetic; float ranges
/// compute in float64 like ATen's CPU kernel (its accumulate type).
Status arange_like(const OpCall& c, const Scalar& start, const Scalar& step) {
  DType t = c.meta().dtype;
  auto is_int = [](const Scalar& s) { return s.kind != Scalar::Kind::Float; };
  ir::BufferPtr out = c.result_buffer();
  if (out->layout.rank() != 1) return Error::unsupported("arange result is not 1-d");
  if (is_int(start) && is_int(step)) {
    auto as_index = [](const Scalar& s) { return s.kind == Scalar::Kind::Symbolic ? s.sym : ir::index_const(s.i); };
    emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<ir::IndexExpr>& x) {
      return ir::cast(ir::IndexValue::make(as_index(start) + as_index(step) * x[0]), t);
    });
  } else {
    emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<ir::IndexExpr>& x) {
      Expr i = ir::cast(ir::IndexValue::make(x[0]), DType::Float64);
      Expr v = ir::binary(ir::BinaryOp::Add, start.as_expr(DType::Float64),
                          ir::binary(ir::BinaryOp::Mul, step.as_expr(DType::Float64), i));
      return ir::cast(v, t);
    });
  }
  c.set_result_buffer(out);
  return Status::success();
}

Status lower_arange(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(end, c.scalar(0, "end"));
  (void)end;
  return arange_like(c, Scalar::of_int(0), Scalar::of_int(1));
}

Status lower_arange_start(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(start, c.scalar(0, "start"));
  std::optional<Scalar> step;
  if (c.node.target == "aten.arange.start_step") {
    CPPI_ASSIGN_OR_RETURN(s, c.optional_scalar(2, "step"));
    step = s;
  }
  return arange_like(c, start, step.value_or(Scalar::of_int(1)));
}

/// prims.iota(length, start, step, ...).
Status lower_iota(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(start, c.scalar(1, "start"));
  CPPI_ASSIGN_OR_RETURN(step, c.scalar(2, "step"));
  return arange_like(c, start, step);
}

/// A copy of `src` (broadcast, converted) into the node's own buffer.
Status copy_of(const OpCall& c, const TensorRef& src) {
  if (!same_device(src, c.meta())) return Error::unsupported("copy across devices");
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(src, out->layout.sizes));
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<ir::IndexExpr>& x) {
    return ir::cast(load_broadcast(src, x), t);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// clone, _to_copy, convert_element_type, lift_fresh_copy: (x).
Status lower_copy_self(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  return copy_of(c, x);
}

/// copy(self, src): a new tensor shaped like self holding src.
Status lower_copy(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(src, c.tensor(1, "src"));
  return copy_of(c, src);
}

/// copy_(self, src) into a graph input (AOTAutograd's input mutation): a
/// compute node storing into the input's own buffer. The node's value is
/// self itself (an alias), so it is marked as a view: if the runtime needs
/// the slot, an AtenItem recomputes the (idempotent) copy_.
Status lower_copy_inplace(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(self, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(src, c.tensor(1, "src"));
  if (self.device != src.device) return Error::unsupported("copy_ across devices");
  if (self.buffer->kind != ir::BufferKind::GraphInput)
    return Error::unsupported("copy_ into a tensor that is not a graph input");
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(src, self.sizes));
  emit_pointwise_store(
      c.ctx, c.node.name, self.sizes, self.buffer,
      [&](const std::vector<ir::IndexExpr>& x) { return element_index(self, x); },
      [&](const std::vector<ir::IndexExpr>& x) { return ir::cast(load_broadcast(src, x), self.dtype); });
  TensorRef alias = self;
  alias.is_view = true;
  c.set_result(alias);
  return Status::success();
}

}  // namespace

void register_creation_lowerings(Registry& r) {
  r.add("aten.full.default", full(1));
  r.add("aten.full_like.default", full(1));
  r.add("aten.new_full.default", full(2));
  r.add("aten.scalar_tensor.default", full(0));
  r.add("aten.zeros.default", constant(0));
  r.add("aten.zeros_like.default", constant(0));
  r.add("aten.new_zeros.default", constant(0));
  r.add("aten.ones.default", constant(1));
  r.add("aten.ones_like.default", constant(1));
  r.add("aten.new_ones.default", constant(1));
  r.add("aten.empty.memory_format", lower_empty);
  r.add("aten.empty_like.default", lower_empty);
  r.add("aten.empty_strided.default", lower_empty);
  r.add("aten.empty_permuted.default", lower_empty);  // the layout is the node's meta's, as for the others
  r.add("aten.new_empty.default", lower_empty);
  r.add("aten.new_empty_strided.default", lower_empty);
  r.add("aten.fill.Scalar", full(1));
  r.add("aten.fill.Tensor", lower_fill_tensor);
  r.add("aten.arange.default", lower_arange);
  r.add("aten.arange.start", lower_arange_start);
  r.add("aten.arange.start_step", lower_arange_start);
  r.add("prims.iota.default", lower_iota);
  r.add("aten.clone.default", lower_copy_self);
  r.add("aten._to_copy.default", lower_copy_self);
  r.add("aten.to.dtype", lower_copy_self);
  r.add("prims.convert_element_type.default", lower_copy_self);
  r.add("aten.lift_fresh_copy.default", lower_copy_self);
  r.add("aten.copy.default", lower_copy);
  r.add("aten.copy_.default", lower_copy_inplace);
}

}  // namespace cppi::lowering
