#include "cpu_codegen/schedule/sink_loopless_stages.h"

#include <vector>

namespace cppi::cpu {

using namespace ir;

namespace {

bool loopless_pointwise(const Stage& s) {
  const auto* p = std::get_if<PointwiseStage>(&s);
  return p && p->loops.empty();
}

/// Whether `reduction` reads a buffer one of `pending` stores.
bool reads_a_store_of(const Stage& reduction, const std::vector<Stage>& pending) {
  const std::vector<Access> read = reads(reduction);
  for (const Stage& p : pending) {
    for (const Access& w : writes(p)) {
      for (const Access& r : read)
        if (r.buffer->name == w.buffer->name) return true;
    }
  }
  return false;
}

}  // namespace

KernelPtr sink_loopless_stages(const KernelPtr& kernel) {
  if (kernel->device != Device::CPU) return kernel;
  std::vector<Stage> stages, pending;  // pending: loop-less stages not yet placed, in order
  bool moved = false;
  auto place_pending = [&] {
    for (Stage& p : pending) stages.push_back(std::move(p));
    pending.clear();
  };
  for (const Stage& s : kernel->stages) {
    if (loopless_pointwise(s)) {
      pending.push_back(s);
      continue;
    }
    const auto* r = std::get_if<ReductionStage>(&s);
    if (r && !r->loops.empty() && !pending.empty() && !reads_a_store_of(s, pending)) {
      stages.push_back(s);  // ahead of the pending stages
      moved = true;
      continue;
    }
    place_pending();
    stages.push_back(s);
  }
  place_pending();
  if (!moved) return kernel;
  return Kernel::make(kernel->name, kernel->device, kernel->outer, std::move(stages), kernel->schedule,
                      kernel->origins);
}

}  // namespace cppi::cpu
