/// \file
/// Internal to lowering/fusion: turns a group of nodes into a Kernel, and
/// removes the stores nobody needs once kernels are formed.
///
/// In a kernel, a load of a reduction result computed by an earlier stage at
/// the same outer point becomes a LocalRef to that stage's result, and a load
/// of a value stored earlier in the same pointwise stage at the same point
/// becomes that value. The stores they made unnecessary are then dead.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lowering/fusion/program.h"
#include "lowering/ir/kernel.h"

namespace cppi::lowering::fusion {

ir::KernelPtr build_kernel(const Program& p, const Group& group, std::string name, std::vector<std::string> origins);

/// Drops stores to buffers that no kernel loads and `needed_outside` does
/// not claim, then reduction stages whose results nothing uses, to a fixed
/// point; kernels left without stages disappear (nullptr).
std::vector<ir::KernelPtr> remove_dead_stores(const std::vector<ir::KernelPtr>& kernels,
                                              const std::function<bool(const std::string&)>& needed_outside);

}  // namespace cppi::lowering::fusion
