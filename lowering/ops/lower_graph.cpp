#include "lowering/ops/lower_graph.h"

#include "lowering/ops/context.h"
#include "lowering/ops/externs.h"
#include "lowering/ops/registry.h"

#include <functional>

namespace cppi::lowering {
namespace {

bool is_aten_target(const std::string& t) { return t.rfind("aten.", 0) == 0 || t.rfind("prims.", 0) == 0; }

/// A device some tensor of the node (its value or an input) lives on that
/// has no codegen, or nullptr.
const char* device_without_codegen(const LoweringContext& ctx, const Node& n) {
  auto check = [&](const TensorMeta& m) -> const char* {
    if (m.device == Device::CUDA && !ctx.options().cuda) return "cuda";
    if (m.device == Device::CPU && !ctx.options().cpu) return "cpu";
    return nullptr;
  };
  std::function<const char*(const ValueInfo&)> visit_value = [&](const ValueInfo& v) -> const char* {
    if (v.kind == ValueInfo::Kind::Tensor) return check(v.tensor);
    for (const auto& i : v.items)
      if (const char* d = visit_value(i)) return d;
    return nullptr;
  };
  if (const char* d = visit_value(n.value)) return d;
  std::function<const char*(const Arg&)> visit_arg = [&](const Arg& a) -> const char* {
    if (a.kind == Arg::Kind::Node) return visit_value(ctx.graph().nodes[a.i].value);
    for (const auto& e : a.list)
      if (const char* d = visit_arg(e)) return d;
    return nullptr;
  };
  for (const auto& a : n.args)
    if (const char* d = visit_arg(a)) return d;
  for (const auto& [k, a] : n.kwargs)
    if (const char* d = visit_arg(a)) return d;
  return nullptr;
}

/// The node runs through ATen; its tensor result (or, for tuples, each
/// getitem's) is a buffer bound to the slot, fixed to the meta layout.
/// `planned_as_fallback`: an extern (not a gap) that the memory plan still
/// treats as a fallback, whose result may alias its inputs (collectives).
void run_through_aten(LoweringContext& ctx, int i, bool is_extern, const std::string& reason,
                      bool planned_as_fallback = false) {
  const Node& n = ctx.graph().nodes[i];
  ctx.emit_aten(i, is_extern && !planned_as_fallback);
  ctx.remarks().add({is_extern ? Remark::Kind::Extern : Remark::Kind::Fallback, n.name, n.target, "", reason});
  NodeValue& v = ctx.value(i);
  v.from_aten = true;
  if (n.value.kind == ValueInfo::Kind::Tensor) {
    v.kind = NodeValue::Kind::Tensor;
    v.tensor = TensorRef::of_buffer(ctx.graph_buffer(i, n.value.tensor, ir::BufferKind::GraphInput),
                                    to_index(n.value.tensor.storage_offset));
  } else if (n.value.kind == ValueInfo::Kind::Tuple) {
    v.kind = NodeValue::Kind::Tuple;
    v.items.assign(n.value.items.size(), std::nullopt);
  } else if (n.value.kind == ValueInfo::Kind::SymInt || n.value.kind == ValueInfo::Kind::Int) {
    v.kind = NodeValue::Kind::Scalar;
    v.scalar = Scalar::of_sym(to_index(n.value.sym));
  }
}

/// Placeholders and attributes: tensors the runtime provides.
void lower_input(LoweringContext& ctx, int i) {
  const Node& n = ctx.graph().nodes[i];
  NodeValue& v = ctx.value(i);
  v.runtime_ready = true;
  switch (n.value.kind) {
    case ValueInfo::Kind::Tensor:
      v.kind = NodeValue::Kind::Tensor;
      v.tensor = TensorRef::of_buffer(ctx.graph_buffer(i, n.value.tensor, ir::BufferKind::GraphInput),
                                      to_index(n.value.tensor.storage_offset));
      break;
    case ValueInfo::Kind::SymInt:
    case ValueInfo::Kind::Int: {
      v.kind = NodeValue::Kind::Scalar;
      ir::IndexExpr e = to_index(n.value.sym);
      v.scalar = e.constant() ? Scalar::of_int(*e.constant()) : Scalar::of_sym(e);
      break;
    }
    case ValueInfo::Kind::Float:
      v.kind = NodeValue::Kind::Scalar;
      v.scalar = Scalar::of_float(n.value.number);
      break;
    default: break;  // SymFloat/SymBool: only a hint is known, so users fall back
  }
}

/// getitem(x, k): the item's lowered value. Items of ATen tuples (and of
/// tuples of views) need the runtime: an AtenItem reads them into the slot.
void lower_getitem(LoweringContext& ctx, int i) {
  const Node& n = ctx.graph().nodes[i];
  int src = static_cast<int>(n.args[0].i);
  size_t k = static_cast<size_t>(n.args[1].i);
  NodeValue& sv = ctx.value(src);
  NodeValue& v = ctx.value(i);
  if (sv.kind == NodeValue::Kind::Tuple && k < sv.items.size() && sv.items[k] && !sv.from_aten) {
    v.kind = NodeValue::Kind::Tensor;
    v.tensor = *sv.items[k];
    v.runtime_ready = !v.tensor.is_view;  // reductions store straight into the getitem's slot
    return;
  }
  ctx.emit_aten(i, false);
  if (n.value.kind == ValueInfo::Kind::Tensor) {
    v.kind = NodeValue::Kind::Tensor;
    v.tensor = TensorRef::of_buffer(ctx.graph_buffer(i, n.value.tensor, ir::BufferKind::GraphInput),
                                    to_index(n.value.tensor.storage_offset));
  }
}

bool is_symbolic_value(const ValueInfo& v) {
  return v.kind == ValueInfo::Kind::SymInt || v.kind == ValueInfo::Kind::Int || v.kind == ValueInfo::Kind::SymFloat ||
         v.kind == ValueInfo::Kind::Float || v.kind == ValueInfo::Kind::SymBool || v.kind == ValueInfo::Kind::Bool;
}

/// A SymFloat's expression (FloatExpr) as a float64 expression of the size
/// symbols, evaluated in the order Python evaluated it.
ir::Expr to_float_expr(const FloatExpr& e) {
  switch (e.op) {
    case FloatExpr::Op::Const: return ir::Constant::make(e.value, DType::Float64);
    case FloatExpr::Op::ToFloat: return ir::cast(ir::IndexValue::make(to_index(e.size)), DType::Float64);
    case FloatExpr::Op::Div:
      return ir::binary(ir::BinaryOp::TrueDiv, to_float_expr(e.args.at(0)), to_float_expr(e.args.at(1)));
    case FloatExpr::Op::Add:
    case FloatExpr::Op::Mul: {
      const auto op = e.op == FloatExpr::Op::Add ? ir::BinaryOp::Add : ir::BinaryOp::Mul;
      ir::Expr acc = to_float_expr(e.args.at(0));
      for (size_t k = 1; k < e.args.size(); ++k) acc = ir::binary(op, acc, to_float_expr(e.args[k]));
      return acc;
    }
  }
  return ir::Constant::make(0, DType::Float64);
}

/// sym_size, operator.mul, ...: the value is known symbolically; the runtime
/// computes the slot only if an ATen item or the output needs it.
void lower_symbolic(LoweringContext& ctx, int i) {
  const Node& n = ctx.graph().nodes[i];
  NodeValue& v = ctx.value(i);
  v.kind = NodeValue::Kind::Scalar;
  if (n.value.kind == ValueInfo::Kind::SymInt || n.value.kind == ValueInfo::Kind::Int) {
    ir::IndexExpr e = to_index(n.value.sym);
    v.scalar = e.constant() ? Scalar::of_int(*e.constant()) : Scalar::of_sym(e);
  } else if (n.value.kind == ValueInfo::Kind::Float) {
    v.scalar = Scalar::of_float(n.value.number);
  } else if (n.value.kind == ValueInfo::Kind::SymFloat && n.value.fexpr) {
    v.scalar = Scalar::of_float_expr(to_float_expr(*n.value.fexpr));
  } else {
    // SymBool / Bool, and SymFloats export could not describe: the meta holds
    // a hint, not an expression, so a kernel must not bake it in; nodes
    // reading it fall back to ATen.
    v.kind = NodeValue::Kind::None;
  }
}

/// A tensor argument on another device than the node's result that no
/// kernel can read. Eager lets CUDA ops read 0-d CPU tensors (lifted Python
/// scalars); a CUDA kernel takes one by value when its value is one element
/// of CPU memory (ir::is_host_scalar), so only other cases count. Returns the
/// argument's node name, or "" when there is none. `host_scalars` is set
/// when the node reads a host scalar.
std::string other_device_argument(const LoweringContext& ctx, const Node& n, bool* host_scalars) {
  *host_scalars = false;
  if (n.value.kind != ValueInfo::Kind::Tensor) return "";
  const Device device = n.value.tensor.device;
  std::string found;
  std::function<void(const Arg&)> visit = [&](const Arg& a) {
    if (!found.empty()) return;
    if (a.kind == Arg::Kind::Node) {
      const Node& src = ctx.graph().nodes[a.i];
      if (src.value.kind == ValueInfo::Kind::Tensor && src.value.tensor.device != device) {
        const NodeValue& v = ctx.value(static_cast<int>(a.i));
        const bool by_value = device == Device::CUDA && src.value.tensor.sizes.empty() &&
                              v.kind == NodeValue::Kind::Tensor && v.tensor.buffer &&
                              ir::is_host_scalar(*v.tensor.buffer, ir::Device::CUDA);
        if (by_value) {
          *host_scalars = true;
        } else {
          found = src.name;
        }
      }
    }
    for (const auto& e : a.list) visit(e);
  };
  for (const auto& a : n.args) visit(a);
  for (const auto& [k, a] : n.kwargs) visit(a);
  return found;
}

/// The first error `check(access, written)` finds among the buffers the
/// nodes emitted since `first_item` write and read, or success.
Status check_accesses(const LoweringContext& ctx, size_t first_item,
                      const std::function<Status(const ir::Access&, bool written)>& check) {
  for (size_t k = first_item; k < ctx.program().size(); ++k) {
    const auto* node = std::get_if<ir::ComputeNode>(&ctx.program()[k]);
    if (!node) continue;
    for (const ir::Access& w : ir::writes(*node)) CPPI_RETURN_IF_ERROR_STATUS(check(w, true));
    for (const ir::Access& r : ir::reads(*node)) CPPI_RETURN_IF_ERROR_STATUS(check(r, false));
  }
  return Status::success();
}

/// What a CUDA node that reads host scalars emitted must be: work on CUDA
/// that reads CPU memory only through host scalars. A lowering that puts a
/// temporary on its argument's device, or indexes the scalar as more than
/// one element, would build a kernel no device can run.
Status check_host_scalar_reads(const LoweringContext& ctx, size_t first_item) {
  return check_accesses(ctx, first_item, [](const ir::Access& a, bool written) -> Status {
    if (a.buffer->device == ir::Device::CUDA) return Status::success();
    if (written) return Error::unsupported(cat("writes ", a.buffer->name, " on the CPU while reading a 0-d CPU tensor"));
    if (!ir::is_host_scalar(*a.buffer, ir::Device::CUDA))
      return Error::unsupported(cat("reads ", a.buffer->name, " in CPU memory as more than one element"));
    return Status::success();
  });
}

/// Float8 tensors are storage only (support/dtype.h): a lowering whose
/// kernels would read or write one runs through ATen instead.
Status check_no_float8(const LoweringContext& ctx, size_t first_item) {
  return check_accesses(ctx, first_item, [](const ir::Access& a, bool) -> Status {
    if (!is_float8(a.buffer->dtype)) return Status::success();
    return Error::unsupported(cat("computes on ", dtype_name(a.buffer->dtype),
                                  " (float8 tensors are passed to ATen ops, not computed in kernels yet)"));
  });
}

void lower_call(LoweringContext& ctx, const Registry& registry, int i) {
  const Node& n = ctx.graph().nodes[i];
  if (n.target == "getitem") return lower_getitem(ctx, i);
  bool size_arithmetic = !is_aten_target(n.target) || n.target.rfind("aten.sym_", 0) == 0;
  if (size_arithmetic && is_symbolic_value(n.value)) return lower_symbolic(ctx, i);
  if (const char* dev = device_without_codegen(ctx, n)) {
    return run_through_aten(ctx, i, is_extern_op(n.target), cat("no codegen for ", dev));
  }
  if (is_extern_op(n.target)) return run_through_aten(ctx, i, true, "calls the vendor library through ATen");
  if (is_collective_op(n.target)) {
    // Its values may alias and must live until their wait.
    return run_through_aten(ctx, i, true, "a collective: c10d runs it through ATen", /*planned_as_fallback=*/true);
  }
  bool host_scalars = false;
  if (std::string other = other_device_argument(ctx, n, &host_scalars); !other.empty())
    return run_through_aten(ctx, i, false,
                            cat("reads '", other, "' from another device; a kernel reads one device's memory (and "
                                "a CUDA kernel one-element CPU tensors by value)"));
  const Lowering* lowering = registry.find(n.target);
  if (!lowering) return run_through_aten(ctx, i, false, cat("no lowering for ", n.target));
  if (!lowering->fn) return run_through_aten(ctx, i, false, lowering->fallback_reason);
  // A lowering that gives up (or trips an IR check) leaves nothing behind.
  auto mark = ctx.mark();
  Status st;
  try {
    st = lowering->fn(OpCall(ctx, i));
    if (st.ok() && host_scalars) st = check_host_scalar_reads(ctx, mark.program);
    if (st.ok()) st = check_no_float8(ctx, mark.program);
  } catch (const CompilerError& e) {
    st = Error::internal(e.what());
  }
  if (st.ok()) return;
  ctx.rollback(mark);
  ctx.value(i) = NodeValue{};
  std::string reason = st.error().kind == Error::Kind::Unsupported
                           ? cat(n.target, ": ", st.error().message)
                           : cat("lowering failed: ", st.error().message);
  run_through_aten(ctx, i, false, reason);
}

}  // namespace

Expected<LoweredGraph> lower_graph(const Graph& graph, const LoweringOptions& options, Remarks& remarks) {
  if (graph.nodes.empty() || graph.nodes.back().op != Node::Op::Output)
    return Error::invalid_input("graph must end with its output node");
  const Registry& registry = builtin_lowerings();
  LoweringContext ctx(graph, options, remarks);
  for (size_t idx = 0; idx < graph.nodes.size(); ++idx) {
    int i = static_cast<int>(idx);
    const Node& n = graph.nodes[idx];
    switch (n.op) {
      case Node::Op::Placeholder: lower_input(ctx, i); break;
      case Node::Op::GetAttr:
        ctx.emit_aten(i, false);
        lower_input(ctx, i);
        break;
      case Node::Op::CallFunction: lower_call(ctx, registry, i); break;
      case Node::Op::Output: {
        // Returned views and symbolic values must exist as real values.
        std::function<void(const Arg&)> visit = [&](const Arg& a) {
          if (a.kind == Arg::Kind::Node) ctx.ensure_runtime(static_cast<int>(a.i));
          for (const auto& e : a.list) visit(e);
        };
        for (const auto& a : n.args) visit(a);
        break;
      }
    }
  }
  return ctx.finish();
}

}  // namespace cppi::lowering
