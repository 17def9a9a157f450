#include "lowering/ops/op_call.h"

#include <algorithm>

namespace cppi::lowering {

const Arg* OpCall::arg(size_t pos, std::string_view kw) const {
  const Arg* a = nullptr;
  if (pos < node.args.size()) {
    a = &node.args[pos];
  } else if (!kw.empty()) {
    for (const auto& [k, v] : node.kwargs)
      if (k == kw) a = &v;
  }
  return a && a->kind != Arg::Kind::None ? a : nullptr;
}

namespace {
std::string describe(size_t pos, std::string_view kw) {
  return kw.empty() ? cat("argument ", pos) : cat("argument '", kw, "'");
}
}  // namespace

Expected<TensorRef> OpCall::tensor(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  int n = node_of(a);
  if (n < 0) return Error::unsupported(cat(describe(pos, kw), " is not a tensor"));
  NodeValue& v = ctx.value(n);
  if (v.kind != NodeValue::Kind::Tensor) return Error::unsupported(cat(describe(pos, kw), " is not a lowered tensor"));
  return v.tensor;
}

Expected<std::vector<TensorRef>> OpCall::tensor_list(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (!a || a->kind != Arg::Kind::List) return Error::unsupported(cat(describe(pos, kw), " is not a tensor list"));
  std::vector<TensorRef> out;
  for (const auto& e : a->list) {
    int n = node_of(&e);
    if (n < 0 || ctx.value(n).kind != NodeValue::Kind::Tensor)
      return Error::unsupported(cat(describe(pos, kw), " holds a non-tensor"));
    out.push_back(ctx.value(n).tensor);
  }
  return out;
}

Expected<Scalar> OpCall::scalar(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (!a) return Error::unsupported(cat(describe(pos, kw), " is missing"));
  switch (a->kind) {
    case Arg::Kind::Bool: return Scalar::of_bool(a->b);
    case Arg::Kind::Int: return Scalar::of_int(a->i);
    case Arg::Kind::Float: return Scalar::of_float(a->f);
    case Arg::Kind::SymExpr: {
      ir::IndexExpr e = to_index(a->sym);
      if (auto c = e.constant()) return Scalar::of_int(*c);
      return Scalar::of_sym(e);
    }
    case Arg::Kind::Node: {
      NodeValue& v = ctx.value(static_cast<int>(a->i));
      if (v.kind != NodeValue::Kind::Scalar) return Error::unsupported(cat(describe(pos, kw), " is not a scalar"));
      if (v.scalar.kind == Scalar::Kind::SymbolicFloat)
        return Error::unsupported(cat(describe(pos, kw), " is a symbolic float (computed from sizes) where the lowering "
                                      "needs a constant"));
      return v.scalar;
    }
    default: return Error::unsupported(cat(describe(pos, kw), " is not a scalar"));
  }
}

Expected<std::optional<Scalar>> OpCall::optional_scalar(size_t pos, std::string_view kw) const {
  if (!arg(pos, kw)) return std::optional<Scalar>();
  CPPI_ASSIGN_OR_RETURN(s, scalar(pos, kw));
  return std::optional<Scalar>(s);
}

Expected<int64_t> OpCall::int_const(size_t pos, std::string_view kw, std::optional<int64_t> dflt) const {
  const Arg* a = arg(pos, kw);
  if (!a) {
    if (dflt) return *dflt;
    return Error::unsupported(cat(describe(pos, kw), " is missing"));
  }
  if (a->kind == Arg::Kind::Int) return a->i;
  if (a->kind == Arg::Kind::Bool) return static_cast<int64_t>(a->b);
  CPPI_ASSIGN_OR_RETURN(s, scalar(pos, kw));
  if (s.kind == Scalar::Kind::Int || s.kind == Scalar::Kind::Bool) return s.i;
  return Error::unsupported(cat(describe(pos, kw), " is not a constant integer"));
}

Expected<std::vector<int64_t>> OpCall::int_list(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (!a) return std::vector<int64_t>{};
  if (a->kind == Arg::Kind::Int) return std::vector<int64_t>{a->i};
  if (a->kind != Arg::Kind::List) return Error::unsupported(cat(describe(pos, kw), " is not an int list"));
  std::vector<int64_t> out;
  for (const auto& e : a->list) {
    if (e.kind != Arg::Kind::Int) return Error::unsupported(cat(describe(pos, kw), " holds a non-constant"));
    out.push_back(e.i);
  }
  return out;
}

namespace {
Expected<ir::IndexExpr> size_of_arg(LoweringContext& ctx, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Int: return ir::index_const(a.i);
    case Arg::Kind::SymExpr: return to_index(a.sym);
    case Arg::Kind::Node: {
      NodeValue& v = ctx.value(static_cast<int>(a.i));
      if (v.kind == NodeValue::Kind::Scalar) {
        if (v.scalar.kind == Scalar::Kind::Symbolic) return v.scalar.sym;
        if (v.scalar.kind == Scalar::Kind::Int) return ir::index_const(v.scalar.i);
      }
      return Error::unsupported("size argument is not an integer");
    }
    default: return Error::unsupported("size argument is not an integer");
  }
}
}  // namespace

Expected<ir::IndexExpr> OpCall::size(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (!a) return Error::unsupported(cat(describe(pos, kw), " is missing"));
  return size_of_arg(ctx, *a);
}

Expected<std::vector<ir::IndexExpr>> OpCall::size_list(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (!a) return std::vector<ir::IndexExpr>{};
  if (a->kind != Arg::Kind::List) {
    CPPI_ASSIGN_OR_RETURN(one, size_of_arg(ctx, *a));
    return std::vector<ir::IndexExpr>{one};
  }
  std::vector<ir::IndexExpr> out;
  for (const auto& e : a->list) {
    CPPI_ASSIGN_OR_RETURN(s, size_of_arg(ctx, e));
    out.push_back(s);
  }
  return out;
}

bool OpCall::flag(size_t pos, std::string_view kw, bool dflt) const {
  const Arg* a = arg(pos, kw);
  if (!a) return dflt;
  if (a->kind == Arg::Kind::Bool) return a->b;
  if (a->kind == Arg::Kind::Int) return a->i != 0;
  return dflt;
}

std::optional<DType> OpCall::dtype(size_t pos, std::string_view kw) const {
  const Arg* a = arg(pos, kw);
  if (a && a->kind == Arg::Kind::DType) return a->dtype;
  return std::nullopt;
}

ir::BufferPtr OpCall::item_buffer(size_t k) const {
  int g = ctx.getitem_node(index, static_cast<int>(k));
  if (g >= 0) return ctx.result_buffer(g, ctx.graph().nodes[g].value.tensor);
  const TensorMeta& m = item_meta(k);
  return ctx.temp_buffer(cat(node.name, "_", k), m.dtype, ir_device(m), to_index(m.sizes));
}

void OpCall::set_result(TensorRef t) const {
  NodeValue& v = ctx.value(index);
  v.kind = NodeValue::Kind::Tensor;
  v.runtime_ready = !t.is_view;
  v.tensor = std::move(t);
}

void OpCall::set_items(std::vector<std::optional<TensorRef>> items) const {
  NodeValue& v = ctx.value(index);
  v.kind = NodeValue::Kind::Tuple;
  v.items = std::move(items);
  // The tuple itself has no storage: its items live in the getitem slots.
  v.runtime_ready = false;
}

void OpCall::set_result_buffer(const ir::BufferPtr& buffer) const {
  set_result(TensorRef::of_buffer(buffer, to_index(meta().storage_offset)));
}

Expected<int> normalize_dim(int64_t dim, size_t rank) {
  int64_t r = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  if (dim < -r || dim >= r) return Error::unsupported(cat("dim ", dim, " out of range for rank ", rank));
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

Expected<std::vector<int>> normalize_dims(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<int> out;
  if (dims.empty()) {
    for (size_t i = 0; i < rank; ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  for (int64_t d : dims) {
    CPPI_ASSIGN_OR_RETURN(n, normalize_dim(d, rank));
    if (rank == 0) continue;  // dim 0 / -1 of a scalar: nothing to reduce
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expected<DiagonalArgs> diagonal_args(const OpCall& c, size_t first, size_t rank) {
  DiagonalArgs d;
  CPPI_ASSIGN_OR_RETURN(offset, c.int_const(first, "offset", 0));
  CPPI_ASSIGN_OR_RETURN(a, c.int_const(first + 1, "dim1", 0));
  CPPI_ASSIGN_OR_RETURN(b, c.int_const(first + 2, "dim2", 1));
  CPPI_ASSIGN_OR_RETURN(dim1, normalize_dim(a, rank));
  CPPI_ASSIGN_OR_RETURN(dim2, normalize_dim(b, rank));
  if (dim1 == dim2) return Error::unsupported("diagonal with dim1 == dim2");
  d.offset = offset;
  d.dim1 = dim1;
  d.dim2 = dim2;
  return d;
}

}  // namespace cppi::lowering
