// The reference interpreter: pointwise and reduction nodes, a fused softmax
// kernel, dtype rounding on store, NaN rules of reductions, op semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ir_builders.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/scalar_convert.h"

namespace cppi::ir {
namespace {

BufferPtr buffer(const std::string& name, DType t, std::vector<IndexExpr> sizes,
                 BufferKind kind = BufferKind::Intermediate) {
  return Buffer::make_contiguous(name, t, Device::CPU, kind, std::move(sizes));
}

TEST(Interpreter, PointwiseNodeWithSymbolicRows) {
  IndexExpr s0 = sym("s0");
  auto a = buffer("a", DType::Float32, {s0, index_const(4)}, BufferKind::GraphInput);
  auto b = buffer("b", DType::Float32, {index_const(4)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {s0, index_const(4)}, BufferKind::GraphOutput);
  auto node = testing::add_relu_node(a, b, out);

  std::vector<float> av{1, -2, 3, -4, 5, -6, 7, -8, 0.5f, 0.25f, -1, 2};
  std::vector<float> bv{0.5f, 1, -10, 4};
  std::vector<float> ov(12, -99);
  auto args = InterpreterArgs().bind("a", av).bind("b", bv).bind("out", ov).symbol("s0", 3);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(ov[i * 4 + j], std::max(av[i * 4 + j] + bv[j], 0.0f)) << i << "," << j;
  }
  // A missing symbol is an error, not a crash.
  InterpreterArgs missing = args;
  missing.symbols.clear();
  EXPECT_FALSE(interpret(ComputeNode(node), missing).ok());
}

TEST(Interpreter, ReductionNodes) {
  auto in = buffer("in", DType::Float32, {index_const(3), index_const(4)}, BufferKind::GraphInput);
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  Expr x = load(in, in->layout.index({x0, r0}));
  std::vector<float> iv{1, 5, 5, 2,  // ties: argmax picks the first 5
                        -1, NAN, 3, NAN,  // NaN wins max and argmax (first NaN)
                        2, 4, 6, 8};
  auto run = [&](ReductionKind kind, DType out_dtype, Expr body) {
    auto out = buffer("out", out_dtype, {index_const(3)});
    std::vector<double> storage(3, -1);  // big enough for any dtype
    auto node = ReductionNode::make("r", out, {index_const(4)}, kind, body);
    auto args = InterpreterArgs().bind("in", iv).bind("out", storage.data());
    Status s = interpret(ComputeNode(node), args);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return storage;
  };
  auto as_f = [](const std::vector<double>& s, int i) { return reinterpret_cast<const float*>(s.data())[i]; };
  auto as_i = [](const std::vector<double>& s, int i) { return reinterpret_cast<const int64_t*>(s.data())[i]; };

  auto sum = run(ReductionKind::Sum, DType::Float32, x);
  EXPECT_EQ(as_f(sum, 0), 13);
  EXPECT_TRUE(std::isnan(as_f(sum, 1)));
  EXPECT_EQ(as_f(sum, 2), 20);
  auto mx = run(ReductionKind::Max, DType::Float32, x);
  EXPECT_EQ(as_f(mx, 0), 5);
  EXPECT_TRUE(std::isnan(as_f(mx, 1)));
  auto mn = run(ReductionKind::Min, DType::Float32, x);
  EXPECT_TRUE(std::isnan(as_f(mn, 1)));
  EXPECT_EQ(as_f(mn, 2), 2);
  auto am = run(ReductionKind::ArgMax, DType::Int64, x);
  EXPECT_EQ(as_i(am, 0), 1);
  EXPECT_EQ(as_i(am, 1), 1);
  EXPECT_EQ(as_i(am, 2), 3);
  auto ami = run(ReductionKind::ArgMin, DType::Int64, x);
  EXPECT_EQ(as_i(ami, 0), 0);
  EXPECT_EQ(as_i(ami, 1), 1);  // NaN is also the minimum
  auto any = run(ReductionKind::Any, DType::Bool, compare(CompareOp::Gt, x, const_float(5)));
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(any.data())[0], 0);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(any.data())[2], 1);
}

TEST(Interpreter, FullReductionToScalar) {
  // x.sum() over a 2-D input: no pointwise ranges, a rank-0 output.
  auto in = buffer("in", DType::Int32, {index_const(3), index_const(4)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Int64, {}, BufferKind::GraphOutput);
  IndexExpr r0 = reduction_var(0), r1 = reduction_var(1);
  auto node = ReductionNode::make("total", out, {index_const(3), index_const(4)}, ReductionKind::Sum,
                                  cast(load(in, in->layout.index({r0, r1})), DType::Int64));
  std::vector<int32_t> iv(12);
  // Large values whose int32 sum would overflow; the int64 accumulator does not.
  for (int k = 0; k < 12; ++k) iv[k] = 2000000000 - k;
  int64_t result = 0;
  auto args = InterpreterArgs().bind("in", iv).bind("out", &result, 1);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  int64_t want = 0;
  for (int k = 0; k < 12; ++k) want += iv[k];
  EXPECT_EQ(result, want);
  EXPECT_GT(want, int64_t{1} << 31);
  // argmax over two reduction dims: position in the row-major flattening.
  auto pos = buffer("pos", DType::Int64, {}, BufferKind::GraphOutput);
  auto arg = ReductionNode::make("where_max", pos, {index_const(3), index_const(4)}, ReductionKind::ArgMax,
                                 load(in, in->layout.index({r0, r1})));
  std::vector<int32_t> jv{0, 1, 2, 3, 4, 9, 6, 7, 8, 9, 1, 2};
  int64_t p = -1;
  auto args2 = InterpreterArgs().bind("in", jv).bind("pos", &p, 1);
  ASSERT_TRUE(interpret(ComputeNode(arg), args2).ok());
  EXPECT_EQ(p, 5);
}

TEST(Interpreter, WelfordMatchesTwoPassVariance) {
  auto in = buffer("in", DType::Float32, {index_const(2), index_const(5)}, BufferKind::GraphInput);
  auto mean = buffer("mean", DType::Float32, {index_const(2)});
  auto m2 = buffer("m2", DType::Float32, {index_const(2)});
  auto weight = buffer("weight", DType::Float32, {index_const(2)});
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  auto node = ReductionNode::make("var_mean", {index_const(2)}, {index_const(5)}, ReductionKind::Welford,
                                  load(in, in->layout.index({x0, r0})), {{mean, x0}, {m2, x0}, {weight, x0}});
  std::vector<float> iv{1, 2, 3, 4, 10, -3, -3, -3, -3, -3};
  std::vector<float> mv(2), m2v(2), wv(2);
  auto args = InterpreterArgs().bind("in", iv).bind("mean", mv).bind("m2", m2v).bind("weight", wv);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  EXPECT_FLOAT_EQ(mv[0], 4);
  EXPECT_FLOAT_EQ(m2v[0], 9 + 4 + 1 + 0 + 36);
  EXPECT_FLOAT_EQ(wv[0], 5);
  EXPECT_FLOAT_EQ(mv[1], -3);
  EXPECT_FLOAT_EQ(m2v[1], 0);
}

TEST(Interpreter, FusedSoftmaxKernel) {
  IndexExpr s0 = sym("s0");
  auto in = buffer("in", DType::Float32, {s0, index_const(5)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {s0, index_const(5)}, BufferKind::GraphOutput);
  auto k = testing::softmax_kernel(in, out, s0, index_const(5));
  std::vector<float> iv{1, 2, 3, 4, 5, 100, 100, 100, 100, 100, -1, 0, 1, 0, -1};
  std::vector<float> ov(15);
  auto args = InterpreterArgs().bind("in", iv).bind("out", ov).symbol("s0", 3);
  ASSERT_TRUE(interpret(*k, args).ok());
  for (int row = 0; row < 3; ++row) {
    double mx = -INFINITY, total = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, double(iv[row * 5 + c]));
    for (int c = 0; c < 5; ++c) total += std::exp(iv[row * 5 + c] - mx);
    for (int c = 0; c < 5; ++c) {
      EXPECT_NEAR(ov[row * 5 + c], std::exp(iv[row * 5 + c] - mx) / total, 1e-6) << row << "," << c;
    }
  }
}

TEST(Interpreter, KernelLocalScratchIsAllocatedByTheKernel) {
  // Stage 1 writes a row into scratch, stage 2 reads it reversed.
  IndexExpr s0 = sym("s0");
  auto in = buffer("in", DType::Float32, {s0, index_const(4)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {s0, index_const(4)}, BufferKind::GraphOutput);
  auto row = buffer("row", DType::Float32, {index_const(4)}, BufferKind::KernelLocal);
  IndexExpr x0 = var("x0"), r0 = var("r0");
  PointwiseStage fill{{{r0, index_const(4)}}, {Store::make(row, r0, load(in, 4 * x0 + r0))}};
  PointwiseStage reverse{{{r0, index_const(4)}}, {Store::make(out, 4 * x0 + r0, load(row, 3 - r0))}};
  auto k = Kernel::make("reverse_rows", Device::CPU, {{x0, s0}}, {fill, reverse});
  KernelSignature sig = signature(*k);
  ASSERT_EQ(sig.buffers.size(), 2u);
  ASSERT_EQ(sig.scratch.size(), 1u);
  EXPECT_EQ(sig.scratch[0]->name, "row");
  std::vector<float> iv{1, 2, 3, 4, 5, 6, 7, 8}, ov(8);
  ASSERT_TRUE(interpret(*k, InterpreterArgs().bind("in", iv).bind("out", ov).symbol("s0", 2)).ok());
  EXPECT_EQ(ov, (std::vector<float>{4, 3, 2, 1, 8, 7, 6, 5}));
}

TEST(Interpreter, ReducedFloatsRoundOnlyAtCasts) {
  // out_h = half(float(a_h) * 3 + 1e-4): the intermediate is float32, the
  // store rounds once to float16.
  auto a = buffer("a", DType::Float16, {index_const(2)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float16, {index_const(2)}, BufferKind::GraphOutput);
  Expr v = binary(BinaryOp::Add,
                  binary(BinaryOp::Mul, cast(load(a, pointwise_var(0)), DType::Float32), const_float(3)),
                  const_float(1e-4));
  auto node = PointwiseNode::make("scale", out, cast(v, DType::Float16));
  std::vector<uint16_t> av{float_to_half(1.0009765625f), float_to_half(-2.5f)};
  std::vector<uint16_t> ov(2);
  auto args = InterpreterArgs().bind("a", av).bind("out", ov);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  float want0 = half_to_float(float_to_half(1.0009765625f * 3 + 1e-4f));
  EXPECT_EQ(half_to_float(ov[0]), want0);
  EXPECT_EQ(half_to_float(ov[1]), half_to_float(float_to_half(-7.5f + 1e-4f)));
}

TEST(Interpreter, MaskedLoadDoesNotTouchMemory) {
  // Constant-pad by one element on the left: out[x] = x >= 1 ? in[x - 1] : 0.
  auto in = buffer("in", DType::Float32, {index_const(3)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {index_const(4)});
  IndexExpr x0 = pointwise_var(0);
  Expr inside = compare(CompareOp::Ge, IndexValue::make(x0), const_int(1));
  Expr value = where(inside, load(in, x0 - 1, inside), const_float(0));
  auto node = PointwiseNode::make("pad", out, value);
  std::vector<float> iv{7, 8, 9};
  std::vector<float> ov(4, -1);
  auto args = InterpreterArgs().bind("in", iv).bind("out", ov);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  EXPECT_EQ(ov, (std::vector<float>{0, 7, 8, 9}));
}

TEST(Interpreter, ReportsOutOfBoundsAccess) {
  // A lowering bug: reading in[x0 + 1] over the full range.
  auto in = buffer("in", DType::Float32, {index_const(3)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {index_const(3)});
  auto node = PointwiseNode::make("shift", out, load(in, pointwise_var(0) + 1));
  std::vector<float> iv(3), ov(3);
  auto args = InterpreterArgs().bind("in", iv).bind("out", ov);
  Status s = interpret(ComputeNode(node), args);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "interpreter: in[x0 + 1] = in[3] is out of bounds [0, 3) at x0=2");
}

TEST(Interpreter, OpSemantics) {
  InterpreterArgs none;
  auto eval = [&](const Expr& e) { return evaluate_expr(e, none).value(); };
  auto i32 = [](int64_t v) { return const_int(v, DType::Int32); };
  auto f32 = [](double v) { return const_float(v); };
  // Integer overflow wraps.
  EXPECT_EQ(eval(binary(BinaryOp::Add, i32(2147483647), i32(1))).i, -2147483648LL);
  // floordiv / remainder follow Python, truncdiv / fmod follow C.
  EXPECT_EQ(eval(binary(BinaryOp::FloorDiv, i32(-7), i32(2))).i, -4);
  EXPECT_EQ(eval(binary(BinaryOp::TruncDiv, i32(-7), i32(2))).i, -3);
  EXPECT_EQ(eval(binary(BinaryOp::Remainder, i32(-7), i32(2))).i, 1);
  EXPECT_EQ(eval(binary(BinaryOp::Fmod, i32(-7), i32(2))).i, -1);
  EXPECT_EQ(eval(binary(BinaryOp::Remainder, f32(-7.5), f32(2))).f, 0.5);
  EXPECT_EQ(eval(binary(BinaryOp::FloorDiv, f32(-7.5), f32(2))).f, -4);
  // Integer division by zero is reported.
  EXPECT_FALSE(evaluate_expr(binary(BinaryOp::FloorDiv, i32(1), i32(0)), none).ok());
  // maximum/minimum propagate NaN.
  EXPECT_TRUE(std::isnan(eval(binary(BinaryOp::Maximum, f32(NAN), f32(1))).f));
  EXPECT_TRUE(std::isnan(eval(binary(BinaryOp::Minimum, f32(1), f32(NAN))).f));
  // Comparisons with NaN are false except ne.
  EXPECT_EQ(eval(compare(CompareOp::Lt, f32(NAN), f32(1))).i, 0);
  EXPECT_EQ(eval(compare(CompareOp::Ne, f32(NAN), f32(NAN))).i, 1);
  // round is half-to-even; casts truncate; bool casts test != 0.
  EXPECT_EQ(eval(unary(UnaryOp::Round, f32(2.5))).f, 2);
  EXPECT_EQ(eval(cast(f32(-2.7), DType::Int32)).i, -2);
  EXPECT_EQ(eval(cast(f32(NAN), DType::Bool)).i, 1);
  EXPECT_EQ(eval(cast(i32(300), DType::UInt8)).i, 44);
  // Shifts past the width.
  EXPECT_EQ(eval(binary(BinaryOp::LShift, i32(1), i32(40))).i, 0);
  EXPECT_EQ(eval(binary(BinaryOp::RShift, i32(-8), i32(40))).i, -1);
  // float32 arithmetic is rounded to float32.
  EXPECT_EQ(eval(binary(BinaryOp::Add, f32(1), f32(1e-8))).f, 1.0);
  EXPECT_NE(eval(binary(BinaryOp::Add, const_float(1, DType::Float64), const_float(1e-8, DType::Float64))).f, 1.0);
  EXPECT_NEAR(eval(unary(UnaryOp::Erfinv, f32(0.5))).f, 0.4769362762044699, 1e-6);
}

TEST(Interpreter, EveryOpEvaluatesForEveryAcceptedDtype) {
  // Guards the interpreter (and its typing) against ops added to ops.def
  // without an implementation.
  InterpreterArgs none;
  const DType dtypes[] = {DType::Bool, DType::UInt8, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
  auto sample = [](DType t, double v) { return Constant::make(v, t); };
  int evaluated = 0;
#define CPPI_TRY_UNARY(Name, name, typing)                                                   \
  for (DType t : dtypes) {                                                                   \
    Expr e;                                                                                  \
    try {                                                                                    \
      e = unary(UnaryOp::Name, sample(t, 1));                                                \
    } catch (const CompilerError&) {                                                         \
      continue;                                                                              \
    }                                                                                        \
    auto r = evaluate_expr(e, none);                                                         \
    EXPECT_TRUE(r.ok()) << name << " on " << dtype_name(t) << ": " << r.error().message;     \
    ++evaluated;                                                                             \
  }
  CPPI_FOR_EACH_UNARY_OP(CPPI_TRY_UNARY)
#undef CPPI_TRY_UNARY
#define CPPI_TRY_BINARY(Name, name, typing)                                                  \
  for (DType t : dtypes) {                                                                   \
    Expr e;                                                                                  \
    try {                                                                                    \
      e = binary(BinaryOp::Name, sample(t, 3), sample(t, 1));                                \
    } catch (const CompilerError&) {                                                         \
      continue;                                                                              \
    }                                                                                        \
    auto r = evaluate_expr(e, none);                                                         \
    EXPECT_TRUE(r.ok()) << name << " on " << dtype_name(t) << ": " << r.error().message;     \
    ++evaluated;                                                                             \
  }
  CPPI_FOR_EACH_BINARY_OP(CPPI_TRY_BINARY)
#undef CPPI_TRY_BINARY
  EXPECT_GT(evaluated, 150);
}

TEST(Interpreter, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32-10.
  using W = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, 0, 0), (W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff),
            (W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0),
            (W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Interpreter, PhiloxIsDeterministicAndInRange) {
  // Same (seed, offset) -> same value; values in [0, 1); normal has ~N(0,1) moments.
  EXPECT_EQ(philox_uniform(42, 7), philox_uniform(42, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(42, 8));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(43, 7));
  double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    float u = philox_uniform(1234, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LE(u, 1.0f);
    sum += u;
    sum2 += u * u;
    float z = philox_normal(1234, i);
    nsum += z;
    nsum2 += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(sum2 / n - 0.25, 1.0 / 12, 0.01);
  EXPECT_NEAR(nsum / n, 0.0, 0.03);
  EXPECT_NEAR(nsum2 / n, 1.0, 0.03);
}

TEST(Interpreter, Float16Conversions) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(2.98023224e-08f), 0x0000);  // half of it: ties to even
  EXPECT_EQ(float_to_half(1.00048828125f), 0x3c00);  // 1 + 2^-11: tie -> even
  EXPECT_EQ(float_to_half(1.00146484375f), 0x3c02);  // 1 + 3*2^-11: tie -> even (up)
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h);
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);  // tie -> even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

}  // namespace
}  // namespace cppi::ir
