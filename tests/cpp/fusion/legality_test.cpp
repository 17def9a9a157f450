// The legality layer on its own: where a read lands in the writer's loops,
// inlining hazards, joining a kernel, stage planning.
#include <gtest/gtest.h>

#include "fusion_test_util.h"
#include "lowering/fusion/fusion_node.h"
#include "lowering/fusion/legality.h"

namespace cppi::lowering::testing {
namespace {

using fusion::writer_point;
using ir::BinaryOp;
using ir::VarRanges;

std::string str(const std::optional<std::vector<IndexExpr>>& point) {
  if (!point) return "none";
  return fusion::format_ranges(*point);
}

TEST(WriterPoint, SameIterationSpaceIsTheIdentity) {
  auto p = writer_point(16 * x(0) + x(1), {8, 16}, 16 * x(0) + x(1), {{"x0", 8}, {"x1", 16}});
  EXPECT_EQ(str(p), "[x0, x1]");
  EXPECT_TRUE(fusion::is_identity(*p, 2));
}

TEST(WriterPoint, BroadcastReadOfARowVector) {
  // bias[x1] read from a [rows, 16] loop nest.
  EXPECT_EQ(str(writer_point(x(0), {16}, x(1), {{"x0", 8}, {"x1", 16}})), "[x1]");
}

TEST(WriterPoint, PerRowReductionResult) {
  EXPECT_EQ(str(writer_point(x(0), {8}, x(0), {{"x0", 8}, {"r0", 16}})), "[x0]");
}

TEST(WriterPoint, TransposedRead) {
  auto p = writer_point(8 * x(0) + x(1), {8, 8}, 8 * x(1) + x(0), {{"x0", 8}, {"x1", 8}});
  EXPECT_EQ(str(p), "[x1, x0]");
  EXPECT_FALSE(fusion::is_identity(*p, 1));
}

TEST(WriterPoint, SymbolicExtents) {
  auto s0 = ir::sym("s0"), s1 = ir::sym("s1");
  auto p = writer_point(s1 * x(0) + x(1), {s0, s1}, s1 * x(0) + x(1), {{"x0", s0}, {"x1", s1}});
  EXPECT_EQ(str(p), "[x0, x1]");
}

TEST(WriterPoint, ChannelsLastStore) {
  // [N=2, C=3, H=4, W=5] stored channels-last: strides [60, 1, 15, 3].
  auto write = 60 * x(0) + x(1) + 15 * x(2) + 3 * x(3);
  VarRanges ranges{{"x0", 2}, {"x1", 3}, {"x2", 4}, {"x3", 5}};
  EXPECT_EQ(str(writer_point(write, {2, 3, 4, 5}, write, ranges)), "[x0, x1, x2, x3]");
}

TEST(WriterPoint, FlatReadOfA2dProducer) {
  // A view of [4, 8] as [32]: element x0 is (x0 // 8, x0 % 8).
  EXPECT_EQ(str(writer_point(8 * x(0) + x(1), {4, 8}, x(0), {{"x0", 32}})), "[(x0 // 8), (x0 % 8)]");
}

TEST(WriterPoint, ShiftedRead) {
  EXPECT_EQ(str(writer_point(x(0), {16}, x(0) - 1, {{"x0", 18}})), "[x0 - 1]");
}

TEST(WriterPoint, StoreWithGapsIsNotInverted) {
  // Every other element: the producer's loops do not cover the buffer densely.
  EXPECT_EQ(str(writer_point(2 * x(0), {8}, x(0), {{"x0", 16}})), "none");
}

TEST(WriterPoint, NonAffineStoreIsNotInverted) {
  EXPECT_EQ(str(writer_point(ir::mod(x(0), 4), {8}, x(0), {{"x0", 4}})), "none");
}

TEST(WriterPoint, OutermostCoordinateIsNotWrapped) {
  // The producer writes rows 1..3 of a [4, 8] buffer. The point of a read is
  // only meaningful for elements the producer wrote: row 0 maps to x0 - 1,
  // outside its loops. Callers rely on that: inlining needs the producer to
  // be the buffer's only writer (so every read element is its), sharing a
  // kernel needs the identity.
  EXPECT_EQ(str(writer_point(8 * x(0) + x(1) + 8, {3, 8}, 8 * x(0) + x(1) + 3, {{"x0", 3}, {"x1", 4}})),
            "[x0 - 1, x1 + 3]");
}

// --- program-level checks --------------------------------------------------------

TEST(Legality, InlineRefusedWhenTheProducersInputIsOverwrittenFirst) {
  GraphBuilder b;
  auto xin = b.input("x", {8});
  auto y = b.input("y", {8});
  auto t = b.temp("t", {8});
  auto out = b.output("out", {8});
  b.pointwise("mul", t, ir::binary(BinaryOp::Mul, at(xin, {x(0)}), f32(2)));
  b.node(ir::PointwiseNode::make_with_store("copy_", {8}, ir::Store::make(xin, x(0), at(y, {x(0)})), {"copy_"}));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(t, {x(0)}), f32(1)));
  auto p = fusion::Program::from(b.graph);
  fusion::ReadMap map;
  EXPECT_EQ(fusion::why_not_inline(p, 0, 2, &map).value_or(""), "copy_ between them overwrites x, which the producer reads");
}

TEST(Legality, InlineAcceptsABroadcastRead) {
  GraphBuilder b;
  auto w = b.input("w", {16});
  auto xin = b.input("x", {4, 16});
  auto t = b.temp("t", {16});
  auto out = b.output("out", {4, 16});
  b.pointwise("mul", t, ir::binary(BinaryOp::Mul, at(w, {x(0)}), f32(2)));
  b.pointwise("add", out, ir::binary(BinaryOp::Add, at(xin, {x(0), x(1)}), at(t, {x(1)})));
  auto p = fusion::Program::from(b.graph);
  fusion::ReadMap map;
  EXPECT_FALSE(fusion::why_not_inline(p, 0, 1, &map).has_value());
  ASSERT_EQ(map.points.size(), 1u);
  EXPECT_EQ(fusion::format_ranges(map.points[0]), "[x1]");
}

TEST(Legality, UnitLoopsAreDroppedSoKeepdimMatches) {
  GraphBuilder b;
  auto xin = b.input("x", {4, 16});
  auto amax = b.temp("amax", {4, 1});
  b.reduction("amax", amax, {16}, ir::ReductionKind::Max, at(xin, {x(0), r(0)}));
  auto p = fusion::Program::from(b.graph);
  EXPECT_EQ(fusion::format_ranges(fusion::ranges_of(*p.nodes[0])), "[4]");
}

TEST(Legality, BufferNeededOutsideTheKernels) {
  GraphBuilder b;
  auto xin = b.input("x", {4});
  auto v = b.graph_value("v", {4});
  auto late = b.graph_value("late", {4});
  auto t = b.temp("t", {4});
  auto mm = b.output("mm", {4});
  b.pointwise("a", v, at(xin, {x(0)}));
  b.pointwise("b", t, at(v, {x(0)}));
  b.aten(mm);
  b.pointwise("c", late, at(t, {x(0)}));
  auto p = fusion::Program::from(b.graph);
  EXPECT_TRUE(p.needed_outside("x"));
  EXPECT_TRUE(p.needed_outside("mm"));
  EXPECT_TRUE(p.needed_outside("v"));      // an ATen call after it may read it
  EXPECT_FALSE(p.needed_outside("t"));     // no graph node: only kernels see it
  EXPECT_FALSE(p.needed_outside("late"));  // written after the last ATen call
  // The ATen call cannot read a value written only after it, nor an internal one.
  EXPECT_FALSE(p.may_read(2, "late"));
  EXPECT_FALSE(p.may_read(2, "t"));
  EXPECT_TRUE(p.may_read(2, "v"));
  EXPECT_TRUE(p.may_read(2, "x"));
}

GraphBuilder row_then_reversed_row(ir::Device device) {
  GraphBuilder b;
  b.device = device;
  auto xin = b.input("x", {4, 16});
  auto sum = b.output("sum", {4});
  auto a = b.output("a", {4, 16});
  auto c = b.output("c", {4, 16});
  auto d = b.output("d", {4, 16});
  b.reduction("sum", sum, {16}, ir::ReductionKind::Sum, at(xin, {x(0), r(0)}));
  b.pointwise("a", a, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), at(sum, {x(0)})));
  b.pointwise("c", c, ir::binary(BinaryOp::Add, at(a, {x(0), x(1)}), f32(1)));
  b.pointwise("d", d, at(a, {x(0), ir::index_const(15) - x(1)}));
  return b;
}

TEST(Legality, SamePositionAcrossStages) {
  auto b = row_then_reversed_row(ir::Device::CPU);
  auto p = fusion::Program::from(b.graph);
  EXPECT_TRUE(fusion::same_position(p, 0, 1, "sum", 1));  // a reduction result: a LocalRef
  EXPECT_TRUE(fusion::same_position(p, 1, 2, "a", 1));
  EXPECT_FALSE(fusion::same_position(p, 1, 3, "a", 1));
}

TEST(Legality, GpuKernelsDoNotReadOtherPositionsOfAnEarlierStage) {
  // The CUDA printer splits a row's loop across threads with no barrier
  // between stages: the reversed read goes to its own kernel there.
  auto b = row_then_reversed_row(ir::Device::CUDA);
  Remarks remarks;
  auto fused = fuse(b.graph, {}, remarks);
  ASSERT_EQ(kernels(fused).size(), 2u);
  EXPECT_EQ(stage_shape(*kernels(fused)[0]), "R1 P1 P0");
  EXPECT_EQ(remark_text(remarks),
            "a / d: the backend cannot order a stage after one that stored what it reads at other positions\n");
}

TEST(Legality, StagesSplitWhereAReadCrossesInnerPoints) {
  GraphBuilder b;
  auto xin = b.input("x", {4, 16});
  auto sum = b.output("sum", {4});
  auto a = b.output("a", {4, 16});
  auto c = b.output("c", {4, 16});
  auto d = b.output("d", {4, 16});
  b.reduction("sum", sum, {16}, ir::ReductionKind::Sum, at(xin, {x(0), r(0)}));
  b.pointwise("a", a, ir::binary(BinaryOp::Mul, at(xin, {x(0), x(1)}), at(sum, {x(0)})));
  b.pointwise("c", c, ir::binary(BinaryOp::Add, at(a, {x(0), x(1)}), f32(1)));
  b.pointwise("d", d, at(a, {x(0), ir::index_const(15) - x(1)}));  // reversed row: needs all of `a`'s row
  auto p = fusion::Program::from(b.graph);
  auto stages = fusion::plan_stages(p, {0, 1, 2, 3}, 1);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_TRUE(stages[0].reduction);
  EXPECT_EQ(stages[1].members, (std::vector<int>{1, 2}));
  EXPECT_EQ(stages[2].members, (std::vector<int>{3}));
  EXPECT_TRUE(fusion::needs_own_stage(p, 1, 3));
  EXPECT_FALSE(fusion::needs_own_stage(p, 1, 2));

  // And end to end: one kernel, the reversed read in its own stage.
  Remarks remarks;
  auto fused = fuse(b.graph, {}, remarks);
  ASSERT_EQ(kernels(fused).size(), 1u) << remark_text(remarks);
  EXPECT_EQ(stage_shape(*kernels(fused)[0]), "R1 P1 P1 P0");
  EXPECT_EQ(compare_numerics(b.graph, fused), "");
}

}  // namespace
}  // namespace cppi::lowering::testing
