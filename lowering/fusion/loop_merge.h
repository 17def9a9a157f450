/// \file
/// Merging adjacent loops that every access walks as one. Lowering gives a
/// kernel one loop per tensor dimension; over a contiguous [N, C, 56, 56]
/// tensor the innermost loop is 56 long, so the CPU's 16-wide vector loop
/// runs 3 vectors and an 8-element scalar tail per row, and the GPU divides
/// indices by 56 (BatchNorm's statistics over (N, H, W); Inductor merges H
/// and W into 3136).
#pragma once

#include "lowering/ir/kernel.h"

namespace cppi::lowering::fusion {

/// `k` with adjacent loops merged where it changes no access: loops o and
/// i (i inside o, extent E) merge when every index the kernel computes in
/// their scope is affine in both with stride(o) == stride(i) * E (a
/// contiguous pair, or a pair that index does not use), so each index
/// becomes offset + stride(i) * i over the merged extent. Outer loops merge
/// over every index of the kernel; stage loops at the same positions merge
/// in all looped stages together, and only when those stages have the same
/// loop extents (stages that walk the same elements keep walking them alike).
/// `k` itself when nothing merges.
ir::KernelPtr merge_contiguous_loops(const ir::KernelPtr& k);

}  // namespace cppi::lowering::fusion
