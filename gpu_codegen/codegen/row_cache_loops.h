/// \file
/// A cached row's filling in the scheduled loop IR (codegen/loop_stmt.h):
/// lower_row_cache_fill builds the loop over its slots that loads the row
/// into registers once per row and computes the values it keeps, and
/// lower_row_loops puts it inside the loop over the rows (row_loops.h). The
/// CUDA printer (cuda_print_row_cache.cpp) prints its leaves.
#pragma once

#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The parts of a cached row's filling its printer prints whole (codegen::TargetPart::what).
namespace row_cache_part {
/// The row cache's register arrays (cacheN for its loads, vcacheN for its
/// values), and where in memory each load reads (a gathered row's
/// position found once per row, here).
inline constexpr const char* kDeclare = "declare the row cache and find its loads";
/// The row cache's variables its loads use, unravelled from position args[0].
inline constexpr const char* kUnravel = "unravel the row cache's variables from";
/// Cached load args[0] at the slot group's positions, into its slots (one
/// vector load a group of V > 1 slots).
inline constexpr const char* kLoad = "load into the row cache, load";
/// The row cache's values (RowCache::values) at slots args[0], ... (C text;
/// two: their roundings to 16 bits paired), from the loads cached there.
inline constexpr const char* kValues = "the row cache's values at slots";
}  // namespace row_cache_part

/// The GpuRowSlotGroups loop `var` over a cached row's slots in groups of
/// g.cache_vector, `threads` sharing a row: its body names the group's
/// first position `first`, and, where the row's `length` positions end
/// before its last group, runs `body` only in the row.
codegen::Stmt slot_groups(const std::string& var, const std::string& first, const ir::GpuSchedule& g, int threads,
                          int64_t length, codegen::Stmt body);

/// A cached row's filling (GpuSchedule::elements_per_thread), before the
/// stages: its arrays declared (kDeclare), then a slot_groups loop whose
/// groups load each cached load (kLoad), the row cache's variables
/// unravelled first, and compute the values it keeps (kValues), in a
/// GpuLanes loop over a group's slots where they are vectors. An empty
/// block where the kernel caches no load.
codegen::Stmt lower_row_cache_fill(const ir::Kernel& k, const ir::GpuSchedule& g);

}  // namespace cppi::gpu
