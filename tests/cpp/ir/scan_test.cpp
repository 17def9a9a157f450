// Scans (ir::ScanNode, ir::ScanStage): what the factories refuse, the
// kernel a scan node runs as, and the interpreter's running values (each
// step rounded to the output's dtype from the accumulator, NaN carried on).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lowering/ir/interpreter.h"
#include "lowering/ir/printer.h"

namespace cppi::ir {
namespace {

BufferPtr buffer(const std::string& name, DType t, std::vector<IndexExpr> sizes,
                 BufferKind kind = BufferKind::Intermediate) {
  return Buffer::make_contiguous(name, t, Device::CPU, kind, std::move(sizes));
}

/// cumsum / cumprod over dim `dim` of a 2 x 3 input, accumulating in `acc`.
ScanNodePtr scan_2x3(ReductionKind kind, int dim, const BufferPtr& in, const BufferPtr& out, DType acc) {
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  std::vector<IndexExpr> coords = dim == 1 ? std::vector<IndexExpr>{x0, r0} : std::vector<IndexExpr>{r0, x0};
  IndexExpr others = dim == 1 ? index_const(2) : index_const(3);
  IndexExpr along = dim == 1 ? index_const(3) : index_const(2);
  return ScanNode::make("scan", {others}, along, kind, cast(load(in, in->layout.index(coords)), acc), out,
                        out->layout.index(coords), {"cumsum"});
}

TEST(Scan, FactoriesRefuseWhatNoBackendScans) {
  auto in = buffer("in", DType::Float32, {index_const(2), index_const(3)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {index_const(2), index_const(3)});
  EXPECT_THROW(scan_2x3(ReductionKind::Max, 1, in, out, DType::Float32), CompilerError);
  auto flags = buffer("flags", DType::Bool, {index_const(2), index_const(3)}, BufferKind::GraphInput);
  EXPECT_THROW(scan_2x3(ReductionKind::Sum, 1, flags, out, DType::Bool), CompilerError);
  // The body may only use x0 and r0.
  EXPECT_THROW(ScanNode::make("scan", {index_const(2)}, index_const(3), ReductionKind::Sum,
                              load(in, pointwise_var(1)), out, pointwise_var(0)),
               CompilerError);
  // A scan stage runs alone in its kernel.
  auto node = scan_2x3(ReductionKind::Sum, 1, in, out, DType::Float32);
  auto k = single_node_kernel(ComputeNode(node));
  ASSERT_NE(scan_of(*k), nullptr);
  PointwiseStage extra{{}, {Store::make(out, index_const(0), const_float(0))}};
  EXPECT_THROW(Kernel::make("k", Device::CPU, k->outer, {k->stages[0], extra}), CompilerError);
}

TEST(Scan, RunsAsOneStageWhoseStoresReadTheRunningValue) {
  auto in = buffer("in", DType::Float32, {index_const(2), index_const(3)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {index_const(2), index_const(3)});
  auto k = single_node_kernel(ComputeNode(scan_2x3(ReductionKind::Sum, 1, in, out, DType::Float64)));
  ASSERT_EQ(k->outer.size(), 1u);
  const ScanStage* scan = scan_of(*k);
  ASSERT_NE(scan, nullptr);
  EXPECT_EQ(scan->body.dtype(), DType::Float64);
  ASSERT_EQ(scan->stores.size(), 1u);
  EXPECT_EQ(scan->stores[0].value.dtype(), DType::Float32);  // rounded from the float64 accumulator
  const std::string text = to_string(*k);
  EXPECT_NE(text.find("scan sum for r0 in [0, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("= running sum("), std::string::npos) << text;
  ASSERT_EQ(reads(k->stages[0]).size(), 1u);
  EXPECT_EQ(writes(k->stages[0]).size(), 1u);
}

TEST(Scan, InterpreterKeepsARunningValuePerPoint) {
  auto in = buffer("in", DType::Float32, {index_const(2), index_const(3)}, BufferKind::GraphInput);
  auto out = buffer("out", DType::Float32, {index_const(2), index_const(3)});
  std::vector<float> iv{1, 2, 3, 4, NAN, 6};
  std::vector<float> ov(6, -99);
  auto args = InterpreterArgs().bind("in", iv).bind("out", ov);
  ASSERT_TRUE(interpret(ComputeNode(scan_2x3(ReductionKind::Sum, 1, in, out, DType::Float32)), args).ok());
  EXPECT_EQ((std::vector<float>{ov[0], ov[1], ov[2], ov[3]}), (std::vector<float>{1, 3, 6, 4}));
  EXPECT_TRUE(std::isnan(ov[4]) && std::isnan(ov[5]));  // NaN carries on along the row
  ASSERT_TRUE(interpret(ComputeNode(scan_2x3(ReductionKind::Prod, 0, in, out, DType::Float32)), args).ok());
  EXPECT_EQ(ov[0], 1);
  EXPECT_EQ(ov[3], 4);
  EXPECT_EQ(ov[2], 3);
  EXPECT_EQ(ov[5], 18);
  EXPECT_TRUE(std::isnan(ov[4]));

  // float32 input accumulated in float64: 1 + 2^-30 + 2^-30 ... rounds once per output.
  std::vector<float> tiny{1, 0x1p-25f, 0x1p-25f, 0, 0, 0};
  auto targs = InterpreterArgs().bind("in", tiny).bind("out", ov);
  ASSERT_TRUE(interpret(ComputeNode(scan_2x3(ReductionKind::Sum, 1, in, out, DType::Float64)), targs).ok());
  EXPECT_EQ(ov[2], static_cast<float>(1.0 + 0x1p-24));  // float accumulation would stay at 1
  ASSERT_TRUE(interpret(ComputeNode(scan_2x3(ReductionKind::Sum, 1, in, out, DType::Float32)), targs).ok());
  EXPECT_EQ(ov[2], 1.0f);
}

}  // namespace
}  // namespace cppi::ir
