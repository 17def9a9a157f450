// Ops that index with tensor values: gather, index_select, embedding,
// index.Tensor / _unsafe_index (advanced indexing), index_put (without
// accumulate) and scatter (without reduce). Each position read from an index
// tensor becomes an indirect index leaf (ir::indirect, expr.h): negative
// indices wrap for advanced indexing and are out of range for the others, as
// in eager. An index out of range is clamped into the dimension, so a kernel
// never touches memory outside a buffer; the CPU kernel also reports it and
// the call raises IndexError, as eager does (cppi_check_index), and a CUDA
// kernel fails with a device-side assert, as eager's do (cppi_index_assert).
//
// Writes through indices (index_put, scatter) are two nodes into the result
// buffer: a copy of self, then one store per index position. With repeated
// positions eager leaves the winner unspecified and so do we (one of the
// candidate values lands; parallel chunks may pick any). Accumulating
// scatters (index_put(accumulate=True), which index_add and embedding's
// backward decompose into, scatter_add, scatter_reduce's sum) store with
// ir::Store::accumulate: on the CPU their kernel runs parallel only over
// the loops no two of whose points add into one element, on CUDA each add is
// atomic.
#include <limits>

#include "lowering/ops/op_call.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::Expr;
using ir::IndexExpr;

Status check_index_dtype(const TensorRef& idx, const char* what) {
  if (idx.dtype == DType::Bool || idx.dtype == DType::UInt8)
    return Error::unsupported(cat(what, " is a ", dtype_name(idx.dtype), " mask (data-dependent output shape)"));
  if (!is_integral(idx.dtype)) return Error::unsupported(cat(what, " has dtype ", dtype_name(idx.dtype)));
  return Status::success();
}

/// An indirect position needs a dimension with at least one element.
Status check_indexable(const IndexExpr& size) {
  if (auto n = size.constant(); n && *n < 1) return Error::unsupported("indexing into an empty dimension");
  return Status::success();
}

/// The position that `idx` holds at `coords` in a dimension of `size`. These
/// ops (gather, index_select, embedding, scatter) reject negative indices.
IndexExpr position(const TensorRef& idx, const std::vector<IndexExpr>& coords, const IndexExpr& size) {
  return ir::indirect(load(idx, coords), size, /*wraps=*/false);
}

bool same_sizes(const std::vector<IndexExpr>& a, const std::vector<IndexExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

/// Emits out = copy of self: the first half of a write through indices.
void emit_copy(const OpCall& c, const TensorRef& self, const ir::BufferPtr& out) {
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& x) { return load(self, x); });
}

// --- gather-like -------------------------------------------------------------------------

/// gather(self, dim, index): out[x] = self[x with x[dim] = index[x]].
Status lower_gather(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim"));
  CPPI_ASSIGN_OR_RETURN(idx, c.tensor(2, "index"));
  if (c.flag(3, "sparse_grad", false)) return Error::unsupported("gather with sparse_grad");
  CPPI_RETURN_IF_ERROR_STATUS(check_index_dtype(idx, "index"));
  if (x.rank() == 0 || idx.rank() != x.rank()) return Error::unsupported("gather of a 0-d tensor or with an index of another rank");
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_RETURN_IF_ERROR_STATUS(check_indexable(x.sizes[dim]));
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    coords[dim] = position(idx, o, x.sizes[dim]);
    return load(x, coords);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// index_select(self, dim, index): out[x] = self[x with x[dim] = index[x[dim]]].
Status lower_index_select(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim"));
  CPPI_ASSIGN_OR_RETURN(idx, c.tensor(2, "index"));
  CPPI_RETURN_IF_ERROR_STATUS(check_index_dtype(idx, "index"));
  if (x.rank() == 0 || idx.rank() > 1) return Error::unsupported("index_select of a 0-d tensor or with a multi-dim index");
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_RETURN_IF_ERROR_STATUS(check_indexable(x.sizes[dim]));
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    std::vector<IndexExpr> at;
    if (idx.rank() == 1) at.push_back(o[dim]);
    coords[dim] = position(idx, at, x.sizes[dim]);
    return load(x, coords);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// embedding(weight, indices, ...): out[i..., j] = weight[indices[i...], j].
/// padding_idx only matters for the backward; scale_grad_by_freq and sparse
/// too.
Status lower_embedding(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(w, c.tensor(0, "weight"));
  CPPI_ASSIGN_OR_RETURN(idx, c.tensor(1, "indices"));
  CPPI_RETURN_IF_ERROR_STATUS(check_index_dtype(idx, "indices"));
  if (w.rank() != 2) return Error::unsupported("embedding with a weight that is not 2-d");
  CPPI_RETURN_IF_ERROR_STATUS(check_indexable(w.sizes[0]));
  const size_t k = idx.rank();
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> at(o.begin(), o.begin() + static_cast<long>(k));
    return load(w, {position(idx, at, w.sizes[0]), o[k]});
  });
  c.set_result_buffer(out);
  return Status::success();
}

// --- advanced indexing ----------------------------------------------------------------------

/// x[indices] where indices has one optional index tensor per leading dim of
/// x (None: the whole dim), as index.Tensor and index_put take it.
struct AdvancedIndex {
  TensorRef self;
  std::vector<std::optional<TensorRef>> indices;  // one per dim of self (padded with None)
  std::vector<IndexExpr> broadcast;               // the index tensors' broadcast shape
  size_t broadcast_at = 0;                        // where those dims sit in the result
  std::vector<IndexExpr> result_sizes;

  /// Coordinates in self of result element `o`.
  std::vector<IndexExpr> self_coords(const std::vector<IndexExpr>& o) const {
    std::vector<IndexExpr> b(o.begin() + static_cast<long>(broadcast_at),
                             o.begin() + static_cast<long>(broadcast_at + broadcast.size()));
    std::vector<IndexExpr> coords;
    size_t plain = 0;  // plain (None) dims so far: result dim plain, or past the broadcast dims
    for (size_t d = 0; d < self.rank(); ++d) {
      if (indices[d]) {
        coords.push_back(ir::indirect(load_broadcast(*indices[d], b), self.sizes[d]));
      } else {
        coords.push_back(o[plain < broadcast_at ? plain : plain + broadcast.size()]);
        ++plain;
      }
    }
    return coords;
  }
};

/// numpy broadcasting of index shapes; nullopt when two sizes may differ.
std::optional<std::vector<IndexExpr>> broadcast_shapes(const std::vector<std::vector<IndexExpr>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<IndexExpr> out(rank, ir::index_const(1));
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      IndexExpr& o = out[rank - s.size() + i];
      if (s[i].is_constant(1) || s[i] == o) continue;
      if (!o.is_constant(1)) return std::nullopt;
      o = s[i];
    }
  }
  return out;
}

Expected<AdvancedIndex> advanced_index(const OpCall& c) {
  AdvancedIndex a;
  CPPI_ASSIGN_OR_RETURN(self, c.tensor(0, "self"));
  a.self = self;
  const Arg* list = c.arg(1, "indices");
  if (!list || list->kind != Arg::Kind::List) return Error::unsupported("indices is not a list");
  if (list->list.size() > self.rank()) return Error::unsupported("more indices than dims");
  std::vector<std::vector<IndexExpr>> shapes;
  std::vector<size_t> indexed;
  for (size_t d = 0; d < self.rank(); ++d) {
    const Arg* e = d < list->list.size() ? &list->list[d] : nullptr;
    if (!e || e->kind == Arg::Kind::None) {
      a.indices.emplace_back();
      continue;
    }
    int n = OpCall::node_of(e);
    if (n < 0 || c.ctx.value(n).kind != NodeValue::Kind::Tensor) return Error::unsupported("an index is not a tensor");
    const TensorRef& t = c.ctx.value(n).tensor;
    CPPI_RETURN_IF_ERROR_STATUS(check_index_dtype(t, "an index tensor"));
    CPPI_RETURN_IF_ERROR_STATUS(check_indexable(self.sizes[d]));
    a.indices.push_back(t);
    shapes.push_back(t.sizes);
    indexed.push_back(d);
  }
  if (indexed.empty()) return Error::unsupported("no index tensor");
  auto b = broadcast_shapes(shapes);
  if (!b) return Error::unsupported("index tensors whose shapes may not broadcast");
  a.broadcast = *b;
  // Adjacent indexed dims keep their place; separated ones go first (numpy).
  const bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  a.broadcast_at = adjacent ? indexed.front() : 0;
  std::vector<IndexExpr> plain;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (!a.indices[d]) plain.push_back(self.sizes[d]);
  }
  a.result_sizes.assign(plain.begin(), plain.begin() + static_cast<long>(a.broadcast_at));
  a.result_sizes.insert(a.result_sizes.end(), a.broadcast.begin(), a.broadcast.end());
  a.result_sizes.insert(a.result_sizes.end(), plain.begin() + static_cast<long>(a.broadcast_at), plain.end());
  return a;
}

/// index.Tensor / _unsafe_index.Tensor: out[o] = self[self_coords(o)].
Status lower_index(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(a, advanced_index(c));
  if (!same_sizes(a.result_sizes, to_index(c.meta().sizes)))
    return Error::unsupported("advanced indexing result shape does not match the graph's");
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out,
                 [&](const std::vector<IndexExpr>& o) { return load(a.self, a.self_coords(o)); });
  c.set_result_buffer(out);
  return Status::success();
}

/// Whether an accumulating scatter into `self` adds into a float32 copy of
/// it: a 16-bit float on CUDA. ATen's CUDA kernel sums the updates of a
/// position in float and rounds once; a 16-bit atomic add would round at
/// every add (an embedding row a frequent token hits thousands of times
/// would keep a few digits of its gradient), and CUDA has none for half.
bool accumulates_in_float(const TensorRef& self) {
  return self.device == ir::Device::CUDA && (self.dtype == DType::Float16 || self.dtype == DType::BFloat16);
}

/// Where an accumulating scatter into `self` adds (its copy of self first):
/// `out` itself, or a float32 buffer that finish_accumulator rounds into
/// `out` after the adds (accumulates_in_float).
ir::BufferPtr accumulator_for(const OpCall& c, const TensorRef& self, const ir::BufferPtr& out) {
  if (!accumulates_in_float(self)) return out;
  return c.ctx.temp_buffer(cat(c.node.name, "_acc"), DType::Float32, self.device, self.sizes);
}

void finish_accumulator(const OpCall& c, const ir::BufferPtr& acc, const ir::BufferPtr& out) {
  if (acc == out) return;
  emit_pointwise(c.ctx, c.node.name, out,
                 [&](const std::vector<IndexExpr>& x) { return ir::Load::make(acc, acc->layout.index(x)); });
}

/// Whether an accumulating scatter into `self`'s dtype and device runs here.
Status check_accumulate(const OpCall& c, const TensorRef& self) {
  if (!ir::accumulate_supported(self.dtype, self.device) && !accumulates_in_float(self)) {
    return Error::unsupported(cat("accumulating into ", dtype_name(self.dtype), " on ", ir::to_string(self.device),
                                  self.device == ir::Device::CUDA ? " (no whole atomic add for it)" : "",
                                  ": runs through ATen"));
  }
  if (self.device == ir::Device::CUDA && c.ctx.options().deterministic) {
    return Error::unsupported(
        "torch.use_deterministic_algorithms is on and CUDA atomic adds land in any order: runs through ATen");
  }
  return Status::success();
}

/// index_put / _unsafe_index_put(self, indices, values, accumulate): out =
/// self; out[self_coords(o)] = values (broadcast), or += with accumulate,
/// for every o.
Status lower_index_put(const OpCall& c) {
  const bool accumulate = c.flag(3, "accumulate", false);
  CPPI_ASSIGN_OR_RETURN(a, advanced_index(c));
  if (accumulate) CPPI_RETURN_IF_ERROR_STATUS(check_accumulate(c, a.self));
  CPPI_ASSIGN_OR_RETURN(values, c.tensor(2, "values"));
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(values, a.result_sizes));
  ir::BufferPtr out = c.result_buffer();
  const ir::BufferPtr to = accumulate ? accumulator_for(c, a.self, out) : out;
  emit_copy(c, a.self, to);
  emit_pointwise_store(
      c.ctx, c.node.name, a.result_sizes, to,
      [&](const std::vector<IndexExpr>& o) { return to->layout.index(a.self_coords(o)); },
      [&](const std::vector<IndexExpr>& o) { return load_broadcast(values, o); },
      accumulate ? StoreMode::Accumulate : StoreMode::Overwrite);
  finish_accumulator(c, to, out);
  c.set_result_buffer(out);
  return Status::success();
}

/// index_put_(self, indices, values) into a graph input whose old value
/// nothing else reads (graph_passes.reinplace_input_scatters makes it from an
/// index_put and AOTAutograd's copy_ of the result back into the input): the
/// stores go straight into the input, with no copy of it before or after.
/// The value is the input itself (an alias: recomputing it is idempotent
/// without accumulate, which is why accumulate stays functional).
Status lower_index_put_inplace(const OpCall& c) {
  if (c.flag(3, "accumulate", false)) return Error::unsupported("index_put_ with accumulate");
  CPPI_ASSIGN_OR_RETURN(a, advanced_index(c));
  if (a.self.buffer->kind != ir::BufferKind::GraphInput)
    return Error::unsupported("index_put_ into a tensor that is not a graph input");
  CPPI_ASSIGN_OR_RETURN(values, c.tensor(2, "values"));
  if (values.device != a.self.device) return Error::unsupported("index_put_ across devices");
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(values, a.result_sizes));
  emit_pointwise_store(
      c.ctx, c.node.name, a.result_sizes, a.self.buffer,
      [&](const std::vector<IndexExpr>& o) { return element_index(a.self, a.self_coords(o)); },
      [&](const std::vector<IndexExpr>& o) { return ir::cast(load_broadcast(values, o), a.self.dtype); },
      StoreMode::Overwrite);
  TensorRef alias = a.self;
  alias.is_view = true;
  c.set_result(alias);
  return Status::success();
}

/// How a scatter combines src with what is at a position: scatter
/// overwrites; scatter_add adds; scatter_reduce's sum without self first
/// zeroes the positions it scatters to, then adds.
enum class ScatterKind { Overwrite, Add, AddWithoutSelf };

/// Whether `index` holds one position along `dim` for every row of `self`
/// (size 1 there, self's sizes elsewhere), as cross-entropy's backward
/// scatters its -1s. Then each element is either the one scattered to or
/// self's, and a scalar scatter is the pointwise
/// where(x[dim] == index[row], value, self[x]): no copy of self and no store
/// through the index, so it fuses with what reads it (Inductor's
/// scatter_upon_const_tensor). The index still goes through an indirect
/// leaf, so a position out of range raises as eager's does.
bool one_position_per_row(const TensorRef& self, const TensorRef& index, size_t dim) {
  for (size_t d = 0; d < self.rank(); ++d) {
    if (d == dim ? index.sizes[d] != ir::index_const(1) : index.sizes[d] != self.sizes[d]) return false;
  }
  return true;
}

/// scatter.src / scatter.value(self, dim, index, src), scatter_add(self,
/// dim, index, src), scatter_reduce.two(self, dim, index, src, "sum",
/// include_self): out = self; out[x with x[dim] = index[x]] = src[x] (or the
/// scalar; += for the adds) for x over index.
Status lower_scatter(const OpCall& c, bool scalar_src, ScatterKind kind = ScatterKind::Overwrite) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim"));
  CPPI_ASSIGN_OR_RETURN(idx, c.tensor(2, "index"));
  CPPI_RETURN_IF_ERROR_STATUS(check_index_dtype(idx, "index"));
  if (x.rank() == 0 || idx.rank() != x.rank()) return Error::unsupported("scatter into a 0-d tensor or with an index of another rank");
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_RETURN_IF_ERROR_STATUS(check_indexable(x.sizes[dim]));
  std::optional<TensorRef> src;
  std::optional<Scalar> value;
  if (scalar_src) {
    CPPI_ASSIGN_OR_RETURN(v, c.scalar(3, "value"));
    value = v;
  } else {
    CPPI_ASSIGN_OR_RETURN(s, c.tensor(3, "src"));
    if (s.rank() != x.rank()) return Error::unsupported("scatter with a src of another rank");
    src = s;
  }
  if (kind != ScatterKind::Overwrite) CPPI_RETURN_IF_ERROR_STATUS(check_accumulate(c, x));
  ir::BufferPtr out = c.result_buffer();
  if (value && kind == ScatterKind::Overwrite && one_position_per_row(x, idx, dim)) {
    // Positions compare as int32 where they fit: twice the CPU's vector lanes.
    const auto n = x.sizes[dim].constant();
    const DType t = n && *n <= std::numeric_limits<int32_t>::max() ? DType::Int32 : DType::Int64;
    emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
      std::vector<IndexExpr> row = o;
      row[dim] = ir::index_const(0);
      Expr hit = ir::compare(ir::CompareOp::Eq, ir::cast(ir::IndexValue::make(position(idx, row, x.sizes[dim])), t),
                             ir::cast(ir::IndexValue::make(o[dim]), t));
      return ir::where(hit, value->as_expr(out->dtype), load(x, o));
    });
    c.set_result_buffer(out);
    return Status::success();
  }
  const ir::BufferPtr to = kind == ScatterKind::Overwrite ? out : accumulator_for(c, x, out);
  emit_copy(c, x, to);
  auto scattered_to = [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    coords[dim] = position(idx, o, x.sizes[dim]);
    return to->layout.index(coords);
  };
  if (kind == ScatterKind::AddWithoutSelf) {
    emit_pointwise_store(c.ctx, c.node.name, idx.sizes, to, scattered_to,
                         [&](const std::vector<IndexExpr>&) { return Scalar::of_int(0).as_expr(to->dtype); });
  }
  emit_pointwise_store(
      c.ctx, c.node.name, idx.sizes, to, scattered_to,
      [&](const std::vector<IndexExpr>& o) { return src ? load(*src, o) : value->as_expr(to->dtype); },
      kind == ScatterKind::Overwrite ? StoreMode::Overwrite : StoreMode::Accumulate);
  finish_accumulator(c, to, out);
  c.set_result_buffer(out);
  return Status::success();
}

/// scatter_reduce.two(self, dim, index, src, reduce, include_self): the sum
/// only (prod, mean, amax and amin stay ATen calls).
Status lower_scatter_reduce(const OpCall& c) {
  const Arg* reduce = c.arg(4, "reduce");
  if (!reduce || reduce->kind != Arg::Kind::String) return Error::unsupported("scatter_reduce without a reduce name");
  if (reduce->s != "sum") {
    return Error::unsupported(cat("scatter_reduce with reduce='", reduce->s, "' runs through ATen (only 'sum' is lowered)"));
  }
  const bool include_self = c.flag(5, "include_self", true);
  return lower_scatter(c, false, include_self ? ScatterKind::Add : ScatterKind::AddWithoutSelf);
}

}  // namespace

void register_indirect_indexing_lowerings(Registry& r) {
  r.add("aten.gather.default", lower_gather);
  r.add("aten.index_select.default", lower_index_select);
  r.add("aten.embedding.default", lower_embedding);
  r.add("aten.index.Tensor", lower_index);
  r.add("aten._unsafe_index.Tensor", lower_index);
  r.add("aten.index_put.default", lower_index_put);
  r.add("aten._unsafe_index_put.default", lower_index_put);
  r.add("aten.index_put_.default", lower_index_put_inplace);
  r.add("aten.scatter.src", [](const OpCall& c) { return lower_scatter(c, false); });
  r.add("aten.scatter.value", [](const OpCall& c) { return lower_scatter(c, true); });
  r.add("aten.scatter_add.default", [](const OpCall& c) { return lower_scatter(c, false, ScatterKind::Add); });
  r.add("aten.scatter_reduce.two", lower_scatter_reduce);
}

}  // namespace cppi::lowering
