// 2-d pooling: max_pool2d_with_indices, avg_pool2d, _adaptive_avg_pool2d,
// adaptive_max_pool2d, and their backwards.
//
// A forward pool is a reduction per output element over its window: the
// reduction loops r0, r1 walk the window's rows and columns, and positions
// outside the input (padding, ceil_mode's last window) are masked loads that
// the body replaces by the reduction's identity. Adaptive windows vary in
// size; the loops run to the largest window and mask the rest.
//
// A backward pool is written as a gather, as Inductor does: each input
// position sums the output gradients of the (few) windows that may contain
// it, so there is no accumulating scatter. The candidate windows of input row
// ih are the ones starting at most a window span before it; the loops walk
// those candidates and the body keeps the ones that really contain ih (for
// max pooling: whose argmax is ih).
//
// Inputs are (C, H, W) or (N, C, H, W) of a floating dtype; the window
// parameters are constant ints (what nn.MaxPool2d and friends pass), input
// sizes may be symbolic. Everything else falls back to ATen with a reason.
#include <array>
#include <cmath>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ops/registry.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {
namespace {

using ir::BinaryOp;
using ir::CompareOp;
using ir::Expr;
using ir::IndexExpr;
using ir::ReductionKind;

Expr index_value(const IndexExpr& e) { return ir::IndexValue::make(e); }
Expr all_of(const std::vector<Expr>& conds) {
  Expr m;
  for (const auto& e : conds) m = m.defined() ? ir::binary(BinaryOp::LogicalAnd, m, e) : e;
  return m;
}
Expr in_range(const IndexExpr& i, const IndexExpr& lo, const IndexExpr& hi) {
  return all_of({ir::compare(CompareOp::Ge, index_value(i), index_value(lo)),
                 ir::compare(CompareOp::Lt, index_value(i), index_value(hi))});
}

/// One spatial dimension's window: kernel, stride, padding, dilation.
struct Window {
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1;
  /// How many windows may contain one input position (the backward's loop).
  int64_t windows_per_position() const { return ((kernel - 1) * dilation) / stride + 1; }
};

/// A pair from an int[2] argument: one value means both; absent means `dflt`.
Expected<std::array<int64_t, 2>> pair_arg(const OpCall& c, size_t pos, std::string_view kw,
                                          std::optional<std::array<int64_t, 2>> dflt) {
  CPPI_ASSIGN_OR_RETURN(v, c.int_list(pos, kw));
  if (v.empty() && dflt) return *dflt;
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() != 2) return Error::unsupported(cat("pooling: ", kw, " must have 1 or 2 entries"));
  return std::array<int64_t, 2>{v[0], v[1]};
}

/// kernel_size, stride (empty: the kernel), padding and dilation at their
/// schema positions (dilation_pos nullopt: avg_pool, always 1).
Expected<std::array<Window, 2>> windows(const OpCall& c, size_t kernel_pos, std::optional<size_t> dilation_pos) {
  CPPI_ASSIGN_OR_RETURN(k, pair_arg(c, kernel_pos, "kernel_size", std::nullopt));
  CPPI_ASSIGN_OR_RETURN(s, pair_arg(c, kernel_pos + 1, "stride", k));
  CPPI_ASSIGN_OR_RETURN(p, pair_arg(c, kernel_pos + 2, "padding", std::array<int64_t, 2>{0, 0}));
  std::array<int64_t, 2> d{1, 1};
  if (dilation_pos) {
    CPPI_ASSIGN_OR_RETURN(dd, pair_arg(c, *dilation_pos, "dilation", std::array<int64_t, 2>{1, 1}));
    d = dd;
  }
  std::array<Window, 2> w;
  for (int i = 0; i < 2; ++i) {
    w[i] = {k[i], s[i], p[i], d[i]};
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0) return Error::unsupported("pooling: invalid window");
  }
  return w;
}

/// The pooled input: rank 3 or 4, floating, on the node's device.
Expected<TensorRef> pooled_input(const OpCall& c, size_t pos, std::string_view kw) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(pos, kw));
  if (x.rank() != 3 && x.rank() != 4) return Error::unsupported("pooling of a tensor that is not 3-d or 4-d");
  if (!is_floating(x.dtype)) return Error::unsupported("pooling of a non-floating tensor");
  return x;
}

/// coords with the last two replaced by (h, w).
std::vector<IndexExpr> at_hw(std::vector<IndexExpr> coords, const IndexExpr& h, const IndexExpr& w) {
  coords[coords.size() - 2] = h;
  coords[coords.size() - 1] = w;
  return coords;
}

using WindowBody = std::function<Expr(const std::vector<IndexExpr>& x, const std::vector<IndexExpr>& r)>;

/// One reduction node over `out_sizes` x `window`, storing its single result
/// into `target` when the dtypes agree, else into a temporary. Returns the
/// buffer written.
ir::BufferPtr emit_window_reduction(const OpCall& c, const std::vector<IndexExpr>& out_sizes,
                                    const std::vector<IndexExpr>& window, ReductionKind kind, const WindowBody& body_fn,
                                    const ir::BufferPtr& target, ir::Device device) {
  auto xs = ir::pointwise_vars(out_sizes.size());
  auto rs = ir::reduction_vars(window.size());
  Expr body = body_fn(xs, rs);
  ir::VarRanges vr;
  for (size_t i = 0; i < xs.size(); ++i) vr[xs[i].as<ir::IndexVar>()->name] = out_sizes[i];
  for (size_t j = 0; j < rs.size(); ++j) vr[rs[j].as<ir::IndexVar>()->name] = window[j];
  body = ir::simplify_indices(body, vr);
  DType result = ir::reduction_result_dtypes(kind, body.dtype()).value().front();
  ir::BufferPtr b = target && target->dtype == result ? target
                                                      : c.ctx.temp_buffer(cat(c.node.name, "_acc"), result, device,
                                                                          out_sizes);
  std::vector<ir::ReductionOutput> outputs{{b, ir::simplify(b->layout.index(xs), vr)}};
  c.ctx.emit(ir::ReductionNode::make(c.ctx.fresh_node_name(c.node.name), out_sizes, window, kind, body,
                                     std::move(outputs), {c.node.name}));
  return b;
}

/// out[x] = post(x, acc[x]) unless acc is out and there is nothing to do.
void finish(const OpCall& c, const ir::BufferPtr& acc, const ir::BufferPtr& out,
            const std::function<Expr(const std::vector<IndexExpr>&, Expr)>& post = nullptr) {
  if (acc == out && !post) return;
  TensorRef a = TensorRef::of_buffer(acc);
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& x) {
    Expr v = load(a, x);
    return post ? post(x, v) : v;
  });
}

/// A pooling backward's grad_input: each input position sums `body(i, r)`
/// over the window positions r of the outputs that may read it.
Status emit_input_gradient(const OpCall& c, const std::vector<IndexExpr>& window, const WindowBody& body,
                           ir::Device device) {
  ir::BufferPtr out = c.result_buffer();
  ir::BufferPtr stored = emit_window_reduction(c, out->layout.sizes, window, ReductionKind::Sum, body, out, device);
  finish(c, stored, out);
  c.set_result_buffer(out);
  return Status::success();
}

// --- max pooling ----------------------------------------------------------------------------

using PositionFn = std::function<Expr(const std::vector<IndexExpr>& o, Expr r)>;

/// Windows of at most this many positions unroll into a pointwise max.
constexpr int64_t kMaxUnrolledWindow = 16;

/// Whether a max pool's values are a pointwise max over its unrolled window:
/// a small window, no indices wanted, and values stored channels-last (the
/// channels innermost, as CUDA conv nets run). Each output then reads its
/// window's channels as neighbouring lanes do, and the pointwise kernel loads
/// them as vectors; as a reduction each thread took one channel.
bool unrolls_window(const OpCall& c, const std::vector<IndexExpr>& window) {
  if (c.item_used(1)) return false;
  int64_t positions = 1;
  for (const auto& w : window) positions *= w.constant().value_or(kMaxUnrolledWindow + 1);
  const TensorMeta& meta = c.item_meta(0);
  if (positions > kMaxUnrolledWindow || meta.rank() != 4) return false;
  return to_index(meta.strides[1]).is_constant(1) && !to_index(meta.sizes[1]).is_constant(1) &&
         !to_index(meta.strides[3]).is_constant(1);
}

/// max over the window positions of body(o, r), as one pointwise expression.
Expr unrolled_max(const std::vector<IndexExpr>& o, const std::vector<IndexExpr>& window, const WindowBody& body) {
  const int64_t kh = *window[0].constant(), kw = *window[1].constant();
  std::optional<Expr> m;
  for (int64_t rh = 0; rh < kh; ++rh) {
    for (int64_t rw = 0; rw < kw; ++rw) {
      Expr v = body(o, {ir::index_const(rh), ir::index_const(rw)});
      m = m ? ir::binary(BinaryOp::Maximum, *m, v) : v;
    }
  }
  return *m;
}

/// The (values, indices) items of a max pool: a max and an argmax over the
/// same window body (fusion puts them in one kernel); `position` turns the
/// argmax r of output o into the input's flattened H*W index. An unused item
/// is not computed.
Status set_max_pool_items(const OpCall& c, const TensorRef& x, const std::vector<IndexExpr>& out_sizes,
                          const std::vector<IndexExpr>& window, const WindowBody& body, const PositionFn& position) {
  std::vector<std::optional<TensorRef>> items(2);
  if (c.item_used(1) && c.item_buffer(1)->dtype != DType::Int64)
    return Error::unsupported("max pooling indices that are not int64");
  if (c.item_used(0) && unrolls_window(c, window)) {
    ir::BufferPtr out = c.item_buffer(0);
    emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& o) {
      return ir::cast(unrolled_max(o, window, body), out->dtype);
    });
    items[0] = TensorRef::of_buffer(out);
  } else if (c.item_used(0)) {
    ir::BufferPtr out = c.item_buffer(0);
    ir::BufferPtr stored = emit_window_reduction(c, out_sizes, window, ReductionKind::Max, body, out, x.device);
    finish(c, stored, out);
    items[0] = TensorRef::of_buffer(out);
  }
  if (c.item_used(1)) {
    ir::BufferPtr out = c.item_buffer(1);
    ir::BufferPtr arg = emit_window_reduction(c, out_sizes, window, ReductionKind::ArgMax, body, nullptr, x.device);
    finish(c, arg, out, position);
    items[1] = TensorRef::of_buffer(out);
  }
  c.set_items(std::move(items));
  return Status::success();
}

/// A max pool backward's body term for candidate output o (in range where
/// `valid`): grad[o] where o's argmax is input position `flat`, else 0.
Expr grad_if_argmax(const TensorRef& grad, const TensorRef& indices, const std::vector<IndexExpr>& o, Expr valid,
                    const IndexExpr& flat, DType acc) {
  Expr hit = ir::binary(BinaryOp::LogicalAnd, valid,
                        ir::compare(CompareOp::Eq, ir::cast(load(indices, o, valid), DType::Int64), index_value(flat)));
  return ir::where(hit, ir::cast(load(grad, o, valid), acc), ir::const_float(0, acc));
}

/// max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
/// -> (values, indices). The value is a max over the window; the index is
/// the window's argmax turned into a position in the input's flattened H*W.
/// Padding reads as -inf. Where the window's max is -inf, eager reports the
/// window's first in-bounds position (its initial guess, never replaced);
/// the argmax then may sit on padding (ties pick the first), so a padding
/// position is replaced by that first in-bounds one. NaN wins as in eager;
/// with several NaNs in one window eager reports the last and we the first
/// (the values agree).
Status lower_max_pool2d_with_indices(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 0, "self"));
  CPPI_ASSIGN_OR_RETURN(w, windows(c, 1, 4));
  const size_t rank = x.rank();
  const IndexExpr H = x.sizes[rank - 2], W = x.sizes[rank - 1];
  const std::vector<IndexExpr> out_sizes = to_index(c.item_meta(0).sizes);
  const DType acc = opmath_type(x.dtype);
  const std::vector<IndexExpr> window{ir::index_const(w[0].kernel), ir::index_const(w[1].kernel)};
  auto start = [&](const std::vector<IndexExpr>& o, int d) {
    return o[rank - 2 + d] * w[d].stride - w[d].pad;
  };
  auto position = [&](const std::vector<IndexExpr>& o, const IndexExpr& rh, const IndexExpr& rw) {
    return std::pair{start(o, 0) + rh * w[0].dilation, start(o, 1) + rw * w[1].dilation};
  };
  auto body = [&](const std::vector<IndexExpr>& o, const std::vector<IndexExpr>& r) {
    auto [ih, iw] = position(o, r[0], r[1]);
    Expr valid = all_of({in_range(ih, ir::index_const(0), H), in_range(iw, ir::index_const(0), W)});
    return ir::where(valid, ir::cast(load(x, at_hw(o, ih, iw), valid), acc), ir::const_float(-INFINITY, acc));
  };

  return set_max_pool_items(c, x, out_sizes, window, body, [&](const std::vector<IndexExpr>& o, Expr r) {
    // r -> (r // kw, r % kw) -> input position, as int64 values.
    Expr kw = ir::const_int(w[1].kernel);
    auto coord = [&](int d, Expr step) {
      return ir::binary(BinaryOp::Add, index_value(start(o, d)),
                        ir::binary(BinaryOp::Mul, step, ir::const_int(w[d].dilation)));
    };
    Expr ih = coord(0, ir::binary(BinaryOp::FloorDiv, r, kw));
    Expr iw = coord(1, ir::binary(BinaryOp::Remainder, r, kw));
    auto inside = [](Expr i, const IndexExpr& n) {
      return ir::binary(BinaryOp::LogicalAnd, ir::compare(CompareOp::Ge, i, ir::const_int(0)),
                        ir::compare(CompareOp::Lt, i, index_value(n)));
    };
    Expr valid = ir::binary(BinaryOp::LogicalAnd, inside(ih, H), inside(iw, W));
    // The first in-bounds row/column: start + ceil(-start / dilation) * dilation when start < 0.
    auto first = [&](int d) {
      IndexExpr s = start(o, d);
      return s + ir::max(ir::index_const(0), ir::floordiv(-s + (w[d].dilation - 1), ir::index_const(w[d].dilation))) *
                     w[d].dilation;
    };
    Expr flat = ir::binary(BinaryOp::Add, ir::binary(BinaryOp::Mul, ih, index_value(W)), iw);
    return ir::where(valid, flat, index_value(first(0) * W + first(1)));
  });
}

/// max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding,
/// dilation, ceil_mode, indices): grad_input[ih, iw] = sum of grad[oh, ow]
/// over the candidate windows whose index is ih*W + iw.
Status lower_max_pool2d_with_indices_backward(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(grad, c.tensor(0, "grad_output"));
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 1, "self"));
  CPPI_ASSIGN_OR_RETURN(w, windows(c, 2, 5));
  CPPI_ASSIGN_OR_RETURN(indices, c.tensor(7, "indices"));
  const size_t rank = x.rank();
  if (grad.rank() != rank || indices.rank() != rank || !is_floating(grad.dtype))
    return Error::unsupported("max_pool2d backward: unexpected operands");
  const IndexExpr W = x.sizes[rank - 1];
  const IndexExpr OH = grad.sizes[rank - 2], OW = grad.sizes[rank - 1];
  const DType acc = opmath_type(c.meta().dtype);
  const std::vector<IndexExpr> window{ir::index_const(w[0].windows_per_position()),
                                      ir::index_const(w[1].windows_per_position())};
  auto body = [&](const std::vector<IndexExpr>& i, const std::vector<IndexExpr>& r) {
    IndexExpr ih = i[rank - 2], iw = i[rank - 1];
    // The last window that may contain ih starts at or before it, then r steps back.
    IndexExpr oh = ir::floordiv(ih + w[0].pad, ir::index_const(w[0].stride)) - r[0];
    IndexExpr ow = ir::floordiv(iw + w[1].pad, ir::index_const(w[1].stride)) - r[1];
    Expr valid = all_of({in_range(oh, ir::index_const(0), OH), in_range(ow, ir::index_const(0), OW)});
    return grad_if_argmax(grad, indices, at_hw(i, oh, ow), valid, ih * W + iw, acc);
  };
  return emit_input_gradient(c, window, body, x.device);
}

// --- average pooling ------------------------------------------------------------------------

struct AvgOptions {
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

/// Eager's divisor of the window of output o along both dims: the window
/// clipped to the padded input (count_include_pad) or to the input.
IndexExpr avg_divisor(const std::array<Window, 2>& w, const AvgOptions& opt, const IndexExpr& H, const IndexExpr& W,
                      const IndexExpr& oh, const IndexExpr& ow) {
  if (opt.divisor_override) return ir::index_const(*opt.divisor_override);
  const IndexExpr sizes[2] = {H, W};
  const IndexExpr outs[2] = {oh, ow};
  IndexExpr count = ir::index_const(1);
  for (int d = 0; d < 2; ++d) {
    IndexExpr start = outs[d] * w[d].stride - w[d].pad;
    IndexExpr end = ir::min(start + w[d].kernel, sizes[d] + w[d].pad);
    if (!opt.count_include_pad) {
      end = ir::min(end, sizes[d]);
      start = ir::max(start, ir::index_const(0));
    }
    count = count * (end - start);
  }
  return count;
}

Expected<AvgOptions> avg_options(const OpCall& c, size_t count_pos) {
  AvgOptions opt;
  opt.count_include_pad = c.flag(count_pos, "count_include_pad", true);
  if (c.arg(count_pos + 1, "divisor_override")) {
    CPPI_ASSIGN_OR_RETURN(d, c.int_const(count_pos + 1, "divisor_override"));
    if (d == 0) return Error::unsupported("avg_pool2d: divisor_override is 0");
    opt.divisor_override = d;
  }
  return opt;
}

/// avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override): a sum over the window (padding reads 0), then the
/// division in an epilogue.
Status lower_avg_pool2d(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 0, "self"));
  CPPI_ASSIGN_OR_RETURN(w, windows(c, 1, std::nullopt));
  CPPI_ASSIGN_OR_RETURN(opt, avg_options(c, 5));
  const size_t rank = x.rank();
  const IndexExpr H = x.sizes[rank - 2], W = x.sizes[rank - 1];
  const DType acc = opmath_type(x.dtype);
  ir::BufferPtr out = c.result_buffer();
  const std::vector<IndexExpr> window{ir::index_const(w[0].kernel), ir::index_const(w[1].kernel)};
  auto body = [&](const std::vector<IndexExpr>& o, const std::vector<IndexExpr>& r) {
    IndexExpr ih = o[rank - 2] * w[0].stride - w[0].pad + r[0];
    IndexExpr iw = o[rank - 1] * w[1].stride - w[1].pad + r[1];
    Expr valid = all_of({in_range(ih, ir::index_const(0), H), in_range(iw, ir::index_const(0), W)});
    return ir::cast(load(x, at_hw(o, ih, iw), valid), acc);
  };
  ir::BufferPtr sum =
      emit_window_reduction(c, out->layout.sizes, window, ReductionKind::Sum, body, nullptr, x.device);
  finish(c, sum, out, [&](const std::vector<IndexExpr>& o, Expr s) {
    IndexExpr div = avg_divisor(w, opt, H, W, o[rank - 2], o[rank - 1]);
    return ir::binary(BinaryOp::TrueDiv, s, ir::cast(index_value(div), acc));
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override): each input position sums
/// grad / divisor over the windows that contain it.
Status lower_avg_pool2d_backward(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(grad, c.tensor(0, "grad_output"));
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 1, "self"));
  CPPI_ASSIGN_OR_RETURN(w, windows(c, 2, std::nullopt));
  CPPI_ASSIGN_OR_RETURN(opt, avg_options(c, 6));
  const size_t rank = x.rank();
  if (grad.rank() != rank || !is_floating(grad.dtype)) return Error::unsupported("avg_pool2d backward: bad grad");
  const IndexExpr H = x.sizes[rank - 2], W = x.sizes[rank - 1];
  const IndexExpr OH = grad.sizes[rank - 2], OW = grad.sizes[rank - 1];
  const DType acc = opmath_type(c.meta().dtype);
  const std::vector<IndexExpr> window{ir::index_const(w[0].windows_per_position()),
                                      ir::index_const(w[1].windows_per_position())};
  auto body = [&](const std::vector<IndexExpr>& i, const std::vector<IndexExpr>& r) {
    IndexExpr ih = i[rank - 2], iw = i[rank - 1];
    IndexExpr oh = ir::floordiv(ih + w[0].pad, ir::index_const(w[0].stride)) - r[0];
    IndexExpr ow = ir::floordiv(iw + w[1].pad, ir::index_const(w[1].stride)) - r[1];
    // The window of oh covers [oh*s - p, oh*s - p + k): oh <= (ih + p) / s by
    // construction, so only its end needs checking.
    Expr valid = all_of({in_range(oh, ir::index_const(0), OH), in_range(ow, ir::index_const(0), OW),
                         ir::compare(CompareOp::Lt, index_value(ih), index_value(oh * w[0].stride - w[0].pad + w[0].kernel)),
                         ir::compare(CompareOp::Lt, index_value(iw), index_value(ow * w[1].stride - w[1].pad + w[1].kernel))});
    Expr g = ir::cast(load(grad, at_hw(i, oh, ow), valid), acc);
    Expr div = ir::cast(index_value(avg_divisor(w, opt, H, W, oh, ow)), acc);
    return ir::where(valid, ir::binary(BinaryOp::TrueDiv, g, div), ir::const_float(0, acc));
  };
  return emit_input_gradient(c, window, body, x.device);
}

// --- adaptive average pooling ---------------------------------------------------------------

/// Output o of n_out over n_in covers [floor(o*n_in/n_out), ceil((o+1)*n_in/n_out)).
IndexExpr adaptive_start(const IndexExpr& o, const IndexExpr& n_in, const IndexExpr& n_out) {
  return ir::floordiv(o * n_in, n_out);
}
IndexExpr adaptive_end(const IndexExpr& o, const IndexExpr& n_in, const IndexExpr& n_out) {
  return ir::floordiv((o + 1) * n_in + n_out - 1, n_out);
}
/// The largest window (and, swapping the roles, the most windows that
/// contain one input position): ceil((n_in + n_out - 1) / n_out).
IndexExpr adaptive_span(const IndexExpr& n_in, const IndexExpr& n_out) {
  return ir::floordiv(n_in + n_out - 1 + n_out - 1, n_out);
}

/// The outputs of an adaptive pool over x (H x W) to grad (OH x OW) that may
/// read input position i, for the backward: oh = floor(ih * OH / H) + r[0]
/// and ow likewise, r over `window`, `in_bounds` when oh < OH and ow < OW.
struct AdaptiveCandidates {
  IndexExpr H, W, OH, OW;
  std::vector<IndexExpr> window;
  struct Candidate {
    IndexExpr ih, iw, oh, ow;
    Expr in_bounds;
  };

  AdaptiveCandidates(const TensorRef& x, const TensorRef& grad)
      : H(x.sizes[x.rank() - 2]),
        W(x.sizes[x.rank() - 1]),
        OH(grad.sizes[grad.rank() - 2]),
        OW(grad.sizes[grad.rank() - 1]),
        window{adaptive_span(OH, H), adaptive_span(OW, W)} {}

  Candidate at(const std::vector<IndexExpr>& i, const std::vector<IndexExpr>& r) const {
    Candidate k{i[i.size() - 2], i[i.size() - 1], {}, {}, {}};
    k.oh = ir::floordiv(k.ih * OH, H) + r[0];
    k.ow = ir::floordiv(k.iw * OW, W) + r[1];
    k.in_bounds = all_of({ir::compare(CompareOp::Lt, index_value(k.oh), index_value(OH)),
                          ir::compare(CompareOp::Lt, index_value(k.ow), index_value(OW))});
    return k;
  }
};

/// _adaptive_avg_pool2d(x, output_size): windows of varying size; the loops
/// run over the largest and mask the rest.
Status lower_adaptive_avg_pool2d(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 0, "self"));
  const size_t rank = x.rank();
  const IndexExpr H = x.sizes[rank - 2], W = x.sizes[rank - 1];
  ir::BufferPtr out = c.result_buffer();
  const IndexExpr OH = out->layout.sizes[rank - 2], OW = out->layout.sizes[rank - 1];
  const DType acc = opmath_type(x.dtype);
  const std::vector<IndexExpr> window{adaptive_span(H, OH), adaptive_span(W, OW)};
  auto body = [&](const std::vector<IndexExpr>& o, const std::vector<IndexExpr>& r) {
    IndexExpr hs = adaptive_start(o[rank - 2], H, OH), ws = adaptive_start(o[rank - 1], W, OW);
    IndexExpr ih = hs + r[0], iw = ws + r[1];
    Expr valid = all_of({ir::compare(CompareOp::Lt, index_value(ih), index_value(adaptive_end(o[rank - 2], H, OH))),
                         ir::compare(CompareOp::Lt, index_value(iw), index_value(adaptive_end(o[rank - 1], W, OW)))});
    return ir::cast(load(x, at_hw(o, ih, iw), valid), acc);
  };
  ir::BufferPtr sum = emit_window_reduction(c, out->layout.sizes, window, ReductionKind::Sum, body, nullptr, x.device);
  finish(c, sum, out, [&](const std::vector<IndexExpr>& o, Expr s) {
    IndexExpr count = (adaptive_end(o[rank - 2], H, OH) - adaptive_start(o[rank - 2], H, OH)) *
                      (adaptive_end(o[rank - 1], W, OW) - adaptive_start(o[rank - 1], W, OW));
    return ir::binary(BinaryOp::TrueDiv, s, ir::cast(index_value(count), acc));
  });
  c.set_result_buffer(out);
  return Status::success();
}

/// _adaptive_avg_pool2d_backward(grad, x): input position i sums grad[o] /
/// |window o| over the outputs whose windows contain it, which start at
/// floor(i*n_out/n_in).
Status lower_adaptive_avg_pool2d_backward(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(grad, c.tensor(0, "grad_output"));
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 1, "self"));
  const size_t rank = x.rank();
  if (grad.rank() != rank || !is_floating(grad.dtype))
    return Error::unsupported("adaptive_avg_pool2d backward: bad grad");
  const AdaptiveCandidates a(x, grad);
  const DType acc = opmath_type(c.meta().dtype);
  auto body = [&](const std::vector<IndexExpr>& i, const std::vector<IndexExpr>& r) {
    const auto k = a.at(i, r);
    IndexExpr hs = adaptive_start(k.oh, a.H, a.OH), he = adaptive_end(k.oh, a.H, a.OH);
    IndexExpr ws = adaptive_start(k.ow, a.W, a.OW), we = adaptive_end(k.ow, a.W, a.OW);
    Expr valid = all_of({k.in_bounds, in_range(k.ih, hs, he), in_range(k.iw, ws, we)});
    Expr g = ir::cast(load(grad, at_hw(i, k.oh, k.ow), valid), acc);
    Expr count = ir::cast(index_value((he - hs) * (we - ws)), acc);
    return ir::where(valid, ir::binary(BinaryOp::TrueDiv, g, count), ir::const_float(0, acc));
  };
  return emit_input_gradient(c, a.window, body, x.device);
}

/// adaptive_max_pool2d(x, output_size) -> (values, indices): the adaptive
/// windows with max pooling's value and index. Window position (0, 0) is
/// always in the window and first in scan order, so where the max is -inf
/// the argmax lands there, which is eager's initial guess too.
Status lower_adaptive_max_pool2d(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 0, "self"));
  const size_t rank = x.rank();
  const IndexExpr H = x.sizes[rank - 2], W = x.sizes[rank - 1];
  const std::vector<IndexExpr> out_sizes = to_index(c.item_meta(0).sizes);
  const IndexExpr OH = out_sizes[rank - 2], OW = out_sizes[rank - 1];
  const DType acc = opmath_type(x.dtype);
  const std::vector<IndexExpr> window{adaptive_span(H, OH), adaptive_span(W, OW)};
  auto hstart = [&](const std::vector<IndexExpr>& o) { return adaptive_start(o[rank - 2], H, OH); };
  auto wstart = [&](const std::vector<IndexExpr>& o) { return adaptive_start(o[rank - 1], W, OW); };
  auto body = [&](const std::vector<IndexExpr>& o, const std::vector<IndexExpr>& r) {
    IndexExpr ih = hstart(o) + r[0], iw = wstart(o) + r[1];
    Expr valid = all_of({ir::compare(CompareOp::Lt, index_value(ih), index_value(adaptive_end(o[rank - 2], H, OH))),
                         ir::compare(CompareOp::Lt, index_value(iw), index_value(adaptive_end(o[rank - 1], W, OW)))});
    return ir::where(valid, ir::cast(load(x, at_hw(o, ih, iw), valid), acc), ir::const_float(-INFINITY, acc));
  };
  return set_max_pool_items(c, x, out_sizes, window, body, [&](const std::vector<IndexExpr>& o, Expr r) {
    Expr kw = ir::cast(index_value(window[1]), DType::Int64);
    Expr ih = ir::binary(BinaryOp::Add, index_value(hstart(o)), ir::binary(BinaryOp::FloorDiv, r, kw));
    Expr iw = ir::binary(BinaryOp::Add, index_value(wstart(o)), ir::binary(BinaryOp::Remainder, r, kw));
    return ir::binary(BinaryOp::Add, ir::binary(BinaryOp::Mul, ih, index_value(W)), iw);
  });
}

/// adaptive_max_pool2d_backward(grad, x, indices): input position i sums
/// grad[o] over the outputs whose windows may contain it and whose index is i.
Status lower_adaptive_max_pool2d_backward(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(grad, c.tensor(0, "grad_output"));
  CPPI_ASSIGN_OR_RETURN(x, pooled_input(c, 1, "self"));
  CPPI_ASSIGN_OR_RETURN(indices, c.tensor(2, "indices"));
  const size_t rank = x.rank();
  if (grad.rank() != rank || indices.rank() != rank || !is_floating(grad.dtype))
    return Error::unsupported("adaptive_max_pool2d backward: unexpected operands");
  const AdaptiveCandidates a(x, grad);
  const DType acc = opmath_type(c.meta().dtype);
  auto body = [&](const std::vector<IndexExpr>& i, const std::vector<IndexExpr>& r) {
    const auto k = a.at(i, r);
    return grad_if_argmax(grad, indices, at_hw(i, k.oh, k.ow), k.in_bounds, k.ih * a.W + k.iw, acc);
  };
  return emit_input_gradient(c, a.window, body, x.device);
}

}  // namespace

void register_pooling_lowerings(Registry& r) {
  r.add("aten.max_pool2d_with_indices.default", lower_max_pool2d_with_indices);
  r.add("aten.max_pool2d_with_indices_backward.default", lower_max_pool2d_with_indices_backward);
  r.add("aten.avg_pool2d.default", lower_avg_pool2d);
  r.add("aten.avg_pool2d_backward.default", lower_avg_pool2d_backward);
  r.add("aten._adaptive_avg_pool2d.default", lower_adaptive_avg_pool2d);
  r.add("aten._adaptive_avg_pool2d_backward.default", lower_adaptive_avg_pool2d_backward);
  r.add("aten.adaptive_max_pool2d.default", lower_adaptive_max_pool2d);
  r.add("aten.adaptive_max_pool2d_backward.default", lower_adaptive_max_pool2d_backward);
}

}  // namespace cppi::lowering
