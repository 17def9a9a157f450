// lower_row_loops (row_loops.h): a row kernel's loop over its rows as the
// scheduled loop IR.
#include "gpu_codegen/codegen/row_loops.h"

#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/row_cache_loops.h"
#include "gpu_codegen/codegen/row_stage_loops.h"

namespace cppi::gpu {

using namespace codegen;

Stmt lower_row_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                     const std::function<std::string(const ir::IndexExpr&)>& index) {
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : k.outer) extents.push_back(l.extent);
  std::vector<Stmt> row{stmt(TargetPart{grid_part::kUsedOuterVars, {"row"}})};
  if (g.elements_per_thread > 0) row.push_back(lower_row_cache_fill(k, g));
  row.push_back(lower_row_stage_loops(k, g, index));
  const bool warp = g.mapping == ir::GpuMapping::RowPerWarp;
  For loop = gpu_loop("row", Bound::symbolic("rows"), warp ? LoopKind::GpuWarpRows : LoopKind::GpuBlockRows,
                      warp ? g.block_size / 32 : 1, g.block_size, block(std::move(row)));
  loop.splits = warp ? 1 : g.row_splits;
  return block({stmt(Let{"rows", index(ir::product(extents))}), stmt(std::move(loop))});
}

}  // namespace cppi::gpu
