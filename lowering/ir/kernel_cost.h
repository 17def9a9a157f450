/// \file
/// What one call of a kernel costs, read off its IR: the bytes it moves
/// between memory and the kernel, and the floating-point operations it does.
/// explain() reports them per kernel and, timed, places each kernel on the
/// machine's roofline (python/cppinductor/roofline.py).
///
/// Bytes: each buffer the kernel loads counts once, however many stages or
/// loads read it (a softmax reads its input in three passes, from cache after
/// the first; the DRAM traffic is one pass): the elements its distinct
/// accesses touch, at most the whole buffer. An access touches the product of
/// the extents of the loop variables its index uses, so a bias broadcast
/// over rows (b[x1]) counts its C elements, a slice only the slice. Stored
/// buffers count the same way; an accumulating store reads its target too.
/// What a stage loads of a buffer an earlier stage stored is the kernel's
/// own value coming back (softmax's exp stashed in its output and rescaled
/// there, stash_reduction_bodies.h): the write counts, the read does not, as
/// the bytes a kernel must move are its inputs and outputs once. Kernel-local
/// scratch (per-thread partials) never leaves the kernel and counts nothing.
///
/// FLOPs: one per floating-point unary, binary or comparison op, whatever
/// the op (exp and sqrt count 1, as an add does: a roofline's peak is a
/// count of such ops); selects, casts, loads, random bits and integer
/// arithmetic count none. An op runs once per iteration of the outer loops
/// and of the stage loops its value depends on (codegen hoists the rest: a
/// layer norm's rsqrt runs once per row). A reduction adds its combine per
/// element folded: 1 (sum, max, argmax, ...), 7 for Welford (weight, delta,
/// mean and m2 updates), none over integers or bools; an accumulating float
/// store adds 1 per element.
///
/// Sizes may be symbolic, so every count is an index expression over the
/// graph's size symbols (a constant when the sizes are).
#pragma once

#include "lowering/ir/index_expr.h"
#include "lowering/ir/kernel.h"

namespace cppi::ir {

struct KernelCost {
  IndexExpr bytes_read;
  IndexExpr bytes_written;
  IndexExpr flops;
};

KernelCost kernel_cost(const Kernel& k);

}  // namespace cppi::ir
