// Kernels as the fusion pass actually builds them (softmax, log_softmax,
// layer_norm with saved stats, bias+relu), scheduled for the CPU, compiled
// and compared with the reference interpreter.
#include <gtest/gtest.h>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "fusion_test_util.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;
using lowering::testing::at;
using lowering::testing::f32;
using lowering::testing::GraphBuilder;
using lowering::testing::r;
using lowering::testing::softmax;
using lowering::testing::x;

GraphBuilder layer_norm(IndexExpr rows, IndexExpr cols) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto w = b.input("weight", {cols});
  auto bias = b.input("bias", {cols});
  auto mean = b.output("mean", {rows, 1});
  auto m2 = b.temp("m2", {rows, 1});
  auto rstd = b.output("rstd", {rows, 1});
  auto xhat = b.temp("xhat", {rows, cols});
  auto out = b.output("out", {rows, cols});
  auto one = [](const BufferPtr& buf) { return buf->layout.index({x(0), x(1)}); };
  b.node(ReductionNode::make("var_mean", {rows, 1}, {cols}, ReductionKind::Welford, at(xin, {x(0), r(0)}),
                             {{mean, one(mean)}, {m2, one(m2)}, {nullptr, IndexExpr()}}, {"var_mean"}));
  auto cols_f = cast(IndexValue::make(cols), DType::Float32);
  b.pointwise("rsqrt", rstd,
              unary(UnaryOp::Rsqrt, binary(BinaryOp::Add, binary(BinaryOp::TrueDiv, at(m2, {x(0), 0}), cols_f), f32(1e-5))));
  b.pointwise("mul", xhat,
              binary(BinaryOp::Mul, binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(mean, {x(0), 0})), at(rstd, {x(0), 0})));
  b.pointwise("add", out,
              binary(BinaryOp::Add, binary(BinaryOp::Mul, at(xhat, {x(0), x(1)}), at(w, {x(1)})), at(bias, {x(1)})));
  return b;
}

std::vector<KernelPtr> fused_kernels(const GraphBuilder& g) {
  Remarks remarks;
  auto fused = lowering::fuse(g.graph, lowering::FusionOptions{}, remarks);
  return lowering::testing::kernels(fused);
}

void check_all(const std::vector<KernelPtr>& kernels, const RunOptions& o, bool expect_vectorized) {
  ASSERT_FALSE(kernels.empty());
  CpuTarget target;
  target.vector_bytes = 64;
  target.num_threads = 4;
  target.min_parallel_work = 512;
  for (const auto& k : kernels) {
    auto s = schedule_for_cpu(k, target);
    if (expect_vectorized) EXPECT_NE(s->schedule.cpu.vectorized, VectorizedLoop::None) << explain_cpu_schedule(*k, target);
    EXPECT_EQ(run_and_compare(s, o), "") << to_string(*k);
  }
}

TEST(FusedKernels, Softmax) {
  RunOptions o;
  check_all(fused_kernels(softmax(13, 77, false)), o, true);
  check_all(fused_kernels(softmax(13, 77, true)), o, true);
}

TEST(FusedKernels, LayerNormWithSavedStats) {
  RunOptions o;
  o.rtol = o.atol = 1e-4;
  check_all(fused_kernels(layer_norm(9, 100)), o, true);
}

TEST(FusedKernels, DynamicSoftmax) {
  RunOptions o;
  o.graph_symbols = {"s0", "s1"};
  o.symbols = {{"s0", 6}, {"s1", 45}};
  check_all(fused_kernels(softmax(sym("s0"), sym("s1"), false)), o, true);
}

}  // namespace
}  // namespace cppi::cpu::test
