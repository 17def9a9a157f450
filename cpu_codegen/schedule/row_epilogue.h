/// \file
/// The epilogue of W rows in lanes and the reductions in trees before it
/// (CpuSchedule::epilogue_in_lanes, reduction_trees): where a kernel's
/// epilogue starts, and whether the schedule may run a vector of rows at a
/// time. The schedule decides with these; the printer finds the epilogue.
#pragma once

#include <cstddef>

#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// A kernel's epilogue (CpuSchedule::epilogue_in_lanes): the index of the
/// first of its last stages that are loop-less pointwise stores, after at
/// least one stage; stages.size() where there are none.
size_t epilogue_start(const ir::Kernel& k);

/// Whether `k` may run its epilogue a vector of `width` rows at a time;
/// `*math`: whether the epilogue calls a math function.
bool epilogue_in_lanes_fits(const ir::Kernel& k, int width, bool* math);

/// Whether the reductions before `k`'s epilogue may combine a block of rows
/// in one tree each, under the schedule `s` decided so far.
bool reduction_trees_fit(const ir::Kernel& k, const ir::CpuSchedule& s);

}  // namespace cppi::cpu
