/// \file
/// A column-group CUDA kernel's loop over its columns in the scheduled loop
/// IR (codegen/loop_stmt.h): lower_column_group_loops builds it from the
/// kernel and its GpuSchedule (ColumnReduction with row slices,
/// threads_per_column > 1), and the CUDA printer (cuda_print_rows.cpp)
/// prints it. Inside a group the stages walk their rows across the slices
/// in loops lower_row_stage_loops builds (row_stage_loops.h).
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// `n`, the product of the outer extents (the columns), and the
/// GpuColumnGroups loop over [0, n) (split groups' blocks), inside it the
/// outer variables the stages use unravelled from the column (the
/// grid-stride nest's part, grid_stride_loops.h) and the stages with their
/// loops over the rows (row_stage_loops.h). `index`:
/// the printer's C form of an index expression.
codegen::Stmt lower_column_group_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                                       const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
