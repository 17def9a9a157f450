/// \file
/// How the looped stages of a kernel compare: whether they all walk the same
/// extents (a cached GPU row, fusion's loop merging), how many lead with a
/// reduction (CPU column tiling).
#pragma once

#include <vector>

#include "lowering/ir/kernel.h"

namespace cppi::ir {

/// Whether every stage with loops has the same list of loop extents (stages
/// without loops do not count). True for a kernel with no looped stage.
bool uniform_stage_loops(const std::vector<Stage>& stages);

/// The loops of the first stage that has any; nullptr when none has.
const std::vector<Loop>* first_stage_loops(const std::vector<Stage>& stages);

/// How many stages from the first are reductions with loops (the ones a CPU
/// column kernel tiles, one after another).
size_t leading_looped_reductions(const std::vector<Stage>& stages);

}  // namespace cppi::ir
