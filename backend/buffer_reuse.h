/// \file
/// Buffer reuse in the wrapper plan (Inductor's "reuse" lines): a buffer a
/// kernel step allocates takes over the storage of a buffer that died
/// earlier in the same call, instead of a fresh allocation.
///
/// Which buffers take part:
/// - only buffers our kernels allocate (Allocation entries), as sources and
///   as destinations: we know their exact layout and nothing outside the
///   call holds them. Graph inputs and ATen results (extern calls such as
///   mm write out-of-place results ATen allocates; fallbacks) are neither;
/// - never a buffer the graph returns, nor one a returned value may alias:
///   an ATen step other than an extern call (a view, a getitem, a fallback)
///   may return an alias of any tensor it reads, so a storage lives until
///   the last use of every value derived from it that way;
/// - the same device (and device index), and the same storage byte size:
///   itemsize * (1 + sum((size_i - 1) * stride_i)), compared as simplified
///   index expressions, so buffers with symbolic sizes are reused when the
///   sizes agree symbolically. Dtypes may differ (the runtime reinterprets
///   the storage). A larger buffer is not used for a smaller one: exact
///   sizes keep the plan's live bytes at most one freed buffer per pending
///   reuse above the plan without reuse.
/// Among equal candidates the most recently freed one is taken (warm in
/// cache), as Inductor's reuse pool does.
#pragma once

#include "backend/compiled_graph.h"

namespace cppi {

/// Runs after plan_frees. Sets Allocation::reuse where a dead buffer fits,
/// and moves that buffer's free from its last use to the reusing step (the
/// runtime hands its storage over there).
void plan_buffer_reuse(CompiledGraph& cg);

/// Buffers the kernel steps of one call allocate, fresh or reused.
struct AllocationCounts {
  int fresh = 0;
  int reused = 0;
};
AllocationCounts count_allocations(const CompiledGraph& cg);

}  // namespace cppi
