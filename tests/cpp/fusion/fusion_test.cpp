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

/// cat([neg(a), exp(b)], 1) over [rows, split + rest], each input masked
/// by its side of the split, as the cat lowering writes it.
GraphBuilder cat_of_computed(IndexExpr rows, int64_t split, int64_t rest) {
  GraphBuilder b;
  auto a = b.input("a", {rows, split});
  auto c = b.input("c", {rows, rest});
  auto neg = b.temp("neg", {rows, split});
  auto ex = b.temp("ex", {rows, rest});
  auto out = b.output("out", {rows, split + rest});
  b.pointwise("neg", neg, ir::unary(ir::UnaryOp::Neg, at(a, {x(0), x(1)})));
  b.pointwise("exp", ex, ir::unary(ir::UnaryOp::Exp, at(c, {x(0), x(1)})));
  Expr first = ir::compare(ir::CompareOp::Lt, ir::IndexValue::make(x(1)), ir::const_int(split));
  Expr second = ir::compare(ir::CompareOp::Ge, ir::IndexValue::make(x(1)), ir::const_int(split));
  b.pointwise("cat", out, ir::where(first, ir::load(neg, neg->layout.index({x(0), x(1)}), first),
                                    ir::load(ex, ex->layout.index({x(0), x(1) - split}), second)));
  return b;
}

TEST(Fusion, ACatComputesEachInputWhereItReadsIt) {
  // The second input is read at x1 - 37, which its producer's loops express
  // only where the mask x1 >= 37 holds: both producers inline into the cat.
  for (IndexExpr rows : {IndexExpr(5), ir::sym("s0")}) {
    auto g = cat_of_computed(rows, 37, 53);
    Remarks remarks;
    auto fused = run(g.graph, remarks);
    auto ks = kernels(fused);
    ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
    EXPECT_EQ(ks[0]->origins, (std::vector<std::string>{"neg", "exp", "cat"}));
    EXPECT_FALSE(has_buffer(fused, "neg"));
    EXPECT_FALSE(has_buffer(fused, "ex"));
    EXPECT_EQ(compare_numerics(g.graph, fused, {{"s0", 5}}), "");
  }
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

/// A residual stream: h1 = x + a1, h2 = h1 + a2, ..., each h read by a row
/// sum (a norm's statistics) and by the next add, each addend an ATen
/// result (a matmul's; the interpreter has no ATen items, so no numerics here: the
/// rule itself only chooses what to store). Inlining every add would make the n-th sum reload
/// x and all n addends; the chain is cut where an add would load more than
/// max_shared_producer_loads whole buffers at its two reads.
TEST(Fusion, ResidualStreamIsStoredBeforeItsReadsReloadTooManyBuffers) {
  GraphBuilder b;
  const int depth = 8;
  auto h = b.input("x", {16, 32});
  for (int i = 1; i <= depth; ++i) {
    auto addend = b.graph_value(cat("mm", i), {16, 32});
    b.aten(addend, true, std::vector<BufferPtr>{});
    auto next = i == depth ? b.output(cat("h", i), {16, 32}) : b.temp(cat("h", i), {16, 32});
    b.pointwise(cat("add", i), next, ir::binary(BinaryOp::Add, at(h, {x(0), x(1)}), at(addend, {x(0), x(1)})));
    b.reduction(cat("sum", i), b.output(cat("s", i), {16}), {32}, ReductionKind::Sum, at(next, {x(0), r(0)}));
    h = next;
  }
  Remarks remarks;
  FusionOptions options;
  auto fused = run(b.graph, remarks, options);
  size_t most = 0;
  for (const auto& k : kernels(fused)) {
    const auto args = ir::signature(*k).buffers;
    const auto written = ir::written_buffers(*k);  // a stored h read back by its sum is no extra load
    most = std::max<size_t>(most, std::count_if(args.begin(), args.end(), [&](const auto& a) {
                              return a.read && !written.count(a.buffer->name);
                            }));
  }
  EXPECT_LE(most, static_cast<size_t>(fusion::FusionHeuristics{}.max_shared_producer_loads + 1)) << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("input buffers again at each of 2 reads"), std::string::npos)
      << remark_text(remarks);
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
  EXPECT_EQ(rm.bytes, -1);  // neither reads what the other writes
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

/// zeros into out and out2; out[idx[x0], x1] += g[x0, x1] * 2 and
/// out2[idx[x0], x1] += g[x0, x1] * 3 (an embedding's backward, twice);
/// h = g + 1 over the same points; y = out + 1 reads a scatter's result.
GraphBuilder two_scatters(ir::Device device) {
  GraphBuilder b;
  b.device = device;
  auto g = b.input("g", {8, 4});
  auto idx = b.input("idx", {8}, DType::Int64);
  auto scaled = b.temp("scaled", {8, 4});
  auto out = b.temp("out", {5, 4});
  auto out2 = b.output("out2", {5, 4});
  auto h = b.output("h", {8, 4});
  auto y = b.output("y", {5, 4});
  b.pointwise("zeros", out, f32(0));
  b.pointwise("zeros_2", out2, f32(0));
  b.pointwise("mul", scaled, ir::binary(BinaryOp::Mul, at(g, {x(0), x(1)}), f32(2)));
  auto row = out->layout.index({ir::indirect(at(idx, {x(0)}), 5), x(1)});
  b.node(ir::PointwiseNode::make_with_store("index_put", {8, 4},
                                            ir::Store::make_accumulate(out, row, at(scaled, {x(0), x(1)})), {"index_put"}));
  b.node(ir::PointwiseNode::make_with_store(
      "index_put_2", {8, 4}, ir::Store::make_accumulate(out2, row, ir::binary(BinaryOp::Mul, at(g, {x(0), x(1)}), f32(3))),
      {"index_put_2"}));
  b.pointwise("plus", h, ir::binary(BinaryOp::Add, at(g, {x(0), x(1)}), f32(1)));
  b.pointwise("add", y, ir::binary(BinaryOp::Add, at(out, {x(0), x(1)}), f32(1)));
  return b;
}

TEST(Fusion, AccumulatingScattersShareACpuKernelOnlyWithEachOther) {
  auto b = two_scatters(ir::Device::CPU);
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  auto ks = kernels(fused);
  std::vector<std::vector<std::string>> origins;
  for (const auto& k : ks) origins.push_back(k->origins);
  // The producer is recomputed in the scatter; the two scatters read g once;
  // the plain node keeps its threads; the reader waits for the adds.
  EXPECT_EQ(origins, (std::vector<std::vector<std::string>>{
                         {"zeros", "zeros_2"}, {"mul", "index_put", "index_put_2"}, {"plus"}, {"add"}}))
      << remark_text(remarks);
  EXPECT_FALSE(has_buffer(fused, "scaled"));
  EXPECT_NE(remark_text(remarks).find("it shares a CPU kernel only with other scatters"), std::string::npos)
      << remark_text(remarks);
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

TEST(Fusion, OnAGpuAScatterSharesItsKernelButNotWithItsReaders) {
  auto b = two_scatters(ir::Device::CUDA);
  Remarks remarks;
  auto fused = run(b.graph, remarks);
  std::vector<std::vector<std::string>> origins;
  for (const auto& k : kernels(fused)) origins.push_back(k->origins);
  EXPECT_EQ(origins, (std::vector<std::vector<std::string>>{
                         {"zeros", "zeros_2"}, {"mul", "index_put", "index_put_2", "plus"}, {"add"}}))
      << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("accumulates into what the consumer reads"), std::string::npos)
      << remark_text(remarks);
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

}  // namespace
}  // namespace cppi::lowering::testing
