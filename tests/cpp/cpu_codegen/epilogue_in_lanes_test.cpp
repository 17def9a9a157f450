// The epilogue of W rows in lanes (CpuSchedule::epilogue_in_lanes): a
// kernel of row reductions whose last, loop-less stages call a math function
// (logsumexp's log of the row sum) runs those stages once per block of W
// rows, a row per lane; where the rows are short, the reductions before it
// combine the block's rows in one tree each (CpuSchedule::reduction_trees).
// Which kernels take them, the printed blocks, and numerics against the
// interpreter for whole and partial blocks, serial and parallel loops, and
// NaN and infinities.
#include <gtest/gtest.h>

#include <string>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// logsumexp over the last dim of [batch, rows, cols] (no batch loop when
/// batch is 0): the row's max, the sum of exp(x - max), then
/// out[row] = log(sum) + max + bias[row] and top[row] = max in the epilogue.
/// With `in_place`, the epilogue stores into the input's first column.
KernelPtr logsumexp_kernel(int64_t batch, const IndexExpr& rows, int64_t cols, DType out_dtype = DType::Float32,
                           bool in_place = false) {
  std::vector<IndexExpr> sizes = {rows, cols};
  if (batch > 0) sizes.insert(sizes.begin(), batch);
  auto in = in_place ? output("buf2", DType::Float32, sizes) : input("arg0", DType::Float32, sizes);
  auto bias = input("arg1", DType::Float32, {rows});
  std::vector<IndexExpr> row_sizes = {rows};
  if (batch > 0) row_sizes.insert(row_sizes.begin(), batch);
  auto out = output("buf0", out_dtype, row_sizes);
  auto top = output("buf1", DType::Float32, row_sizes);
  IndexExpr x0 = var("x0"), x1 = var("x1"), r0 = var("r0");
  const IndexExpr row = batch > 0 ? x0 * rows + x1 : x0;
  const IndexExpr row_var = batch > 0 ? x1 : x0;
  Expr x = load(in, row * cols + r0);
  auto amax = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Max, x, {"amax"});
  auto denom = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum,
                                    unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result())), {"denom"});
  Expr lse = binary(BinaryOp::Add, binary(BinaryOp::Add, unary(UnaryOp::Log, denom.result()), amax.result()),
                    load(bias, row_var));
  if (out_dtype != DType::Float32) lse = cast(lse, out_dtype);
  PointwiseStage store{{}, {Store::make(out, row, lse), Store::make(in_place ? in : top, in_place ? row * cols : row,
                                                                     amax.result())}};
  std::vector<Loop> outer = {Loop{x0, batch > 0 ? IndexExpr(batch) : rows}};
  if (batch > 0) outer.push_back(Loop{x1, rows});
  return Kernel::make("logsumexp_0", Device::CPU, outer, {amax, denom, store}, {}, {"amax", "exp", "sum", "log"});
}

TEST(EpilogueInLanes, RowsOfAVectorOrMoreWithMathAfterTheirReductions) {
  for (int64_t cols : {16, 17, 33, 100, 300}) {
    const auto k = logsumexp_kernel(0, 512, cols);
    const CpuSchedule s = sched(k);
    EXPECT_TRUE(s.epilogue_in_lanes) << cols << " " << explain_cpu_schedule(*k, avx512_target());
    EXPECT_EQ(s.vectorized, VectorizedLoop::InnermostOfEachStage) << cols;
    // A block of 16 rows of 300 floats (19 KiB) would not stay in L1.
    EXPECT_EQ(s.reduction_trees, cols <= 256) << cols;
  }
  EXPECT_NE(explain_cpu_schedule(*logsumexp_kernel(0, 512, 33), avx512_target()).find("epilogue of every 16 x0 in lanes"),
            std::string::npos);
  EXPECT_TRUE(sched(logsumexp_kernel(0, 512, 33), avx2_target()).epilogue_in_lanes);
  // Under a batch loop, where the rows' loop is a loop of its own (not
  // collapsed with the batch loop into one parallel loop).
  EXPECT_TRUE(sched(logsumexp_kernel(4, 37, 33), avx512_target(1 << 30)).epilogue_in_lanes);
  EXPECT_EQ(sched(logsumexp_kernel(4, 37, 33)).parallel_loops, 2);
  EXPECT_FALSE(sched(logsumexp_kernel(4, 37, 33)).epilogue_in_lanes);
  EXPECT_TRUE(sched(logsumexp_kernel(0, sym("s0"), 33)).epilogue_in_lanes);
  // Serial (little work) as well as parallel.
  EXPECT_TRUE(sched(logsumexp_kernel(0, 20, 16), avx512_target(1 << 30)).epilogue_in_lanes);
}

TEST(EpilogueInLanes, ShortRowsReduceInTreesWithoutMathAfterThem) {
  // Stores only after the reductions: the trees are the gain.
  const auto stats = sched(softmax_statistics_kernel(512, 33));
  EXPECT_TRUE(stats.epilogue_in_lanes && stats.reduction_trees);
  EXPECT_NE(explain_cpu_schedule(*softmax_statistics_kernel(512, 33), avx512_target()).find("in one tree each"),
            std::string::npos);
  EXPECT_FALSE(sched(softmax_statistics_kernel(512, 300)).epilogue_in_lanes);
  // A row's state must be its vector: rows of whole vectors, or a masked
  // last vector (on AVX2 only where the stage calls a math function).
  EXPECT_TRUE(sched(softmax_statistics_kernel(512, 32), avx2_target()).reduction_trees);
  const auto avx2 = sched(softmax_statistics_kernel(512, 33), avx2_target());
  EXPECT_EQ(avx2.reduction_trees, avx2.tail == TailKind::Masked);
  // Rows of 16 end without a tail on AVX-512 too.
  EXPECT_TRUE(sched(softmax_statistics_kernel(512, 16)).reduction_trees);
}

TEST(EpilogueInLanes, OtherKernelsKeepAStorePerRow) {
  // Rows shorter than a vector go in lanes whole.
  EXPECT_FALSE(sched(logsumexp_kernel(0, 512, 7)).epilogue_in_lanes);
  EXPECT_TRUE(sched(logsumexp_kernel(0, 512, 7)).row_blocks);
  // Fewer rows than a vector.
  EXPECT_FALSE(sched(logsumexp_kernel(0, 9, 33)).epilogue_in_lanes);
  // An epilogue that writes what the stages before it read, for the rows
  // after its own.
  EXPECT_FALSE(sched(logsumexp_kernel(0, 512, 33, DType::Float32, true)).epilogue_in_lanes);
  // A half-float value, which has no vector of the kernel's width.
  EXPECT_FALSE(sched(logsumexp_kernel(0, 512, 33, DType::BFloat16)).epilogue_in_lanes);
}

TEST(EpilogueInLanes, PrintsTheRowsThenOneVectorOfThem) {
  // Rows of 300: each row reduces across its lanes, its results kept in
  // arrays for the epilogue.
  const auto k = schedule_for_cpu(logsumexp_kernel(0, 512, 300), avx512_target());
  ASSERT_TRUE(k->schedule.cpu.epilogue_in_lanes);
  ASSERT_FALSE(k->schedule.cpu.reduction_trees);
  const std::string text = kernel_text(print_one(k));
  EXPECT_TRUE(file_check(text, {"epilogue_in_lanes=yes", "for (int64_t x0_block = begin; x0_block < end; x0_block += 16)",
                                "const int64_t x0_rows = cppi_min_i<int64_t>(16, end - x0_block);",
                                "float amax_rows[16];", "float denom_rows[16];",
                                "for (int64_t x0 = x0_block; x0 < x0_block + x0_rows; ++x0)", "cppi_vreduce_max(",
                                "amax_rows[x0 - x0_block] = amax;", "denom_rows[x0 - x0_block] = denom;",
                                "if (x0_rows == 16)", "cppi_vload<cppi_f32x16>(denom_rows)", "cppi_log(",
                                "cppi_vstore(&out_buf0[x0], ", "cppi_vstore(&out_buf1[x0], ", "else",
                                "cppi_vload_partial<cppi_f32x16>(denom_rows, x0_rows)",
                                "cppi_vstore_partial(&out_buf0[x0], ", "NOT:out_buf0[x0] =", "NOT:cppi_vtree"}))
      << text;
  // Serial, and under a batch loop: the rows' loop from 0 to its extent.
  const std::string serial = kernel_text(print_one(schedule_for_cpu(logsumexp_kernel(0, 20, 16), avx512_target(1 << 30))));
  EXPECT_TRUE(file_check(serial, {"for (int64_t x0_block = 0; x0_block < 20; x0_block += 16)"})) << serial;
  const std::string batched =
      kernel_text(print_one(schedule_for_cpu(logsumexp_kernel(4, 37, 33), avx512_target(1 << 30))));
  EXPECT_TRUE(file_check(batched, {"for (int64_t x1_block = 0; x1_block < 37; x1_block += 16)",
                                   "cppi_vstore(&out_buf0[37*x0 + x1], "}))
      << batched;
}

TEST(EpilogueInLanes, PrintsATreePerReductionOfTheBlock) {
  // Rows of 33: the max of every row of the block, one tree; then the sum
  // of exp(x - max), each row reading its max from the block's array.
  const auto k = schedule_for_cpu(logsumexp_kernel(0, 512, 33), avx512_target());
  ASSERT_TRUE(k->schedule.cpu.reduction_trees);
  const std::string text = kernel_text(print_one(k));
  EXPECT_TRUE(file_check(text, {"reduction_trees=yes", "float amax_rows[16];", "float denom_rows[16];",
                                "cppi_f32x16 amax_vaccs[16];", "for (int64_t x0 = x0_block; x0 < x0_block + x0_rows; ++x0)",
                                "amax_vaccs[x0 - x0_block] = amax_vacc;",
                                "for (int64_t x0_pad = x0_rows; x0_pad < 16; ++x0_pad) amax_vaccs[x0_pad] = ",
                                "cppi_vstore(amax_rows, cppi_vtree_max(amax_vaccs));", "cppi_f32x16 denom_vaccs[16];",
                                "const float amax = amax_rows[x0 - x0_block];", "cppi_exp(",
                                "denom_vaccs[x0 - x0_block] = denom_vacc;",
                                "cppi_vstore(denom_rows, cppi_vtree_add(denom_vaccs));", "if (x0_rows == 16)",
                                "cppi_log(", "NOT:cppi_vreduce_max(", "NOT:cppi_vreduce_add("}))
      << text;
}

TEST(EpilogueInLanes, MatchesTheInterpreter) {
  // 37 rows: two whole blocks of 16 and a partial one; 48: whole blocks
  // only. Rows of 16 and 33 reduce in trees, of 300 a row at a time.
  for (int64_t rows : {16, 37, 48}) {
    for (int64_t cols : {16, 33, 300}) expect_matches(logsumexp_kernel(0, rows, cols), true);
    expect_matches(softmax_statistics_kernel(rows, 33), true);
  }
  expect_matches(logsumexp_kernel(3, 21, 17), true);
  // A symbolic row count: fewer rows than a block, then several blocks.
  for (int64_t rows : {5, 29}) {
    RunOptions symbolic;
    symbolic.graph_symbols = {"s0"};
    symbolic.symbols = {{"s0", rows}};
    expect_matches(logsumexp_kernel(0, sym("s0"), 20), true, symbolic);
  }
  // AVX2's 8 lanes, as this machine may run them: a row at a time (rows of
  // 19), and in trees (rows of 32).
  RunOptions o;
  o.specials = true;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(logsumexp_kernel(0, 37, 19), avx2_target()), o), "");
  const auto avx2_trees = schedule_for_cpu(softmax_statistics_kernel(37, 32), avx2_target());
  ASSERT_TRUE(avx2_trees->schedule.cpu.reduction_trees);
  EXPECT_EQ(run_and_compare(avx2_trees, o), "");
  // g++ builds the trees too.
  RunOptions gxx = o;
  gxx.compiler = CompileOptions::Compiler::Gxx;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(logsumexp_kernel(0, 37, 33), avx512_target()), gxx), "");
}

}  // namespace
}  // namespace cppi::cpu::test
