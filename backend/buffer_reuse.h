/// \file
/// Buffer reuse in the wrapper plan (Inductor's "reuse" lines): a buffer a
/// kernel step allocates takes over the storage of a buffer that died
/// earlier in the same call, instead of a fresh allocation.
///
/// Which buffers take part:
/// - destinations: the buffers our kernels allocate (Allocation entries),
///   and the results of CPU matmul externs (mm, addmm, bmm) that run their
///   out= variant into a planned buffer (backend/wrapper.cpp). Other extern
///   calls (convolution, ...) run ATen's out-of-place op, which allocates
///   its own result, and fallbacks likewise: neither ever writes into a
///   reused storage;
/// - sources: dead kernel buffers, and the tensor an extern call returned
///   (fresh from ATen, nothing outside the call holds it; its size comes
///   from the node's FX layout, so the runtime checks the storage is large
///   enough and allocates fresh otherwise). Never graph inputs;
/// - never a buffer the graph returns, nor one a returned value may alias:
///   an ATen step other than an extern call (a view, a getitem, a fallback)
///   may return an alias of any tensor it reads, so a storage lives until
///   the last use of every value derived from it that way;
/// - the same device (and device index), and the same storage byte size:
///   itemsize * (1 + sum((size_i - 1) * stride_i)), compared as simplified
///   index expressions, so buffers with symbolic sizes are reused when the
///   sizes agree symbolically. Dtypes may differ (the runtime reinterprets
///   the storage). Between static sizes a larger dead buffer serves a
///   smaller one, up to twice its size (the runtime views its first bytes):
///   the bound caps the bytes held beyond what the buffer needs.
/// Exact sizes win; among them the most recently freed (warm in cache), as
/// Inductor's reuse pool does; otherwise the smallest larger one.
///
/// In place: before looking at dead buffers, an allocation takes over a
/// buffer its own kernel reads for the last time when the kernel may write
/// over it (Allocation::overwritable, lowering/ir/in_place.h), as
/// Inductor's in-place reuse does: relu(mm(x, w)) writes into the mm result.
/// This applies to returned buffers too (the storage was made in this call
/// and nothing reads it afterwards); the source stays alive through the
/// kernel and is freed after it.
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
