// Reductions: sum, mean, prod, amax/amin, max/min (values and indices),
// argmax/argmin, any/all, var/std/var_mean through Welford, linalg_vector_norm.
//
// A reduction node stores its results straight into the node's buffer when
// no post-processing is needed; otherwise into a temporary in the
// accumulation dtype, followed by a pointwise node (mean's division, var's
// correction, the rounding to float16, ...) that fusion folds back in.
#include <cmath>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ops/elementwise.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::BinaryOp;
using ir::Expr;
using ir::IndexExpr;
using ir::ReductionKind;

struct ReductionInput {
  TensorRef x;
  std::vector<int> dims;  // normalised, sorted
  bool keepdim = false;
};

/// Number of reduced elements.
IndexExpr reduced_numel(const ReductionInput& in) {
  std::vector<IndexExpr> f;
  for (int d : in.dims) f.push_back(in.x.sizes[d]);
  return ir::product(f);
}

/// Emits one reduction node over `in` with output ranges `out_sizes`. For each
/// result i with want[i], stores into targets[i] when given and of the
/// result's dtype, else into a fresh temporary. Returns the stored buffers.
Expected<std::vector<ir::BufferPtr>> emit_reduction(const OpCall& c, const ReductionInput& in,
                                                    const std::vector<IndexExpr>& out_sizes, ReductionKind kind,
                                                    const std::function<Expr(Expr)>& pre,
                                                    std::vector<ir::BufferPtr> targets, std::vector<bool> want) {
  const size_t rank = in.x.rank();
  std::vector<IndexExpr> rranges;
  std::vector<IndexExpr> coords(rank);
  auto xs = ir::pointwise_vars(out_sizes.size());
  size_t next_out = 0;
  for (size_t d = 0, k = 0; d < rank; ++d) {
    bool reduced = k < in.dims.size() && in.dims[k] == static_cast<int>(d);
    if (reduced) {
      coords[d] = ir::reduction_var(static_cast<int>(rranges.size()));
      rranges.push_back(in.x.sizes[d]);
      ++k;
      if (in.keepdim) ++next_out;
    } else {
      if (next_out >= xs.size()) return Error::unsupported("reduction result rank does not match its input");
      coords[d] = xs[next_out++];
    }
  }
  if (rranges.empty()) rranges.push_back(ir::index_const(1));  // a reduction over nothing: one element
  Expr body = pre(load(in.x, coords));
  CPPI_ASSIGN_OR_RETURN(dtypes, ir::reduction_result_dtypes(kind, body.dtype()));
  ir::VarRanges vr;
  for (size_t i = 0; i < xs.size(); ++i) vr[xs[i].as<ir::IndexVar>()->name] = out_sizes[i];
  for (size_t j = 0; j < rranges.size(); ++j) vr["r" + std::to_string(j)] = rranges[j];
  body = ir::simplify_indices(body, vr);

  std::vector<ir::BufferPtr> stored(dtypes.size());
  std::vector<ir::ReductionOutput> outputs;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (!want[i]) {
      outputs.push_back({nullptr, IndexExpr()});
      continue;
    }
    ir::BufferPtr b = i < targets.size() ? targets[i] : nullptr;
    if (!b || b->dtype != dtypes[i])
      b = c.ctx.temp_buffer(cat(c.node.name, "_acc"), dtypes[i], in.x.device, out_sizes);
    stored[i] = b;
    outputs.push_back({b, ir::simplify(b->layout.index(xs), vr)});
  }
  c.ctx.emit(ir::ReductionNode::make(c.ctx.fresh_node_name(c.node.name), out_sizes, rranges, kind, body,
                                     std::move(outputs), {c.node.name}));
  return stored;
}

/// out[x] = post(acc[x]) unless acc already is out.
void finish(const OpCall& c, const ir::BufferPtr& acc, const ir::BufferPtr& out,
            const std::function<Expr(Expr)>& post = nullptr) {
  if (acc == out && !post) return;
  TensorRef a = TensorRef::of_buffer(acc);
  emit_pointwise(c.ctx, c.node.name, out, [&](const std::vector<IndexExpr>& x) {
    Expr v = load(a, x);
    return post ? post(v) : v;
  });
}

Expected<ReductionInput> reduction_input(const OpCall& c, std::optional<size_t> dim_pos, size_t keepdim_pos,
                                         const char* dim_kw = "dim") {
  ReductionInput in;
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "self"));
  in.x = x;
  std::vector<int64_t> dims;
  if (dim_pos) {
    CPPI_ASSIGN_OR_RETURN(d, c.int_list(*dim_pos, dim_kw));
    dims = d;
  }
  CPPI_ASSIGN_OR_RETURN(nd, normalize_dims(dims, x.rank()));
  in.dims = nd;
  in.keepdim = c.flag(keepdim_pos, "keepdim", false);
  if (x.device != ir_device(c.node.value.kind == ValueInfo::Kind::Tuple ? c.item_meta(0) : c.meta()))
    return Error::unsupported("reduction across devices");
  return in;
}

/// The accumulation dtype of sum/prod: int64 for integers and bool, float32
/// for reduced floats, or the requested dtype.
DType accumulation_type(DType input, std::optional<DType> requested) {
  if (requested) return opmath_type(*requested);
  if (!is_floating(input)) return DType::Int64;
  return opmath_type(input);
}

/// sum / prod (with optional dtype=).
LowerFn sum_like(ReductionKind kind, std::optional<size_t> dim_pos, size_t keepdim_pos, size_t dtype_pos) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, dim_pos, keepdim_pos));
    DType acc = accumulation_type(in.x.dtype, c.dtype(dtype_pos, "dtype"));
    ir::BufferPtr out = c.result_buffer();
    CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kind,
                                                 [acc](Expr v) { return ir::cast(v, acc); }, {out}, {true}));
    finish(c, stored[0], out);
    c.set_result_buffer(out);
    return Status::success();
  };
}

LowerFn mean(std::optional<size_t> dim_pos, size_t keepdim_pos, size_t dtype_pos) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, dim_pos, keepdim_pos));
    DType acc = opmath_type(c.dtype(dtype_pos, "dtype").value_or(c.meta().dtype));
    if (!is_floating(acc)) return Error::unsupported("mean of an integer tensor");
    ir::BufferPtr out = c.result_buffer();
    IndexExpr n = reduced_numel(in);
    CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, ReductionKind::Sum,
                                                 [acc](Expr v) { return ir::cast(v, acc); }, {}, {true}));
    finish(c, stored[0], out, [&](Expr s) {
      return ir::binary(BinaryOp::TrueDiv, s, ir::cast(ir::IndexValue::make(n), acc));
    });
    c.set_result_buffer(out);
    return Status::success();
  };
}

/// amax/amin, max/min over all elements: NaN propagates. Reduced floats are
/// compared in float32 (exact) and rounded back on store (also exact).
LowerFn extremum(ReductionKind kind, std::optional<size_t> dim_pos, size_t keepdim_pos) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, dim_pos, keepdim_pos));
    ir::BufferPtr out = c.result_buffer();
    CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kind,
                                                 [](Expr v) { return ir::cast(v, opmath_type(v.dtype())); },
                                                 {out}, {true}));
    finish(c, stored[0], out);
    c.set_result_buffer(out);
    return Status::success();
  };
}

/// argmax/argmin(x, dim=None, keepdim): dim None reduces the flattened tensor.
LowerFn arg_extremum(ReductionKind kind) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, 1, 2));
    ir::BufferPtr out = c.result_buffer();
    CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kind,
                                                 [](Expr v) { return ir::cast(v, opmath_type(v.dtype())); },
                                                 {out}, {true}));
    finish(c, stored[0], out);
    c.set_result_buffer(out);
    return Status::success();
  };
}

/// max.dim / min.dim: (values, indices), each a reduction node (fusion can
/// merge them horizontally); an unused result is not computed.
LowerFn extremum_with_indices(ReductionKind value_kind, ReductionKind index_kind) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, 1, 2));
    if (in.dims.size() != 1 && in.x.rank() > 0) return Error::unsupported("max.dim over several dims");
    std::vector<std::optional<TensorRef>> items(2);
    auto pre = [](Expr v) { return ir::cast(v, opmath_type(v.dtype())); };
    const ReductionKind kinds[2] = {value_kind, index_kind};
    for (size_t k = 0; k < 2; ++k) {
      if (!c.item_used(k)) continue;
      ir::BufferPtr out = c.item_buffer(k);
      CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kinds[k], pre, {out}, {true}));
      finish(c, stored[0], out);
      items[k] = TensorRef::of_buffer(out);
    }
    c.set_items(std::move(items));
    return Status::success();
  };
}

/// any / all: over the input read as bool; the result keeps eager's dtype
/// (bool, or uint8 for uint8 inputs).
LowerFn any_all(ReductionKind kind, std::optional<size_t> dim_pos, size_t keepdim_pos) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, dim_pos, keepdim_pos));
    ir::BufferPtr out = c.result_buffer();
    CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kind,
                                                 [](Expr v) { return ir::cast(v, DType::Bool); }, {out}, {true}));
    finish(c, stored[0], out);
    c.set_result_buffer(out);
    return Status::success();
  };
}

/// var/std/var_mean/std_mean(x, dim, correction, keepdim): var = m2 /
/// max(N - correction, 0) (inf/NaN where eager has them), m2 from one Welford
/// reduction, or for short static reductions from two sums (below).
enum class Moments { Var, Std, VarMean, StdMean };

/// Reductions of at most this many elements use the two-pass variance on CPU,
/// as Inductor's cpp backend does (config.cpp.use_two_step_variance_threshold):
/// the mean first, then the sum of squared deviations from it. A float32
/// Welford state loses the spread when the mean is large next to it (std of
/// data with mean 1e4 and std 1: 1.7e-4 relative error; two passes: ~1e-7);
/// the second pass re-reads a row that is still in cache.
constexpr int64_t kTwoPassVarianceMaxElements = 1024;
/// On CUDA, rows over the innermost dims up to this length: the GPU schedule
/// keeps such a row in registers (gpu_schedule.cpp, 512 threads x 32), so
/// the second pass reads registers, not memory, and a block reduces two
/// floats instead of a three-float Welford state (whose combine divides).
constexpr int64_t kCudaTwoPassVarianceMaxElements = 16384;

bool use_two_pass_variance(const ReductionInput& in) {
  auto n = reduced_numel(in).constant();
  if (!n || *n <= 0) return false;
  if (in.x.device == ir::Device::CPU) return *n <= kTwoPassVarianceMaxElements;
  // Over the innermost dims only: a column reduction streams from memory,
  // where a second pass would double the traffic.
  const int rank = static_cast<int>(in.x.rank());
  for (size_t i = 0; i < in.dims.size(); ++i)
    if (in.dims[in.dims.size() - 1 - i] != rank - 1 - static_cast<int>(i)) return false;
  return *n <= kCudaTwoPassVarianceMaxElements;
}

/// {mean, m2} of `in` by the corrected two-pass algorithm (Chan, Golub and
/// LeVeque): m = sum(x) / N, then over d = x - m both s1 = sum(d) and
/// s2 = sum(d^2); mean = m + s1 / N and m2 = s2 - s1^2 / N. The correction
/// removes the rounding of m itself: for a constant row m can be an ULP off
/// x, and layer_norm's (x - mean) * rsqrt(var + eps) multiplied that ULP by
/// up to 1/sqrt(eps) = 316 (3e-4 where eager's Welford mean gives exactly
/// 0); with it, mean = x exactly. The two sums of the second pass read the
/// first sum at their output position and fuse with it into one kernel.
Expected<std::pair<ir::BufferPtr, ir::BufferPtr>> two_pass_moments(const OpCall& c, const ReductionInput& in,
                                                                   const std::vector<IndexExpr>& out_sizes,
                                                                   DType acc) {
  const Expr n = ir::cast(ir::IndexValue::make(reduced_numel(in)), acc);
  CPPI_ASSIGN_OR_RETURN(sums, emit_reduction(c, in, out_sizes, ReductionKind::Sum,
                                             [acc](Expr v) { return ir::cast(v, acc); }, {}, {true}));
  const TensorRef sum = TensorRef::of_buffer(sums[0]);
  const std::vector<IndexExpr> xs = ir::pointwise_vars(out_sizes.size());
  auto deviation = [&](Expr v) {
    return ir::binary(BinaryOp::Sub, ir::cast(v, acc), ir::binary(BinaryOp::TrueDiv, load(sum, xs), n));
  };
  CPPI_ASSIGN_OR_RETURN(s1s, emit_reduction(c, in, out_sizes, ReductionKind::Sum, deviation, {}, {true}));
  CPPI_ASSIGN_OR_RETURN(s2s, emit_reduction(c, in, out_sizes, ReductionKind::Sum,
                                            [&](Expr v) {
                                              Expr d = deviation(v);
                                              return ir::binary(BinaryOp::Mul, d, d);
                                            },
                                            {}, {true}));
  const TensorRef s1 = TensorRef::of_buffer(s1s[0]), s2 = TensorRef::of_buffer(s2s[0]);
  ir::BufferPtr mean = c.ctx.temp_buffer(cat(c.node.name, "_mean"), acc, in.x.device, out_sizes);
  emit_pointwise(c.ctx, c.node.name, mean, [&](const std::vector<IndexExpr>& x) {
    // A row holding inf has an infinite m and a NaN s1 (inf - inf): its
    // mean is m, as eager's (a NaN row's m is NaN either way).
    const Expr m = ir::binary(BinaryOp::TrueDiv, load(sum, x), n);
    return ir::where(ir::unary(ir::UnaryOp::IsFinite, m),
                     ir::binary(BinaryOp::Add, m, ir::binary(BinaryOp::TrueDiv, load(s1, x), n)), m);
  });
  ir::BufferPtr m2 = c.ctx.temp_buffer(cat(c.node.name, "_m2"), acc, in.x.device, out_sizes);
  emit_pointwise(c.ctx, c.node.name, m2, [&](const std::vector<IndexExpr>& x) {
    Expr d = load(s1, x);
    return ir::binary(BinaryOp::Sub, load(s2, x), ir::binary(BinaryOp::TrueDiv, ir::binary(BinaryOp::Mul, d, d), n));
  });
  return std::make_pair(mean, m2);
}

LowerFn welford(Moments what) {
  return [=](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, 1, 3));
    CPPI_ASSIGN_OR_RETURN(corr, c.optional_scalar(2, "correction"));
    double correction = corr ? corr->as_double() : 1.0;
    if (corr && corr->kind == Scalar::Kind::Symbolic) return Error::unsupported("symbolic correction");
    bool with_mean = what == Moments::VarMean || what == Moments::StdMean;
    bool is_std = what == Moments::Std || what == Moments::StdMean;
    const TensorMeta& vmeta = with_mean ? c.item_meta(0) : c.meta();
    DType acc = opmath_type(vmeta.dtype);
    if (!is_floating(acc)) return Error::unsupported("variance of an integer tensor");
    bool want_var = !with_mean || c.item_used(0);
    bool want_mean = with_mean && c.item_used(1);
    ir::BufferPtr var_out = want_var ? (with_mean ? c.item_buffer(0) : c.result_buffer()) : nullptr;
    ir::BufferPtr mean_out = want_mean ? c.item_buffer(1) : nullptr;
    std::vector<IndexExpr> out_sizes = to_index(vmeta.sizes);
    std::vector<ir::BufferPtr> stored;
    if (use_two_pass_variance(in)) {
      CPPI_ASSIGN_OR_RETURN(moments, two_pass_moments(c, in, out_sizes, acc));
      stored = {moments.first, moments.second};
    } else {
      CPPI_ASSIGN_OR_RETURN(welford_state, emit_reduction(c, in, out_sizes, ReductionKind::Welford,
                                                          [acc](Expr v) { return ir::cast(v, acc); },
                                                          {mean_out, nullptr, nullptr}, {want_mean, want_var, false}));
      stored = welford_state;
    }
    if (want_var) {
      IndexExpr n = reduced_numel(in);
      finish(c, stored[1], var_out, [&](Expr m2) {
        Expr denom = ir::binary(BinaryOp::Maximum,
                                ir::binary(BinaryOp::Sub, ir::cast(ir::IndexValue::make(n), acc),
                                           ir::const_float(correction, acc)),
                                ir::const_float(0, acc));
        Expr v = ir::binary(BinaryOp::TrueDiv, m2, denom);
        return is_std ? ir::unary(ir::UnaryOp::Sqrt, v) : v;
      });
    }
    if (want_mean) {
      // An empty reduction's mean is 0/0 in eager; the Welford state never
      // left its initial 0. Size symbols are >= 1, so emptiness is constant.
      auto n = reduced_numel(in).constant();
      if (n && *n == 0) {
        finish(c, stored[0], mean_out, [&](Expr) { return ir::const_float(std::nan(""), acc); });
      } else {
        finish(c, stored[0], mean_out);
      }
    }
    if (with_mean) {
      std::vector<std::optional<TensorRef>> items(2);
      if (var_out) items[0] = TensorRef::of_buffer(var_out);
      if (mean_out) items[1] = TensorRef::of_buffer(mean_out);
      c.set_items(std::move(items));
    } else {
      c.set_result_buffer(var_out);
    }
    return Status::success();
  };
}

/// linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None) as one
/// reduction in the accumulation type of the result: ord 2 sqrt(sum(x*x)),
/// 1 sum(|x|), inf max(|x|), -inf min(|x|), 0 the count of nonzeros, other
/// p sum(|x|^p)^(1/p).
Status lower_linalg_vector_norm(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(in, reduction_input(c, 2, 3));
  CPPI_ASSIGN_OR_RETURN(ord_s, c.optional_scalar(1, "ord"));
  if (ord_s && ord_s->kind == Scalar::Kind::Symbolic) return Error::unsupported("vector_norm: symbolic ord");
  const double ord = ord_s ? ord_s->as_double() : 2.0;
  const DType acc = opmath_type(c.meta().dtype);
  if (!is_floating(acc) || !is_floating(in.x.dtype)) return Error::unsupported("vector_norm of a non-floating tensor");
  // An empty max/min has no identity eager accepts (it raises).
  if (std::isinf(ord) && reduced_numel(in).is_constant(0)) return Error::unsupported("vector_norm: inf norm of nothing");
  ReductionKind kind = ReductionKind::Sum;
  std::function<Expr(Expr)> pre;
  std::function<Expr(Expr)> post;
  auto abs = [](Expr v) { return ir::unary(ir::UnaryOp::Abs, v); };
  if (ord == 2) {
    pre = [](Expr v) { return ir::binary(BinaryOp::Mul, v, v); };
    post = [](Expr s) { return ir::unary(ir::UnaryOp::Sqrt, s); };
  } else if (ord == 1) {
    pre = abs;
  } else if (std::isinf(ord)) {
    kind = ord > 0 ? ReductionKind::Max : ReductionKind::Min;
    pre = abs;
  } else if (ord == 0) {
    pre = [acc](Expr v) { return ir::cast(ir::compare(ir::CompareOp::Ne, v, ir::const_float(0, acc)), acc); };
  } else {
    pre = [acc, ord, abs](Expr v) { return ir::binary(BinaryOp::Pow, abs(v), ir::const_float(ord, acc)); };
    post = [acc, ord](Expr s) { return ir::binary(BinaryOp::Pow, s, ir::const_float(1.0 / ord, acc)); };
  }
  ir::BufferPtr out = c.result_buffer();
  // dtype= converts the input before the norm (eager: x.to(dtype)).
  DType input_as = c.dtype(4, "dtype").value_or(in.x.dtype);
  // With a root to take, the sum goes to a temporary: the root must not
  // rewrite its own input in place.
  std::vector<ir::BufferPtr> targets;
  if (!post) targets.push_back(out);
  CPPI_ASSIGN_OR_RETURN(stored, emit_reduction(c, in, out->layout.sizes, kind,
                                               [&](Expr v) { return pre(ir::cast(ir::cast(v, input_as), acc)); },
                                               targets, {true}));
  if (post) {
    finish(c, stored[0], out, post);
  } else {
    finish(c, stored[0], out);
  }
  c.set_result_buffer(out);
  return Status::success();
}

}  // namespace

void register_reduction_lowerings(Registry& r) {
  r.add("aten.sum.default", sum_like(ReductionKind::Sum, std::nullopt, 99, 1));
  r.add("aten.sum.dim_IntList", sum_like(ReductionKind::Sum, 1, 2, 3));
  r.add("aten.prod.default", sum_like(ReductionKind::Prod, std::nullopt, 99, 1));
  r.add("aten.prod.dim_int", sum_like(ReductionKind::Prod, 1, 2, 3));
  r.add("aten.mean.default", mean(std::nullopt, 99, 1));
  r.add("aten.mean.dim", mean(1, 2, 3));
  r.add("aten.amax.default", extremum(ReductionKind::Max, 1, 2));
  r.add("aten.amin.default", extremum(ReductionKind::Min, 1, 2));
  r.add("aten.max.default", extremum(ReductionKind::Max, std::nullopt, 99));
  r.add("aten.min.default", extremum(ReductionKind::Min, std::nullopt, 99));
  r.add("aten.max.dim", extremum_with_indices(ReductionKind::Max, ReductionKind::ArgMax));
  r.add("aten.min.dim", extremum_with_indices(ReductionKind::Min, ReductionKind::ArgMin));
  r.add("aten.argmax.default", arg_extremum(ReductionKind::ArgMax));
  r.add("aten.argmin.default", arg_extremum(ReductionKind::ArgMin));
  for (auto [name, kind] : {std::pair{"any", ReductionKind::Any}, std::pair{"all", ReductionKind::All}}) {
    r.add(cat("aten.", name, ".default"), any_all(kind, std::nullopt, 99));
    r.add(cat("aten.", name, ".dim"), any_all(kind, 1, 2));
    r.add(cat("aten.", name, ".dims"), any_all(kind, 1, 2));
  }
  r.add("aten.var.correction", welford(Moments::Var));
  r.add("aten.std.correction", welford(Moments::Std));
  r.add("aten.var_mean.correction", welford(Moments::VarMean));
  r.add("aten.std_mean.correction", welford(Moments::StdMean));
  r.add("aten.linalg_vector_norm.default", lower_linalg_vector_norm);
}

}  // namespace cppi::lowering
