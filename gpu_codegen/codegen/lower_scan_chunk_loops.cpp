// lower_scan_chunk_loops (scan_chunk_loops.h): a scan chunk's fold, scan of
// the threads' folds, stores and carry as the scheduled loop IR.
#include "gpu_codegen/codegen/scan_chunk_loops.h"

#include "codegen/c_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "support/status.h"

namespace cppi::gpu {

using namespace codegen;
namespace chunk_part = scan_chunk_part;

namespace {

/// The thread's `count` slots of `width` consecutive positions each, around `body`.
Stmt slots(const std::string& var, int64_t count, int64_t width, std::vector<Stmt> body) {
  return stmt(gpu_loop(var, Bound::constant(count), LoopKind::GpuScanSlots, width, 0, block(std::move(body))));
}

}  // namespace

Stmt lower_scan_chunk_loops(const ir::Kernel& k, const ir::GpuSchedule& g, bool store) {
  const bool rows = g.mapping == ir::GpuMapping::RowPerBlock;
  const int64_t e = g.elements_per_thread, v = g.cache_vector;
  const std::string var = loop_var(ir::scan_of(k)->loops[0]), vectors = std::to_string(e / v);
  // A column's lanes past the columns (not `valid`) fold and store nothing.
  const std::string in_range = cat(rows ? "" : "valid && ", var, " < stop");
  const std::string past_end = cat(rows ? "" : "!valid || ", var, " >= stop");
  std::vector<Stmt> chunk{stmt(Let{"pos", cat("base + (int64_t)", rows ? "threadIdx.x" : "tid", " * ", e)})};
  if (v > 1 && !scan_vector_loads(k).empty()) {
    chunk.push_back(part(chunk_part::kVectorLoads, {vectors}));
    const Stmt leave = part(chunk_part::kLeaveIf, {cat("!(", in_range, ")")});
    chunk.push_back(slots("group", e / v, v, {leave, part(chunk_part::kLoadVectors, {"group"})}));
  }
  if (store) chunk.push_back(part(chunk_part::kRunningValues, {std::to_string(e)}));
  chunk.push_back(part(chunk_part::kOwn));
  std::vector<Stmt> fold{stmt(If{in_range, part(chunk_part::kFoldAt, {"slot"}), nullptr})};
  if (store) fold.push_back(part(chunk_part::kKeepRunning, {"slot"}));
  chunk.push_back(slots("slot", e, 1, std::move(fold)));
  if (rows) {
    chunk.push_back(part(store ? chunk_part::kBlockScanFromCarry : chunk_part::kBlockScan));
  } else {
    chunk.push_back(part(chunk_part::kSliceScan));
    if (store) chunk.push_back(part(chunk_part::kBeforeFromCarry));
  }
  if (store) {
    // In vectors (V > 1): each slot's values into the stores' vectors, then
    // the vectors stored.
    if (v > 1) chunk.push_back(part(chunk_part::kStoredVectors, {vectors}));
    chunk.push_back(slots("slot", e, 1, {part(chunk_part::kLeaveIf, {past_end}), part(chunk_part::kStoreAt, {"slot"})}));
    if (v > 1) {
      chunk.push_back(
          slots("group", e / v, v, {part(chunk_part::kLeaveIf, {past_end}), part(chunk_part::kStoreVectors, {"group"})}));
    }
  }
  chunk.push_back(part(chunk_part::kCarryTotal));
  return block(std::move(chunk));
}

}  // namespace cppi::gpu
