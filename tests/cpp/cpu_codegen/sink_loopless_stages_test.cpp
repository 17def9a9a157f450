// sink_loopless_stages: a column mean's division between two column
// reductions moves after them (the stage order, the schedule it opens and
// numerics against the interpreter), and what keeps a stage in place.
#include <gtest/gtest.h>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/sink_loopless_stages.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// x.mean(0) and x.amax(0) of a [rows, cols] input as fusion orders them:
/// reduce sum, store the mean, reduce max, store the max. With
/// `max_reads_mean`, the max runs over the stored means instead (it must
/// stay after the store).
KernelPtr mean_then_max(int64_t rows, int64_t cols, bool max_reads_mean = false) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto mean_out = output("mean", DType::Float32, {cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), r1 = var("r1");
  auto sum = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum, load(in, r0 * cols + x0), {"total"});
  PointwiseStage divide{{}, {Store::make(mean_out, x0, binary(BinaryOp::TrueDiv, sum.result(),
                                                              const_float(static_cast<double>(rows), DType::Float32)))}};
  Expr max_body = load(in, r1 * cols + x0);
  if (max_reads_mean) max_body = binary(BinaryOp::Add, max_body, load(mean_out, x0));
  auto max = ReductionStage::make({Loop{r1, rows}}, ReductionKind::Max, max_body, {"peak"});
  PointwiseStage store_max{{}, {Store::make(output("amax", DType::Float32, {cols}), x0, max.result())}};
  return Kernel::make("stats_0", Device::CPU, {Loop{x0, cols}}, {sum, divide, max, store_max}, {}, {"mean", "amax"});
}

TEST(SinkLooplessStages, AnEpilogueBetweenReductionsMovesAfterThem) {
  auto k = mean_then_max(5003, 7);
  auto sunk = sink_loopless_stages(k);
  ASSERT_EQ(sunk->stages.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<ReductionStage>(sunk->stages[0])) << to_string(*sunk);
  EXPECT_TRUE(std::holds_alternative<ReductionStage>(sunk->stages[1])) << to_string(*sunk);
  // The stores keep their order.
  EXPECT_EQ(std::get<PointwiseStage>(sunk->stages[2]).stores[0].buffer->name, "mean");
  EXPECT_EQ(std::get<PointwiseStage>(sunk->stages[3]).stores[0].buffer->name, "amax");
  // Both reductions lead now: the tiled rows split among the threads.
  CpuTarget t = avx2_target();
  t.min_parallel_work = 4096;
  t.num_threads = 2;
  EXPECT_FALSE(schedule_for_cpu(k, t)->schedule.cpu.parallel_reduction);
  EXPECT_TRUE(schedule_for_cpu(sunk, t)->schedule.cpu.parallel_reduction)
      << explain_cpu_schedule(*schedule_for_cpu(sunk, t), t);
  RunOptions o;
  o.rtol = o.atol = 1e-4;
  o.reference = k;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(sunk, t), o), "");
  EXPECT_EQ(run_and_compare(schedule_for_cpu(sunk, avx512_target()), o), "");
}

TEST(SinkLooplessStages, AStoreALaterReductionReadsStays) {
  auto k = mean_then_max(64, 7, /*max_reads_mean=*/true);
  EXPECT_TRUE(sink_loopless_stages(k).get() == k.get()) << to_string(*k);
}

}  // namespace
}  // namespace cppi::cpu::test
