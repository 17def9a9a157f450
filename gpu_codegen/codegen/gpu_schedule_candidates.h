/// \file
/// max-autotune's candidate GPU schedules for a kernel: the heuristic's
/// (schedule_for_gpu) first, then the schedules the same rules decide for
/// variants of the target (pointwise blocks of 256 or 64 threads, twice or
/// half the threads per row, fewer column slices, no split rows). Every
/// candidate is a schedule the rules produce, so the printer meets nothing it
/// was not built for; the runtime (python/cppinductor/autotune.py) times them
/// at the first call and keeps the fastest.
#pragma once

#include <string>
#include <vector>

#include "gpu_codegen/codegen/gpu_schedule.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

struct GpuCandidate {
  ir::KernelPtr kernel;  // the kernel with this schedule
  std::string label;     // what differs from the heuristic's target
};

/// `kernel`'s candidates, the heuristic's first (labelled "heuristic"), then
/// at most `most - 1` others whose schedules differ from every earlier one.
/// Candidate j > 0 is named `<kernel name>_c<j>`.
std::vector<GpuCandidate> gpu_schedule_candidates(const ir::KernelPtr& kernel, const GpuTarget& target, size_t most);

/// One line naming every setting of `g`, as generated code's header shows
/// it; two schedules print alike exactly when they are equal.
std::string describe_gpu_schedule(const ir::GpuSchedule& g);

}  // namespace cppi::gpu
