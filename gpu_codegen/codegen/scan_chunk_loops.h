/// \file
/// A scan chunk in the scheduled loop IR (codegen/loop_stmt.h): inside the
/// serial loop over a block's chunks (scan_loops.h), lower_scan_chunk_loops
/// builds the chunk's walk: each thread's fold over its E consecutive
/// positions (GpuScanSlots loops, the vector loads before it), the block's
/// or the column slices' scan of the threads' totals, the stores pass and
/// the carry of the chunk's total. The CUDA printer (cuda_print_scans.cpp)
/// prints its leaves.
#pragma once

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The leaves of a scan chunk (codegen::TargetPart::what).
namespace scan_chunk_part {
/// Each vector load's array of args[0] vectors, zeroed (GpuSchedule::cache_vector V > 1).
inline constexpr const char* kVectorLoads = "declare the vectors of loads, each of";
/// The vector loads at group args[0] of the GpuScanSlots loop around it.
inline constexpr const char* kLoadVectors = "load the vectors at";
/// `prefix`, the thread's running values at its args[0] positions.
inline constexpr const char* kRunningValues = "declare the running values, of";
/// `own`, the thread's fold of its positions, from the identity.
inline constexpr const char* kOwn = "start the thread's fold";
/// The scan's value at slot args[0] of the GpuScanSlots loop around it, into `own`.
inline constexpr const char* kFoldAt = "fold the position at";
/// prefix[args[0]] = own.
inline constexpr const char* kKeepRunning = "keep the running value at";
/// Leaves the GpuScanSlots loop around it where args[0] holds (C text).
inline constexpr const char* kLeaveIf = "leave the slots if";
/// The threads' `own`s scanned across the block: `total`, the chunk's.
inline constexpr const char* kBlockScan = "scan the threads' folds for the chunk's total";
/// As kBlockScan, and `before`, the carry and the threads' folds before this one.
inline constexpr const char* kBlockScanFromCarry = "scan the threads' folds: the chunk's total, before from the carry";
/// The column slices' `own`s scanned in slice order: `before`, the slices'
/// before this one, and `total`, the chunk's.
inline constexpr const char* kSliceScan = "scan the slices' folds: before and the chunk's total";
/// `before` from the carry and the slices' folds before this one.
inline constexpr const char* kBeforeFromCarry = "before from the carry";
/// Each store's array of args[0] vectors of values (V > 1).
inline constexpr const char* kStoredVectors = "declare the vectors of stores, each of";
/// The running value at slot args[0] of the GpuScanSlots loop around it,
/// stored (V > 1: into the stores' vectors).
inline constexpr const char* kStoreAt = "store the running value at";
/// The stores' vectors at group args[0] of the GpuScanSlots loop around it, stored.
inline constexpr const char* kStoreVectors = "store the vectors at";
/// carry = carry combined with the chunk's total.
inline constexpr const char* kCarryTotal = "carry the chunk's total";
}  // namespace scan_chunk_part

/// A chunk from `base` of a scan kernel's block mapping (RowPerBlock: the
/// block's threads; ColumnReduction: a column's slices): `pos`, the
/// thread's first position; its fold over its E positions (a GpuScanSlots
/// loop, the vector loads' before it), the block's or slices' scan of the
/// folds, with `store` the stores pass (GpuScanSlots loops of the running
/// values, and of their vectors), then the carry of the chunk's total.
codegen::Stmt lower_scan_chunk_loops(const ir::Kernel& k, const ir::GpuSchedule& g, bool store);

}  // namespace cppi::gpu
