// End-to-end tests of fuse(): kernel count, stage structure, dropped buffers,
// remarks, and numerical equivalence with the unfused graph.
#include <gtest/gtest.h>

#include "fusion_test_util.h"
#include "lowering/ir/printer.h"

namespace cppi::lowering::testing {
namespace {

using ir::BinaryOp;
using ir::ReductionKind;
using ir::UnaryOp;

FusedGraph run(const LoweredGraph& g, Remarks& remarks, FusionOptions options = {}) {
  return fuse(g, options, remarks);
}

/// relu(x + bias) * 2 with bias broadcast along rows.
GraphBuilder bias_relu_mul(IndexExpr rows = 8, IndexExpr cols = 16) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto bias = b.input("bias", {cols});
  auto t0 = b.temp("buf0", {rows, cols});
  auto t1 = b.temp("buf1", {rows, cols});
  auto out = b.output("out", {rows, cols});
  b.pointwise("add", t0, ir::binary(BinaryOp::Add, at(xin, {x(0), x(1)}), at(bias, {x(1)})));
  b.pointwise("relu", t1, ir::binary(BinaryOp::Maximum, at(t0, {x(0), x(1)}), f32(0)));
  b.pointwise("mul", out, ir::binary(BinaryOp::Mul, at(t1, {x(0), x(1)}), f32(2)));
  return b;
}

/// softmax over the last dim of [rows, cols] as Inductor decomposes it.
GraphBuilder softmax(IndexExpr rows = 6, IndexExpr cols = 10, bool log = false) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto amax = b.temp("amax", {rows, 1});
  auto sub = b.temp("sub", {rows, cols});
  auto exp = b.temp("exp", {rows, cols});
  auto sum = b.temp("sum", {rows, 1});
  auto out = b.output("out", {rows, cols});
  b.reduction("amax", amax, {cols}, ReductionKind::Max, at(xin, {x(0), r(0)}));
  b.pointwise("sub", sub, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(amax, {x(0), 0})));
  b.pointwise("exp", exp, ir::unary(UnaryOp::Exp, at(sub, {x(0), x(1)})));
  b.reduction("sum", sum, {cols}, ReductionKind::Sum, at(exp, {x(0), r(0)}));
  if (log) {
    b.pointwise("log_softmax", out,
                ir::binary(BinaryOp::Sub, at(sub, {x(0), x(1)}), ir::unary(UnaryOp::Log, at(sum, {x(0), 0}))));
  } else {
    b.pointwise("div", out, ir::binary(BinaryOp::TrueDiv, at(exp, {x(0), x(1)}), at(sum, {x(0), 0})));
  }
  return b;
}

TEST(Fusion, DisabledGivesOneKernelPerNodeAndOneRemark) {
  auto g = bias_relu_mul();
  Remarks remarks;
  FusionOptions options;
  options.enabled = false;
  auto fused = run(g.graph, remarks, options);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0]->name, "kernel0_add");
  EXPECT_EQ(ks[2]->name, "kernel2_mul");
  EXPECT_EQ(fused.buffers.size(), g.graph.buffers.size());
  ASSERT_EQ(remarks.all().size(), 1u);
  EXPECT_EQ(remarks.all()[0].reason, "fusion disabled");
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, PointwiseChainIsOneKernel) {
  auto g = bias_relu_mul();
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(ks[0]->name, "kernel0_add");
  EXPECT_EQ(ks[0]->origins, (std::vector<std::string>{"add", "relu", "mul"}));
  EXPECT_EQ(ks[0]->outer.size(), 2u);
  EXPECT_EQ(stage_shape(*ks[0]), "P0");
  EXPECT_FALSE(has_buffer(fused, "buf0"));
  EXPECT_FALSE(has_buffer(fused, "buf1"));
  EXPECT_TRUE(has_buffer(fused, "out"));
  EXPECT_TRUE(remarks.all().empty()) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, PointwiseChainWithSymbolicSizes) {
  auto g = bias_relu_mul(ir::sym("s0"), ir::sym("s1"));
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 1u) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused, {{"s0", 5}, {"s1", 7}}), "");
}

TEST(Fusion, SinPlusCosIsOneKernel) {
  GraphBuilder b;
  auto xin = b.input("x", {32});
  auto s = b.temp("s", {32});
  auto c = b.temp("c", {32});
  auto out = b.output("out", {32});
  b.pointwise("sin", s, ir::unary(UnaryOp::Sin, at(xin, {x(0)})));
  b.pointwise("cos", c, ir::unary(UnaryOp::Cos, at(xin, {x(0)})));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(s, {x(0)}), at(c, {x(0)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(ks[0]->origins, (std::vector<std::string>{"sin", "cos", "add"}));
  EXPECT_EQ(fused.buffers.size(), 2u);
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, SoftmaxIsOneKernelWithThreeStages) {
  auto g = softmax();
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(ks[0]->name, "kernel0_amax");
  EXPECT_EQ(ks[0]->outer.size(), 1u);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(ks[0]->origins, (std::vector<std::string>{"amax", "sub", "exp", "sum", "div"}));
  // The per-row maxima and sums live in LocalRefs, the rest was inlined.
  EXPECT_EQ(fused.buffers.size(), 2u);
  EXPECT_TRUE(remarks.all().empty()) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, SoftmaxWithSymbolicSizes) {
  auto g = softmax(ir::sym("s0"), ir::sym("s1"));
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(compare_numerics(g.graph, fused, {{"s0", 3}, {"s1", 9}}), "");

}

TEST(Fusion, LogSoftmaxIsOneKernel) {
  auto g = softmax(4, 12, /*log=*/true);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(fused.buffers.size(), 2u);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

}  // namespace
}  // namespace cppi::lowering::testing
