// fusion::merge_contiguous_loops: adjacent loops that every access walks as
// one become one loop; anything else keeps its loops.
#include <gtest/gtest.h>

#include "lowering/fusion/loop_merge.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/printer.h"

namespace cppi::lowering::fusion {
namespace {

using namespace cppi::ir;

IndexExpr c(int64_t v) { return index_const(v); }
BufferPtr tensor(const std::string& name, std::vector<IndexExpr> sizes, BufferKind kind = BufferKind::GraphInput) {
  return Buffer::make_contiguous(name, DType::Float32, Device::CPU, kind, std::move(sizes));
}
std::vector<std::string> extents(const std::vector<Loop>& loops) {
  std::vector<std::string> out;
  for (const auto& l : loops) out.push_back(to_string(l.extent));
  return out;
}

TEST(LoopMerge, AContiguousPointwiseKernelBecomesOneLoop) {
  IndexExpr x0 = var("x0"), x1 = var("x1"), x2 = var("x2");
  BufferPtr in = tensor("in", {c(4), c(6), c(5)}), out = tensor("out", {c(4), c(6), c(5)}, BufferKind::GraphOutput);
  Expr v = binary(BinaryOp::Add, load(in, in->layout.index({x0, x1, x2})), const_float(1));
  KernelPtr k = Kernel::make("k", Device::CPU, {{x0, c(4)}, {x1, c(6)}, {x2, c(5)}},
                             {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1, x2}), v)}}});
  KernelPtr merged = merge_contiguous_loops(k);
  ASSERT_EQ(merged->outer.size(), 1u);
  EXPECT_EQ(to_string(merged->outer[0].extent), "120");
  const auto& store = std::get<PointwiseStage>(merged->stages[0]).stores[0];
  EXPECT_EQ(store.index, merged->outer[0].var) << to_string(store.index);
}

TEST(LoopMerge, APerChannelBiasKeepsTheChannelLoopApart) {
  // relu(x + b[c]) over NCHW: H and W merge; N, C and HW stay.
  IndexExpr n = var("x0"), ch = var("x1"), h = var("x2"), w = var("x3");
  BufferPtr x = tensor("x", {c(2), c(3), c(7), c(9)}), b = tensor("b", {c(3)});
  BufferPtr out = tensor("out", {c(2), c(3), c(7), c(9)}, BufferKind::GraphOutput);
  Expr v = binary(BinaryOp::Add, load(x, x->layout.index({n, ch, h, w})), load(b, b->layout.index({ch})));
  KernelPtr k = Kernel::make("k", Device::CPU, {{n, c(2)}, {ch, c(3)}, {h, c(7)}, {w, c(9)}},
                             {PointwiseStage{{}, {Store::make(out, out->layout.index({n, ch, h, w}), v)}}});
  EXPECT_EQ(extents(merge_contiguous_loops(k)->outer), (std::vector<std::string>{"2", "3", "63"}));
}

TEST(LoopMerge, BatchNormStatisticsMergeTheirSpatialReductionLoops) {
  // mean over (N, H, W) of NCHW per channel: r1 and r2 merge, r0 stays.
  IndexExpr ch = var("x0"), r0 = var("r0"), r1 = var("r1"), r2 = var("r2");
  BufferPtr x = tensor("x", {c(2), c(3), c(7), c(9)}), out = tensor("out", {c(3)}, BufferKind::GraphOutput);
  auto sum = ReductionStage::make({{r0, c(2)}, {r1, c(7)}, {r2, c(9)}}, ReductionKind::Sum,
                                  load(x, x->layout.index({r0, ch, r1, r2})), {"s"});
  KernelPtr k = Kernel::make("k", Device::CPU, {{ch, c(3)}},
                             {sum, PointwiseStage{{}, {Store::make(out, out->layout.index({ch}), sum.result())}}});
  KernelPtr merged = merge_contiguous_loops(k);
  EXPECT_EQ(extents(loops_of(merged->stages[0])), (std::vector<std::string>{"2", "63"}));
  EXPECT_EQ(extents(merged->outer), (std::vector<std::string>{"3"}));
}

TEST(LoopMerge, TransposedAccessesAndDifferentStagesKeepTheirLoops) {
  IndexExpr x0 = var("x0"), x1 = var("x1");
  BufferPtr in = tensor("in", {c(5), c(4)}), out = tensor("out", {c(4), c(5)}, BufferKind::GraphOutput);
  KernelPtr transposed = Kernel::make(
      "k", Device::CPU, {{x0, c(4)}, {x1, c(5)}},
      {PointwiseStage{{}, {Store::make(out, out->layout.index({x0, x1}), load(in, in->layout.index({x1, x0})))}}});
  EXPECT_EQ(merge_contiguous_loops(transposed), transposed);

  // Two looped stages with different extents: stage loops are left alone.
  IndexExpr r0 = var("r0"), r1 = var("r1");
  BufferPtr a = tensor("a", {c(3), c(4), c(5)}), sums = tensor("sums", {c(3)}, BufferKind::GraphOutput);
  BufferPtr copy = tensor("copy", {c(3), c(5), c(4)}, BufferKind::GraphOutput);
  auto s = ReductionStage::make({{r0, c(4)}, {r1, c(5)}}, ReductionKind::Sum, load(a, a->layout.index({x0, r0, r1})), {"s"});
  PointwiseStage p{{{r0, c(5)}, {r1, c(4)}},
                   {Store::make(copy, copy->layout.index({x0, r0, r1}), load(a, a->layout.index({x0, r1, r0})))}};
  KernelPtr mixed = Kernel::make("m", Device::CPU, {{x0, c(3)}},
                                 {s, p, PointwiseStage{{}, {Store::make(sums, sums->layout.index({x0}), s.result())}}});
  EXPECT_EQ(merge_contiguous_loops(mixed), mixed);
}

}  // namespace
}  // namespace cppi::lowering::fusion
