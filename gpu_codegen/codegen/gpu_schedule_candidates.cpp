#include "gpu_codegen/codegen/gpu_schedule_candidates.h"

#include "lowering/ir/schedule_variants.h"
#include "support/status.h"

namespace cppi::gpu {

using ir::GpuSchedule;
using ir::KernelPtr;

namespace {

using TargetVariant = ir::TargetVariant<GpuTarget>;

std::vector<TargetVariant> target_variants() {
  return {
      {"pointwise blocks of 256", [](GpuTarget& t) { t.pointwise_block = 256; }},
      {"pointwise blocks of 64", [](GpuTarget& t) { t.pointwise_block = 64; }},
      {"twice the threads per row", [](GpuTarget& t) { t.row_block_shift = 1; }},
      {"half the threads per row", [](GpuTarget& t) { t.row_block_shift = -1; }},
      {"no split rows", [](GpuTarget& t) { t.split_rows = false; }},
      {"at most 8 column slices", [](GpuTarget& t) { t.max_column_slices = 8; }},
  };
}

}  // namespace

std::vector<GpuCandidate> gpu_schedule_candidates(const KernelPtr& kernel, const GpuTarget& target, size_t most) {
  std::vector<GpuCandidate> out;
  for (auto& [k, label] : ir::schedule_variants(
           kernel, target, target_variants(), schedule_for_gpu,
           [](const ir::Kernel& s) { return describe_gpu_schedule(s.schedule.gpu); }, most))
    out.push_back({k, label});
  return out;
}

std::string describe_gpu_schedule(const GpuSchedule& g) {
  return cat("mapping=", to_string(g.mapping), " block=", g.block_size, " grid=", g.grid_size,
             " elements_per_thread=", g.elements_per_thread,
             g.threads_per_column != 1 ? cat(" threads_per_column=", g.threads_per_column) : std::string(),
             g.row_splits != 1 ? cat(" row_splits=", g.row_splits) : std::string(),
             g.cache_vector != 1 ? cat(" cache_vector=", g.cache_vector) : std::string(),
             g.flat_vector ? " flat_vector=true" : "");
}

}  // namespace cppi::gpu
