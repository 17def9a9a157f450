#include "lowering/fusion/capability.h"

#include "support/status.h"

namespace cppi::lowering::fusion {

std::optional<std::string> why_unsupported_dependency(const BackendCapability& c, bool same_position) {
  if (same_position || c.stages_read_other_positions) return std::nullopt;
  return std::string("the backend cannot order a stage after one that stored what it reads at other positions");
}

std::optional<std::string> why_unsupported(const BackendCapability& c, const std::vector<StageShape>& stages) {
  if (static_cast<int>(stages.size()) > c.max_stages_per_kernel) {
    return cat("the backend allows at most ", c.max_stages_per_kernel, " stages per kernel (would be ",
               stages.size(), ")");
  }
  int reductions = 0;
  for (const auto& s : stages) {
    if (s.reduction) {
      ++reductions;
    } else if (reductions > 0 && s.loops > 0 && !c.reduction_epilogues) {
      return std::string("the backend does not support epilogue loops after a reduction");
    }
  }
  if (reductions > 1 && !c.multiple_reductions) {
    return std::string("the backend does not support several reductions in one kernel");
  }
  return std::nullopt;
}

}  // namespace cppi::lowering::fusion
