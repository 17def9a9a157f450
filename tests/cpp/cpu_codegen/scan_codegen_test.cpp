// Scan kernels on the CPU: a scan along the rows' contiguous dim runs one
// serial loop per row, the rows split across threads; a scan down columns
// keeps one running value per vector lane. Compiled results match the
// interpreter (float32 accumulated in float64 as eager's CPU kernel, int64,
// bfloat16 through float32, NaN and infinities), parallel and serial.
#include <gtest/gtest.h>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// A running `kind` over dim `dim` of a [d0, d1, d2] input (any dim),
/// accumulating in `acc`, stored as `out_t`.
KernelPtr scan_kernel(ReductionKind kind, int dim, std::vector<int64_t> sizes, DType in_t, DType acc, DType out_t) {
  std::vector<IndexExpr> extents;
  for (int64_t s : sizes) extents.push_back(index_const(s));
  auto in = input("arg0", in_t, extents);
  auto out = output("buf0", out_t, extents);
  std::vector<IndexExpr> coords, ranges;
  for (size_t d = 0, k = 0; d < sizes.size(); ++d) {
    if (static_cast<int>(d) == dim) {
      coords.push_back(reduction_var(0));
    } else {
      coords.push_back(pointwise_var(static_cast<int>(k++)));
      ranges.push_back(extents[d]);
    }
  }
  auto node = ScanNode::make("cumsum_0", ranges, extents[dim], kind, cast(load(in, in->layout.index(coords)), acc),
                             out, out->layout.index(coords), {"cumsum"});
  return single_node_kernel(ComputeNode(node));
}

TEST(ScanCodegen, AlongRowsIsOneSerialLoopPerRowRowsInParallel) {
  auto k = scan_kernel(ReductionKind::Sum, 1, {64, 300}, DType::Float32, DType::Float64, DType::Float32);
  auto scheduled = schedule_for_cpu(k, avx512_target());
  EXPECT_EQ(scheduled->schedule.cpu.vectorized, VectorizedLoop::None);
  EXPECT_EQ(scheduled->schedule.cpu.parallel_loops, 1);
  const std::string src = kernel_text(print_one(scheduled));
  EXPECT_TRUE(file_check(src, {"cppi_parallel_for", "double cumsum_0_running = 0.0;", "for (int64_t r0 = 0; r0 < 300",
                               "cumsum_0_running = (cumsum_0_running + ", "(float)cumsum_0_running"}));
  expect_matches(k, /*specials=*/true);
}

TEST(ScanCodegen, DownColumnsKeepsARunningVectorPerLane) {
  // 53 columns: six vectors of 8 float64 lanes and a scalar tail.
  auto k = scan_kernel(ReductionKind::Sum, 0, {200, 53}, DType::Float32, DType::Float64, DType::Float32);
  auto scheduled = schedule_for_cpu(k, avx512_target());
  EXPECT_EQ(scheduled->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(scheduled->schedule.cpu.vector_width, 8);
  const std::string src = kernel_text(print_one(scheduled));
  EXPECT_TRUE(file_check(src, {"cppi_f64x8 cumsum_0_running = cppi_vsplat<cppi_f64x8>(0.0);",
                               "cumsum_0_running = cumsum_0_running + ", "cppi_vstore(&out_buf0[",
                               "double cumsum_0_running = 0.0;"}));
  expect_matches(k, /*specials=*/true);
}

TEST(ScanCodegen, MiddleDimScansMatchTheInterpreter) {
  for (ReductionKind kind : {ReductionKind::Sum, ReductionKind::Prod}) {
    SCOPED_TRACE(to_string(kind));
    // Products of a few hundred terms under/overflow: inf, 0 and NaN must come out as eager's.
    expect_matches(scan_kernel(kind, 1, {6, 40, 37}, DType::Float32, DType::Float64, DType::Float32), true);
    expect_matches(scan_kernel(kind, 1, {6, 40, 37}, DType::Float64, DType::Float64, DType::Float64), true);
  }
}

TEST(ScanCodegen, IntegersAndReducedFloats) {
  RunOptions ints;
  ints.int_range = 3;  // a cumprod of 40 terms in [-3, 3] wraps in int64 as eager's does
  for (ReductionKind kind : {ReductionKind::Sum, ReductionKind::Prod}) {
    SCOPED_TRACE(to_string(kind));
    expect_matches(scan_kernel(kind, 0, {40, 70}, DType::Int32, DType::Int64, DType::Int64), false, ints);
    expect_matches(scan_kernel(kind, 1, {40, 70}, DType::Int64, DType::Int64, DType::Int64), false, ints);
  }
  RunOptions reduced;
  reduced.rtol = 1e-2;  // each output rounds once to bfloat16, the same in both
  expect_matches(scan_kernel(ReductionKind::Sum, 0, {40, 70}, DType::BFloat16, DType::Float32, DType::BFloat16),
                 true, reduced);
  expect_matches(scan_kernel(ReductionKind::Sum, 1, {40, 70}, DType::Float16, DType::Float32, DType::Float16), true,
                 reduced);
}

}  // namespace
}  // namespace cppi::cpu::test
