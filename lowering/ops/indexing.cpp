// Data movement that is not a view: cat, constant_pad_nd, flip, roll, repeat,
// slice_scatter, select_scatter, diagonal_scatter. Each output element reads
// at most one input element at an index computed from its coordinates; reads
// that may be out of range (cat's other pieces, pad's border, the scattered
// src) are masked loads, so no kernel touches memory outside a buffer.
//
// Ops that index with tensor values (index.Tensor, gather, index_select,
// embedding, index_put, scatter) are in indirect_indexing.cpp.
#include "lowering/ops/op_call.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::CompareOp;
using ir::Expr;
using ir::IndexExpr;

Expr index_value(const IndexExpr& e) { return ir::IndexValue::make(e); }
Expr in_range(const IndexExpr& i, const IndexExpr& lo, const IndexExpr& hi) {
  return ir::binary(ir::BinaryOp::LogicalAnd, ir::compare(CompareOp::Ge, index_value(i), index_value(lo)),
                    ir::compare(CompareOp::Lt, index_value(i), index_value(hi)));
}

/// cat(tensors, dim): a chain of wheres over the pieces, each a masked load
/// at the coordinate shifted by the piece's offset. Pieces that are empty
/// (eager's legacy 1-d empty tensors) are skipped.
Status lower_cat(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(xs, c.tensor_list(0, "tensors"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(1, "dim", 0));
  const size_t rank = c.meta().rank();
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, rank));
  std::vector<TensorRef> pieces;
  std::vector<IndexExpr> offsets;
  IndexExpr at = ir::index_const(0);
  for (const auto& x : xs) {
    if (x.rank() == 1 && rank != 1 && x.sizes[0].is_constant(0)) continue;
    if (x.rank() != rank) return Error::unsupported("cat of tensors of different ranks");
    if (x.device != ir_device(c.meta())) return Error::unsupported("cat across devices");
    pieces.push_back(x);
    offsets.push_back(at);
    at = at + x.sizes[dim];
  }
  if (pieces.empty()) return Error::unsupported("cat of nothing");
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& x) {
    auto load_piece = [&](size_t k, Expr mask) {
      std::vector<IndexExpr> coords = x;
      coords[dim] = x[dim] - offsets[k];
      return ir::cast(load(pieces[k], coords, mask), t);
    };
    size_t last = pieces.size() - 1;
    Expr v = load_piece(last, last == 0 ? Expr() : in_range(x[dim], offsets[last], offsets[last] + pieces[last].sizes[dim]));
    for (size_t k = last; k-- > 0;) {
      Expr inside = ir::compare(CompareOp::Lt, index_value(x[dim]), index_value(offsets[k] + pieces[k].sizes[dim]));
      Expr mask = k == 0 ? inside : in_range(x[dim], offsets[k], offsets[k] + pieces[k].sizes[dim]);
      v = ir::where(inside, load_piece(k, mask), v);
    }
    return v;
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// constant_pad_nd(x, pad, value): pad lists (before, after) pairs from the
/// last dim backwards; negative pads crop.
Status lower_constant_pad_nd(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(pad, c.size_list(1, "pad"));
  CPPI_ASSIGN_OR_RETURN(value, c.optional_scalar(2, "value"));
  if (pad.size() % 2 != 0 || pad.size() / 2 > x.rank()) return Error::unsupported("bad pad list");
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    Expr mask;
    for (size_t p = 0; p < pad.size() / 2; ++p) {
      size_t dim = x.rank() - 1 - p;
      coords[dim] = o[dim] - pad[2 * p];
      // Only a positive leading pad can put the coordinate below 0 and only a
      // positive trailing pad past the end; crops never leave the input.
      std::vector<Expr> conds;
      if (!(pad[2 * p].constant() && *pad[2 * p].constant() <= 0))
        conds.push_back(ir::compare(CompareOp::Ge, index_value(coords[dim]), ir::const_int(0)));
      if (!(pad[2 * p + 1].constant() && *pad[2 * p + 1].constant() <= 0))
        conds.push_back(ir::compare(CompareOp::Lt, index_value(coords[dim]), index_value(x.sizes[dim])));
      for (const auto& e : conds) mask = mask.defined() ? ir::binary(ir::BinaryOp::LogicalAnd, mask, e) : e;
    }
    Expr loaded = ir::cast(load(x, coords, mask), t);
    if (!mask.defined()) return loaded;
    Expr fill = (value ? *value : Scalar::of_int(0)).as_expr(t);
    return ir::where(mask, loaded, fill);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// flip(x, dims): a copy reading size - 1 - i along the flipped dims.
Status lower_flip(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(dims, c.int_list(1, "dims"));
  std::vector<bool> flipped(x.rank(), false);
  for (int64_t d : dims) {
    CPPI_ASSIGN_OR_RETURN(n, normalize_dim(d, x.rank()));
    if (x.rank() > 0) flipped[n] = true;
  }
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    for (size_t d = 0; d < x.rank(); ++d)
      if (flipped[d]) coords[d] = x.sizes[d] - 1 - o[d];
    return ir::cast(load(x, coords), t);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// roll(x, shifts, dims): out[i] = x[(i - shift) mod size] (Python mod, so
/// negative shifts work); no dims rolls the flattened tensor.
Status lower_roll(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(shifts, c.size_list(1, "shifts"));
  CPPI_ASSIGN_OR_RETURN(dims, c.int_list(2, "dims"));
  if (dims.empty() || shifts.size() != dims.size()) return Error::unsupported("roll of the flattened tensor");
  std::vector<IndexExpr> shift(x.rank(), ir::index_const(0));
  for (size_t k = 0; k < dims.size(); ++k) {
    CPPI_ASSIGN_OR_RETURN(n, normalize_dim(dims[k], x.rank()));
    shift[n] = shift[n] + shifts[k];
  }
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords = o;
    for (size_t d = 0; d < x.rank(); ++d)
      if (!shift[d].is_constant(0)) coords[d] = ir::mod(o[d] - shift[d], x.sizes[d]);
    return ir::cast(load(x, coords), t);
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// slice_scatter(x, src, dim, start, end, step): x with the slice
/// x[start:end:step] along dim replaced by src (the backward of a slice).
/// Position i along dim takes src[(i - start) / step] where
/// i - start in [0, step * src_size) and divisible by step. A symbolic start
/// is assumed in range, as slice's.
Status lower_slice_scatter(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(src, c.tensor(1, "src"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(2, "dim", 0));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_ASSIGN_OR_RETURN(start_s, c.optional_scalar(3, "start"));
  CPPI_ASSIGN_OR_RETURN(step, c.int_const(5, "step", 1));
  if (step <= 0) return Error::unsupported("slice_scatter with a non-positive step");
  if (src.rank() != x.rank()) return Error::unsupported("slice_scatter: src rank differs");
  IndexExpr start = ir::index_const(0);
  if (start_s && start_s->kind == Scalar::Kind::Symbolic) {
    start = start_s->sym;
  } else if (start_s) {
    int64_t v = start_s->i;
    auto n = x.sizes[dim].constant();
    if (v < 0 && !n) return Error::unsupported("slice_scatter: negative start on a symbolic size");
    if (v < 0) v += *n;
    if (n) v = std::min(std::max<int64_t>(v, 0), *n);
    start = ir::index_const(v);
  }
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    IndexExpr rel = o[dim] - start;
    Expr inside = in_range(rel, ir::index_const(0), src.sizes[dim] * step);
    if (step != 1)
      inside = ir::binary(ir::BinaryOp::LogicalAnd, inside,
                          ir::compare(CompareOp::Eq, index_value(ir::mod(rel, ir::index_const(step))),
                                      ir::const_int(0)));
    std::vector<IndexExpr> coords = o;
    coords[dim] = ir::floordiv(rel, ir::index_const(step));
    return ir::where(inside, ir::cast(load(src, coords, inside), t), ir::cast(load(x, o), t));
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// select_scatter(x, src, dim, index): x with x.select(dim, index) replaced
/// by src (the backward of a select).
Status lower_select_scatter(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(src, c.tensor(1, "src"));
  CPPI_ASSIGN_OR_RETURN(d, c.int_const(2, "dim"));
  CPPI_ASSIGN_OR_RETURN(dim, normalize_dim(d, x.rank()));
  CPPI_ASSIGN_OR_RETURN(i, c.scalar(3, "index"));
  if (src.rank() + 1 != x.rank()) return Error::unsupported("select_scatter: src rank");
  IndexExpr index;
  if (i.kind == Scalar::Kind::Symbolic) {
    index = i.sym;
  } else {
    int64_t v = i.i;
    auto n = x.sizes[dim].constant();
    if (v < 0 && !n) return Error::unsupported("select_scatter: negative index on a symbolic size");
    index = ir::index_const(v < 0 ? v + *n : v);
  }
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    Expr hit = ir::compare(CompareOp::Eq, index_value(o[dim]), index_value(index));
    std::vector<IndexExpr> coords = o;
    coords.erase(coords.begin() + dim);
    return ir::where(hit, ir::cast(load(src, coords, hit), t), ir::cast(load(x, o), t));
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// diagonal_scatter(x, src, offset, dim1, dim2): x with
/// x.diagonal(offset, dim1, dim2) replaced by src, whose last dim walks the
/// diagonal (what functionalization makes of a write through diagonal()).
/// Element o is on the diagonal when o[dim2] - o[dim1] == offset; it then
/// takes src at the other dims and diagonal position o[dim1] - max(-offset, 0).
Status lower_diagonal_scatter(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(src, c.tensor(1, "src"));
  CPPI_ASSIGN_OR_RETURN(diag, diagonal_args(c, 2, x.rank()));
  if (src.rank() + 1 != x.rank()) return Error::unsupported("diagonal_scatter: src rank");
  const int dim1 = diag.dim1, dim2 = diag.dim2;
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    Expr on_diagonal = ir::compare(CompareOp::Eq, index_value(o[dim2] - o[dim1]), ir::const_int(diag.offset));
    std::vector<IndexExpr> coords;
    for (size_t d = 0; d < x.rank(); ++d)
      if (static_cast<int>(d) != dim1 && static_cast<int>(d) != dim2) coords.push_back(o[d]);
    coords.push_back(o[dim1] - ir::index_const(diag.dim1_start()));
    return ir::where(on_diagonal, ir::cast(load(src, coords, on_diagonal), t), ir::cast(load(x, o), t));
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// repeat(x, repeats): len(repeats) >= rank dims, the leading ones new; the
/// output reads x at each coordinate modulo x's size.
Status lower_repeat(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  CPPI_ASSIGN_OR_RETURN(repeats, c.size_list(1, "repeats"));
  if (repeats.size() < x.rank()) return Error::unsupported("repeat: fewer repeats than dims");
  const size_t shift = repeats.size() - x.rank();
  DType t = c.meta().dtype;
  ir::BufferPtr out = c.result_buffer();
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
    std::vector<IndexExpr> coords(x.rank());
    for (size_t d = 0; d < x.rank(); ++d)
      coords[d] = repeats[d + shift].is_constant(1) ? o[d + shift] : ir::mod(o[d + shift], x.sizes[d]);
    return ir::cast(load(x, coords), t);
  });
  c.set_result_buffer(out);
  return Status::success();
}

}  // namespace

void register_indexing_lowerings(Registry& r) {
  r.add("aten.cat.default", lower_cat);
  r.add("aten.constant_pad_nd.default", lower_constant_pad_nd);
  r.add("aten.flip.default", lower_flip);
  r.add("aten.roll.default", lower_roll);
  r.add("aten.repeat.default", lower_repeat);
  r.add("aten.slice_scatter.default", lower_slice_scatter);
  r.add("aten.select_scatter.default", lower_select_scatter);
  r.add("aten.diagonal_scatter.default", lower_diagonal_scatter);
}

}  // namespace cppi::lowering
