// max-autotune's candidate schedules (cpu_codegen/schedule/schedule_candidates.h):
// the heuristic's first, distinct schedules after it, variants only where
// they change something, and every candidate computing what the reference
// interpreter does.
#include <gtest/gtest.h>

#include <set>

#include "cpu_codegen/schedule/schedule_candidates.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

TEST(ScheduleCandidates, TheHeuristicComesFirstAndEveryScheduleOnce) {
  const CpuTarget target = avx512_target(32768);
  const KernelPtr k = softmax_kernel(512, 1000);
  const auto candidates = cpu_schedule_candidates(k, target, 16);
  ASSERT_GE(candidates.size(), 3u);
  EXPECT_EQ(candidates[0].label, "heuristic");
  EXPECT_EQ(candidates[0].kernel->name, k->name);
  EXPECT_EQ(describe_cpu_schedule(candidates[0].kernel->schedule.cpu), describe_cpu_schedule(sched(k, target)));
  std::set<std::string> schedules;
  for (size_t j = 0; j < candidates.size(); ++j) {
    EXPECT_TRUE(schedules.insert(describe_cpu_schedule(candidates[j].kernel->schedule.cpu)).second)
        << candidates[j].label;
    if (j > 0) EXPECT_EQ(candidates[j].kernel->name, k->name + "_c" + std::to_string(j));
  }
  EXPECT_EQ(cpu_schedule_candidates(k, target, 2).size(), 2u);
}

TEST(ScheduleCandidates, ThreadsAndChunksVaryOnlyNearTheParallelThreshold) {
  const CpuTarget target = avx512_target(32768);
  auto labels = [&](const KernelPtr& k) {
    std::set<std::string> out;
    for (const auto& c : cpu_schedule_candidates(k, target, 16)) out.insert(c.label);
    return out;
  };
  // 2^26 elements: chunks of any of these sizes keep every thread busy.
  const auto big = labels(pointwise_kernel(int64_t{1} << 26));
  EXPECT_EQ(big.count("one thread"), 0u);
  EXPECT_EQ(big.count("1/4 the work per chunk"), 0u);
  // 2^17 elements: one thread may win.
  const auto small = labels(pointwise_kernel(int64_t{1} << 17));
  EXPECT_EQ(small.count("one thread"), 1u);
}

TEST(ScheduleCandidates, ColumnReductionsTryOtherTiles) {
  const auto candidates = cpu_schedule_candidates(column_reduction_kernel(ReductionKind::Sum, 4096, 1024),
                                                  avx512_target(32768), 16);
  std::set<std::string> labels;
  for (const auto& c : candidates) labels.insert(c.label);
  EXPECT_EQ(labels.count("column tiles of 16 KiB"), 1u);
  EXPECT_EQ(labels.count("row steps of 8"), 1u);
}

TEST(ScheduleCandidates, EveryCandidateMatchesTheInterpreter) {
  const std::vector<KernelPtr> kernels = {
      softmax_kernel(64, 300),
      column_reduction_kernel(ReductionKind::Sum, 300, 77),
      row_reduction_kernel(ReductionKind::Max, 37, 513),
      two_pass_variance_kernel(40, 200),
      pointwise_kernel(5000),
  };
  for (const KernelPtr& k : kernels) {
    for (const auto& c : cpu_schedule_candidates(k, avx512_target(512), 16)) {
      RunOptions o;
      o.rtol = 1e-4;  // candidates sum in other orders
      EXPECT_EQ(run_and_compare(c.kernel, o), "") << k->name << ", " << c.label << ": "
                                                   << describe_cpu_schedule(c.kernel->schedule.cpu);
    }
  }
}

}  // namespace
}  // namespace cppi::cpu::test
