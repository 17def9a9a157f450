/// \file
/// Prints scheduled CUDA kernels (lowering/ir/kernel.h, GpuSchedule filled by
/// gpu_schedule.h) as one CUDA C++ translation unit for NVRTC. Codegen
/// decides nothing: it prints the mapping the schedule names and fails with
/// Error::Kind::Internal on a schedule it cannot honour.
///
/// The printer derives from the C printer (codegen/c_printer.h)
/// and shares its scalar op table; it adds what differs on the GPU: kernel
/// parameters, thread indexing, __launch_bounds__, warp/block reductions,
/// register-cached rows and 16-byte vector accesses. Math names resolve to
/// CUDA's libdevice functions through cuda_support.h.
/// The printer's class is cuda_kernel_printer.h; its parts are printed by
/// cuda_printer.cpp (prologue, module), cuda_print_grid_stride.cpp,
/// cuda_print_rows.cpp, cuda_print_scans.cpp and cuda_print_reductions.cpp.
///
/// A kernel looks like
///   // kernel: softmax_0
///   extern "C" __global__ void __launch_bounds__(256)
///   softmax_0(const float* in_x, float* out_y, int64_t s0) {
///     for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) { ...stages... }
///   }
/// Parameters: one pointer per buffer of ir::signature(kernel) (in that
/// order; a host scalar's value instead of a pointer), then one int64_t per
/// size symbol the kernel uses (signature order).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/print_options.h"
#include "lowering/ir/kernel.h"
#include "support/status.h"

namespace cppi::gpu {

using CudaPrintOptions = codegen::PrintOptions;

/// A condition the launcher checks before it runs a vectorised kernel:
/// buffer argument `buffer_arg` must be aligned to `alignment` bytes and every
/// expression in `multiples` (over size symbols) must be a multiple of
/// `divisor`.
struct VectorCheck {
  int buffer_arg = -1;  // -1: no pointer to check
  int alignment = 1;
  int64_t divisor = 1;
  std::vector<ir::IndexExpr> multiples;
};

/// What the printer did with one kernel and what launching it needs.
struct PrintedCudaKernel {
  std::string name;         // the extern "C" __global__ symbol
  std::string scalar_twin;  // the V = 1 variant of a vectorised kernel, else ""
  /// The twin as a translation unit of its own (prelude, support, the twin):
  /// the launcher compiles it on the first launch that fails vector_checks.
  std::string scalar_twin_source;
  ir::GpuSchedule schedule;
  /// Product of the outer extents: elements (pointwise, column) or rows.
  ir::IndexExpr iterations;
  /// Launch-time checks for the vectorised variant (empty when not vectorised).
  std::vector<VectorCheck> vector_checks;
  /// The size symbols it takes, in parameter order, and the position of
  /// each in the graph's symbols array.
  std::vector<std::string> symbols;
  std::vector<int> symbol_positions;
  int buffer_args = 0;
  /// Per buffer argument: a host scalar (ir::is_host_scalar), a parameter of
  /// its dtype that the launcher passes as the host pointer to the value, which
  /// the driver copies at launch. Other buffers are device pointers.
  std::vector<bool> by_value;
  bool warp_reduction = false;   // uses warp shuffles
  bool block_reduction = false;  // uses the shared-memory block reduce
  bool row_cached = false;       // single pass with the row in registers
  /// With PrintOptions::loop_ir_dumps, the kernel's loop nest
  /// (loop_ir_scheduled_cuda.txt): its grid-stride, row, column-group or
  /// scan loops as lower_*_loops built them.
  std::string loop_ir;
};

struct PrintedCudaModule {
  std::string source;  // preamble, then each of kernel_sources
  std::vector<PrintedCudaKernel> kernels;  // in input order
  /// The parts of `source`: the includes every program starts with, and each
  /// kernel's text, so a run of kernels compiles as a program of its own.
  std::string preamble;
  std::vector<std::string> kernel_sources;

  int vectorized_kernel_count() const;
};

/// One translation unit with one extern "C" __global__ function per kernel.
/// A vectorised kernel's scalar twin "<name>_scalar" is printed apart, into
/// PrintedCudaKernel::scalar_twin_source.
/// Kernel names must be distinct C identifiers; `graph_symbols` lists the
/// graph's size symbols in the order the symbols array passes them.
Expected<PrintedCudaModule> print_cuda_module(const std::vector<ir::KernelPtr>& kernels,
                                              const std::vector<std::string>& graph_symbols,
                                              const CudaPrintOptions& options = {});

}  // namespace cppi::gpu
