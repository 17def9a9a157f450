#include "kernel_builders.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "cpu_codegen/cpu_kernels.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/printer.h"
#include "lowering/ir/scalar_convert.h"

namespace cppi::cpu::test {

using namespace ir;

BufferPtr input(const std::string& name, DType t, std::vector<IndexExpr> sizes) {
  return Buffer::make_contiguous(name, t, Device::CPU, BufferKind::GraphInput, std::move(sizes));
}
BufferPtr output(const std::string& name, DType t, std::vector<IndexExpr> sizes) {
  return Buffer::make_contiguous(name, t, Device::CPU, BufferKind::GraphOutput, std::move(sizes));
}

namespace {
Expr f32(double v) { return const_float(v, DType::Float32); }
}  // namespace

KernelPtr pointwise_kernel(const IndexExpr& n) {
  auto in = input("arg0", DType::Float32, {n});
  auto out = output("buf0", DType::Float32, {n});
  IndexExpr x0 = var("x0");
  Expr x = load(in, x0);
  Expr y = binary(BinaryOp::Maximum, binary(BinaryOp::Add, binary(BinaryOp::Mul, x, f32(2)), f32(1)), f32(0));
  Expr z = binary(BinaryOp::Mul, y, unary(UnaryOp::Exp, unary(UnaryOp::Neg, x)));
  return Kernel::make("pointwise_0", Device::CPU, {Loop{x0, n}}, {PointwiseStage{{}, {Store::make(out, x0, z)}}}, {},
                      {"mul", "add", "relu", "neg", "exp", "mul_1"});
}

KernelPtr sin_cos_kernel(const IndexExpr& n) {
  auto in = input("arg0", DType::Float32, {n});
  auto out0 = output("buf0", DType::Float32, {n}), out1 = output("buf1", DType::Float32, {n});
  IndexExpr x0 = var("x0");
  Expr x = load(in, x0);
  Expr both = binary(BinaryOp::Add, unary(UnaryOp::Sin, x), unary(UnaryOp::Cos, x));
  Expr alone = unary(UnaryOp::Sin, binary(BinaryOp::Mul, x, f32(2)));
  return Kernel::make("sin_cos_0", Device::CPU, {Loop{x0, n}},
                      {PointwiseStage{{}, {Store::make(out0, x0, both), Store::make(out1, x0, alone)}}}, {},
                      {"sin", "cos", "add", "mul", "sin_1"});
}

KernelPtr broadcast_add_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto a = input("arg0", DType::Float32, {rows, cols});
  auto b = input("arg1", DType::Float32, {cols});
  auto out = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = binary(BinaryOp::Add, load(a, x0 * cols + x1), load(b, x1));
  return Kernel::make("broadcast_add_0", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, v)}}}, {}, {"add"});
}

namespace {

Expr reduction_body(ReductionKind kind, const Expr& x) {
  switch (kind) {
    case ReductionKind::Any:
    case ReductionKind::All: return compare(CompareOp::Gt, x, f32(0.5));
    case ReductionKind::Prod: return binary(BinaryOp::Add, f32(1), binary(BinaryOp::Mul, x, f32(0.01)));
    default: return x;
  }
}

KernelPtr reduction_kernel(const std::string& name, ReductionKind kind, const IndexExpr& outs,
                           const IndexExpr& reduced, DType dtype, bool column) {
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto in = column ? input("arg0", dtype, {reduced, outs}) : input("arg0", dtype, {outs, reduced});
  Expr x = load(in, column ? r0 * outs + x0 : x0 * reduced + r0);
  if (dtype != DType::Float32 && is_floating(dtype) && dtype != DType::Float64) x = cast(x, DType::Float32);
  Expr body = reduction_body(kind, x);
  auto result_names = std::vector<std::string>{"red"};
  if (kind == ReductionKind::Welford) result_names = {"red_mean", "red_m2", "red_weight"};
  auto stage = ReductionStage::make({Loop{r0, reduced}}, kind, body, result_names);
  PointwiseStage store;
  for (size_t i = 0; i < (kind == ReductionKind::Welford ? 2u : 1u); ++i) {
    auto out = output(cat("buf", i), stage.result_dtypes[i], {outs});
    store.stores.push_back(Store::make(out, x0, stage.result(i)));
  }
  return Kernel::make(name, Device::CPU, {Loop{x0, outs}}, {stage, store}, {}, {std::string(to_string(kind))});
}

}  // namespace

KernelPtr row_reduction_kernel(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols, DType dtype) {
  return reduction_kernel(cat("row_", to_string(kind), "_0"), kind, rows, cols, dtype, false);
}

KernelPtr column_reduction_kernel(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols) {
  return reduction_kernel(cat("col_", to_string(kind), "_0"), kind, cols, rows, DType::Float32, true);
}

KernelPtr full_reduction_kernel(ReductionKind kind, const IndexExpr& n) {
  IndexExpr r0 = var("r0");
  auto in = input("arg0", DType::Float32, {n});
  Expr body = reduction_body(kind, load(in, r0));
  std::vector<std::string> names = {"total"};
  if (kind == ReductionKind::Welford) names = {"total_mean", "total_m2", "total_weight"};
  auto stage = ReductionStage::make({Loop{r0, n}}, kind, body, names);
  PointwiseStage store;
  for (size_t i = 0; i < (kind == ReductionKind::Welford ? 2u : 1u); ++i) {
    store.stores.push_back(Store::make(output(cat("buf", i), stage.result_dtypes[i], {1}), 0, stage.result(i)));
  }
  return Kernel::make(cat("full_", to_string(kind), "_0"), Device::CPU, {}, {stage, store}, {}, {"sum"});
}

KernelPtr masked_tail_kernel(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = output("buf0", DType::Float32, {rows, cols});
  auto pos = output("buf1", DType::Bool, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  const Expr t = unary(UnaryOp::Tanh, load(in, x0 * cols + r0));
  const bool logical = kind == ReductionKind::Any || kind == ReductionKind::All;
  const Expr body = logical ? compare(CompareOp::Gt, t, f32(0.3)) : reduction_body(kind, t);
  auto red = ReductionStage::make({Loop{r0, cols}}, kind, body, {"red"});
  const Expr shift = logical ? where(red.result(), f32(1), f32(0)) : red.result();
  const Expr inside = compare(CompareOp::Lt, IndexValue::make(r0 + 1), IndexValue::make(cols));
  const Expr y = load(in, x0 * cols + r0 + 1, inside);
  PointwiseStage store{{Loop{r0, cols}},
                       {Store::make(out, x0 * cols + r0, unary(UnaryOp::Exp, binary(BinaryOp::Sub, y, shift))),
                        Store::make(pos, x0 * cols + r0, compare(CompareOp::Gt, t, f32(0)))}};
  return Kernel::make(cat("masked_tail_", to_string(kind), "_0"), Device::CPU, {Loop{x0, rows}}, {red, store}, {},
                      {"tanh", std::string(to_string(kind)), "exp"});
}

KernelPtr softmax_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, x0 * cols + r0);
  auto amax = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Max, x, {"amax"});
  Expr shifted_exp = unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result()));
  auto denom = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, shifted_exp, {"denom"});
  PointwiseStage norm{{Loop{r0, cols}},
                      {Store::make(out, x0 * cols + r0, binary(BinaryOp::TrueDiv, shifted_exp, denom.result()))}};
  return Kernel::make("softmax_0", Device::CPU, {Loop{x0, rows}}, {amax, denom, norm}, {},
                      {"amax", "sub", "exp", "sum", "div"});
}

KernelPtr softmax_statistics_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto amax_out = output("buf0", DType::Float32, {rows});
  auto denom_out = output("buf1", DType::Float32, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, x0 * cols + r0);
  auto amax = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Max, x, {"amax"});
  auto denom = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum,
                                    unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result())), {"denom"});
  PointwiseStage store{{}, {Store::make(amax_out, x0, amax.result()), Store::make(denom_out, x0, denom.result())}};
  return Kernel::make("softmax_stats_0", Device::CPU, {Loop{x0, rows}}, {amax, denom, store}, {},
                      {"amax", "sub", "exp", "sum"});
}

KernelPtr two_pass_variance_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, x0 * cols + r0);
  auto total = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, x, {"total"});
  Expr n = cast(IndexValue::make(cols), DType::Float32);
  Expr d = binary(BinaryOp::Sub, x, binary(BinaryOp::TrueDiv, total.result(), n));
  auto s1 = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, d, {"s1"});
  auto s2 = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, binary(BinaryOp::Mul, d, d), {"s2"});
  // s1 is a sum of terms that cancel (noise, in any order): scaled down.
  Expr var = binary(BinaryOp::TrueDiv, s2.result(), n);
  Expr value = binary(BinaryOp::Add, binary(BinaryOp::Mul, d, var), binary(BinaryOp::TrueDiv, s1.result(), n));
  PointwiseStage norm{{Loop{r0, cols}}, {Store::make(out, x0 * cols + r0, value)}};
  return Kernel::make("variance_0", Device::CPU, {Loop{x0, rows}}, {total, s1, s2, norm}, {},
                      {"sum", "sub", "mul", "sum_1", "sum_2"});
}

KernelPtr half_kernel(const IndexExpr& n, DType half) {
  auto a = input("arg0", half, {n});
  auto b = input("arg1", half, {n});
  auto out = output("buf0", half, {n});
  IndexExpr x0 = var("x0");
  Expr v = binary(BinaryOp::Add, binary(BinaryOp::Mul, cast(load(a, x0), DType::Float32), cast(load(b, x0), DType::Float32)),
                  f32(1));
  return Kernel::make("half_mul_add_0", Device::CPU, {Loop{x0, n}}, {PointwiseStage{{}, {Store::make(out, x0, cast(v, half))}}},
                      {}, {"mul", "add"});
}

KernelPtr op_zoo_kernel(const IndexExpr& n) {
  IndexExpr x0 = var("x0");
  auto a = input("arg0", DType::Float32, {n});
  auto b = input("arg1", DType::Float32, {n});
  auto i = input("arg2", DType::Int64, {n});
  auto mask_in = input("arg3", DType::Bool, {n});
  auto out_f = output("buf0", DType::Float32, {n});
  auto out_i = output("buf1", DType::Int64, {n});
  auto out_b = output("buf2", DType::Bool, {n});
  auto out_d = output("buf3", DType::Float64, {n});
  auto out_m = output("buf4", DType::Float32, {n});
  Expr xa = load(a, x0), xb = load(b, x0), xi = load(i, x0), xm = load(mask_in, x0);
  Expr f = binary(BinaryOp::Add, unary(UnaryOp::Tanh, xa), unary(UnaryOp::Sigmoid, xb));
  f = binary(BinaryOp::Add, f, binary(BinaryOp::Minimum, xa, xb));
  f = binary(BinaryOp::Add, f, unary(UnaryOp::Log1p, unary(UnaryOp::Abs, xa)));
  f = binary(BinaryOp::Add, f, binary(BinaryOp::FloorDiv, xa, f32(0.75)));
  f = binary(BinaryOp::Add, f, binary(BinaryOp::Remainder, xb, f32(1.5)));
  f = binary(BinaryOp::Add, f, unary(UnaryOp::Erfinv, binary(BinaryOp::Mul, unary(UnaryOp::Tanh, xb), f32(0.9))));
  f = binary(BinaryOp::Add, f, unary(UnaryOp::Erf, xb));
  f = where(xm, f, unary(UnaryOp::Round, binary(BinaryOp::Mul, xa, f32(3))));
  Expr ii = binary(BinaryOp::Add, binary(BinaryOp::FloorDiv, xi, const_int(3)), binary(BinaryOp::Remainder, xi, const_int(5)));
  ii = binary(BinaryOp::Add, ii, IndexValue::make(x0 * 2 + 1));
  ii = binary(BinaryOp::BitwiseXor, ii, cast(xa, DType::Int64));
  Expr bb = binary(BinaryOp::LogicalOr, compare(CompareOp::Lt, xa, xb), unary(UnaryOp::IsNan, xa));
  bb = binary(BinaryOp::LogicalXor, bb, xm);
  Expr d = binary(BinaryOp::Mul, cast(xa, DType::Float64), cast(xi, DType::Float64));
  d = binary(BinaryOp::Add, d, cast(bb, DType::Float64));
  // A masked load: reads a[x0 - 3] only where x0 >= 3 (zero elsewhere).
  Expr in_range = compare(CompareOp::Ge, IndexValue::make(x0), const_int(3));
  Expr shifted = load(a, x0 - 3, in_range);
  Expr m = binary(BinaryOp::Add, shifted, cast(in_range, DType::Float32));
  return Kernel::make("op_zoo_0", Device::CPU, {Loop{x0, n}},
                      {PointwiseStage{{},
                                      {Store::make(out_f, x0, f), Store::make(out_i, x0, ii), Store::make(out_b, x0, bb),
                                       Store::make(out_d, x0, d), Store::make(out_m, x0, m)}}},
                      {}, {"zoo"});
}

// --- harness ---------------------------------------------------------------------------

namespace {

double element_as_double(const std::vector<uint8_t>& bytes, DType t, int64_t i) {
  const uint8_t* p = bytes.data() + i * dtype_size(t);
  switch (t) {
    case DType::Bool: return *p != 0;
    case DType::UInt8: return *p;
    case DType::Int8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::Float16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::BFloat16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: break;  // storage only: no kernel reads them
  }
  ADD_FAILURE() << "a kernel buffer of " << dtype_name(t);
  return 0;
}

void fill_random(std::vector<uint8_t>* bytes, DType t, std::mt19937* rng, bool specials, int64_t int_range) {
  const int64_t n = static_cast<int64_t>(bytes->size()) / dtype_size(t);
  std::uniform_real_distribution<float> uf(-3.0f, 3.0f);
  std::uniform_int_distribution<int> ui(static_cast<int>(-int_range), static_cast<int>(int_range));
  std::uniform_int_distribution<int> coin(0, 99);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = bytes->data() + i * dtype_size(t);
    float f = uf(*rng);
    if (specials && is_floating(t)) {
      int c = coin(*rng);
      if (c < 3) f = NAN;
      else if (c < 5) f = INFINITY;
      else if (c < 7) f = -INFINITY;
    }
    switch (t) {
      case DType::Bool: *p = coin(*rng) < 50; break;
      case DType::UInt8: *p = static_cast<uint8_t>(ui(*rng) & 0xff); break;
      case DType::Int8: { int8_t v = static_cast<int8_t>(ui(*rng)); std::memcpy(p, &v, 1); break; }
      case DType::Int16: { int16_t v = static_cast<int16_t>(ui(*rng)); std::memcpy(p, &v, 2); break; }
      case DType::Int32: { int32_t v = ui(*rng); std::memcpy(p, &v, 4); break; }
      case DType::Int64: { int64_t v = ui(*rng); std::memcpy(p, &v, 8); break; }
      case DType::Float16: { uint16_t v = float_to_half(f); std::memcpy(p, &v, 2); break; }
      case DType::BFloat16: { uint16_t v = float_to_bf16(f); std::memcpy(p, &v, 2); break; }
      case DType::Float32: std::memcpy(p, &f, 4); break;
      case DType::Float64: { double v = f; std::memcpy(p, &v, 8); break; }
      case DType::Float8E4M3FN:
      case DType::Float8E5M2: ADD_FAILURE() << "a kernel buffer of " << dtype_name(t); return;
    }
  }
}

}  // namespace

std::string run_and_compare(const KernelPtr& kernel, const RunOptions& options) {
  auto sig = signature(*kernel);
  std::mt19937 rng(options.seed);
  std::vector<std::vector<uint8_t>> reference, compiled;
  InterpreterArgs args;
  args.symbols = options.symbols;
  for (const auto& a : sig.buffers) {
    const int64_t n = evaluate(a.buffer->layout.storage_size(), options.symbols);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * dtype_size(a.buffer->dtype)), 0);
    if (a.read && !a.written) fill_random(&bytes, a.buffer->dtype, &rng, options.specials, options.int_range);
    reference.push_back(bytes);
    compiled.push_back(bytes);
  }
  for (size_t i = 0; i < sig.buffers.size(); ++i) args.buffers[sig.buffers[i].buffer->name] = reference[i].data();
  Status st = interpret(options.reference ? *options.reference : *kernel, args);
  if (!st.ok()) return "interpreter: " + st.error().message;

  std::shared_ptr<CpuKernelHandle> handle = options.compiled;
  std::string source;  // for the report
  if (!handle) {
    CpuKernelOptions copts;
    copts.compile.compiler = options.compiler;
    auto k = compile_cpu_kernels({kernel}, options.graph_symbols, copts);
    if (!k.ok()) return "compile: " + k.error().message.substr(0, 3000);
    handle = k->kernels[0];
    source = k->source;
  }
  std::vector<void*> ptrs;
  for (auto& b : compiled) ptrs.push_back(b.data());
  std::vector<int64_t> syms;
  for (const auto& s : options.graph_symbols) syms.push_back(options.symbols.at(s));
  handle->run(ptrs.data(), syms.data(), 0);

  std::ostringstream report;
  int bad = 0;
  for (size_t b = 0; b < sig.buffers.size(); ++b) {
    if (!sig.buffers[b].written) continue;
    const DType t = sig.buffers[b].buffer->dtype;
    const int64_t n = static_cast<int64_t>(reference[b].size()) / dtype_size(t);
    const double rtol = t == DType::Float16 || t == DType::BFloat16 ? 1e-2 : options.rtol;
    for (int64_t i = 0; i < n; ++i) {
      const double want = element_as_double(reference[b], t, i), got = element_as_double(compiled[b], t, i);
      bool ok;
      if (std::isnan(want) || std::isnan(got)) ok = std::isnan(want) && std::isnan(got);
      else if (std::isinf(want) || std::isinf(got)) ok = want == got;
      else ok = std::fabs(want - got) <= options.atol + rtol * std::fabs(want);
      if (!ok && bad++ < 8) {
        report << sig.buffers[b].buffer->name << "[" << i << "]: want " << want << " got " << got << "\n";
      }
    }
  }
  if (bad) {
    report << bad << " mismatches\n";
    if (const size_t at = source.find("// kernel: "); at != std::string::npos) report << source.substr(at);
  }
  return report.str();
}

::testing::AssertionResult file_check(const std::string& source, const std::vector<std::string>& patterns) {
  size_t pos = 0;
  for (const auto& p : patterns) {
    if (p.rfind("NOT:", 0) == 0) {
      if (source.find(p.substr(4)) != std::string::npos) {
        return ::testing::AssertionFailure() << "found forbidden '" << p.substr(4) << "' in:\n" << source;
      }
      continue;
    }
    size_t at = source.find(p, pos);
    if (at == std::string::npos) {
      return ::testing::AssertionFailure() << "missing '" << p << "' (after offset " << pos << ") in:\n" << source;
    }
    pos = at + p.size();
  }
  return ::testing::AssertionSuccess();
}

std::string kernel_text(const PrintedModule& m) {
  size_t at = m.source.find("// kernel: ");
  return at == std::string::npos ? m.source : m.source.substr(at);
}

CpuTarget avx512_target(int64_t min_parallel_work) {
  CpuTarget t;
  t.vector_bytes = 64;
  t.num_threads = 8;
  t.min_parallel_work = min_parallel_work;
  return t;
}

CpuTarget avx2_target() {
  CpuTarget t = avx512_target();
  t.vector_bytes = 32;
  return t;
}

ir::CpuSchedule sched(const KernelPtr& k, const CpuTarget& t) { return schedule_for_cpu(k, t)->schedule.cpu; }

PrintedModule print_one(const KernelPtr& k, const std::vector<std::string>& symbols, const PrintOptions& o) {
  auto m = print_cpu_module({k}, symbols, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : PrintedModule{};
}

void expect_matches(const KernelPtr& k, bool specials, const RunOptions& base) {
  for (const CpuTarget& target : {avx512_target(), avx512_target(1 << 30)}) {
    RunOptions o = base;
    o.specials = specials;
    auto scheduled = schedule_for_cpu(k, target);
    std::string r = run_and_compare(scheduled, o);
    EXPECT_EQ(r, "") << k->name << " " << to_string(scheduled->schedule);
  }
}

}  // namespace cppi::cpu::test
