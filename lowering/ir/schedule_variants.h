/// \file
/// What max-autotune's candidate generators share (cpu_codegen/schedule/
/// schedule_candidates.h, gpu_codegen/codegen/gpu_schedule_candidates.h): a
/// kernel scheduled for its target, then for variants of that target, each
/// schedule kept once.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "lowering/ir/kernel.h"
#include "support/status.h"

namespace cppi::ir {

/// A change to a target, and what it is called in reports ("one thread").
template <typename Target>
struct TargetVariant {
  std::string label;
  std::function<void(Target&)> change;
};

/// (kernel, label) pairs: `schedule(kernel, target)` labelled "heuristic",
/// then `schedule(kernel, variant of target)` for each variant whose
/// schedule `describe` tells apart from every earlier one, named
/// `<kernel name>_c<j>`; at most `most` in all.
template <typename Target, typename ScheduleFn, typename DescribeFn>
std::vector<std::pair<KernelPtr, std::string>> schedule_variants(const KernelPtr& kernel, const Target& target,
                                                                 const std::vector<TargetVariant<Target>>& variants,
                                                                 ScheduleFn schedule, DescribeFn describe, size_t most) {
  std::vector<std::pair<KernelPtr, std::string>> out;
  const KernelPtr heuristic = schedule(kernel, target);
  out.emplace_back(heuristic, "heuristic");
  std::set<std::string> seen = {describe(*heuristic)};
  for (const TargetVariant<Target>& v : variants) {
    if (out.size() >= most) break;
    Target t = target;
    v.change(t);
    const KernelPtr scheduled = schedule(kernel, t);
    if (!seen.insert(describe(*scheduled)).second) continue;
    out.emplace_back(Kernel::make(cat(kernel->name, "_c", out.size()), scheduled->device, scheduled->outer,
                                  scheduled->stages, scheduled->schedule, scheduled->origins),
                     v.label);
  }
  return out;
}

}  // namespace cppi::ir
