// The choices (heuristics) and backend capability layers on their own.
#include <gtest/gtest.h>

#include "fusion_test_util.h"
#include "lowering/fusion/capability.h"
#include "lowering/fusion/choices.h"

namespace cppi::lowering::testing {
namespace {

using fusion::FusionHeuristics;
using ir::BinaryOp;
using ir::UnaryOp;

TEST(Choices, RecomputeCostWeighsOperations) {
  auto b = ir::Buffer::make_contiguous("x", DType::Float32, ir::Device::CPU, BufferKind::GraphInput, {8});
  auto v = at(b, {x(0)});
  EXPECT_EQ(fusion::recompute_cost(v), 1);
  EXPECT_EQ(fusion::recompute_cost(ir::binary(BinaryOp::Add, v, f32(1))), 2);
  EXPECT_EQ(fusion::recompute_cost(ir::unary(UnaryOp::Exp, v)), 5);
  EXPECT_EQ(fusion::recompute_cost(ir::binary(BinaryOp::TrueDiv, v, f32(3))), 3);
  // Shared subexpressions count once: x * x loads x once.
  EXPECT_EQ(fusion::recompute_cost(ir::binary(BinaryOp::Mul, v, v)), 2);
}

TEST(Choices, CheapProducersAreRecomputedAnywhere) {
  FusionHeuristics h;
  EXPECT_FALSE(fusion::why_not_recompute(h, 8, 100).has_value());
  EXPECT_FALSE(fusion::why_not_recompute(h, 1000, 1).has_value());
}

TEST(Choices, ModeratelyExpensiveProducersIntoAFewReads) {
  FusionHeuristics h;
  EXPECT_FALSE(fusion::why_not_recompute(h, 20, 4).has_value());
  EXPECT_EQ(fusion::why_not_recompute(h, 20, 5).value_or(""),
            "would recompute an expensive producer 5 times (cost 20 per element)");
  EXPECT_TRUE(fusion::why_not_recompute(h, 41, 2).has_value());
}

TEST(Choices, ProducersLoadingManyBuffersAreStoredWhenReadTwice) {
  FusionHeuristics h;
  EXPECT_FALSE(fusion::why_not_reload(h, 100, 1).has_value());
  EXPECT_FALSE(fusion::why_not_reload(h, 4, 2).has_value());
  EXPECT_EQ(fusion::why_not_reload(h, 5, 2).value_or(""),
            "would load its 5 input buffers again at each of 2 reads: stored once instead");
  // CUDA: from 3 (a residual chain's norms move the fewest bytes cut there).
  EXPECT_FALSE(fusion::why_not_reload(h, 2, 2, /*cuda=*/true).has_value());
  EXPECT_TRUE(fusion::why_not_reload(h, 3, 2, /*cuda=*/true).has_value());
}

TEST(Choices, BroadcastReadsOfVeryExpensiveProducers) {
  FusionHeuristics h;
  EXPECT_FALSE(fusion::why_not_recompute(h, 20, 1, /*broadcast=*/true).has_value());
  EXPECT_EQ(fusion::why_not_recompute(h, 41, 1, /*broadcast=*/true).value_or(""),
            "would recompute an expensive producer for every element it is broadcast to (cost 41 per element)");
}

TEST(Choices, ThresholdsAreOptions) {
  FusionHeuristics h;
  h.max_recompute_reads = 1;
  EXPECT_TRUE(fusion::why_not_recompute(h, 9, 2).has_value());
}

TEST(Choices, EpilogueLoopsNeedAnOuterLoop) {
  FusionHeuristics h;
  const std::optional<int64_t> big = 1 << 20, unknown = std::nullopt;
  EXPECT_TRUE(fusion::why_not_loops_without_outer(h, 0, 1, big).has_value());
  EXPECT_TRUE(fusion::why_not_loops_without_outer(h, 0, 1, unknown).has_value());
  EXPECT_FALSE(fusion::why_not_loops_without_outer(h, 0, 0, big).has_value());
  EXPECT_FALSE(fusion::why_not_loops_without_outer(h, 1, 1, big).has_value());
  h.epilogues_need_outer_loops = false;
  EXPECT_FALSE(fusion::why_not_loops_without_outer(h, 0, 1, big).has_value());
}

TEST(Choices, SmallEpilogueLoopsMayJoinAReductionWithoutOuterLoops) {
  // Work the CPU schedule runs on one thread anyway loses no parallelism.
  FusionHeuristics h;
  EXPECT_FALSE(fusion::why_not_loops_without_outer(h, 0, 1, int64_t{1000}).has_value());
  EXPECT_TRUE(fusion::why_not_loops_without_outer(h, 0, 1, h.serial_stage_elements + 1).has_value());
}

TEST(Choices, KernelSizeIsBounded) {
  FusionHeuristics h;
  h.max_fusion_size = 2;
  EXPECT_FALSE(fusion::why_not_grow(h, 2).has_value());
  EXPECT_EQ(fusion::why_not_grow(h, 3).value_or(""), "the kernel already has 2 nodes (max_fusion_size)");
  // Three independent loops: two kernels.
  GraphBuilder b;
  for (int i = 0; i < 3; ++i) {
    auto in = b.input(cat("in", i), {8});
    b.pointwise(cat("neg", i), b.output(cat("out", i), {8}), ir::unary(UnaryOp::Neg, at(in, {x(0)})));
  }
  FusionOptions options;
  options.heuristics = h;
  Remarks remarks;
  EXPECT_EQ(kernels(fuse(b.graph, options, remarks)).size(), 2u);
}

TEST(Capability, StageLimit) {
  fusion::BackendCapability c;
  c.max_stages_per_kernel = 2;
  EXPECT_FALSE(fusion::why_unsupported(c, {{true, 1}, {false, 1}}).has_value());
  EXPECT_EQ(fusion::why_unsupported(c, {{true, 1}, {true, 1}, {false, 1}}).value_or(""),
            "the backend allows at most 2 stages per kernel (would be 3)");
}

TEST(Capability, EpiloguesAndMultipleReductions) {
  fusion::BackendCapability c;
  c.reduction_epilogues = false;
  EXPECT_FALSE(fusion::why_unsupported(c, {{false, 1}, {true, 1}, {false, 0}}).has_value());  // prologue + result store
  EXPECT_TRUE(fusion::why_unsupported(c, {{true, 1}, {false, 1}}).has_value());
  c = {};
  c.multiple_reductions = false;
  EXPECT_EQ(fusion::why_unsupported(c, {{true, 1}, {true, 1}}).value_or(""),
            "the backend does not support several reductions in one kernel");
}

/// A full reduction (no outer loops) keeps its pointwise consumer over all
/// elements in a separate, parallel kernel — when that consumer is big enough
/// to be worth parallelising.
TEST(Choices, FullReductionDoesNotAbsorbABigElementwiseEpilogue) {
  const int64_t n = 1 << 16;  // above serial_stage_elements
  GraphBuilder b;
  auto xin = b.input("x", {n});
  auto total = b.temp("total", {1});
  auto out = b.output("out", {n});
  b.reduction("sum", total, {n}, ir::ReductionKind::Sum, at(xin, {r(0)}));
  b.pointwise("div", out, ir::binary(BinaryOp::TrueDiv, at(xin, {x(0)}), at(total, {0})));
  Remarks remarks;
  auto fused = fuse(b.graph, {}, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  ASSERT_EQ(remarks.all().size(), 1u);
  EXPECT_EQ(remarks.all()[0].reason,
            "the reduction has no outer loop: a pointwise loop fused with it would run serially");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

/// A small consumer runs on one thread anyway: it joins the reduction.
TEST(Choices, FullReductionAbsorbsASmallElementwiseEpilogue) {
  GraphBuilder b;
  auto xin = b.input("x", {64});
  auto total = b.temp("total", {1});
  auto out = b.output("out", {64});
  b.reduction("sum", total, {64}, ir::ReductionKind::Sum, at(xin, {r(0)}));
  b.pointwise("div", out, ir::binary(BinaryOp::TrueDiv, at(xin, {x(0)}), at(total, {0})));
  Remarks remarks;
  auto fused = fuse(b.graph, {}, remarks);
  ASSERT_EQ(kernels(fused).size(), 1u);
  EXPECT_TRUE(remarks.all().empty());
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

/// Reordering a transposed consumer into a column kernel: short columns
/// whose rows spread over the L2's sets.
TEST(Choices, PermutedEpiloguesNeedShortColumnsSpreadOverL2Sets) {
  FusionHeuristics h;
  EXPECT_EQ(why_not_permute(h, 10, 1000, 1000, 4000), std::nullopt);  // softmax over dim 0 of 1000 x 1000
  EXPECT_EQ(why_not_permute(h, 10, 512, 512, 2048), std::nullopt);     // 8 rows per set
  auto cheap = why_not_permute(h, 5, 1000, 1000, 4000);                // log_softmax's x - max - log(sum)
  ASSERT_TRUE(cheap);
  EXPECT_NE(cheap->find("work per element (cost 5, at most 8)"), std::string::npos) << *cheap;
  auto long_columns = why_not_permute(h, 10, 2000, 2000, 4000);
  ASSERT_TRUE(long_columns);
  EXPECT_NE(long_columns->find("a stage of 2000 elements"), std::string::npos) << *long_columns;
  auto aliased = why_not_permute(h, 10, 1024, 1024, 4096);  // 32 rows on each set
  ASSERT_TRUE(aliased);
  EXPECT_NE(aliased->find("put 32 lines on each L2 set"), std::string::npos) << *aliased;
  EXPECT_TRUE(why_not_permute(h, 10, std::nullopt, std::nullopt, std::nullopt));
  EXPECT_TRUE(why_not_permute(h, 10, 100, 100, std::nullopt));
  h.max_permuted_stage_elements = 0;
  EXPECT_TRUE(why_not_permute(h, 10, 16, 16, 48));
}

}  // namespace
}  // namespace cppi::lowering::testing
