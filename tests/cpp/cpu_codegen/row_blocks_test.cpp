// Rows in lanes (CpuSchedule::row_blocks): rows shorter than a host vector
// are read as R vectors of W rows each, turned in registers, so that lane l
// of vector r holds element r of row x0 + l. Which kernels take it, the
// printed loads and stores, and numerics against the interpreter for every
// reduction kind, dtype, row length and tail.
#include <gtest/gtest.h>

#include <string>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// Softmax over rows of `cols` written over its own input: stage 0 reads
/// the rows the last stage stores.
KernelPtr in_place_softmax(int64_t rows, int64_t cols) {
  auto buf = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(buf, x0 * cols + r0);
  auto amax = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Max, x, {"amax"});
  Expr e = unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result()));
  auto denom = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, e, {"denom"});
  PointwiseStage norm{{Loop{r0, cols}}, {Store::make(buf, x0 * cols + r0, binary(BinaryOp::TrueDiv, e, denom.result()))}};
  return Kernel::make("softmax_inplace_0", Device::CPU, {Loop{x0, rows}}, {amax, denom, norm});
}

/// sum over r0 of where(keep[x0, r0], a[x0, r0] * b[x0, r0], 0): two float
/// rows a row block moves whole and a bool row it does not.
KernelPtr masked_product_sum(int64_t rows, int64_t cols) {
  auto a = input("arg0", DType::Float32, {rows, cols});
  auto b = input("arg1", DType::Float32, {rows, cols});
  auto keep = input("arg2", DType::Bool, {rows, cols});
  auto out = output("buf0", DType::Float32, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  const IndexExpr at = x0 * cols + r0;
  Expr body = where(load(keep, at), binary(BinaryOp::Mul, load(a, at), load(b, at)), const_float(0, DType::Float32));
  auto red = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, body, {"red"});
  PointwiseStage store{{}, {Store::make(out, x0, red.result())}};
  return Kernel::make("masked_product_sum_0", Device::CPU, {Loop{x0, rows}}, {red, store});
}

TEST(RowBlocks, RowsShorterThanAVectorGoInLanes) {
  for (int64_t cols = 2; cols < 16; ++cols) {
    const CpuSchedule s = sched(softmax_kernel(512, cols));
    EXPECT_TRUE(s.row_blocks) << cols << " " << explain_cpu_schedule(*softmax_kernel(512, cols), avx512_target());
    EXPECT_EQ(s.vectorized, VectorizedLoop::InnermostOuter) << cols;
    EXPECT_EQ(s.vector_width, 16) << cols;
  }
  EXPECT_NE(explain_cpu_schedule(*softmax_kernel(512, 7), avx512_target()).find("rows in lanes"), std::string::npos);
  for (auto kind : {ReductionKind::Sum, ReductionKind::Prod, ReductionKind::Max, ReductionKind::Min,
                    ReductionKind::ArgMax, ReductionKind::ArgMin, ReductionKind::Welford}) {
    EXPECT_TRUE(sched(row_reduction_kernel(kind, 512, 7)).row_blocks) << to_string(kind);
  }
  EXPECT_TRUE(sched(two_pass_variance_kernel(512, 12)).row_blocks);
  // Bool rows are gathered beside the float rows in lanes.
  EXPECT_TRUE(sched(masked_product_sum(512, 7)).row_blocks);
  // Eight-byte lanes: 8 of them, so rows of 2 to 7.
  EXPECT_TRUE(sched(row_reduction_kernel(ReductionKind::Sum, 512, 7, DType::Float64)).row_blocks);
  EXPECT_EQ(sched(row_reduction_kernel(ReductionKind::Sum, 512, 7, DType::Float64)).vector_width, 8);
  EXPECT_FALSE(sched(row_reduction_kernel(ReductionKind::Sum, 512, 9, DType::Float64)).row_blocks);
  EXPECT_TRUE(sched(row_reduction_kernel(ReductionKind::Sum, 512, 5, DType::Int64)).row_blocks);
  // AVX2: rows of fewer than 8 floats.
  EXPECT_TRUE(sched(softmax_kernel(512, 7), avx2_target()).row_blocks);
  EXPECT_EQ(sched(softmax_kernel(512, 7), avx2_target()).vector_width, 8);
  EXPECT_FALSE(sched(softmax_kernel(512, 8), avx2_target()).row_blocks);
  // A symbolic row count ends in one masked vector of rows.
  EXPECT_TRUE(sched(softmax_kernel(sym("s0"), 7)).row_blocks);
  EXPECT_EQ(sched(softmax_kernel(sym("s0"), 7)).tail, TailKind::Masked);
}

TEST(RowBlocks, OtherRowsKeepTheirStageLoops) {
  // A full vector per row, or more.
  for (int64_t cols : {16, 17, 33}) {
    const CpuSchedule s = sched(softmax_kernel(512, cols));
    EXPECT_FALSE(s.row_blocks) << cols;
    EXPECT_EQ(s.vectorized, VectorizedLoop::InnermostOfEachStage) << cols;
  }
  // A symbolic row length.
  EXPECT_FALSE(sched(softmax_kernel(512, sym("s0"))).row_blocks);
  // Half floats have no row-block loads.
  EXPECT_FALSE(sched(row_reduction_kernel(ReductionKind::Sum, 512, 7, DType::BFloat16)).row_blocks);
  // Stage 0 would read rows from memory that a row block holds unstored.
  const CpuSchedule in_place = sched(in_place_softmax(512, 12));
  EXPECT_FALSE(in_place.row_blocks);
  EXPECT_EQ(in_place.vectorized, VectorizedLoop::InnermostOfEachStage);
  EXPECT_EQ(in_place.tail, TailKind::Masked);
}

TEST(RowBlocks, PrintsOneTurnInAndOneOutPerVectorOfRows) {
  // Softmax with exp(x - max) stashed: the input turned once, the stash
  // kept in registers for the sum and the normalisation, stored once.
  const auto k = schedule_for_cpu(stash_reduction_bodies(softmax_kernel(512, 7)), avx512_target());
  ASSERT_TRUE(k->schedule.cpu.row_blocks);
  const std::string text = kernel_text(print_one(k));
  EXPECT_TRUE(file_check(text, {"row_blocks=yes", "cppi_f32x16 rows0_in_arg0[7];",
                                "cppi_vload_rows<cppi_f32x16, 7>(&in_arg0[7*x0], rows0_in_arg0);",
                                "= rows0_in_arg0[r0];", "cppi_f32x16 rows1_out_buf0[7];", "rows1_out_buf0[r0] = ",
                                "= rows1_out_buf0[r0];", "rows1_out_buf0[r0] = ",
                                "cppi_vstore_rows<cppi_f32x16, 7>(&out_buf0[7*x0], rows1_out_buf0);",
                                "NOT:cppi_vreduce_add", "NOT:cppi_vload_partial", "NOT:cppi_vload<"}))
      << text;
  // The masked last vector of a symbolic row count.
  const std::string masked = kernel_text(print_one(schedule_for_cpu(softmax_kernel(sym("s0"), 7), avx512_target()), {"s0"}));
  EXPECT_TRUE(file_check(masked, {"cppi_vload_rows<cppi_f32x16, 7>(", "cppi_vstore_rows<cppi_f32x16, 7>(",
                                  "cppi_vload_rows_partial<cppi_f32x16, 7>(", "cppi_vstore_rows_partial<cppi_f32x16, 7>("}))
      << masked;
}

TEST(RowBlocks, MatchTheInterpreter) {
  // Rows of 15 end in one masked vector of rows, 37 in two whole ones and a
  // tail.
  for (int64_t cols : {2, 3, 7, 12, 15}) {
    for (int64_t rows : {15, 37}) expect_matches(stash_reduction_bodies(softmax_kernel(rows, cols)), true);
  }
  expect_matches(softmax_kernel(37, 5), true);
  expect_matches(two_pass_variance_kernel(37, 9), false);
  expect_matches(softmax_statistics_kernel(37, 6), true);
  expect_matches(masked_tail_kernel(ReductionKind::Sum, 37, 7), true);
  expect_matches(masked_product_sum(37, 7), true);
  for (auto kind : {ReductionKind::Sum, ReductionKind::Prod, ReductionKind::Max, ReductionKind::Min,
                    ReductionKind::ArgMax, ReductionKind::ArgMin, ReductionKind::Welford, ReductionKind::Any,
                    ReductionKind::All}) {
    expect_matches(row_reduction_kernel(kind, 37, 13), true);
  }
  for (auto kind : {ReductionKind::Sum, ReductionKind::ArgMax, ReductionKind::Welford}) {
    expect_matches(row_reduction_kernel(kind, 37, 3, DType::Float64), true);
  }
  for (DType t : {DType::Int64, DType::Int32}) expect_matches(row_reduction_kernel(ReductionKind::Max, 37, 5, t), false);
  // A symbolic row count: whole vectors of rows, then a masked one.
  for (int64_t rows : {5, 100}) {
    RunOptions o;
    o.graph_symbols = {"s0"};
    o.symbols = {{"s0", rows}};
    o.specials = true;
    for (const auto& k : {softmax_kernel(sym("s0"), 7), stash_reduction_bodies(softmax_kernel(sym("s0"), 7)),
                          row_reduction_kernel(ReductionKind::Welford, sym("s0"), 6)}) {
      EXPECT_EQ(run_and_compare(schedule_for_cpu(k, avx512_target()), o), "") << k->name << " " << rows;
      EXPECT_EQ(run_and_compare(schedule_for_cpu(k, avx2_target()), o), "") << k->name << " " << rows;
    }
  }
  RunOptions gxx;
  gxx.compiler = CompileOptions::Compiler::Gxx;
  gxx.specials = true;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(stash_reduction_bodies(softmax_kernel(37, 7)), avx512_target()), gxx), "");
}

}  // namespace
}  // namespace cppi::cpu::test
