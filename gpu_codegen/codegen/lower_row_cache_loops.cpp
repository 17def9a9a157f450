// lower_row_cache_fill (row_cache_loops.h): a cached row's filling as the
// scheduled loop IR.
#include "gpu_codegen/codegen/row_cache_loops.h"

#include "gpu_codegen/codegen/gpu_row_cache.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "support/status.h"

namespace cppi::gpu {

using namespace codegen;

Stmt slot_groups(const std::string& var, const std::string& first, const ir::GpuSchedule& g, int threads,
                 int64_t length, Stmt body) {
  const int e = g.elements_per_thread, v = g.cache_vector;
  // Group s / V of the thread's: V consecutive positions, the groups of a
  // row's threads side by side (GpuSchedule::cache_vector).
  const std::string at = v > 1 ? cat("(int64_t)(", var, " / ", v, ") * ", threads * v, " + tid * ", v)
                               : cat("(int64_t)", var, " * ", threads, " + tid");
  const bool guard = length != static_cast<int64_t>(e) * threads;  // length % V == 0: whole groups
  Stmt in_row = guard ? stmt(If{cat(first, " < ", length), std::move(body), nullptr}) : std::move(body);
  For groups = gpu_loop(var, Bound::constant(e), LoopKind::GpuRowSlotGroups, v, threads,
                        block({stmt(Let{first, at}), std::move(in_row)}));
  return stmt(std::move(groups));
}

Stmt lower_row_cache_fill(const ir::Kernel& k, const ir::GpuSchedule& g) {
  const std::vector<ir::Loop>* loops = row_cache_loops(k);
  const RowCache cache = loops ? row_cache(k) : RowCache{};
  if (cache.loads.empty()) return block({});
  std::vector<Stmt> group{stmt(TargetPart{row_cache_part::kUnravel, {"pos"}})};
  for (size_t c = 0; c < cache.loads.size(); ++c) {
    group.push_back(stmt(TargetPart{row_cache_part::kLoad, {std::to_string(c)}}));
  }
  // The values of these positions, while only their loads are live; two
  // slots at a time where their roundings pair.
  const int v = g.cache_vector;
  if (!cache.values.empty() && v == 1) {
    group.push_back(stmt(TargetPart{row_cache_part::kValues, {"slot"}}));
  } else if (!cache.values.empty()) {
    const bool pairs = v % 2 == 0 && rounds_to_16_bits(cache.values);
    std::vector<std::string> slots{"slot + vl"};
    if (pairs) slots.push_back("slot + vl + 1");
    For lanes = gpu_loop("vl", Bound::constant(v), LoopKind::GpuLanes, pairs ? 2 : 1, 0,
                         stmt(TargetPart{row_cache_part::kValues, std::move(slots)}));
    group.push_back(stmt(std::move(lanes)));
  }
  const int threads = g.mapping == ir::GpuMapping::RowPerWarp ? 32 : g.block_size;
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : *loops) extents.push_back(l.extent);
  const int64_t length = *ir::product(extents).constant();
  return block({stmt(TargetPart{row_cache_part::kDeclare, {}}),
                slot_groups("slot", "pos", g, threads, length, block(std::move(group)))});
}

}  // namespace cppi::gpu
