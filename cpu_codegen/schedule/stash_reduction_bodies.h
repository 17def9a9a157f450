/// \file
/// CPU pass: stop computing an expensive reduction body twice. A fused
/// softmax row reduces sum(exp(x - max)) and then stores exp(x - max) / sum,
/// so the generated code evaluated exp twice per element (eager ATen and
/// Inductor's cpp backend compute it once: they write exp into the output and
/// rescale it there). This pass rewrites
///   reduce sum over r of B(r)                        -> s
///   pointwise over c: out[i(c)] = F(B(c), s)
/// into
///   pointwise over c: out[i(c)] = B(c)                  (the stash)
///   reduce sum over c of out[i(c)]                      -> s
///   pointwise over c: out[i(c)] = F(out[i(c)], s)
/// A row in cache costs no traffic for the stash and the two passes reading
/// it back. A longer one writes and reads the stash in memory (4 reads and 2
/// writes of a row where recomputing makes 3 and 1), which still pays where
/// the exp costs more than the traffic (softmax over rows from 256K to 2M
/// floats is faster stashed; eager always stashes). So any row length
/// stashes (symbolic ones too), like eager; a
/// `max_row_bytes` limits it to rows of constant length that fit.
/// Values are bit-identical: B is computed in the same dtype and stored in
/// a buffer of that dtype (no rounding), and the reduction order is the same.
/// One exception, softmax's normalisation: out / s with s a sum of
/// exp(y - max(y)) becomes out * (1 / s), as eager computes it (s is in
/// [1, row length], so this is within 1 ulp of the quotient).
///
/// Applied only where it is correct and pays (each condition is checked):
/// the reduction (any kind, one loop) is followed by a pointwise stage over
/// the same extent whose single store goes to a buffer of the body's dtype
/// that nothing else in the kernel reads or writes, at an index affine in
/// the stage's loop with a nonzero constant stride (one element per
/// iteration); that store's value contains the body (same variables
/// renamed); the body does transcendental work (exp, log, tanh, erf, ...);
/// and, with `max_row_bytes`, the row has a constant length that fits. CPU
/// kernels only: GPU row kernels keep the row in registers.
#pragma once

#include <cstdint>
#include <optional>

#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// The kernel with recomputed reduction bodies stashed (see the file
/// comment), or the same kernel when no stage qualifies.
ir::KernelPtr stash_reduction_bodies(const ir::KernelPtr& kernel, std::optional<int64_t> max_row_bytes = std::nullopt);

}  // namespace cppi::cpu
