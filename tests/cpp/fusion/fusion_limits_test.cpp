// fuse() on graphs where fusing is limited: what the backend cannot emit,
// refusals with their remarks, mutated graph inputs, a transformer block's
// kernel count, and ATen calls reading intermediates.
#include <gtest/gtest.h>

#include "fusion_test_util.h"
#include "lowering/ir/printer.h"

namespace cppi::lowering::testing {
namespace {

using ir::BinaryOp;
using ir::ReductionKind;
using ir::UnaryOp;

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

// softmax over dim 0: the normalising node reads the column statistics at
// [col] while it loops (row, col). On the CPU it joins the column kernel
// with its loops reordered, its rows a stage loop.
TEST(Fusion, ColumnSoftmaxIsOneKernelOnCpu) {
  auto g = column_softmax(16, 12);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << ir::to_string(*ks[0]);
  ASSERT_EQ(ks[0]->outer.size(), 1u);
  EXPECT_EQ(ks[0]->outer[0].extent, ir::index_const(12));  // the columns
  EXPECT_FALSE(has_buffer(fused, "sum"));
  EXPECT_TRUE(remarks.all().empty()) << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

TEST(Fusion, ColumnSoftmaxOverLongColumnsStaysTwoKernels) {
  auto g = column_softmax(2000, 12);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u) << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("a stage of 2000 elements per outer iteration (more than 1024)"),
            std::string::npos)
      << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
}

// The CUDA column schedule has no pointwise stage with loops: there the
// normalising node keeps its own kernel.
TEST(Fusion, BackendWithoutPermutedEpiloguesKeepsColumnSoftmaxInTwoKernels) {
  EXPECT_FALSE(fusion::BackendCapability::cuda_default().permuted_epilogues);
  auto g = column_softmax(16, 12);
  FusionOptions options;
  options.cpu.permuted_epilogues = false;
  Remarks remarks;
  auto fused = run(g.graph, remarks, options);
  ASSERT_EQ(kernels(fused).size(), 2u) << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("do not start with the reduction's outer loops [12]"), std::string::npos)
      << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
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

/// mse_loss's forward: the sum of squared differences over everything, its
/// division, and the scaled difference the backward reads, in program order.
GraphBuilder loss_and_scaled_difference(ir::Device device, int64_t rows, int64_t cols) {
  GraphBuilder b;
  b.device = device;
  auto p = b.input("p", {rows, cols});
  auto q = b.input("q", {rows, cols});
  auto sum = b.temp("sum", {});
  auto loss = b.output("loss", {});
  auto scaled = b.output("scaled", {rows, cols});
  auto diff = [&](IndexExpr i, IndexExpr j) { return ir::binary(BinaryOp::Sub, at(p, {i, j}), at(q, {i, j})); };
  b.reduction("sum", sum, {rows, cols}, ReductionKind::Sum,
              ir::binary(BinaryOp::Mul, diff(r(0), r(1)), diff(r(0), r(1))));
  b.pointwise("div", loss, ir::binary(BinaryOp::TrueDiv, ir::load(sum, ir::index_const(0)), f32(rows * cols)));
  b.pointwise("mul", scaled, ir::binary(BinaryOp::Mul, diff(x(0), x(1)), f32(2.0 / static_cast<double>(rows * cols))));
  return b;
}

TEST(Fusion, ALongFullReductionTakesIndependentPointwiseIntoItsPassWhereTheBackendSplitsIt) {
  // CUDA splits the sum across blocks: the scaled difference joins it and
  // moves up behind it, so one pass reads p and q once.
  auto cuda = loss_and_scaled_difference(ir::Device::CUDA, 1024, 1024);
  Remarks remarks;
  auto fused = run(cuda.graph, remarks);
  auto ks = kernels(fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 P1 P0");  // the contiguous [1024, 1024] loops merged into one
  EXPECT_EQ(ir::pass_run_end(*ks[0], 0), 2u);
  EXPECT_EQ(compare_numerics(cuda.graph, fused), "");
  // The CPU would run the pointwise loop serially beside its reduction.
  auto cpu = loss_and_scaled_difference(ir::Device::CPU, 1024, 1024);
  Remarks cpu_remarks;
  EXPECT_EQ(kernels(run(cpu.graph, cpu_remarks)).size(), 2u);
  EXPECT_NE(remark_text(cpu_remarks).find("would run serially"), std::string::npos) << remark_text(cpu_remarks);
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

/// log(w) over [cols] read by every row of an [rows, cols] loop (a column
/// statistic: log_softmax over dim 0 reads log(sum) so), or by every column
/// of it as log(w[x0]) with x0 the row.
GraphBuilder broadcast_log(ir::Device device, int64_t rows, int64_t cols, bool along_rows) {
  GraphBuilder b;
  b.device = device;
  auto w = b.input("w", {along_rows ? rows : cols});
  auto xin = b.input("x", {rows, cols});
  auto t = b.temp("t", {along_rows ? rows : cols});
  auto out = b.output("out", {rows, cols});
  b.pointwise("log", t, ir::unary(UnaryOp::Log, at(w, {x(0)})));
  b.pointwise("sub", out, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(t, {x(along_rows ? 0 : 1)})));
  return b;
}

TEST(Fusion, CpuStoresAProducerRepeatedAlongItsReadersOuterLoop) {
  // Varies along the reader's inner loop, repeated for 64 rows: no hoisting
  // can save the 64 logs per element; it is stored once.
  auto g = broadcast_log(ir::Device::CPU, 64, 48, false);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  EXPECT_EQ(kernels(fused).size(), 2u) << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("would recompute a producer that varies along its reader's inner loop"),
            std::string::npos)
      << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
  // Inlined where it is cheap to repeat: few rows, a row statistic (constant
  // along the inner loop, hoisted), or on CUDA.
  for (const auto& inlined : {broadcast_log(ir::Device::CPU, 8, 48, false), broadcast_log(ir::Device::CPU, 64, 48, true),
                              broadcast_log(ir::Device::CUDA, 64, 48, false)}) {
    Remarks r;
    auto f = run(inlined.graph, r);
    EXPECT_EQ(kernels(f).size(), 1u) << remark_text(r);
    EXPECT_EQ(compare_numerics(inlined.graph, f), "");
  }
}

/// p[r, c] = g(w[r]) + v[c] with g a chain of `logs` logs (cost 4 each,
/// plus the load), read transposed (out[c, r] = p[r, c]) or in order.
GraphBuilder transposed_read(ir::Device device, int logs, bool transposed) {
  GraphBuilder b;
  b.device = device;
  auto w = b.input("w", {32});
  auto v = b.input("v", {8});
  auto p = b.temp("p", {32, 8});
  auto out = transposed ? b.output("out", {8, 32}) : b.output("out", {32, 8});
  Expr g = at(w, {x(0)});
  for (int i = 0; i < logs; ++i) g = ir::unary(UnaryOp::Log, g);
  b.pointwise("p", p, ir::binary(BinaryOp::Add, g, at(v, {x(1)})));
  b.pointwise("out", out, ir::unary(UnaryOp::Neg, transposed ? at(p, {x(1), x(0)}) : at(p, {x(0), x(1)})));
  return b;
}

TEST(Fusion, CpuStoresAProducerWhoseInnermostDimItsReaderTurnsOutward) {
  // g(w[r]) does not depend on c: the producer's own kernel computes it once
  // per row (hoisted out of its innermost loop over c); the transposed reader
  // loops over c outside r and would compute it for every element.
  auto g = transposed_read(ir::Device::CPU, 4, true);
  Remarks remarks;
  auto fused = run(g.graph, remarks);
  EXPECT_EQ(kernels(fused).size(), 2u) << remark_text(remarks);
  EXPECT_NE(remark_text(remarks).find("its reader loops over the producer's innermost dim outside its own innermost "
                                      "loop: work that does not depend on that dim (cost 17)"),
            std::string::npos)
      << remark_text(remarks);
  EXPECT_EQ(compare_numerics(g.graph, fused), "");
  // Inlined where it is cheap, read in order, or on CUDA.
  for (const auto& inlined : {transposed_read(ir::Device::CPU, 2, true), transposed_read(ir::Device::CPU, 4, false),
                              transposed_read(ir::Device::CUDA, 4, true)}) {
    Remarks r;
    auto f = run(inlined.graph, r);
    EXPECT_EQ(kernels(f).size(), 1u) << remark_text(r);
    EXPECT_EQ(compare_numerics(inlined.graph, f), "");
  }
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
