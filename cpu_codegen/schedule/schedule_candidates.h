/// \file
/// max-autotune's candidate CPU schedules for a kernel: the heuristic's
/// (schedule_for_cpu) first, then the schedules the same rules decide for
/// variants of the target (one thread, a quarter or four times the work per
/// chunk, other accumulator counts, column tiles and row steps, 32-byte
/// vectors on AVX-512). Every candidate is a schedule the rules themselves
/// produce, so the printer meets no combination of settings it was not built
/// for; the runtime (python/cppinductor/autotune.py) times them on the first
/// call and keeps the fastest.
#pragma once

#include <string>
#include <vector>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/kernel.h"

namespace cppi::cpu {

struct CpuCandidate {
  ir::KernelPtr kernel;  // the kernel with this schedule
  std::string label;     // what differs from the heuristic's target ("one thread")
};

/// `kernel`'s candidates, the heuristic's first (labelled "heuristic"), then
/// at most `most - 1` others whose schedules differ from every earlier one.
/// Candidate j > 0 is named `<kernel name>_c<j>`.
std::vector<CpuCandidate> cpu_schedule_candidates(const ir::KernelPtr& kernel, const CpuTarget& target, size_t most);

/// One line naming every setting of `s`, as generated code's header shows
/// it; two schedules print alike exactly when they are equal.
std::string describe_cpu_schedule(const ir::CpuSchedule& s);

}  // namespace cppi::cpu
