// Random (Philox) in the CPU schedule and printer: counters that step evenly
// along the vectorised loop are computed in vector registers (cppi_vrand /
// cppi_vrandn) and the kernel counts as vectorised; compiled uniform numbers
// equal the reference interpreter's bit for bit (vector body and scalar
// tail alike); normal numbers have the same bits in the vector body, the
// scalar tail and a scalar-only kernel, and match the interpreter to a few
// ulp (the log and cos differ from glibc's in the last bits). The g++ path
// compiles the same text to the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "cpu_codegen/cpu_kernels.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

CpuTarget target(int vector_bytes = 64) {
  CpuTarget t;
  t.vector_bytes = vector_bytes;
  t.num_threads = 4;
  t.min_parallel_work = 256;
  return t;
}

/// out[x0, x1] = random(seed[0], base + offset(x0, x1)) (* 2 + 1 for uniform,
/// so the result goes through vector arithmetic too) over [rows, cols].
KernelPtr random_kernel(RandomKind kind, const IndexExpr& rows, const IndexExpr& cols,
                        const std::function<IndexExpr(IndexExpr, IndexExpr)>& offset) {
  auto seed = input("seed", DType::Int64, {1});
  auto out = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr r = Random::make(kind, load(seed, index_const(0)), offset(x0, x1));
  if (kind == RandomKind::Uniform) r = binary(BinaryOp::Add, binary(BinaryOp::Mul, r, const_float(2)), const_float(1));
  return Kernel::make("random_0", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, r)}}}, {}, {"rand"});
}

/// The kernel compiled and run on a given seed; returns its output.
std::vector<float> run_compiled(const KernelPtr& k, int64_t seed, int64_t elements, std::string* source = nullptr) {
  auto compiled = compile_cpu_kernels({k}, {});
  EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
  if (!compiled.ok()) return {};
  if (source) *source = compiled->source;
  std::vector<float> out(static_cast<size_t>(elements));
  std::vector<void*> ptrs;
  for (const auto& a : signature(*k).buffers) ptrs.push_back(a.buffer->name == "seed" ? (void*)&seed : out.data());
  compiled->kernels[0]->run(ptrs.data(), nullptr, 0);
  return out;
}

std::vector<float> run_interpreter(const KernelPtr& k, int64_t seed, int64_t elements) {
  std::vector<float> out(static_cast<size_t>(elements));
  InterpreterArgs args;
  args.bind("seed", &seed, 1);
  args.bind("buf0", out.data(), elements);
  Status st = interpret(*k, args);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(RandomCodegen, UniformIsVectorisedAndBitIdenticalToTheInterpreter) {
  // 37 columns: two 16-lane vectors and a 5-element scalar tail per row;
  // a base offset past 2^32 - 7 makes some lanes carry into the high word.
  const int64_t base = (int64_t{1} << 32) - 7;
  auto k = random_kernel(RandomKind::Uniform, 5, 37, [&](IndexExpr x0, IndexExpr x1) { return x0 * 37 + x1 + base; });
  auto s = schedule_for_cpu(k, target());
  ASSERT_EQ(s->schedule.cpu.vector_width, 16) << explain_cpu_schedule(*k, target());
  ASSERT_EQ(s->schedule.cpu.tail, TailKind::Overlapped);  // the last vector starts at column 21
  Schedule scalar_tail = s->schedule;
  scalar_tail.cpu.tail = TailKind::ScalarLoop;
  std::string source, scalar_tail_source;
  for (int64_t seed : {int64_t{0}, int64_t{42}, int64_t{-3}, int64_t{0x123456789abcdefLL}}) {
    auto got = run_compiled(s, seed, 5 * 37, &source), want = run_interpreter(s, seed, 5 * 37);
    auto got_scalar_tail = run_compiled(s->with_schedule(scalar_tail), seed, 5 * 37, &scalar_tail_source);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(same_bits(got[i], want[i])) << "seed " << seed << " element " << i << ": " << got[i] << " vs " << want[i];
      ASSERT_TRUE(same_bits(got_scalar_tail[i], want[i])) << "scalar tail, seed " << seed << " element " << i;
      ASSERT_GE(got[i], 1.0f);  // 2u + 1 with u in [0, 1)
      ASSERT_LT(got[i], 3.0f);
    }
  }
  EXPECT_NE(source.find("cppi_vrand<cppi_f32x16>(tmp"), std::string::npos) << source;
  EXPECT_EQ(source.find("cppi_rand(tmp"), std::string::npos) << source;  // no scalar tail
  EXPECT_NE(scalar_tail_source.find("cppi_rand(tmp"), std::string::npos);  // the scalar tail
  auto printed = print_cpu_module({s}, {});
  ASSERT_TRUE(printed.ok());
  EXPECT_EQ(printed->vectorized_kernel_count(), 1);
}

TEST(RandomCodegen, StridedCountersUseTheVectorPhilox) {
  // Vectorised along x1 with counter step 5 (a transposed walk), 8-wide on AVX2.
  auto k = random_kernel(RandomKind::Uniform, 5, 40, [](IndexExpr x0, IndexExpr x1) { return x1 * 5 + x0; });
  auto s = schedule_for_cpu(k, target(32));
  ASSERT_EQ(s->schedule.cpu.vector_width, 8) << explain_cpu_schedule(*k, target(32));
  std::string source;
  auto got = run_compiled(s, 7, 200, &source), want = run_interpreter(s, 7, 200);
  EXPECT_NE(source.find("cppi_vrand<cppi_f32x8>(tmp0, x0 + 5*x1, 5u)"), std::string::npos) << source;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
}

TEST(RandomCodegen, CountersThatDoNotStepEvenlyAreGathers) {
  // A symbolic step: drawn lane by lane, so the kernel stays scalar.
  EXPECT_EQ(philox_lane_step(var("x1") * sym("s0"), "x1"), std::nullopt);
  EXPECT_EQ(philox_lane_step(floordiv(var("x1"), 2), "x1"), std::nullopt);
  EXPECT_EQ(philox_lane_step(var("x1") * -1 + 100, "x1"), std::nullopt);
  EXPECT_EQ(philox_lane_step(var("x1") * 3 + var("x0"), "x1"), std::optional<uint32_t>(3));
  auto k = random_kernel(RandomKind::Uniform, 5, 40, [](IndexExpr x0, IndexExpr x1) { return floordiv(x1, 2) + x0 * 20; });
  auto s = schedule_for_cpu(k, target());
  EXPECT_EQ(s->schedule.cpu.vectorized, VectorizedLoop::None) << explain_cpu_schedule(*k, target());
  auto got = run_compiled(s, 9, 200), want = run_interpreter(s, 9, 200);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
  EXPECT_TRUE(same_bits(got[0], got[1]));  // x1 = 0 and 1 share counter 0
}

TEST(RandomCodegen, NormalHasTheSameBitsInVectorTailAndScalarKernels) {
  auto k = random_kernel(RandomKind::Normal, 3, 45, [](IndexExpr x0, IndexExpr x1) { return x0 * 45 + x1; });
  auto vec16 = schedule_for_cpu(k, target(64));
  auto vec8 = schedule_for_cpu(k, target(32));
  Schedule scalar_schedule = vec16->schedule;
  scalar_schedule.cpu.vectorized = VectorizedLoop::None;
  scalar_schedule.cpu.tail = TailKind::ScalarLoop;
  auto scalar = vec16->with_schedule(scalar_schedule);
  ASSERT_EQ(vec16->schedule.cpu.vector_width, 16);
  ASSERT_EQ(vec8->schedule.cpu.vector_width, 8);
  std::string source;
  auto a = run_compiled(vec16, 11, 135, &source), b = run_compiled(vec8, 11, 135), c = run_compiled(scalar, 11, 135);
  EXPECT_NE(source.find("cppi_vrandn<cppi_f32x16>"), std::string::npos);
  auto want = run_interpreter(vec16, 11, 135);
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(same_bits(a[i], b[i]) && same_bits(a[i], c[i])) << i << ": " << a[i] << " " << b[i] << " " << c[i];
    ASSERT_NEAR(a[i], want[i], 4e-6 * (1 + std::fabs(want[i]))) << i;
    sum += a[i];
  }
  EXPECT_LT(std::fabs(sum / 135), 0.35);  // a mean near 0 (sd of the mean ~0.09)
}

TEST(RandomCodegen, GxxCompilesTheSamePhilox) {
  RunOptions exact;
  exact.compiler = CompileOptions::Compiler::Gxx;
  exact.rtol = exact.atol = 0;
  auto uniform = random_kernel(RandomKind::Uniform, 5, 37, [](IndexExpr x0, IndexExpr x1) { return x0 * 37 + x1; });
  EXPECT_EQ(run_and_compare(schedule_for_cpu(uniform, target()), exact), "");
  RunOptions close = exact;
  close.rtol = close.atol = 4e-6;
  auto normal = random_kernel(RandomKind::Normal, 5, 37, [](IndexExpr x0, IndexExpr x1) { return x0 * 37 + x1; });
  EXPECT_EQ(run_and_compare(schedule_for_cpu(normal, target()), close), "");
}

}  // namespace
}  // namespace cppi::cpu::test
