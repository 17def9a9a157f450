/// \file
/// A row CUDA kernel's loop over its rows in the scheduled loop IR
/// (codegen/loop_stmt.h): lower_row_loops builds it from the kernel and its
/// GpuSchedule (RowPerWarp, RowPerBlock), and the CUDA printer
/// (cuda_print_rows.cpp) prints it. Inside a row, a cached row's filling is
/// the nest lower_row_cache_fill builds (row_cache_loops.h), and the
/// stages' loops over its positions the nest lower_row_stage_loops builds
/// (row_stage_loops.h).
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// `rows`, the product of the outer extents, and the loop over [0, rows) on
/// the grid (GpuWarpRows or GpuBlockRows, split rows' blocks), inside it the
/// outer variables the stages use unravelled from the row (the
/// grid-stride nest's part, grid_stride_loops.h), a cached row's filling
/// (row_cache_loops.h) and the stages with their loops (row_stage_loops.h).
/// `index`: the printer's C form of an index expression.
codegen::Stmt lower_row_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                              const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
