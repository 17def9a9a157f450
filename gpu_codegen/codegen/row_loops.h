/// \file
/// A row CUDA kernel's loop over its rows in the scheduled loop IR
/// (codegen/loop_stmt.h): lower_row_loops builds it from the kernel and its
/// GpuSchedule (RowPerWarp, RowPerBlock), and the CUDA printer
/// (cuda_print_rows.cpp) prints it. Inside a row, the stages' loops over its
/// positions are the nest lower_row_stage_loops builds (row_stage_loops.h);
/// a cached row's filling still prints its slot loops whole (issue #38).
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The parts of a row nest its printer prints whole (codegen::TargetPart::what).
namespace row_part {
/// A cached row's registers, filled once per row (GpuSchedule::elements_per_thread).
inline constexpr const char* kFillRowCache = "fill the row cache";
}  // namespace row_part

/// `rows`, the product of the outer extents, and the loop over [0, rows) on
/// the grid (GpuWarpRows or GpuBlockRows, split rows' blocks), inside it the
/// outer variables the stages use unravelled from the row (the
/// grid-stride nest's part, grid_stride_loops.h), the row cache's filling
/// and the stages with their loops (row_stage_loops.h). `index`: the printer's C form of an index expression.
codegen::Stmt lower_row_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                              const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
