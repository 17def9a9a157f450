// ir::kernel_cost: bytes each buffer moves (once, however often it is
// loaded; broadcasts and slices by what they touch) and FLOPs (hoisted
// values once per iteration they vary in, reduction combines per element).
#include <gtest/gtest.h>

#include "ir_builders.h"
#include "lowering/ir/kernel_cost.h"

namespace cppi::ir {
namespace {

BufferPtr f32(const std::string& name, BufferKind kind, std::vector<IndexExpr> sizes) {
  return Buffer::make_contiguous(name, DType::Float32, Device::CPU, kind, std::move(sizes));
}

TEST(KernelCostTest, PointwiseWithABroadcastOperand) {
  auto a = f32("a", BufferKind::GraphInput, {index_const(100), index_const(64)});
  auto b = f32("b", BufferKind::GraphInput, {index_const(64)});
  auto out = f32("out", BufferKind::GraphOutput, {index_const(100), index_const(64)});
  KernelCost c = kernel_cost(*single_node_kernel(testing::add_relu_node(a, b, out)));
  EXPECT_EQ(c.bytes_read, index_const(4 * 100 * 64 + 4 * 64));  // b once, not per row
  EXPECT_EQ(c.bytes_written, index_const(4 * 100 * 64));
  EXPECT_EQ(c.flops, index_const(2 * 100 * 64));  // add, maximum
}

TEST(KernelCostTest, SoftmaxReadsItsInputOnce) {
  auto x = f32("x", BufferKind::GraphInput, {index_const(10), index_const(50)});
  auto out = f32("out", BufferKind::GraphOutput, {index_const(10), index_const(50)});
  KernelCost c = kernel_cost(*testing::softmax_kernel(x, out, index_const(10), index_const(50)));
  EXPECT_EQ(c.bytes_read, index_const(4 * 500));
  EXPECT_EQ(c.bytes_written, index_const(4 * 500));
  // max: 1 combine; sum: sub, exp, 1 combine; normalize: sub, exp, div.
  EXPECT_EQ(c.flops, index_const(7 * 500));
}

TEST(KernelCostTest, SymbolicSizesGiveExpressions) {
  IndexExpr s0 = sym("s0");
  auto x = f32("x", BufferKind::GraphInput, {s0, index_const(50)});
  auto out = f32("out", BufferKind::GraphOutput, {s0, index_const(50)});
  KernelCost c = kernel_cost(*testing::softmax_kernel(x, out, s0, index_const(50)));
  EXPECT_EQ(to_string(c.bytes_read), "200*s0");
  EXPECT_EQ(to_string(c.flops), "350*s0");
}

TEST(KernelCostTest, ValuesInvariantInAStageLoopRunOncePerOuterIteration) {
  // out[x0, r0] = x[x0, r0] * rsqrt(sum[x0] + 1): the rsqrt and its add once per row.
  auto x = f32("x", BufferKind::GraphInput, {index_const(8), index_const(32)});
  auto rows = f32("rows", BufferKind::GraphInput, {index_const(8)});
  auto out = f32("out", BufferKind::GraphOutput, {index_const(8), index_const(32)});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr scale = unary(UnaryOp::Rsqrt, binary(BinaryOp::Add, load(rows, x0), const_float(1)));
  Expr value = binary(BinaryOp::Mul, load(x, 32 * x0 + r0), scale);
  PointwiseStage stage{{{r0, index_const(32)}}, {Store::make(out, 32 * x0 + r0, value)}};
  KernelCost c = kernel_cost(*Kernel::make("k", Device::CPU, {{x0, index_const(8)}}, {stage}));
  EXPECT_EQ(c.flops, index_const(8 * 32 + 2 * 8));
  EXPECT_EQ(c.bytes_read, index_const(4 * (8 * 32 + 8)));
}

TEST(KernelCostTest, ASliceCountsWhatItTouchesAndScratchNothing) {
  // out[x0] = big[2 * x0] over 10 of big's 100 elements, through a kernel-local stash.
  auto big = f32("big", BufferKind::GraphInput, {index_const(100)});
  auto stash = f32("stash", BufferKind::KernelLocal, {index_const(10)});
  auto out = f32("out", BufferKind::GraphOutput, {index_const(10)});
  IndexExpr x0 = var("x0");
  PointwiseStage first{{}, {Store::make(stash, x0, load(big, 2 * x0))}};
  PointwiseStage second{{}, {Store::make(out, x0, load(stash, x0))}};
  KernelCost c = kernel_cost(*Kernel::make("k", Device::CPU, {{x0, index_const(10)}}, {first, second}));
  EXPECT_EQ(c.bytes_read, index_const(40));
  EXPECT_EQ(c.bytes_written, index_const(40));
  EXPECT_EQ(c.flops, index_const(0));
}

TEST(KernelCostTest, AStashReadBackIsNotRead) {
  // out[x0, r0] = exp(x[x0, r0]); sum over r0 of out[x0, r0]: the kernel's own values.
  auto x = f32("x", BufferKind::GraphInput, {index_const(4), index_const(16)});
  auto out = f32("out", BufferKind::GraphOutput, {index_const(4), index_const(16)});
  auto total = f32("total", BufferKind::GraphOutput, {index_const(4)});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  PointwiseStage stash{{{r0, index_const(16)}}, {Store::make(out, 16 * x0 + r0, unary(UnaryOp::Exp, load(x, 16 * x0 + r0)))}};
  auto sum = ReductionStage::make({{r0, index_const(16)}}, ReductionKind::Sum, load(out, 16 * x0 + r0), {"s"});
  PointwiseStage store{{}, {Store::make(total, x0, sum.result())}};
  KernelCost c = kernel_cost(*Kernel::make("k", Device::CPU, {{x0, index_const(4)}}, {stash, sum, store}));
  EXPECT_EQ(c.bytes_read, index_const(4 * 64));
  EXPECT_EQ(c.bytes_written, index_const(4 * 64 + 4 * 4));
  EXPECT_EQ(c.flops, index_const(2 * 64));
}

TEST(KernelCostTest, IntegerWorkAndWelfordCombines) {
  auto x = f32("x", BufferKind::GraphInput, {index_const(4), index_const(16)});
  auto mean = f32("mean", BufferKind::GraphOutput, {index_const(4)});
  auto ints = Buffer::make_contiguous("ints", DType::Int64, Device::CPU, BufferKind::GraphInput, {index_const(4)});
  auto isum = Buffer::make_contiguous("isum", DType::Int64, Device::CPU, BufferKind::GraphOutput, {index_const(4)});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto welford = ReductionStage::make({{r0, index_const(16)}}, ReductionKind::Welford, load(x, 16 * x0 + r0),
                                      {"w_mean", "w_m2", "w_weight"});
  PointwiseStage store{{},
                       {Store::make(mean, x0, welford.result(0)),
                        Store::make(isum, x0, binary(BinaryOp::Add, load(ints, x0), const_int(1)))}};
  KernelCost c = kernel_cost(*Kernel::make("k", Device::CPU, {{x0, index_const(4)}}, {welford, store}));
  EXPECT_EQ(c.flops, index_const(7 * 64));  // the integer add counts nothing
  EXPECT_EQ(c.bytes_read, index_const(4 * 64 + 8 * 4));
  EXPECT_EQ(c.bytes_written, index_const(4 * 4 + 8 * 4));
}

}  // namespace
}  // namespace cppi::ir
