/// \file
/// A grid-stride CUDA kernel's loop nest in the scheduled loop IR
/// (codegen/loop_stmt.h): lower_grid_stride_loops builds it from the kernel
/// and its GpuSchedule (GridStridePointwise, and ColumnReduction with one
/// thread a column), and the CUDA printer (cuda_print_grid_stride.cpp) prints
/// it. The other mappings' loops are nests of their own: the rows'
/// (row_loops.h), the column groups' (column_group_loops.h) and the scans'
/// block mappings' (scan_loops.h).
#pragma once

#include <functional>
#include <string>

#include "codegen/loop_stmt.h"
#include "lowering/ir/kernel.h"

namespace cppi::gpu {

/// The parts of a grid-stride nest its printer prints whole
/// (codegen::TargetPart::what).
namespace grid_part {
/// The outer loop variables the stages use, from the flat index args[0] (row-major).
inline constexpr const char* kUsedOuterVars = "unravel the outer variables the stages use from";
/// Every outer loop variable, from the flat index args[0]: a vectorised
/// kernel's lanes step from them.
inline constexpr const char* kOuterVars = "unravel the outer variables from";
}  // namespace grid_part

/// A rounding from float to half or bfloat16; nullptr for other expressions.
const ir::Cast* rounding_to_16_bits(const ir::Expr& e);
/// Whether some value of `values` rounds float to half or bfloat16: lanes
/// that compute them pair (one packed conversion or operation for two).
bool rounds_to_16_bits(const std::vector<ir::Expr>& values);

/// A GPU loop of `kind` over [0, hi), `step` and `threads` as For has them.
codegen::For gpu_loop(std::string var, codegen::Bound hi, codegen::LoopKind kind, int64_t step, int threads,
                       codegen::Stmt body);

/// `n`, the product of the outer extents, and the GpuGridStride loop over
/// [0, n) with the outer variables unravelled from it. One element a
/// thread: the stages inside (printed serially). V elements: per store, a
/// GpuLanes loop over the V lanes around the store (two lanes an iteration
/// where its value rounds to 16 bits per lane). `index`: the printer's C
/// form of an index expression.
codegen::Stmt lower_grid_stride_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                                      const std::function<std::string(const ir::IndexExpr&)>& index);

}  // namespace cppi::gpu
