// Cascaded float accumulation (CpuSchedule::cascade_block) and a row's
// several vector accumulators: the schedule, the printed blocks and merges,
// and sums long enough that naive float accumulation would lose terms.
// Built into cpu_codegen_test.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_codegen/cpu_kernels.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// out[x0] = reduce over r0 of in[x0] + 2 * (r0 % 2): every row the same
/// `cols` values (a stride-0 broadcast, so a tall reduction needs no memory),
/// alternating +0 / +2 so a Welford reduction has a variance.
KernelPtr tall_broadcast_kernel(ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr wobble = binary(BinaryOp::Mul, cast(IndexValue::make(mod(r0, 2)), DType::Float32), const_float(2, DType::Float32));
  Expr body = binary(BinaryOp::Add, load(in, x0), wobble);
  std::vector<std::string> names = {"red"};
  if (kind == ReductionKind::Welford) names = {"red_mean", "red_m2", "red_weight"};
  auto stage = ReductionStage::make({Loop{r0, rows}}, kind, body, names);
  PointwiseStage store;
  for (size_t i = 0; i < (kind == ReductionKind::Welford ? 2u : 1u); ++i) {
    store.stores.push_back(Store::make(output(cat("buf", i), DType::Float32, {cols}), x0, stage.result(i)));
  }
  return Kernel::make("tall_0", Device::CPU, {Loop{x0, cols}}, {stage, store}, {}, {"sum"});
}

/// The sum of every element of a [rows, cols] broadcast of a `cols` row.
KernelPtr broadcast_matrix_sum_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {cols});
  IndexExpr r0 = var("r0"), r1 = var("r1");
  auto stage = ReductionStage::make({Loop{r0, rows}, Loop{r1, cols}}, ReductionKind::Sum, load(in, r1), {"total"});
  PointwiseStage store{{}, {Store::make(output("buf0", DType::Float32, {1}), 0, stage.result())}};
  return Kernel::make("matrix_sum_0", Device::CPU, {}, {stage, store}, {}, {"sum"});
}

/// One serial thread: a single set of accumulators sees every term.
CpuTarget one_thread() {
  CpuTarget t = avx512_target(int64_t{1} << 40);
  t.num_threads = 1;
  return t;
}

std::vector<float> run_tall(const KernelPtr& k, std::vector<float> in, size_t outputs) {
  auto compiled = compile_cpu_kernels({k}, {});
  EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
  if (!compiled.ok()) return {};
  std::vector<float> out(in.size() * outputs, -1.0f);
  std::vector<void*> bufs = {in.data()};
  for (size_t i = 0; i < outputs; ++i) bufs.push_back(out.data() + i * in.size());
  compiled->kernels[0]->run(bufs.data(), nullptr, 0);
  return out;
}

TEST(CpuSchedule, LongOrSymbolicFloatSumsAndWelfordCascade) {
  auto block = [](const KernelPtr& k) { return schedule_for_cpu(k, avx512_target())->schedule.cpu.cascade_block; };
  EXPECT_EQ(block(full_reduction_kernel(ReductionKind::Sum, 4096)), 0);
  EXPECT_EQ(block(full_reduction_kernel(ReductionKind::Sum, 4097)), 4096);
  EXPECT_EQ(block(full_reduction_kernel(ReductionKind::Welford, 100000)), 4096);
  EXPECT_EQ(block(row_reduction_kernel(ReductionKind::Sum, 4, sym("s0"))), 4096);
  // Tiled column reductions (one term per row per lane) cascade every 64 rows.
  EXPECT_EQ(block(column_reduction_kernel(ReductionKind::Sum, sym("s0"), 64)), 64);
  EXPECT_EQ(block(column_reduction_kernel(ReductionKind::Sum, 65, 64)), 64);
  EXPECT_EQ(block(column_reduction_kernel(ReductionKind::Sum, 64, 64)), 0);
  EXPECT_EQ(block(row_reduction_kernel(ReductionKind::Sum, 512, 1000)), 0);  // short rows: code unchanged
  // Exact reductions never cascade.
  EXPECT_EQ(block(full_reduction_kernel(ReductionKind::Max, 100000)), 0);
  EXPECT_EQ(block(full_reduction_kernel(ReductionKind::ArgMax, 100000)), 0);
  EXPECT_EQ(block(row_reduction_kernel(ReductionKind::Sum, 4, 100000, DType::Int64)), 0);
  EXPECT_NE(explain_cpu_schedule(*full_reduction_kernel(ReductionKind::Sum, 1 << 20), avx512_target()).find("cascaded"),
            std::string::npos);
}

TEST(CpuPrinter, CascadedRowSumRunsInBlocksAndMergesIntoATotal) {
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 64, sym("s0")), avx512_target());
  auto m = print_one(k, {"s0"});
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "cascade_block=4096",
                                             "float red_total = 0.0f;",
                                             "int64_t red_terms = 0;",
                                             // blocks of 4096 vectors of 16
                                             "r0_cblk += 65536) {",
                                             "const int64_t r0_cblk_end = cppi_min_i<int64_t>(r0_cblk + 65536,",
                                             "red_vacc = red_vacc + tmp",
                                             "if (r0_vec_end < r0_end) {",
                                             "cppi_vlanes_below<cppi_i32x16>((r0_end - r0_vec_end))",
                                             "red_terms += r0_cblk_end - r0_cblk;",
                                             "if (red_terms >= 65536) {",
                                             "red_vacc = red_vacc + red_vacc_1;",
                                             "red_vacc = red_vacc + red_vacc_2;",
                                             "red_vacc_1 = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             "red_vacc_3 = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             "red_total = (red_total + cppi_vreduce_add(red_vacc));",
                                             "red_vacc = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             // Symbolic: three levels of totals, each into the next every 64 merges.
                                             "if (++red_merges1 >= 64) {",
                                             "red_total_2 = (red_total_2 + red_total);",
                                             "red_total = 0.0f;",
                                             "if (++red_merges2 >= 64) {",
                                             "red_total_3 = (red_total_3 + red_total_2);",
                                             "red_total_2 = 0.0f;",
                                             "const float red = (red_total_3 + (red_total_2 + (red_total + cppi_vreduce_add(red_vacc))));",
                                             "NOT:red_acc",
                                         }));
}

TEST(CpuPrinter, IndependentSumsOverOneRowFoldInOnePass) {
  auto k = schedule_for_cpu(two_pass_variance_kernel(64, 1000), avx512_target());
  const std::string text = kernel_text(print_one(k));
  EXPECT_TRUE(file_check(text, {
                                   "// stage 0: reduce sum over r0 -> total",
                                   "const float total = ",
                                   "// stage 1: reduce sum over r0 -> s1",
                                   "// stage 2: reduce sum over r0 -> s2",
                                   "// stages 1-2 fold in one pass over their loops",
                                   "cppi_f32x16 s1_vacc_3 = ",
                                   "cppi_f32x16 s2_vacc_3 = ",
                                   "for (int64_t r0_grp = 0; r0_grp < r0_grp_end; r0_grp += 64) {",
                                   "cppi_vload<cppi_f32x16>(&in_arg0[r0 + 1000*x0])",
                                   "s1_vacc = s1_vacc + tmp",
                                   "s2_vacc = s2_vacc + tmp",
                                   "const int64_t r0 = 992;",
                                   "s1_vacc = s1_vacc + cppi_vselect(",
                                   "s2_vacc = s2_vacc + cppi_vselect(",
                                   "const float s1 = cppi_vreduce_add(s1_vacc);",
                                   "const float s2 = cppi_vreduce_add(s2_vacc);",
                                   "// stage 3: store buf0 over r0",
                               }));
  // Three passes over the row (sum, both sums, store), each loading x once
  // per vector: 4 loads in a group of 4 vectors, 1 after the groups.
  const size_t group_loads = 5;
  size_t loads = 0;
  for (size_t at = text.find("cppi_vload<cppi_f32x16>(&in_arg0["); at != std::string::npos;
       at = text.find("cppi_vload<cppi_f32x16>(&in_arg0[", at + 1)) {
    ++loads;
  }
  EXPECT_EQ(loads, 2 * group_loads + 1) << text;
  for (int64_t cols : {1000, 37, 192, 16}) {
    EXPECT_EQ(run_and_compare(schedule_for_cpu(two_pass_variance_kernel(9, cols), avx512_target()), {}), "")
        << cols;
  }
}

TEST(CpuPrinter, ASumOfAMathFunctionKeepsOneAccumulator) {
  // Its exp takes longer per vector than the add chain it feeds.
  auto k = schedule_for_cpu(softmax_kernel(64, 1000), avx512_target());
  const std::string text = kernel_text(print_one(k));
  EXPECT_NE(text.find("amax_vacc_3"), std::string::npos);
  EXPECT_EQ(text.find("denom_vacc_1"), std::string::npos) << text;
}

TEST(CpuNumerics, CascadedSumsWithFourAccumulators) {
  RunOptions o;
  o.graph_symbols = {"s0"};
  o.symbols = {{"s0", 4096 * 16 * 2 + 16 * 7 + 5}};  // two whole cascade blocks, then a part
  o.rtol = o.atol = 1e-4;
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 3, sym("s0")), avx512_target());
  ASSERT_EQ(k->schedule.cpu.cascade_block, 4096);
  ASSERT_EQ(k->schedule.cpu.vector_accumulators, 4);
  EXPECT_EQ(run_and_compare(k, o), "");
}

TEST(CpuPrinter, CascadedTiledColumnsKeepATileOfTotals) {
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, sym("s0"), 512), avx512_target());
  ASSERT_EQ(k->schedule.cpu.column_block, 64);
  auto m = print_one(k, {"s0"});
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "cppi_f32x16 red_tile[64];",
                                             "cppi_f32x16 red_tile_total[64];",
                                             "int64_t red_tile_terms = 0;",
                                             "red_tile_terms += (r0_blk_end - r0_blk);",
                                             "if (red_tile_terms >= 64) {",
                                             "red_tile_total[x0_i] = (red_tile_total[x0_i] + "
                                             "red_tile[x0_i]);",
                                             "if (++red_tile_merges1 >= 64) {",
                                             "red_tile_total2[x0_i] = (red_tile_total2[x0_i] + red_tile_total[x0_i]);",
                                             "red_tile[x0_i] = (red_tile_total[x0_i] + "
                                             "red_tile[x0_i]);",
                                             "red_tile[x0_i] = (red_tile_total2[x0_i] + red_tile[x0_i]);",
                                         }));
}

// 2^22 rows of 0.1 and 2.1 in turn: one level of totals added 65536 block
// sums into one float in a row, each rounding at the total's size (6.6e-4
// off); levels of at most 64 merges keep every addend near its total: 1.2e-6,
// the 64-row block sums' own rounding (eager: 5.9e-7).
TEST(CpuNumerics, TallColumnSumsAreAccurateWithLevelsOfTotals) {
  constexpr int64_t kRows = int64_t{1} << 22;
  const double want = kRows / 2 * (double{0.1f} + double{2.1f});
  for (int64_t cols : {16, 32}) {  // one vector (lane mode), two (tiled columns)
    auto sum = schedule_for_cpu(tall_broadcast_kernel(ReductionKind::Sum, kRows, cols), one_thread());
    ASSERT_GT(sum->schedule.cpu.cascade_block, 0);
    const std::string text = kernel_text(print_one(sum));
    EXPECT_NE(text.find("_merges2 >= 64"), std::string::npos) << text;  // three levels
    auto out = run_tall(sum, std::vector<float>(cols, 0.1f), 1);
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_LT(std::abs(out[c] - want) / want, 2e-6) << "column " << c << ": " << out[c] << " for " << want;
    }
  }
}

// 2^25 terms per accumulator: a plain float accumulator stops at 2^24 (adding
// 1 to 2^24 rounds back to 2^24). Cascaded, every block sum and total is
// exact, so the results are exact.
TEST(CpuNumerics, TallColumnSumsAndWelfordAreExactPastTwoToThe24) {
  constexpr int64_t kRows = int64_t{1} << 25;
  for (int64_t cols : {16, 32}) {  // one vector (lane mode), two (tiled columns)
    auto sum = schedule_for_cpu(tall_broadcast_kernel(ReductionKind::Sum, kRows, cols), one_thread());
    EXPECT_EQ(sum->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
    EXPECT_EQ(sum->schedule.cpu.column_block > 0, cols == 32);
    auto out = run_tall(sum, std::vector<float>(cols, 1.0f), 1);
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(out[c], 2.0f * kRows) << "column " << c;  // 1 + {0, 2} on average
    auto welford = schedule_for_cpu(tall_broadcast_kernel(ReductionKind::Welford, kRows, cols), one_thread());
    auto mm = run_tall(welford, std::vector<float>(cols, 1.0f), 2);
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(mm[c], 2.0f) << "mean of column " << c;
      ASSERT_EQ(mm[cols + c], static_cast<float>(kRows)) << "m2 of column " << c;
    }
  }
}

TEST(CpuNumerics, HorizontalSumOfTwoToThe29OnesIsExact) {
  auto k = schedule_for_cpu(broadcast_matrix_sum_kernel(int64_t{1} << 19, 1024), one_thread());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOfEachStage);
  auto compiled = compile_cpu_kernels({k}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  std::vector<float> in(1024, 1.0f);
  float out = -1;
  void* bufs[] = {in.data(), &out};
  compiled->kernels[0]->run(bufs, nullptr, 0);
  EXPECT_EQ(out, static_cast<float>(int64_t{1} << 29));
}

}  // namespace
}  // namespace cppi::cpu::test
