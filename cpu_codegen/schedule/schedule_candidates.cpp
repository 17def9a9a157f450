#include "cpu_codegen/schedule/schedule_candidates.h"

#include <algorithm>

#include "cpu_codegen/schedule/kernel_facts.h"
#include "lowering/ir/schedule_variants.h"
#include "support/status.h"

namespace cppi::cpu {

using ir::CpuSchedule;
using ir::KernelPtr;

namespace {

using TargetVariant = ir::TargetVariant<CpuTarget>;

/// In the order they are tried: where `most` cuts the list, the ones that
/// most often won on the bench's rows stay. Threads and chunk sizes matter
/// only near the point where splitting a kernel starts to pay: a kernel of
/// more work than kSplitMatters chunks of the heuristic's size keeps them.
std::vector<TargetVariant> target_variants(const ir::Kernel& k, const CpuTarget& t) {
  constexpr int64_t kSplitMatters = 64;
  std::vector<TargetVariant> v;
  if (detail::kernel_work(k, detail::Estimator{t}) / kSplitMatters < t.min_parallel_work) {
    // Below the threshold every kernel of constant sizes runs serial.
    if (t.num_threads > 1) v.push_back({"one thread", [](CpuTarget& x) { x.min_parallel_work = INT64_MAX / 4; }});
    v.push_back({"4x the work per chunk", [](CpuTarget& x) { x.min_parallel_work *= 4; }});
    v.push_back({"1/4 the work per chunk",
                 [](CpuTarget& x) { x.min_parallel_work = std::max<int64_t>(1024, x.min_parallel_work / 4); }});
  }
  v.push_back({"1 vector accumulator", [](CpuTarget& x) { x.vector_accumulators = 1; }});
  v.push_back({"8 vector accumulators", [](CpuTarget& x) { x.vector_accumulators = 8; }});
  v.push_back({"column tiles of 1 KiB", [](CpuTarget& x) { x.column_block_bytes = 1024; }});
  v.push_back({"column tiles of 16 KiB", [](CpuTarget& x) { x.column_block_bytes = 16384; }});
  v.push_back({"row steps of 8", [](CpuTarget& x) { x.row_block = 8; }});
  v.push_back({"row steps of 64", [](CpuTarget& x) { x.row_block = 64; }});
  // AVX-512's alternative: 32-byte vectors may run at a higher clock. (On
  // AVX2, 16-byte ones are slower on every kernel tried, so no candidate.)
  if (t.vector_bytes == 64) v.push_back({"32-byte vectors", [](CpuTarget& x) { x.vector_bytes = 32; }});
  return v;
}

}  // namespace

std::vector<CpuCandidate> cpu_schedule_candidates(const KernelPtr& kernel, const CpuTarget& target, size_t most) {
  std::vector<CpuCandidate> out;
  for (auto& [k, label] : ir::schedule_variants(
           kernel, target, target_variants(*kernel, target), schedule_for_cpu,
           [](const ir::Kernel& s) { return describe_cpu_schedule(s.schedule.cpu); }, most))
    out.push_back({k, label});
  return out;
}

std::string describe_cpu_schedule(const CpuSchedule& c) {
  std::string s = cat("parallel_loops=", c.parallel_loops, " grain=", c.grain_size,
                      " parallel_reduction=", c.parallel_reduction ? "yes" : "no",
                      " vectorized=", to_string(c.vectorized));
  if (c.grain_work > 0) s += cat(" grain_work=", c.grain_work);
  if (c.vectorized != ir::VectorizedLoop::None) s += cat(" width=", c.vector_width, " tail=", to_string(c.tail));
  if (c.column_block > 0) s += cat(" column_block=", c.column_block, " row_block=", c.row_block);
  if (c.cascade_block > 0) s += cat(" cascade_block=", c.cascade_block);
  if (c.vector_accumulators != 1) s += cat(" vector_accumulators=", c.vector_accumulators);
  if (c.transpose_tile) s += " transpose_tile=yes";
  if (c.row_blocks) s += " row_blocks=yes";
  if (c.epilogue_in_lanes) s += " epilogue_in_lanes=yes";
  if (c.reduction_trees) s += " reduction_trees=yes";
  if (!c.vector_loop_splits.empty()) {
    s += " vector_loop_splits=";
    for (size_t i = 0; i < c.vector_loop_splits.size(); ++i) s += cat(i ? "," : "", c.vector_loop_splits[i]);
  }
  if (c.prefault_outputs) s += " prefault_outputs=yes";
  return s;
}

}  // namespace cppi::cpu
