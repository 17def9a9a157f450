// merge_duplicate_reductions: a column normalisation's repeated sum(x) is
// reduced once (the rewritten stages, numerics against the interpreter), and
// every condition that keeps a kernel unchanged.
#include <gtest/gtest.h>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/merge_duplicate_reductions.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

struct Variant {
  IndexExpr second_rows = 0;          // extent of the repeated sum's loop (0: the same rows)
  ReductionKind second_kind = ReductionKind::Sum;
  bool overwrite_between = false;     // a stage between the sums writes the input
};

/// (x - mean) over dim 0 of a [rows, cols] input, as fusion builds
/// (x - x.mean(0)) / x.std(0): sum(x) for the mean, sum(x) again (with its
/// own loop variable) for the variance, then sum((x - total / rows)^2).
KernelPtr column_norm_stats(int64_t rows, int64_t cols, const Variant& v = {}) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), r1 = var("r1"), r2 = var("r2");
  const IndexExpr rows2 = v.second_rows.is_constant(0) ? IndexExpr(rows) : v.second_rows;
  auto mean = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum, load(in, r0 * cols + x0), {"mean"});
  auto total = ReductionStage::make({Loop{r1, rows2}}, v.second_kind, load(in, r1 * cols + x0), {"total"});
  Expr d = binary(BinaryOp::Sub, load(in, r2 * cols + x0),
                  binary(BinaryOp::TrueDiv, total.result(), const_float(static_cast<double>(rows), DType::Float32)));
  auto m2 = ReductionStage::make({Loop{r2, rows}}, ReductionKind::Sum, binary(BinaryOp::Mul, d, d), {"m2"});
  std::vector<Stage> stages = {mean};
  if (v.overwrite_between) {
    stages.push_back(PointwiseStage{{}, {Store::make(in, x0, const_float(1, DType::Float32))}});
  }
  stages.push_back(total);
  stages.push_back(m2);
  stages.push_back(PointwiseStage{{},
                                  {Store::make(output("buf0", DType::Float32, {cols}), x0, mean.result()),
                                   Store::make(output("buf1", DType::Float32, {cols}), x0, m2.result())}});
  return Kernel::make("col_norm_0", Device::CPU, {Loop{x0, cols}}, stages, {}, {"mean", "var"});
}

size_t reductions(const Kernel& k) {
  size_t n = 0;
  for (const auto& s : k.stages) n += std::holds_alternative<ReductionStage>(s);
  return n;
}

TEST(MergeDuplicateReductions, TheRepeatedSumIsReducedOnce) {
  auto k = column_norm_stats(45, 40);
  auto merged = merge_duplicate_reductions(k);
  ASSERT_EQ(reductions(*merged), 2u) << to_string(*merged);
  // The second pass reads the kept sum under its name.
  const auto& m2 = std::get<ReductionStage>(merged->stages[1]);
  EXPECT_EQ(m2.results[0], "m2");
  EXPECT_NE(to_string(*merged).find("truediv(mean"), std::string::npos) << to_string(*merged);
  EXPECT_EQ(to_string(*merged).find("total"), std::string::npos) << to_string(*merged);
  // Same results as the kernel with both sums (interpreted), tiled or not,
  // serial or parallel.
  RunOptions o;
  o.rtol = o.atol = 1e-4;
  o.reference = k;
  for (int64_t work : {int64_t{512}, int64_t{1} << 40}) {
    CpuTarget t;
    t.vector_bytes = 64;
    t.num_threads = 4;
    t.min_parallel_work = work;
    EXPECT_EQ(run_and_compare(schedule_for_cpu(merged, t), o), "");
  }
}

TEST(MergeDuplicateReductions, DifferentReductionsOrDataStay) {
  // Another extent, another kind, or the input overwritten between the sums.
  Variant other_rows;
  other_rows.second_rows = 44;
  for (const Variant& v : {other_rows, Variant{0, ReductionKind::Max, false}, Variant{0, ReductionKind::Sum, true}}) {
    auto k = column_norm_stats(45, 40, v);
    EXPECT_TRUE(merge_duplicate_reductions(k).get() == k.get()) << to_string(*k);
  }
}

}  // namespace
}  // namespace cppi::cpu::test
