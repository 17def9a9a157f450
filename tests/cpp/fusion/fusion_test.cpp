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


// --- reductions with epilogues ----------------------------------------------------

/// layer_norm forward as Inductor decomposes it: welford, rstd, normalise.
GraphBuilder layer_norm(bool save_stats, IndexExpr rows = 6, IndexExpr cols = 16) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto w = b.input("weight", {cols});
  auto bias = b.input("bias", {cols});
  auto mean = save_stats ? b.output("mean", {rows, 1}) : b.temp("mean", {rows, 1});
  auto m2 = b.temp("m2", {rows, 1});
  auto rstd = save_stats ? b.output("rstd", {rows, 1}) : b.temp("rstd", {rows, 1});
  auto xhat = b.temp("xhat", {rows, cols});
  auto out = b.output("out", {rows, cols});
  auto one = [](const BufferPtr& buf) { return buf->layout.index({x(0), x(1)}); };
  b.node(ir::ReductionNode::make("var_mean", {rows, 1}, {cols}, ReductionKind::Welford, at(xin, {x(0), r(0)}),
                                 {{mean, one(mean)}, {m2, one(m2)}, {nullptr, IndexExpr()}}, {"var_mean"}));
  auto cols_f = ir::cast(ir::IndexValue::make(cols), DType::Float32);
  b.pointwise("rsqrt", rstd,
              ir::unary(UnaryOp::Rsqrt, ir::binary(BinaryOp::Add, ir::binary(BinaryOp::TrueDiv, at(m2, {x(0), 0}), cols_f),
                                                   f32(1e-5))));
  b.pointwise("mul", xhat,
              ir::binary(BinaryOp::Mul, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(mean, {x(0), 0})),
                         at(rstd, {x(0), 0})));
  b.pointwise("add", out,
              ir::binary(BinaryOp::Add, ir::binary(BinaryOp::Mul, at(xhat, {x(0), x(1)}), at(w, {x(1)})),
                         at(bias, {x(1)})));
  return b;
}

TEST(Fusion, LayerNormIsOneKernel) {
  auto g = layer_norm(false);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(ks[0]->name, "kernel0_var_mean");
  EXPECT_EQ(fused.buffers.size(), 4u);  // x, weight, bias, out
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, LayerNormSavingMeanAndRstdStoresThemPerRow) {
  auto g = layer_norm(true, ir::sym("s0"), 16);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 P0 P1") << ir::to_string(*ks[0]);
  EXPECT_TRUE(has_buffer(fused, "mean"));
  EXPECT_TRUE(has_buffer(fused, "rstd"));
  EXPECT_FALSE(has_buffer(fused, "m2"));
  EXPECT_EQ(compare_numerics(g.graph, fused, {{"s0", 5}}), "");
}

TEST(Fusion, LayerNormWithMeanAndVarianceReductionsIsOneKernel) {
  const IndexExpr rows = 4, cols = 12;
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto sum = b.temp("sum", {rows, 1});
  auto mean = b.temp("mean", {rows, 1});
  auto diff = b.temp("diff", {rows, cols});
  auto sq = b.temp("sq", {rows, cols});
  auto sq_sum = b.temp("sq_sum", {rows, 1});
  auto rstd = b.temp("rstd", {rows, 1});
  auto out = b.output("out", {rows, cols});
  b.reduction("sum", sum, {cols}, ReductionKind::Sum, at(xin, {x(0), r(0)}));
  b.pointwise("div", mean, ir::binary(BinaryOp::TrueDiv, at(sum, {x(0), 0}), f32(12)));
  b.pointwise("sub", diff, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(mean, {x(0), 0})));
  b.pointwise("pow", sq, ir::binary(BinaryOp::Mul, at(diff, {x(0), x(1)}), at(diff, {x(0), x(1)})));
  b.reduction("sum_1", sq_sum, {cols}, ReductionKind::Sum, at(sq, {x(0), r(0)}));
  b.pointwise("rsqrt", rstd,
              ir::unary(UnaryOp::Rsqrt, ir::binary(BinaryOp::Add, ir::binary(BinaryOp::TrueDiv, at(sq_sum, {x(0), 0}),
                                                                              f32(12)),
                                                   f32(1e-5))));
  b.pointwise("mul", out, ir::binary(BinaryOp::Mul, at(diff, {x(0), x(1)}), at(rstd, {x(0), 0})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(fused.buffers.size(), 2u);
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, VarMeanIsOneKernel) {
  const IndexExpr rows = 5, cols = 9;
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto mean = b.output("mean", {rows});
  auto m2 = b.temp("m2", {rows});
  auto var = b.output("var", {rows});
  b.node(ir::ReductionNode::make("var_mean", {rows}, {cols}, ReductionKind::Welford, at(xin, {x(0), r(0)}),
                                 {{mean, x(0)}, {m2, x(0)}, {nullptr, IndexExpr()}}, {"var_mean"}));
  b.pointwise("div", var, ir::binary(BinaryOp::TrueDiv, at(m2, {x(0)}), f32(8)));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 P0") << ir::to_string(*ks[0]);
  EXPECT_FALSE(has_buffer(fused, "m2"));
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, SumOfProductIsOneReductionWithItsPrologue) {
  GraphBuilder b;
  auto a = b.input("a", {8, 32});
  auto c = b.input("c", {8, 32});
  auto prod = b.temp("prod", {8, 32});
  auto out = b.output("out", {8});
  b.pointwise("mul", prod, ir::binary(BinaryOp::Mul, at(a, {x(0), x(1)}), at(c, {x(0), x(1)})));
  b.reduction("sum", out, {32}, ReductionKind::Sum, at(prod, {x(0), r(0)}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 P0");
  EXPECT_FALSE(has_buffer(fused, "prod"));
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

/// layer_norm backward: grad_input per row (two row sums, then pointwise),
/// grad_weight / grad_bias reduce over rows (the other axis).
TEST(Fusion, LayerNormBackwardIsTwoKernels) {
  const IndexExpr rows = 6, cols = 10;
  GraphBuilder b;
  auto g = b.input("grad", {rows, cols});
  auto xin = b.input("x", {rows, cols});
  auto mean = b.input("mean", {rows, 1});
  auto rstd = b.input("rstd", {rows, 1});
  auto w = b.input("weight", {cols});
  auto xhat = b.temp("xhat", {rows, cols});
  auto gw = b.temp("gw", {rows, cols});
  auto s1 = b.temp("s1", {rows, 1});
  auto gwx = b.temp("gwx", {rows, cols});
  auto s2 = b.temp("s2", {rows, 1});
  auto dx = b.output("dx", {rows, cols});
  auto dw = b.output("dw", {cols});
  auto db = b.output("db", {cols});
  auto mul = [](Expr p, Expr q) { return ir::binary(BinaryOp::Mul, p, q); };
  auto sub = [](Expr p, Expr q) { return ir::binary(BinaryOp::Sub, p, q); };
  b.pointwise("xhat", xhat, mul(sub(at(xin, {x(0), x(1)}), at(mean, {x(0), 0})), at(rstd, {x(0), 0})));
  b.pointwise("gw", gw, mul(at(g, {x(0), x(1)}), at(w, {x(1)})));
  b.reduction("s1", s1, {cols}, ReductionKind::Sum, at(gw, {x(0), r(0)}));
  b.pointwise("gwx", gwx, mul(at(gw, {x(0), x(1)}), at(xhat, {x(0), x(1)})));
  b.reduction("s2", s2, {cols}, ReductionKind::Sum, at(gwx, {x(0), r(0)}));
  b.pointwise("dx", dx,
              mul(ir::binary(BinaryOp::TrueDiv, at(rstd, {x(0), 0}), f32(10)),
                  sub(sub(mul(f32(10), at(gw, {x(0), x(1)})), at(s1, {x(0), 0})),
                      mul(at(xhat, {x(0), x(1)}), at(s2, {x(0), 0})))));
  b.reduction("dw", dw, {rows}, ReductionKind::Sum, mul(at(g, {r(0), x(0)}), at(xhat, {r(0), x(0)})));
  b.reduction("db", db, {rows}, ReductionKind::Sum, at(g, {r(0), x(0)}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 2u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  EXPECT_EQ(stage_shape(*ks[1]), "R1 R1 P0") << ir::to_string(*ks[1]);
  EXPECT_EQ(fused.buffers.size(), 8u);  // 5 inputs, 3 outputs
  EXPECT_NE(remark_text(remarks).find("reduction over a different axis"), std::string::npos) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, RowAndColumnSumsOfASquareInputStaySeparate) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto rows = b.output("rows", {8});
  auto cols = b.output("cols", {8});
  b.reduction("sum_rows", rows, {8}, ReductionKind::Sum, at(xin, {x(0), r(0)}));
  b.reduction("sum_cols", cols, {8}, ReductionKind::Sum, at(xin, {r(0), x(0)}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u) << remark_text(remarks);
  const auto& rm = remarks.all()[0];
  EXPECT_EQ(rm.kind, Remark::Kind::FusionRefusal);
  EXPECT_EQ(rm.node, "sum_rows");
  EXPECT_EQ(rm.other, "sum_cols");
  EXPECT_EQ(rm.reason, "reduction over a different axis (x read at r0 + 8*x0 vs 8*r0 + x0)");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, GeluOfBiasAddIsOneKernel) {
  GraphBuilder b;
  auto xin = b.input("x", {4, 32});
  auto bias = b.input("b", {32});
  auto t = b.temp("t", {4, 32});
  auto out = b.output("out", {4, 32});
  b.pointwise("add", t, ir::binary(BinaryOp::Add, at(xin, {x(0), x(1)}), at(bias, {x(1)})));
  auto v = at(t, {x(0), x(1)});
  auto half = ir::binary(BinaryOp::Mul, v, f32(0.5));
  auto erf = ir::unary(UnaryOp::Erf, ir::binary(BinaryOp::Mul, v, f32(0.7071067811865476)));
  b.pointwise("gelu", out, ir::binary(BinaryOp::Mul, half, ir::binary(BinaryOp::Add, erf, f32(1))));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(stage_shape(*ks[0]), "P0");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

// --- extern calls -----------------------------------------------------------------

TEST(Fusion, MlpEpilogueBetweenMatmulsIsOneKernel) {
  GraphBuilder b;
  auto xin = b.input("x", {4, 8});
  auto b1 = b.input("b1", {16});
  auto h = b.graph_value("mm", {4, 16});
  auto a = b.temp("add", {4, 16});
  auto r1 = b.graph_value("relu", {4, 16});
  auto y = b.output("mm_1", {4, 8});
  b.aten(h);
  b.pointwise("add", a, ir::binary(BinaryOp::Add, at(h, {x(0), x(1)}), at(b1, {x(1)})));
  b.pointwise("relu", r1, ir::binary(BinaryOp::Maximum, at(a, {x(0), x(1)}), f32(0)));
  b.aten(y);
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(fused.program.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<AtenItem>(fused.program[0]));
  EXPECT_TRUE(std::holds_alternative<AtenItem>(fused.program[2]));
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0]->origins, (std::vector<std::string>{"add", "relu"}));
  EXPECT_TRUE(has_buffer(fused, "relu"));  // the second matmul reads it
  EXPECT_TRUE(has_buffer(fused, "mm"));
  EXPECT_FALSE(has_buffer(fused, "add"));
  EXPECT_TRUE(xin && y);
}

TEST(Fusion, NodeDoesNotMovePastAnAtenCallThatReadsWhatItWrites) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto y = b.output("y", {8, 8});
  auto mm = b.output("mm", {8, 8});
  b.pointwise("mul", y, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), f32(2)));
  b.aten(mm);
  // copy_ into the input x: the ATen call may still read the old x.
  b.node(ir::PointwiseNode::make_with_store(
      "copy_", {8, 8}, ir::Store::make(xin, xin->layout.index({x(0), x(1)}), ir::binary(BinaryOp::Add, at(y, {x(0), x(1)}), f32(1))),
      {"copy_"}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u) << remark_text(remarks);
  EXPECT_EQ(remarks.all()[0].node, "mul");
  EXPECT_EQ(remarks.all()[0].other, "copy_");
  EXPECT_EQ(remarks.all()[0].reason, "an ATen call between them (graph node 2) reads x");
}

// --- horizontal fusion --------------------------------------------------------------

GraphBuilder two_independent(IndexExpr n) {
  GraphBuilder b;
  auto p = b.input("p", {n, 4});
  auto q = b.input("q", {n, 4});
  auto o1 = b.output("o1", {n, 4});
  auto o2 = b.output("o2", {n, 4});
  b.pointwise("mul", o1, ir::binary(BinaryOp::Mul, at(p, {x(0), x(1)}), f32(3)));
  b.pointwise("add", o2, ir::binary(BinaryOp::Add, at(q, {x(0), x(1)}), f32(1)));
  return b;
}

TEST(Fusion, IndependentLoopsOverTheSameRangeShareAKernel) {
  auto g = two_independent(ir::sym("s0"));
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(stage_shape(*ks[0]), "P0");
  EXPECT_EQ(std::get<ir::PointwiseStage>(ks[0]->stages[0]).stores.size(), 2u);
  EXPECT_EQ(compare_numerics(g.graph, fused, {{"s0", 3}}), "");
}

TEST(Fusion, HorizontalFusionFollowsTheBackendCapability) {
  auto g = two_independent(5);
  FusionOptions options;
  options.cpu.horizontal_fusion = false;
  Remarks remarks;
  auto fused = run(g.graph, remarks, options);
  EXPECT_EQ(kernels(fused).size(), 2u);
  EXPECT_TRUE(remarks.all().empty()) << remark_text(remarks);  // unrelated nodes: nothing to explain
}

TEST(Fusion, IndependentReductionsStayApartWhereTheBackendSaysSo) {
  // A column sum of p and an unrelated pointwise of q over the same outer range.
  GraphBuilder b;
  auto p = b.input("p", {16, 8});
  auto q = b.input("q", {8, 4});
  auto s = b.output("s", {8});
  auto o = b.output("o", {8, 4});
  b.reduction("sum", s, {16}, ReductionKind::Sum, at(p, {r(0), x(0)}));
  b.pointwise("neg", o, ir::unary(UnaryOp::Neg, at(q, {x(0), x(1)})));
  Remarks remarks;
  EXPECT_EQ(kernels(run(b.graph, remarks)).size(), 1u);  // the CPU default fuses them
  FusionOptions options;
  options.cpu.horizontal_reductions = false;  // as CUDA's default
  EXPECT_FALSE(fusion::BackendCapability::cuda_default().horizontal_reductions);
  auto fused = run(b.graph, remarks, options);
  EXPECT_EQ(kernels(fused).size(), 2u);
  EXPECT_EQ(compare_numerics(b.graph, fused, {}), "");
}

TEST(Fusion, IndependentLoopsStoringAlongDifferentAxesStayApart) {
  GraphBuilder b;
  auto p = b.input("p", {8, 8});
  auto q = b.input("q", {8, 8});
  auto t = b.output("t", {8, 8});
  auto o = b.output("o", {8, 8});
  b.node(ir::PointwiseNode::make_with_store("permute_copy", {8, 8},
                                            ir::Store::make(t, t->layout.index({x(1), x(0)}), at(p, {x(0), x(1)})),
                                            {"permute_copy"}));
  b.pointwise("neg", o, ir::unary(UnaryOp::Neg, at(q, {x(0), x(1)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  EXPECT_EQ(kernels(fused).size(), 2u);  // the contiguous one stays vectorisable
  EXPECT_TRUE(remarks.all().empty());
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, IndependentRowReductionsShareAKernel) {
  GraphBuilder b;
  auto p = b.input("p", {6, 7});
  auto q = b.input("q", {6, 7});
  auto o1 = b.output("o1", {6});
  auto o2 = b.output("o2", {6});
  b.reduction("sum", o1, {7}, ReductionKind::Sum, at(p, {x(0), r(0)}));
  b.reduction("amax", o2, {7}, ReductionKind::Max, at(q, {x(0), r(0)}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P0");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

// --- backend capability -------------------------------------------------------------

TEST(Fusion, BackendWithoutReductionEpiloguesSplitsSoftmax) {
  auto g = softmax();
  FusionOptions options;
  options.cpu.reduction_epilogues = false;
  Remarks remarks;
  auto fused = run(g.graph, remarks, options);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P0") << ir::to_string(*ks[0]);
  EXPECT_EQ(stage_shape(*ks[1]), "P0");
  EXPECT_TRUE(has_buffer(fused, "sum"));
  ASSERT_EQ(remarks.all().size(), 1u) << remark_text(remarks);
  EXPECT_EQ(remarks.all()[0].other, "div");
  EXPECT_EQ(remarks.all()[0].reason, "the backend does not support epilogue loops after a reduction");
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, BackendStageLimitSplitsSoftmax) {
  auto g = softmax();
  FusionOptions options;
  options.cpu.max_stages_per_kernel = 2;
  Remarks remarks;
  auto fused = run(g.graph, remarks, options);
  EXPECT_EQ(kernels(fused).size(), 2u);
  EXPECT_NE(remark_text(remarks).find("at most 2 stages per kernel"), std::string::npos) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, CudaCapabilityIsSeparate) {
  auto g = softmax();
  FusionOptions options;
  options.cuda.reduction_epilogues = false;  // the CPU graph is unaffected
  Remarks remarks;
  EXPECT_EQ(kernels(run(g.graph, remarks, options)).size(), 1u);
}

// --- refusals -----------------------------------------------------------------------

TEST(Fusion, ConsumerReadingAStoredProducerTransposedIsRefused) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto e = b.output("exp", {8, 8});
  auto out = b.output("out", {8, 8});
  b.pointwise("exp", e, ir::unary(UnaryOp::Exp, at(xin, {x(0), x(1)})));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(e, {x(1), x(0)}), f32(1)));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u);
  EXPECT_EQ(remarks.all()[0].node, "exp");
  EXPECT_EQ(remarks.all()[0].other, "add");
  EXPECT_EQ(remarks.all()[0].reason, "consumer reads the producer transposed (exp)");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, DifferentIterationSpacesAreRefused) {
  GraphBuilder b;
  auto xin = b.input("x", {ir::sym("s0"), 64});
  auto e = b.output("exp", {ir::sym("s0"), 64});
  auto out = b.output("out", {64});
  b.pointwise("exp", e, ir::unary(UnaryOp::Exp, at(xin, {x(0), x(1)})));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(e, {0, x(0)}), f32(1)));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u);
  EXPECT_EQ(remarks.all()[0].reason, "different iteration spaces: [s0, 64] vs [64]");
  EXPECT_EQ(compare_numerics(b.graph, fused, {{"s0", 3}}), "");
}

/// exp(sin(x)) read by `readers` consumers, transposed when asked.
GraphBuilder expensive_producer(int readers, bool transposed) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto e = b.temp("e", {8, 8});
  b.pointwise("exp", e, ir::unary(UnaryOp::Exp, ir::unary(UnaryOp::Sin, at(xin, {x(0), x(1)}))));
  for (int i = 0; i < readers; ++i) {
    auto out = b.output(cat("out", i), {8, 8});
    auto v = transposed ? at(e, {x(1), x(0)}) : at(e, {x(0), x(1)});
    b.pointwise(cat("add", i), out, ir::binary(BinaryOp::Add, v, f32(i)));
  }
  return b;
}

TEST(Fusion, ExpensiveProducerWithManyReadersIsStoredOnce) {
  auto g = expensive_producer(5, false);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  // Computed once per element and forwarded to the five stores in the same loop body.
  EXPECT_EQ(stage_shape(*ks[0]), "P0");
  EXPECT_FALSE(has_buffer(fused, "e"));
  EXPECT_TRUE(remarks.all().empty()) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, ExpensiveProducerIsNotRecomputedForManyTransposedReaders) {
  auto g = expensive_producer(5, true);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u) << remark_text(remarks);  // the producer, then the five readers together
  EXPECT_TRUE(has_buffer(fused, "e"));
  ASSERT_EQ(remarks.all().size(), 5u) << remark_text(remarks);
  EXPECT_EQ(remarks.all()[0].node, "exp");
  EXPECT_EQ(remarks.all()[0].other, "add0");
  EXPECT_EQ(remarks.all()[0].reason,
            "would recompute an expensive producer 5 times (cost 9 per element); consumer reads the producer "
            "transposed (e)");
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, ExpensiveProducerIsRecomputedForTwoTransposedReaders) {
  auto g = expensive_producer(2, true);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 1u) << remark_text(remarks);
  EXPECT_FALSE(has_buffer(fused, "e"));
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, MaskedReadOfAProducerIsInlinedUnderTheMask) {
  GraphBuilder b;
  auto xin = b.input("x", {16});
  auto e = b.temp("e", {16});
  auto out = b.output("out", {18});
  b.pointwise("exp", e, ir::unary(UnaryOp::Exp, at(xin, {x(0)})));
  auto i = ir::IndexValue::make(x(0));
  auto mask = ir::binary(BinaryOp::LogicalAnd, ir::compare(ir::CompareOp::Ge, i, ir::const_int(1)),
                         ir::compare(ir::CompareOp::Lt, i, ir::const_int(17)));
  b.pointwise("constant_pad_nd", out, ir::load(e, x(0) - 1, mask));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_FALSE(has_buffer(fused, "e"));
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

// --- mutation of graph inputs ------------------------------------------------------

TEST(Fusion, CopyIntoAnInputAfterReadingItAtTheSamePointIsOneKernel) {
  GraphBuilder b;
  auto xin = b.input("x", {4, 8});
  auto t = b.temp("t", {4, 8});
  auto out = b.output("out", {4, 8});
  b.pointwise("mul", t, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), f32(2)));
  b.node(ir::PointwiseNode::make_with_store("copy_", {4, 8},
                                            ir::Store::make(xin, xin->layout.index({x(0), x(1)}), f32(7)), {"copy_"}));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(t, {x(0), x(1)}), f32(1)));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  // The copy comes after the read of the old x in the loop body.
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, CopyIntoAnInputThatOthersReadElsewhereWaits) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto out = b.output("out", {8, 8});
  b.pointwise("mul", out, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), f32(2)));
  b.node(ir::PointwiseNode::make_with_store("copy_", {8, 8},
                                            ir::Store::make(xin, xin->layout.index({x(1), x(0)}), f32(7)), {"copy_"}));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u) << remark_text(remarks);
  EXPECT_EQ(remarks.all()[0].reason, "writes x, which mul reads at other points (consumer reads the producer transposed (x))");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}


// --- a transformer block, values bound to graph nodes as lowering binds them -------

/// Appends layer_norm over `in` (rows x cols) into `out`; all values graph-bound.
void add_layer_norm(GraphBuilder& b, const std::string& tag, const BufferPtr& in, const BufferPtr& out, IndexExpr rows,
                    IndexExpr cols) {
  auto w = b.input(tag + "_w", {cols});
  auto bias = b.input(tag + "_b", {cols});
  auto mean = b.graph_value(tag + "_mean", {rows, 1});
  auto m2 = b.temp(tag + "_m2", {rows, 1});
  auto rstd = b.graph_value(tag + "_rstd", {rows, 1});
  auto xhat = b.graph_value(tag + "_xhat", {rows, cols});
  auto two = [](const BufferPtr& buf) { return buf->layout.index({x(0), x(1)}); };
  b.node(ir::ReductionNode::make(tag + "_var_mean", {rows, 1}, {cols}, ReductionKind::Welford, at(in, {x(0), r(0)}),
                                 {{mean, two(mean)}, {m2, two(m2)}, {nullptr, IndexExpr()}}, {tag + "_var_mean"}));
  b.pointwise(tag + "_rsqrt", rstd,
              ir::unary(UnaryOp::Rsqrt, ir::binary(BinaryOp::Add, ir::binary(BinaryOp::TrueDiv, at(m2, {x(0), 0}), f32(16)),
                                                   f32(1e-5))));
  b.pointwise(tag + "_mul", xhat,
              ir::binary(BinaryOp::Mul, ir::binary(BinaryOp::Sub, at(in, {x(0), x(1)}), at(mean, {x(0), 0})),
                         at(rstd, {x(0), 0})));
  b.pointwise(tag + "_add", out,
              ir::binary(BinaryOp::Add, ir::binary(BinaryOp::Mul, at(xhat, {x(0), x(1)}), at(w, {x(1)})),
                         at(bias, {x(1)})));
}

TEST(Fusion, TransformerBlockKernelCount) {
  const IndexExpr n = 8, c = 16, hidden = 32;
  GraphBuilder b;
  auto xin = b.input("x", {n, c});
  auto ln1 = b.graph_value("ln1", {n, c});
  add_layer_norm(b, "ln1", xin, ln1, n, c);
  // attention: scores = q k^T (extern), softmax, p v (extern), output projection (extern)
  auto scores = b.graph_value("bmm", {n, n});
  b.aten(scores);
  auto amax = b.graph_value("amax", {n, 1});
  auto sub = b.graph_value("sub", {n, n});
  auto exp = b.graph_value("exp", {n, n});
  auto sum = b.graph_value("sum", {n, 1});
  auto probs = b.graph_value("div", {n, n});
  b.reduction("amax", amax, {n}, ReductionKind::Max, at(scores, {x(0), r(0)}));
  b.pointwise("sub", sub, ir::binary(BinaryOp::Sub, at(scores, {x(0), x(1)}), at(amax, {x(0), 0})));
  b.pointwise("exp", exp, ir::unary(UnaryOp::Exp, at(sub, {x(0), x(1)})));
  b.reduction("sum", sum, {n}, ReductionKind::Sum, at(exp, {x(0), r(0)}));
  b.pointwise("div", probs, ir::binary(BinaryOp::TrueDiv, at(exp, {x(0), x(1)}), at(sum, {x(0), 0})));
  auto attn = b.graph_value("bmm_1", {n, c});
  b.aten(attn);
  auto proj = b.graph_value("mm", {n, c});
  b.aten(proj);
  // residual + bias, then layer_norm 2
  auto bo = b.input("bo", {c});
  auto h = b.graph_value("add_1", {n, c});
  b.pointwise("add_1", h,
              ir::binary(BinaryOp::Add, at(xin, {x(0), x(1)}), ir::binary(BinaryOp::Add, at(proj, {x(0), x(1)}), at(bo, {x(1)}))));
  auto ln2 = b.graph_value("ln2", {n, c});
  add_layer_norm(b, "ln2", h, ln2, n, c);
  // MLP: mm, bias + gelu, mm, bias + residual
  auto mm1 = b.graph_value("mm_1", {n, hidden});
  b.aten(mm1);
  auto b1 = b.input("b1", {hidden});
  auto pre = b.graph_value("add_2", {n, hidden});
  auto act = b.graph_value("gelu", {n, hidden});
  b.pointwise("add_2", pre, ir::binary(BinaryOp::Add, at(mm1, {x(0), x(1)}), at(b1, {x(1)})));
  auto v = at(pre, {x(0), x(1)});
  b.pointwise("gelu", act,
              ir::binary(BinaryOp::Mul, ir::binary(BinaryOp::Mul, v, f32(0.5)),
                         ir::binary(BinaryOp::Add, ir::unary(UnaryOp::Erf, ir::binary(BinaryOp::Mul, v, f32(0.70710678))),
                                    f32(1))));
  auto mm2 = b.graph_value("mm_2", {n, c});
  b.aten(mm2);
  auto b2 = b.input("b2", {c});
  auto out = b.output("out", {n, c});
  b.pointwise("add_3", out,
              ir::binary(BinaryOp::Add, at(h, {x(0), x(1)}), ir::binary(BinaryOp::Add, at(mm2, {x(0), x(1)}), at(b2, {x(1)}))));

  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  std::vector<std::string> names;
  for (const auto& k : ks) names.push_back(k->name + " " + stage_shape(*k));
  // Inductor: layer_norm, softmax, residual + layer_norm, bias + gelu, bias + residual.
  EXPECT_EQ(names, (std::vector<std::string>{"kernel0_ln1_var_mean R1 P0 P1", "kernel1_amax R1 P1 R1 P1 P0",
                                             "kernel2_add_1 P1 R1 P0 P1", "kernel3_add_2 P0", "kernel4_add_3 P0"}))
      << remark_text(remarks);
  EXPECT_EQ(fused.program.size(), 10u);
}


TEST(Fusion, BroadcastProducersAreInlinedIntoTheFullLoop) {
  GraphBuilder b;
  auto col = b.input("col", {6, 1});
  auto row = b.input("row", {1, 10});
  auto a = b.temp("a", {6, 1});
  auto c = b.temp("c", {1, 10});
  auto out = b.output("out", {6, 10});
  b.pointwise("mul", a, ir::binary(BinaryOp::Mul, at(col, {x(0), x(1)}), f32(3)));
  b.pointwise("exp", c, ir::unary(UnaryOp::Exp, at(row, {x(0), x(1)})));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(a, {x(0), 0}), at(c, {0, x(1)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "P0");
  EXPECT_EQ(ks[0]->outer.size(), 2u);
  EXPECT_EQ(fused.buffers.size(), 3u);
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, NoCycleThroughAKernelInBetween) {
  GraphBuilder b;
  auto xin = b.input("x", {8, 8});
  auto a = b.output("a", {8, 8});
  auto m = b.output("m", {8, 8});
  auto out = b.output("out", {8, 8});
  b.pointwise("exp", a, ir::unary(UnaryOp::Exp, at(xin, {x(0), x(1)})));
  b.pointwise("mul", m, ir::binary(BinaryOp::Mul, at(a, {x(1), x(0)}), f32(2)));  // transposed: own kernel
  // Reads `a` at the same point, but also `m` (transposed): it cannot join
  // exp's kernel, which runs before mul's.
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(a, {x(0), x(1)}), at(m, {x(1), x(0)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 3u);
  EXPECT_EQ(remark_text(remarks),
            "exp / mul: consumer reads the producer transposed (a)\n"
            "exp / add: mul (another kernel) between them writes m\n"
            "mul / add: consumer reads the producer transposed (m)\n");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, NodesOnDifferentDevicesNeverShareAKernel) {
  GraphBuilder b;
  auto p = b.input("p", {16});
  auto o1 = b.output("o1", {16});
  auto q = b.add_buffer(ir::Buffer::make_contiguous("q", DType::Float32, ir::Device::CUDA, BufferKind::GraphInput, {16}), 10);
  auto o2 = b.add_buffer(ir::Buffer::make_contiguous("o2", DType::Float32, ir::Device::CUDA, BufferKind::GraphOutput, {16}), 11);
  b.pointwise("neg", o1, ir::unary(UnaryOp::Neg, at(p, {x(0)})));
  b.pointwise("neg_1", o2, ir::unary(UnaryOp::Neg, at(q, {x(0)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[1]->device, ir::Device::CUDA);
}


TEST(Fusion, VeryExpensiveBroadcastProducerIsComputedOnce) {
  GraphBuilder b;
  auto w = b.input("w", {16});
  auto xin = b.input("x", {8, 16});
  auto t = b.temp("t", {16});
  auto out = b.output("out", {8, 16});
  Expr v = at(w, {x(0)});
  for (int i = 0; i < 10; ++i) v = ir::unary(i % 2 ? UnaryOp::Sin : UnaryOp::Tanh, v);  // cost 41
  b.pointwise("tanh", t, v);
  b.pointwise("mul", out, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), at(t, {x(1)})));
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  EXPECT_EQ(remark_text(remarks),
            "tanh / mul: would recompute an expensive producer for every element it is broadcast to (cost 41 per "
            "element); different iteration spaces: [16] vs [8, 16]\n");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

}  // namespace
}  // namespace cppi::lowering::testing

namespace cppi::lowering::testing {
namespace {

using ir::BinaryOp;

/// An ATen call that does not read an intermediate leaves it free to be
/// inlined away: only what the call reads must stay in memory.
TEST(FusionAtenReads, IntermediatesTheCallDoesNotReadAreNotStored) {
  GraphBuilder b;
  auto xin = b.input("x", {64});
  auto t = b.temp("t", {64});       // exp(x): only the kernel below needs it
  auto out = b.output("out", {64});
  auto mm = b.temp("mm", {64});     // produced by an ATen call reading x only
  b.pointwise("exp", t, ir::unary(ir::UnaryOp::Exp, at(xin, {x(0)})));
  b.aten(mm, true, std::vector<BufferPtr>{xin});
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(t, {x(0)}), at(mm, {x(0)})));
  Remarks remarks;
  auto fused = fuse(b.graph, {}, remarks);
  ASSERT_EQ(kernels(fused).size(), 1u);
  for (const auto& binding : fused.buffers) EXPECT_NE(binding.buffer->name, "t");
}

}  // namespace
}  // namespace cppi::lowering::testing
