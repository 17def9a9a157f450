/// \file
/// A scan kernel's block mappings in the scheduled loop IR
/// (codegen/loop_stmt.h): lower_scan_loops builds the loop over the rows
/// (RowPerBlock) or the groups of 32 columns (ColumnReduction), or, split
/// (row_splits P > 1), the block's tile taken by ticket, and inside it the
/// loops over the scan's chunks, each chunk's fold, scan and stores as
/// lower_scan_chunk_loops builds them (scan_chunk_loops.h); the CUDA
/// printer (cuda_print_scans.cpp) prints it. The serial mapping is a
/// grid-stride nest (grid_stride_loops.h).
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The parts of a scan nest its printer prints whole (codegen::TargetPart::what).
namespace scan_part {
/// The shared memory the block's scans combine in.
inline constexpr const char* kScratch = "declare the scan scratch";
/// lane (the column in its group) and tid (the slice) of a column mapping's thread.
inline constexpr const char* kColumnThreads = "the thread's column and slice";
/// args[0] (a row or group) of the tile taken by ticket.
inline constexpr const char* kUnitOfTile = "from the tile, its";
/// The thread's column `idx` of group args[0] (a tile's), and whether it
/// is one of the args[1] columns (`valid`); a GpuColumnGroups loop has
/// them at its top.
inline constexpr const char* kGroupColumn = "the thread's column idx, valid, of group and columns";
/// [start, stop): the block's share of the scan (split: whole chunks of it).
inline constexpr const char* kShare = "the block's share of the scan";
/// The running value carried from chunk to chunk, from the identity.
inline constexpr const char* kCarry = "start the carry";
/// The block's carry, its share's total, published at tile slot args[0] of
/// the module's totals by the threads where args[1] holds.
inline constexpr const char* kPublish = "publish the share's total at";
/// `earlier`: the thread's fold of the totals of the splits before this one
/// (args: the row's or group's first tile, a split `part`'s total slot, the
/// thread's first split and the threads' stride).
inline constexpr const char* kLookBack = "fold the earlier splits' totals";
/// The carry: the earlier splits' totals, combined across the block.
inline constexpr const char* kCarryFromEarlier = "carry the earlier splits' totals";
}  // namespace scan_part

/// A scan kernel's block mapping (RowPerBlock or ColumnReduction) as a
/// nest: unsplit, a GpuBlockRows loop over `rows` or a GpuColumnGroups loop
/// over the `n` columns; split, a GpuTickets tile (P tiles a row or group);
/// inside, the block's share [start, stop) of the scan walked by a serial
/// loop over its chunks (base, step E x the threads or slices of a
/// position), each chunk lower_scan_chunk_loops' nest, with the stores or
/// (a split's share before it publishes) for its total only. `index`: the
/// printer's C form of an index expression.
codegen::Stmt lower_scan_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                               const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
