// lower_scan_loops (scan_loops.h): a scan kernel's block mappings as the
// scheduled loop IR.
#include "gpu_codegen/codegen/scan_loops.h"

#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/scan_chunk_loops.h"
#include "support/status.h"

namespace cppi::gpu {

using namespace codegen;

namespace {

/// The serial loop over the block's share [start, stop) in chunks of `chunk`
/// positions; `store`: the chunks' stores too (else their totals only).
Stmt chunk_loop(const ir::Kernel& k, const ir::GpuSchedule& g, int64_t chunk, bool store) {
  For l;
  l.var = "base";
  l.lo = Bound::symbolic("start");
  l.hi = Bound::symbolic("stop");
  l.step = chunk;
  l.body = lower_scan_chunk_loops(k, g, store);
  return stmt(std::move(l));
}

/// A split block's scan of its share: the splits but the last fold theirs
/// and publish the total; each then folds the totals before it into its
/// carry and scans its share with the stores. `unit`: the tile's row or
/// group (C name); `slot`: where a tile's totals are (a column's, for groups).
std::vector<Stmt> split_share(const ir::Kernel& k, const ir::GpuSchedule& g, bool rows, int64_t chunk) {
  const int p = g.row_splits;
  const std::string unit = rows ? "row" : "group";
  const std::string slot = rows ? "tile" : "tile * 32 + lane";
  const std::string earlier = rows ? cat("row * ", p, " + part") : cat("(group * ", p, " + part) * 32 + lane");
  return {part(scan_part::kCarry),
          stmt(If{cat("split + 1 < ", p),
                  block({chunk_loop(k, g, chunk, false),
                         part(scan_part::kPublish, {slot, rows ? "threadIdx.x == 0" : "tid == 0"})}),
                  nullptr}),
          part(scan_part::kLookBack, {cat(unit, " * ", p), earlier, rows ? "threadIdx.x" : "tid",
                                      std::to_string(rows ? g.block_size : g.threads_per_column)}),
          part(scan_part::kCarryFromEarlier), chunk_loop(k, g, chunk, true)};
}

/// The tile of a split scan: GpuTickets over the outer units' P tiles each.
For tickets(int64_t units, const ir::GpuSchedule& g, std::vector<Stmt> body) {
  For l = gpu_loop("tile", Bound::constant(units * g.row_splits), LoopKind::GpuTickets, 1, g.block_size,
                   block(std::move(body)));
  l.splits = g.row_splits;
  return l;
}

/// RowPerBlock: a block a row, or split, a tile of one.
Stmt row_scan(const ir::Kernel& k, const ir::GpuSchedule& g, const ir::IndexExpr& outer, const std::string& rows) {
  const int64_t chunk = int64_t{g.elements_per_thread} * g.block_size;
  const Stmt unravel = part(grid_part::kUsedOuterVars, {"row"});
  if (g.row_splits == 1) {
    Stmt row = block({unravel, part(scan_part::kShare), part(scan_part::kCarry), chunk_loop(k, g, chunk, true)});
    return block({stmt(Let{"rows", rows}),
                  stmt(gpu_loop("row", Bound::symbolic("rows"), LoopKind::GpuBlockRows, 1, g.block_size, row))});
  }
  // The share depends on the split alone: it is known before the row.
  std::vector<Stmt> tile{part(scan_part::kShare), part(scan_part::kUnitOfTile, {"row"}), unravel};
  for (Stmt& s : split_share(k, g, true, chunk)) tile.push_back(std::move(s));
  return stmt(tickets(*outer.constant(), g, std::move(tile)));
}

}  // namespace

Stmt lower_scan_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                      const std::function<std::string(const ir::IndexExpr&)>& index) {
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : k.outer) extents.push_back(l.extent);
  const ir::IndexExpr outer = ir::product(extents);
  if (g.mapping == ir::GpuMapping::RowPerBlock) {
    return block({part(scan_part::kScratch), row_scan(k, g, outer, index(outer))});
  }
  const int64_t chunk = int64_t{g.threads_per_column} * g.elements_per_thread;
  std::vector<Stmt> group{part(grid_part::kUsedOuterVars, {"idx"}), part(scan_part::kShare)};
  Stmt walk;
  if (g.row_splits == 1) {
    group.push_back(part(scan_part::kCarry));
    group.push_back(chunk_loop(k, g, chunk, true));
    walk = stmt(gpu_loop("idx", Bound::symbolic("n"), LoopKind::GpuColumnGroups, 32, g.block_size, block(group)));
  } else {
    group.insert(group.begin(), {part(scan_part::kUnitOfTile, {"group"}), part(scan_part::kGroupColumn, {"group", "n"})});
    for (Stmt& s : split_share(k, g, false, chunk)) group.push_back(std::move(s));
    walk = stmt(tickets((*outer.constant() + 31) / 32, g, std::move(group)));
  }
  return block({part(scan_part::kScratch), stmt(Let{"n", index(outer)}), part(scan_part::kColumnThreads), walk});
}

}  // namespace cppi::gpu
