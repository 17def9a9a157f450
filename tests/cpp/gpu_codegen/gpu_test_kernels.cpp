#include "gpu_test_kernels.h"

#include "gpu_codegen/codegen/gpu_schedule.h"

namespace cppi::gpu::testing {

using namespace ir;

const std::vector<std::string> kSymbols = {"s0", "s1"};

KernelPtr scheduled(const KernelPtr& k) { return schedule_for_gpu(k, GpuTarget{}); }

KernelPtr with_gpu(const KernelPtr& k, GpuMapping m, int block, int ept) {
  Schedule s = k->schedule;
  s.gpu = GpuSchedule{m, block, 0, ept};
  return k->with_schedule(s);
}

KernelPtr with_column_groups(const KernelPtr& k, int threads_per_column) {
  Schedule s = k->schedule;
  s.gpu = GpuSchedule{GpuMapping::ColumnReduction, 32 * threads_per_column, 0, 1, threads_per_column};
  return k->with_schedule(s);
}

namespace {

BufferPtr buffer(const std::string& name, DType t, BufferKind kind, std::vector<IndexExpr> sizes) {
  return Buffer::make_contiguous(name, t, Device::CUDA, kind, std::move(sizes));
}
BufferPtr input(const std::string& name, DType t, std::vector<IndexExpr> sizes) {
  return buffer(name, t, BufferKind::GraphInput, std::move(sizes));
}
BufferPtr output(const std::string& name, DType t, std::vector<IndexExpr> sizes) {
  return buffer(name, t, BufferKind::GraphOutput, std::move(sizes));
}
Expr f32(Expr e) { return cast(std::move(e), DType::Float32); }
Expr add(Expr a, Expr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return binary(BinaryOp::Sub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
Expr div(Expr a, Expr b) { return binary(BinaryOp::TrueDiv, std::move(a), std::move(b)); }

}  // namespace

KernelPtr add_relu_mul(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), b = input("b", t, {cols}), out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = add(f32(load(x, x->layout.index({x0, x1}))), f32(load(b, b->layout.index({x1}))));
  v = mul(binary(BinaryOp::Maximum, v, const_float(0)), const_float(2));
  return Kernel::make("add_relu_mul", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), cast(v, t))}}}, {},
                      {"add", "relu", "mul"});
}

KernelPtr sin_plus_cos(const IndexExpr& n, DType t) {
  auto x = input("x", t, {n}), out = output("out", t, {n});
  IndexExpr x0 = var("x0");
  Expr xv = f32(load(x, x0));
  Expr v = add(unary(UnaryOp::Sin, xv), unary(UnaryOp::Cos, xv));
  return Kernel::make("sin_plus_cos", Device::CUDA, {{x0, n}}, {PointwiseStage{{}, {Store::make(out, x0, cast(v, t))}}},
                      {}, {"sin", "cos", "add"});
}

KernelPtr gelu_bias(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), b = input("b", t, {cols}), out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr y = add(f32(load(x, x->layout.index({x0, x1}))), f32(load(b, b->layout.index({x1}))));
  Expr g = mul(mul(const_float(0.5), y),
               add(const_float(1), unary(UnaryOp::Erf, mul(y, const_float(0.7071067811865476)))));
  return Kernel::make("gelu_bias", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), cast(g, t))}}}, {},
                      {"add", "gelu"});
}

KernelPtr bias_then_gelu(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), b = input("b", t, {cols});
  auto pre = output("pre", t, {rows, cols}), post = output("post", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr y = cast(add(f32(load(x, x->layout.index({x0, x1}))), f32(load(b, b->layout.index({x1})))), t);
  Expr g = mul(mul(const_float(0.5), f32(y)),
               add(const_float(1), unary(UnaryOp::Erf, mul(f32(y), const_float(0.7071067811865476)))));
  return Kernel::make("bias_then_gelu", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(pre, pre->layout.index({x0, x1}), y),
                                           Store::make(post, post->layout.index({x0, x1}), cast(g, t))}}});
}

KernelPtr add_in_place(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), s = output("s", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = add(f32(load(s, s->layout.index({x0, x1}))), f32(load(x, x->layout.index({x0, x1}))));
  return Kernel::make("add_in_place", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(s, s->layout.index({x0, x1}), cast(v, t))}}});
}

KernelPtr rounded_chain(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  auto rounded = [&](Expr e) { return f32(cast(std::move(e), t)); };
  Expr xv = f32(load(x, x->layout.index({x0, x1})));
  Expr half = rounded(mul(xv, const_float(0.5)));
  Expr cube = rounded(mul(mul(xv, xv), xv));
  Expr squashed = rounded(unary(UnaryOp::Tanh, cube));
  return Kernel::make("rounded_chain", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), cast(mul(half, squashed), t))}}});
}

KernelPtr gelu_backward_3d(const IndexExpr& a, const IndexExpr& b, const IndexExpr& c) {
  auto g = input("g", DType::Float32, {a, b, c}), x = input("x", DType::Float32, {a, b, c});
  auto out = output("out", DType::Float32, {a, b, c});
  IndexExpr x0 = var("x0"), x1 = var("x1"), x2 = var("x2");
  Expr xv = load(x, x->layout.index({x0, x1, x2}));
  Expr cdf = mul(add(unary(UnaryOp::Erf, mul(xv, const_float(0.7071067811865476))), const_float(1)), const_float(0.5));
  Expr pdf = mul(unary(UnaryOp::Exp, mul(mul(xv, xv), const_float(-0.5))), const_float(0.3989422804014327));
  Expr v = mul(load(g, g->layout.index({x0, x1, x2})), add(cdf, mul(xv, pdf)));
  return Kernel::make("gelu_backward_3d", Device::CUDA, {{x0, a}, {x1, b}, {x2, c}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1, x2}), v)}}}, {},
                      {"gelu_backward"});
}

KernelPtr nan_to_index(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr xv = load(x, x->layout.index({x0, x1}));
  Expr v = add(where(unary(UnaryOp::IsNan, xv), const_float(-1), xv), cast(IndexValue::make(x1), DType::Float32));
  return Kernel::make("nan_to_index", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), v)}}});
}

KernelPtr scatter_add_rows(const IndexExpr& rows, int64_t out_rows, const IndexExpr& cols, DType t) {
  auto x = input("x", t, {rows, cols}), out = output("out", t, {out_rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  IndexExpr row = mod(5 * x0, index_const(out_rows));
  return Kernel::make("scatter_add_rows", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make_accumulate(out, out->layout.index({row, x1}),
                                                                  load(x, x->layout.index({x0, x1})))}}},
                      {}, {"index_put"});
}

KernelPtr pad_columns(const IndexExpr& rows, const IndexExpr& cols, int64_t left, int64_t right, bool halved) {
  const IndexExpr width = simplify(cols + left + right);
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {rows, width});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr j = IndexValue::make(x1 - left);
  Expr inside = binary(BinaryOp::LogicalAnd, compare(CompareOp::Ge, j, const_int(0)),
                       compare(CompareOp::Lt, j, IndexValue::make(cols)));
  Expr v = where(inside, unary(UnaryOp::Exp, load(x, x->layout.index({x0, x1 - left}), inside)), const_float(-2));
  std::vector<Store> stores = {Store::make(out, out->layout.index({x0, x1}), v)};
  if (halved) {
    auto half = output("half", DType::Float32, {rows, width});
    stores.push_back(Store::make(half, half->layout.index({x0, x1}), mul(v, const_float(0.5))));
  }
  return Kernel::make("pad_columns", Device::CUDA, {{x0, rows}, {x1, width}}, {PointwiseStage{{}, stores}}, {},
                      {"exp", "pad"});
}

KernelPtr cat_columns(const IndexExpr& rows, const IndexExpr& left, const IndexExpr& right) {
  const IndexExpr width = simplify(left + right);
  auto a = input("a", DType::Float32, {rows, left}), b = input("b", DType::Float32, {rows, right});
  auto out = output("out", DType::Float32, {rows, width});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr first = compare(CompareOp::Lt, IndexValue::make(x1), IndexValue::make(left));
  Expr second = compare(CompareOp::Ge, IndexValue::make(x1), IndexValue::make(left));
  Expr v = where(first, mul(load(a, a->layout.index({x0, x1}), first), const_float(2)),
                 add(load(b, b->layout.index({x0, x1 - left}), second), const_float(1)));
  return Kernel::make("cat_columns", Device::CUDA, {{x0, rows}, {x1, width}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), v)}}}, {}, {"cat"});
}

KernelPtr row_reduce(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols});
  const bool arg = kind == ReductionKind::ArgMax || kind == ReductionKind::ArgMin;
  auto out = output("out", arg ? DType::Int64 : DType::Float32, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto red = ReductionStage::make({{r0, cols}}, kind, load(x, x->layout.index({x0, r0})), {"acc"});
  return Kernel::make(std::string("row_") + to_string(kind), Device::CUDA, {{x0, rows}},
                      {red, PointwiseStage{{}, {Store::make(out, x0, red.result())}}});
}

KernelPtr host_scalar_scale(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {rows, cols});
  auto s = Buffer::make_contiguous("s", DType::Float64, Device::CPU, BufferKind::GraphInput, {});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr scale = f32(load(s, index_const(0)));
  Expr v = mul(load(x, x->layout.index({x0, x1})), scale);
  v = add(binary(BinaryOp::Maximum, v, const_float(0)), f32(mul(load(s, index_const(0)), const_float(2, DType::Float64))));
  return Kernel::make("host_scalar_scale", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), v)}}}, {}, {"mul", "relu"});
}

KernelPtr host_scalar_row_sum(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {rows});
  auto s = Buffer::make_contiguous("s", DType::Float32, Device::CPU, BufferKind::GraphInput, {});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto red = ReductionStage::make({{r0, cols}}, ReductionKind::Sum,
                                  mul(load(x, x->layout.index({x0, r0})), load(s, index_const(0))), {"acc"});
  return Kernel::make("host_scalar_row_sum", Device::CUDA, {{x0, rows}},
                      {red, PointwiseStage{{}, {Store::make(out, x0, red.result())}}});
}

KernelPtr column_sum(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto red = ReductionStage::make({{r0, rows}}, ReductionKind::Sum, load(x, x->layout.index({r0, x0})), {"acc"});
  return Kernel::make("column_sum", Device::CUDA, {{x0, cols}},
                      {red, PointwiseStage{{}, {Store::make(out, x0, red.result())}}});
}

KernelPtr cumsum(const IndexExpr& rows, const IndexExpr& cols, int dim) {
  auto x = input("x", DType::Float32, {rows, cols}), out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  const std::vector<IndexExpr> at = dim == 1 ? std::vector<IndexExpr>{x0, r0} : std::vector<IndexExpr>{r0, x0};
  auto scan = ScanStage::make({r0, dim == 1 ? cols : rows}, ReductionKind::Sum, load(x, x->layout.index(at)), "acc",
                              {Store::make(out, out->layout.index(at), LocalRef::make("acc", DType::Float32))});
  return Kernel::make("cumsum", Device::CUDA, {{x0, dim == 1 ? rows : cols}}, {scan});
}

KernelPtr column_reduce(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr v = load(x, x->layout.index({r0, x0}));
  const std::string name = std::string("column_") + to_string(kind);
  if (kind == ReductionKind::Welford) {
    auto var_out = output("var", DType::Float32, {cols}), mean_out = output("mean", DType::Float32, {cols});
    auto stats = ReductionStage::make({{r0, rows}}, kind, v, {"mean", "m2", "weight"});
    Expr var_v = div(stats.result(1), stats.result(2));
    return Kernel::make(name, Device::CUDA, {{x0, cols}},
                        {stats, PointwiseStage{{}, {Store::make(var_out, x0, var_v), Store::make(mean_out, x0, stats.result(0))}}});
  }
  const bool arg = kind == ReductionKind::ArgMax || kind == ReductionKind::ArgMin;
  auto out = output("out", arg ? DType::Int64 : DType::Float32, {cols});
  auto red = ReductionStage::make({{r0, rows}}, kind, v, {"acc"});
  return Kernel::make(name, Device::CUDA, {{x0, cols}}, {red, PointwiseStage{{}, {Store::make(out, x0, red.result())}}});
}

KernelPtr two_column_reductions(const IndexExpr& rows, const IndexExpr& cols) {
  auto g = input("g", DType::Float32, {rows, cols}), x = input("x", DType::Float32, {rows, cols});
  auto gw = output("gw", DType::Float32, {cols}), gmax = output("gmax", DType::Float32, {cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), r1 = var("r1");
  auto dot = ReductionStage::make({{r0, rows}}, ReductionKind::Sum,
                                  mul(load(g, g->layout.index({r0, x0})), load(x, x->layout.index({r0, x0}))), {"gw"});
  auto top = ReductionStage::make({{r1, rows}}, ReductionKind::Max, load(g, g->layout.index({r1, x0})), {"gmax"});
  return Kernel::make("two_column_reductions", Device::CUDA, {{x0, cols}},
                      {dot, top, PointwiseStage{{}, {Store::make(gw, x0, dot.result()), Store::make(gmax, x0, top.result())}}});
}

KernelPtr sum_and_halved_difference(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), y = input("y", DType::Float32, {rows, cols});
  auto half = output("half", DType::Float32, {rows, cols}), mean = output("mean", DType::Float32, {});
  IndexExpr x0 = var("x0"), x1 = var("x1"), r0 = var("r0"), r1 = var("r1");
  auto diff = [&](const IndexExpr& i, const IndexExpr& j) {
    return sub(load(x, x->layout.index({i, j})), load(y, y->layout.index({i, j})));
  };
  auto red = ReductionStage::make({{r0, rows}, {r1, cols}}, ReductionKind::Sum, diff(r0, r1), {"total"});
  PointwiseStage halved{{{x0, rows}, {x1, cols}}, {Store::make(half, half->layout.index({x0, x1}), mul(diff(x0, x1), const_float(0.5)))}};
  Expr n = cast(IndexValue::make(rows * cols), DType::Float32);
  return Kernel::make("sum_and_halved_difference", Device::CUDA, {},
                      {red, halved, PointwiseStage{{}, {Store::make(mean, index_const(0), div(red.result(), n))}}});
}

KernelPtr four_load_row_sums(const IndexExpr& rows, const IndexExpr& cols, int loads) {
  std::vector<BufferPtr> in;
  for (int i = 0; i < loads; ++i) in.push_back(input(cat("a", i), DType::Float32, {rows, cols}));
  auto out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), r1 = var("r1"), x1 = var("x1");
  auto row = [&](int i, const IndexExpr& v) { return load(in[i], in[i]->layout.index({x0, v})); };
  Expr prod = row(0, r0);
  for (int i = 1; i < loads; ++i) prod = mul(prod, row(i, r0));
  auto s = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, prod, {"s"});
  auto t = ReductionStage::make({{r1, cols}}, ReductionKind::Sum, row(0, r1), {"t"});
  // Scaled down: the interpreter's sequential float sums of the products
  // carry ~1e-3 of rounding, which the stored value must not magnify.
  Expr v = add(row(0, x1), mul(sub(s.result(), mul(t.result(), row(loads > 1 ? 1 : 0, x1))), const_float(1.0 / 4096)));
  return Kernel::make("four_load_row_sums", Device::CUDA, {{x0, rows}},
                      {s, t, PointwiseStage{{{x1, cols}}, {Store::make(out, out->layout.index({x0, x1}), v)}}});
}

KernelPtr middle_sum_scale(const IndexExpr& a, const IndexExpr& r, const IndexExpr& c) {
  auto x = input("x", DType::Float32, {a, r, c});
  auto sum_out = output("sum", DType::Float32, {a, c}), scaled = output("scaled", DType::Float32, {a, r, c});
  IndexExpr x0 = var("x0"), x1 = var("x1"), r0 = var("r0");
  Expr v = load(x, x->layout.index({x0, r0, x1}));
  auto red = ReductionStage::make({{r0, r}}, ReductionKind::Sum, v, {"acc"});
  // A looped stage after the reduction: x * sum, written down the column.
  PointwiseStage scale{{{r0, r}}, {Store::make(scaled, scaled->layout.index({x0, r0, x1}), mul(v, red.result()))}};
  return Kernel::make("middle_sum_scale", Device::CUDA, {{x0, a}, {x1, c}},
                      {red, scale, PointwiseStage{{}, {Store::make(sum_out, sum_out->layout.index({x0, x1}), red.result())}}});
}

KernelPtr softmax(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto in = input("x", t, {rows, cols}), out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = f32(load(in, in->layout.index({x0, r0})));
  auto amax = ReductionStage::make({{r0, cols}}, ReductionKind::Max, x, {"amax"});
  Expr e = unary(UnaryOp::Exp, sub(x, amax.result()));
  auto denom = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, e, {"denom"});
  PointwiseStage norm{{{r0, cols}}, {Store::make(out, out->layout.index({x0, r0}), cast(div(e, denom.result()), t))}};
  return Kernel::make("softmax", Device::CUDA, {{x0, rows}}, {amax, denom, norm}, {}, {"amax", "sub", "exp", "sum", "div"});
}

KernelPtr log_softmax_backward(const IndexExpr& rows, const IndexExpr& cols) {
  auto g = input("g", DType::Float32, {rows, cols}), x = input("x", DType::Float32, {rows, cols});
  auto amax = input("amax", DType::Float32, {rows}), lse = input("lse", DType::Float32, {rows});
  auto scale = input("scale", DType::Float32, {rows});
  auto out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  // Per-row values read in the loops (as cross-entropy's backward reads a
  // row's scale, maximum and log-sum): invariant along the row.
  auto grad = [&] { return mul(load(g, g->layout.index({x0, r0})), load(scale, x0)); };
  auto sum = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, grad(), {"sum"});
  Expr p = unary(UnaryOp::Exp, sub(sub(load(x, x->layout.index({x0, r0})), load(amax, x0)), load(lse, x0)));
  PointwiseStage store{{{r0, cols}}, {Store::make(out, out->layout.index({x0, r0}), sub(grad(), mul(p, sum.result())))}};
  return Kernel::make("log_softmax_backward", Device::CUDA, {{x0, rows}}, {sum, store}, {}, {"_log_softmax_backward_data"});
}

KernelPtr layer_norm(const IndexExpr& rows, const IndexExpr& cols, DType t) {
  auto in = input("x", t, {rows, cols}), w = input("w", t, {cols}), b = input("b", t, {cols});
  auto out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = f32(load(in, in->layout.index({x0, r0})));
  auto stats = ReductionStage::make({{r0, cols}}, ReductionKind::Welford, x, {"mean", "m2", "weight"});
  Expr rstd = unary(UnaryOp::Rsqrt, add(div(stats.result(1), stats.result(2)), const_float(1e-5)));
  Expr y = add(mul(mul(sub(x, stats.result(0)), rstd), f32(load(w, r0))), f32(load(b, r0)));
  PointwiseStage norm{{{r0, cols}}, {Store::make(out, out->layout.index({x0, r0}), cast(y, t))}};
  return Kernel::make("layer_norm", Device::CUDA, {{x0, rows}}, {stats, norm}, {}, {"native_layer_norm"});
}

KernelPtr residual_layer_norm(const IndexExpr& rows, const IndexExpr& cols, DType t, int inputs, bool store_sum) {
  std::vector<BufferPtr> in;
  for (int i = 0; i < inputs; ++i) in.push_back(input(cat("a", i), t, {rows, cols}));
  auto sum = output("sum", t, {rows, cols}), out = output("out", t, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1"), r0 = var("r0"), r1 = var("r1"), x2 = var("x2");
  auto h = [&](const IndexExpr& v) {
    if (store_sum && !(v == x1)) return f32(load(sum, sum->layout.index({x0, v})));
    Expr acc = f32(load(in[0], in[0]->layout.index({x0, v})));
    for (int i = 1; i < inputs; ++i) acc = f32(cast(add(acc, f32(load(in[i], in[i]->layout.index({x0, v})))), t));
    return acc;
  };
  std::vector<Stage> stages;
  if (store_sum) stages.push_back(PointwiseStage{{{x1, cols}}, {Store::make(sum, sum->layout.index({x0, x1}), cast(h(x1), t))}});
  auto total = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, h(r0), {"total"});
  const Expr n = const_float(static_cast<double>(cols.constant().value()));
  Expr mean = div(total.result(), n);
  auto sq = ReductionStage::make({{r1, cols}}, ReductionKind::Sum, mul(sub(h(r1), mean), sub(h(r1), mean)), {"sq"});
  Expr rstd = unary(UnaryOp::Rsqrt, add(div(sq.result(), n), const_float(1e-5)));
  PointwiseStage norm{{{x2, cols}}, {Store::make(out, out->layout.index({x0, x2}), cast(mul(sub(h(x2), mean), rstd), t))}};
  stages.push_back(total);
  stages.push_back(sq);
  stages.push_back(norm);
  return Kernel::make("residual_layer_norm", Device::CUDA, {{x0, rows}}, stages);
}

KernelPtr chained_stores(const IndexExpr& rows, const IndexExpr& cols) {
  auto a = input("a", DType::Float32, {rows, cols}), b = input("b", DType::Float32, {rows, cols});
  auto t = output("t", DType::Float32, {rows, cols}), u = output("u", DType::Float32, {rows, cols});
  auto total = output("total", DType::Float32, {rows});
  IndexExpr x0 = var("x0"), x1 = var("x1"), x2 = var("x2"), r0 = var("r0");
  PointwiseStage first{{{x1, cols}}, {Store::make(t, t->layout.index({x0, x1}),
                                                  mul(load(a, a->layout.index({x0, x1})), const_float(2)))}};
  PointwiseStage second{{{x2, cols}}, {Store::make(u, u->layout.index({x0, x2}),
                                                   add(load(t, t->layout.index({x0, x2})), load(b, b->layout.index({x0, x2}))))}};
  auto sum = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, load(u, u->layout.index({x0, r0})), {"sum"});
  return Kernel::make("chained_stores", Device::CUDA, {{x0, rows}},
                      {first, second, sum, PointwiseStage{{}, {Store::make(total, x0, sum.result())}}});
}

KernelPtr var_mean(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("x", DType::Float32, {rows, cols});
  auto var_out = output("var", DType::Float32, {rows}), mean_out = output("mean", DType::Float32, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto stats = ReductionStage::make({{r0, cols}}, ReductionKind::Welford, load(in, in->layout.index({x0, r0})),
                                    {"mean", "m2", "weight"});
  Expr v = div(stats.result(1), sub(stats.result(2), const_float(1)));
  return Kernel::make("var_mean", Device::CUDA, {{x0, rows}},
                      {stats, PointwiseStage{{}, {Store::make(var_out, x0, v), Store::make(mean_out, x0, stats.result(0))}}},
                      {}, {"var_mean"});
}

KernelPtr row_any_positive(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("x", DType::Float32, {rows, cols});
  auto out = output("out", DType::Bool, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto red = ReductionStage::make({{r0, cols}}, ReductionKind::Any,
                                  compare(CompareOp::Gt, load(in, in->layout.index({x0, r0})), const_float(0)), {"any"});
  return Kernel::make("row_any", Device::CUDA, {{x0, rows}}, {red, PointwiseStage{{}, {Store::make(out, x0, red.result())}}});
}

KernelPtr dropout_noise(const IndexExpr& rows, const IndexExpr& cols) {
  auto x = input("x", DType::Float32, {rows, cols}), seed = input("seed", DType::Int64, {1});
  auto out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  const IndexExpr linear = x0 * cols + x1;
  Expr s = load(seed, index_const(0));
  Expr keep = compare(CompareOp::Gt, Random::make(RandomKind::Uniform, s, linear), const_float(0.3));
  Expr dropped = where(keep, div(load(x, linear), const_float(0.7)), const_float(0));
  Expr noise = mul(Random::make(RandomKind::Normal, s, linear + rows * cols), const_float(0.1));
  return Kernel::make("dropout_noise", Device::CUDA, {{x0, rows}, {x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), add(dropped, noise))}}}, {},
                      {"rand_like", "gt", "where", "randn", "add"});
}

}  // namespace cppi::gpu::testing
