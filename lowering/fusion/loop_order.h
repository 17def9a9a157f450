/// \file
/// The order of a pointwise kernel's outer loops. Lowering gives every node
/// its loops in the order of the output's logical dimensions; when the output
/// is laid out otherwise (eager keeps the input's memory order: `x.t() + 1`
/// writes a [n, m] tensor with strides (1, n)), the innermost loop strides
/// through memory. GPU threads then touch one element per 128-byte line and a
/// CPU loop cannot be vectorised, far slower than streaming.
#pragma once

#include "lowering/ir/kernel.h"

namespace cppi::lowering::fusion {

/// `k` with its outer loops reordered so that the loop along which the
/// stores move least is innermost, the one along which they move most
/// outermost (each loop ranked by the sum of its stride over all stores).
/// Only for kernels whose stages have no loops of their own and only store,
/// or fold a window of at most 16 points per output (max_pool2d's 3 x 3 on a
/// channels-last input, whose channel must be innermost): any order of
/// their outer iterations computes the same thing.
/// `k` itself when its order is already that one, or when a store's stride
/// is not a known constant (symbolic sizes, indirect stores) or some loop
/// moves no store (so order cannot be judged).
ir::KernelPtr order_loops_for_stores(const ir::KernelPtr& k);

}  // namespace cppi::lowering::fusion
