#include "lowering/ir/stage_loops.h"

namespace cppi::ir {

const std::vector<Loop>* first_stage_loops(const std::vector<Stage>& stages) {
  for (const auto& s : stages) {
    if (!loops_of(s).empty()) return &loops_of(s);
  }
  return nullptr;
}

size_t leading_looped_reductions(const std::vector<Stage>& stages) {
  size_t n = 0;
  while (n < stages.size()) {
    const auto* r = std::get_if<ReductionStage>(&stages[n]);
    if (!r || r->loops.empty()) break;
    ++n;
  }
  return n;
}

bool uniform_stage_loops(const std::vector<Stage>& stages) {
  const std::vector<Loop>* first = first_stage_loops(stages);
  for (const auto& s : stages) {
    const auto& loops = loops_of(s);
    if (loops.empty()) continue;
    if (loops.size() != first->size()) return false;
    for (size_t i = 0; i < loops.size(); ++i) {
      if (loops[i].extent != (*first)[i].extent) return false;
    }
  }
  return true;
}

}  // namespace cppi::ir
