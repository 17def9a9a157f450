// View ops: no compute, an index mapping onto the base buffer (context.h).
// Sizes come from the node's FX meta (they already resolve -1, SymInts and
// broadcasting); each lowering only says where view element (v0, ...) lives
// in its input.
#include "lowering/ops/op_call.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::IndexExpr;

std::vector<IndexExpr> out_sizes(const OpCall& c) { return to_index(c.meta().sizes); }

Status set_view(const OpCall& c, const TensorRef& base, const std::vector<IndexExpr>& sizes,
                const std::vector<IndexExpr>& base_coords) {
  if (base_coords.size() != base.rank()) return Error::internal("view: coordinate count differs from input rank");
  c.set_result(base.view(sizes, base_coords));
  return Status::success();
}

Expected<IndexExpr> normalized_index(const Scalar& s, const IndexExpr& size, bool clamp) {
  if (s.kind == Scalar::Kind::Symbolic) return s.sym;  // SymInt starts are assumed in range
  int64_t v = s.i;
  if (auto n = size.constant()) {
    if (v < 0) v += *n;
    if (clamp) v = std::min(std::max<int64_t>(v, 0), *n);
    return ir::index_const(v);
  }
  if (v < 0) return size + v;
  return ir::index_const(v);
}

/// Coordinates in a tensor of sizes `from` of element `coords` of the same
/// elements reshaped (row-major) to `to`. Leading and trailing dims that
/// match map directly; the middle goes through the linear index, which the
/// simplifier reduces whenever the grouping is contiguous.
std::vector<IndexExpr> reshape_coords(const std::vector<IndexExpr>& from, const std::vector<IndexExpr>& to,
                                      const std::vector<IndexExpr>& coords) {
  size_t lead = 0;
  while (lead < from.size() && lead < to.size() && from[lead] == to[lead]) ++lead;
  size_t trail = 0;
  while (trail < from.size() - lead && trail < to.size() - lead &&
         from[from.size() - 1 - trail] == to[to.size() - 1 - trail])
    ++trail;
  std::vector<IndexExpr> out(from.size());
  for (size_t i = 0; i < lead; ++i) out[i] = coords[i];
  for (size_t i = 0; i < trail; ++i) out[from.size() - 1 - i] = coords[to.size() - 1 - i];
  IndexExpr linear = ir::index_const(0);
  for (size_t i = lead; i < to.size() - trail; ++i) linear = linear * to[i] + coords[i];
  IndexExpr stride = ir::index_const(1);
  for (size_t i = from.size() - trail; i-- > lead;) {
    IndexExpr q = ir::floordiv(linear, stride);
    out[i] = i == lead ? q : ir::mod(q, from[i]);
    stride = stride * from[i];
  }
  return out;
}

Status lower_reshape(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  auto sizes = out_sizes(c);
  return set_view(c, x, sizes, reshape_coords(x.sizes, sizes, view_vars(sizes.size())));
}

Status lower_expand(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  auto sizes = out_sizes(c);
  CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(x, sizes));
  auto v = view_vars(sizes.size());
  std::vector<IndexExpr> coords(x.rank());
  size_t shift = sizes.size() - x.rank();
  for (size_t j = 0; j < x.rank(); ++j)
    coords[j] = x.sizes[j].is_constant(1) && !sizes[j + shift].is_constant(1) ? ir::index_const(0) : v[j + shift];
  return set_view(c, x, sizes, coords);
}

Status permute_by(const OpCall& c, const TensorRef& x, const std::vector<int>& perm) {
  auto v = view_vars(perm.size());
  std::vector<IndexExpr> coords(x.rank());
  for (size_t p = 0; p < perm.size(); ++p) coords[perm[p]] = v[p];
  return set_view(c, x, out_sizes(c), coords);
}

Status lower_permute(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(dims, c.int_list(1, "dims"));
  if (dims.size() != x.rank()) return Error::unsupported("permute: wrong number of dims");
  std::vector<int> perm;
  for (int64_t d : dims) {
    CPPI_ASSIGN_OR_RETURN(n, normalize_dim(d, x.rank()));
    perm.push_back(n);
  }
  return permute_by(c, x, perm);
}

Status lower_transpose(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  std::vector<int> perm;
  for (size_t i = 0; i < x.rank(); ++i) perm.push_back(static_cast<int>(i));
  if (x.rank() >= 2) {
    int64_t d0 = 0, d1 = 1;
    if (c.node.target == "aten.transpose.int") {
      CPPI_ASSIGN_OR_RETURN(a, c.int_const(1, "dim0"));
      CPPI_ASSIGN_OR_RETURN(b, c.int_const(2, "dim1"));
      d0 = a;
      d1 = b;
    }
    CPPI_ASSIGN_OR_RETURN(n0, normalize_dim(d0, x.rank()));
    CPPI_ASSIGN_OR_RETURN(n1, normalize_dim(d1, x.rank()));
    std::swap(perm[n0], perm[n1]);
  }
  return permute_by(c, x, perm);
}

/// slice(x, dim, start, end, step): element i of dim is start + step * i.
Status lower_slice(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim", 0));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_ASSIGN_OR_RETURN(start_s, c.optional_scalar(2, "start"));
  CPPI_ASSIGN_OR_RETURN(step, c.int_const(4, "step", 1));
  if (step <= 0) return Error::unsupported("slice with a non-positive step");
  IndexExpr start = ir::index_const(0);
  if (start_s) {
    CPPI_ASSIGN_OR_RETURN(s, normalized_index(*start_s, x.sizes[dim], /*clamp=*/true));
    start = s;
  }
  auto sizes = out_sizes(c);
  auto coords = view_vars(sizes.size());
  coords[dim] = start + ir::index_const(step) * coords[dim];
  return set_view(c, x, sizes, coords);
}

Status lower_select(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim"));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_ASSIGN_OR_RETURN(i, c.scalar(2, "index"));
  CPPI_ASSIGN_OR_RETURN(index, normalized_index(i, x.sizes[dim], /*clamp=*/false));
  auto sizes = out_sizes(c);
  auto v = view_vars(sizes.size());
  std::vector<IndexExpr> coords(v.begin(), v.end());
  coords.insert(coords.begin() + dim, index);
  return set_view(c, x, sizes, coords);
}

/// squeeze (all overloads) and unsqueeze: the input's dims that the output
/// lacks (or vice versa) are size 1; line the others up.
Status lower_squeeze(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(dims, c.int_list(1, "dim"));
  std::vector<bool> squeezed(x.rank(), false);
  if (c.node.target == "aten.squeeze.default") {
    for (size_t d = 0; d < x.rank(); ++d) squeezed[d] = x.sizes[d].is_constant(1);
  } else {
    for (int64_t d : dims) {
      CPPI_ASSIGN_OR_RETURN(n, normalize_dim(d, x.rank()));
      if (x.rank() > 0) squeezed[n] = x.sizes[n].is_constant(1);
    }
  }
  auto sizes = out_sizes(c);
  auto v = view_vars(sizes.size());
  std::vector<IndexExpr> coords;
  size_t k = 0;
  for (size_t d = 0; d < x.rank(); ++d) coords.push_back(squeezed[d] ? ir::index_const(0) : v.at(k++));
  if (k != sizes.size()) return Error::unsupported("squeeze: output rank does not match");
  return set_view(c, x, sizes, coords);
}

Status lower_unsqueeze(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim"));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank() + 1));
  auto sizes = out_sizes(c);
  auto v = view_vars(sizes.size());
  v.erase(v.begin() + dim);
  return set_view(c, x, sizes, v);
}

Status lower_alias(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  return set_view(c, x, x.sizes, view_vars(x.rank()));
}

/// as_strided addresses the input's storage: offset + sum(v_i * stride_i),
/// relative to the buffer's own storage offset.
Status lower_as_strided(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(strides, c.size_list(2, "stride"));
  IndexExpr offset = to_index(c.meta().storage_offset);
  auto sizes = out_sizes(c);
  if (strides.size() != sizes.size()) return Error::unsupported("as_strided: stride rank differs from size rank");
  IndexExpr index = offset - x.buffer_storage_offset;
  auto v = view_vars(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) index = index + v[i] * strides[i];
  TensorRef t = x;
  t.sizes = sizes;
  t.index = index;
  t.is_view = true;
  c.set_result(t);
  return Status::success();
}

/// diagonal(x, offset, dim1, dim2): the diagonal becomes the last dim.
Status lower_diagonal(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(diag, diagonal_args(c, 1, x.rank()));
  const int d1 = diag.dim1, d2 = diag.dim2;
  auto sizes = out_sizes(c);
  auto v = view_vars(sizes.size());
  std::vector<IndexExpr> coords(x.rank());
  size_t k = 0;
  for (size_t d = 0; d < x.rank(); ++d)
    if (static_cast<int>(d) != d1 && static_cast<int>(d) != d2) coords[d] = v[k++];
  IndexExpr position = v.back();
  coords[d1] = position + ir::index_const(diag.dim1_start());
  coords[d2] = position + ir::index_const(diag.dim2_start());
  return set_view(c, x, sizes, coords);
}

/// unfold(self, dimension, size, step): dimension d becomes the windows
/// (sizes from the meta) and a last dimension of `size` walks each window:
/// element (..., w, ..., k) is self's (..., w * step + k, ...).
Status lower_unfold(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dimension"));
  CPPI_ASSIGN_OR_RETURN(step, c.int_const(3, "step"));
  if (step < 1) return Error::unsupported("unfold with a step below 1");
  auto sizes = out_sizes(c);
  // A 0-d tensor unfolds to [size], size <= 1: its one element.
  if (x.rank() == 0) return set_view(c, x, sizes, {});
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  if (sizes.size() != x.rank() + 1) return Error::internal("unfold: result rank is not the input's + 1");
  auto v = view_vars(sizes.size());
  std::vector<IndexExpr> coords(v.begin(), v.end() - 1);
  coords[dim] = v[dim] * ir::index_const(step) + v.back();
  return set_view(c, x, sizes, coords);
}

/// split / split_with_sizes / unbind: a tuple of views, read via getitem.
Status set_slices(const OpCall& c, const TensorRef& x, int dim, const std::vector<IndexExpr>& offsets, bool select) {
  std::vector<std::optional<TensorRef>> items;
  for (size_t k = 0; k < offsets.size(); ++k) {
    auto sizes = to_index(c.item_meta(k).sizes);
    auto v = view_vars(sizes.size());
    std::vector<IndexExpr> coords(v.begin(), v.end());
    if (select) {
      coords.insert(coords.begin() + dim, offsets[k]);
    } else {
      coords[dim] = coords[dim] + offsets[k];
    }
    items.push_back(x.view(sizes, coords));
  }
  c.set_items(std::move(items));
  return Status::success();
}

Status lower_split(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(2, "dim", 0));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  if (c.node.value.kind != ValueInfo::Kind::Tuple) return Error::unsupported("split result is not a tuple");
  std::vector<IndexExpr> offsets;
  IndexExpr at = ir::index_const(0);
  for (size_t k = 0; k < c.node.value.items.size(); ++k) {
    offsets.push_back(at);
    at = at + to_index(c.item_meta(k).sizes.at(dim));
  }
  return set_slices(c, x, dim, offsets, false);
}

Status lower_unbind(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim", 0));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  if (c.node.value.kind != ValueInfo::Kind::Tuple) return Error::unsupported("unbind result is not a tuple");
  std::vector<IndexExpr> offsets;
  for (size_t k = 0; k < c.node.value.items.size(); ++k) offsets.push_back(ir::index_const(static_cast<int64_t>(k)));
  return set_slices(c, x, dim, offsets, true);
}

}  // namespace

void register_view_lowerings(Registry& r) {
  r.add("aten.view.default", lower_reshape);
  r.add("aten._unsafe_view.default", lower_reshape);
  r.add("aten.reshape.default", lower_reshape);
  r.add("aten.expand.default", lower_expand);
  r.add("aten.permute.default", lower_permute);
  r.add("aten.t.default", lower_transpose);
  r.add("aten.transpose.int", lower_transpose);
  r.add("aten.slice.Tensor", lower_slice);
  r.add("aten.select.int", lower_select);
  r.add("aten.squeeze.default", lower_squeeze);
  r.add("aten.squeeze.dim", lower_squeeze);
  r.add("aten.squeeze.dims", lower_squeeze);
  r.add("aten.unsqueeze.default", lower_unsqueeze);
  r.add("aten.alias.default", lower_alias);
  r.add("aten.as_strided.default", lower_as_strided);
  r.add("aten.diagonal.default", lower_diagonal);
  r.add("aten.unfold.default", lower_unfold);
  r.add("aten.split.Tensor", lower_split);
  r.add("aten.split_with_sizes.default", lower_split);
  r.add("aten.unbind.int", lower_unbind);
}

}  // namespace cppi::lowering
