// lower_scan_chunk_loops (scan_chunk_loops.h): a scan chunk's fold, scan of
// the threads' folds, stores and carry as the scheduled loop IR.
#include "gpu_codegen/codegen/scan_chunk_loops.h"

#include "codegen/c_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "support/status.h"

namespace cppi::gpu {

using namespace codegen;
namespace part = scan_chunk_part;

namespace {

Stmt leaf(const char* what, std::vector<std::string> args = {}) { return stmt(TargetPart{what, std::move(args)}); }

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
    chunk.push_back(leaf(part::kVectorLoads, {vectors}));
    const Stmt leave = leaf(part::kLeaveIf, {cat("!(", in_range, ")")});
    chunk.push_back(slots("group", e / v, v, {leave, leaf(part::kLoadVectors, {"group"})}));
  }
  if (store) chunk.push_back(leaf(part::kRunningValues, {std::to_string(e)}));
  chunk.push_back(leaf(part::kOwn));
  std::vector<Stmt> fold{stmt(If{in_range, leaf(part::kFoldAt, {"slot"}), nullptr})};
  if (store) fold.push_back(leaf(part::kKeepRunning, {"slot"}));
  chunk.push_back(slots("slot", e, 1, std::move(fold)));
  if (rows) {
    chunk.push_back(leaf(store ? part::kBlockScanFromCarry : part::kBlockScan));
  } else {
    chunk.push_back(leaf(part::kSliceScan));
    if (store) chunk.push_back(leaf(part::kBeforeFromCarry));
  }
  if (store) {
    // In vectors (V > 1): each slot's values into the stores' vectors, then
    // the vectors stored.
    if (v > 1) chunk.push_back(leaf(part::kStoredVectors, {vectors}));
    chunk.push_back(slots("slot", e, 1, {leaf(part::kLeaveIf, {past_end}), leaf(part::kStoreAt, {"slot"})}));
    if (v > 1) {
      chunk.push_back(
          slots("group", e / v, v, {leaf(part::kLeaveIf, {past_end}), leaf(part::kStoreVectors, {"group"})}));
    }
  }
  chunk.push_back(leaf(part::kCarryTotal));
  return block(std::move(chunk));
}

}  // namespace cppi::gpu
