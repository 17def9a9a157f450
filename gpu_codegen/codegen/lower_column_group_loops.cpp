// lower_column_group_loops (column_group_loops.h): a column-group kernel's
// loop over its columns as the scheduled loop IR.
#include "gpu_codegen/codegen/column_group_loops.h"

#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/row_stage_loops.h"

namespace cppi::gpu {

using namespace codegen;

Stmt lower_column_group_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                              const std::function<std::string(const ir::IndexExpr&)>& index) {
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : k.outer) extents.push_back(l.extent);
  Stmt group = block({stmt(TargetPart{grid_part::kUsedOuterVars, {"idx"}}), lower_row_stage_loops(k, g, index)});
  For loop = gpu_loop("idx", Bound::symbolic("n"), LoopKind::GpuColumnGroups, 32, g.block_size, std::move(group));
  loop.splits = g.row_splits;
  return block({stmt(Let{"n", index(ir::product(extents))}), stmt(std::move(loop))});
}

}  // namespace cppi::gpu
