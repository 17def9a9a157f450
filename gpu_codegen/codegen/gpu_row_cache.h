/// \file
/// What a row-cached CUDA kernel keeps in registers (a row mapping with
/// GpuSchedule::elements_per_thread E > 0): each thread reads its E
/// positions of the row once and every stage of the row reads them from
/// registers. The GPU schedule sizes the cache from this; the nest
/// lower_row_cache_fill builds fills it (row_cache_loops.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The loads a row-cached kernel keeps in registers, in first-use order:
/// unmasked loads that move with the stage loops and with the row (the outer
/// loops), of buffers the kernel does not write, from stages with loops.
/// Loads that are the same for every row (layer_norm's weight and bias) stay
/// in their stages: they hit in L1/L2 and would only cost registers. Each is
/// given with its index over the canonical row variables (row_cache_var(0),
/// ...), one per stage loop, so the same element read by two stages (with
/// their own loop variables) is one entry.
struct CachedLoad {
  ir::BufferPtr buffer;
  ir::IndexExpr index;  // over row_cache_var(i)
};
std::vector<CachedLoad> row_cached_loads(const ir::Kernel& kernel);

/// A row cache: the loads above, and the values computed from them that
/// more than one stage reads. GPT-2's layer norms read the residual stream
/// as a sum of up to six buffers, each add rounded to bfloat16; each of the
/// norm's three passes over the row would redo those adds and roundings,
/// and the roundings bound the kernel. A value is computed once per
/// position, before the stages, into a register array of its own; the loads
/// only it reads are dead once it is.
struct RowCache {
  std::vector<CachedLoad> loads;
  /// The outermost subexpressions of the stages' values, over the canonical
  /// row variables, that at least two stages compute and that read cached
  /// loads and constants only, through at least one operation other than a
  /// cast; in first-use order.
  std::vector<ir::Expr> values;
  /// Register arrays live while the stages run: the values, and the loads a
  /// stage reads outside them.
  size_t live_arrays = 0;

  /// The cached load of `buffer` at `canonical_index`, as its place in
  /// `loads`; nullopt when none is.
  std::optional<size_t> load_at(const std::string& buffer, const ir::IndexExpr& canonical_index) const;
  /// The cached value structurally equal to `canonical_value`, as its place
  /// in `values`; nullopt when none is.
  std::optional<size_t> value_at(const ir::Expr& canonical_value) const;
};
RowCache row_cache(const ir::Kernel& kernel);

/// `kernel` with each load that reads back what an earlier looped pointwise
/// stage stores at the same row position replaced by the stored value,
/// where that value is pure (it reads no buffer the kernel writes, once
/// what it reads is forwarded too; it draws no random numbers) and the
/// buffer has no other store; `kernel` itself when there is none. A layer norm that also stores the residual sum it
/// normalises then computes the sum once into its row cache instead of
/// reading it back from memory in each pass. Recomputing is right for any
/// mapping; it pays only where the row is cached (schedule_for_gpu).
ir::KernelPtr forward_row_stores(const ir::KernelPtr& kernel);

/// The loops the canonical row variables stand for: those of the first stage
/// with loops (a cached row's stages all have the same extents); nullptr
/// when no stage has loops.
const std::vector<ir::Loop>* row_cache_loops(const ir::Kernel& kernel);
/// The i-th canonical row variable ("rc0", ...).
ir::IndexExpr row_cache_var(size_t i);
/// An index / a value of stage `stage` with its stage loop variables renamed
/// to the canonical row variables.
ir::IndexExpr canonical_row_index(const ir::Kernel& kernel, size_t stage, const ir::IndexExpr& index);
ir::Expr canonical_row_value(const ir::Kernel& kernel, size_t stage, const ir::Expr& value);

}  // namespace cppi::gpu
