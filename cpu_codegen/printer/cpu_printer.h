/// \file
/// Prints scheduled CPU kernels (lowering/ir/kernel.h) as one C++ translation
/// unit for cpu::compile_cpp. Codegen decides nothing: it prints the
/// CpuSchedule each kernel carries (cpu_codegen/schedule/cpu_schedule.h fills
/// it) and fails with Error::Kind::Internal on a schedule it cannot honour.
///
/// What a kernel looks like (see the file comment of cpu_kernel_printer.h for the
/// shapes of loops, vector code and reductions):
///   // kernel: softmax_0
///   // origins: amax, sub, exp, sum, div
///   extern "C" void softmax_0(void* const* buffers, const int64_t* symbols) {
///     const float* in_arg0 = (const float*)buffers[0];
///     float* out_buf4 = (float*)buffers[1];
///     cppi_parallel_for(0, 1024, 4, [&](int64_t begin, int64_t end) {
///       for (int64_t x0 = begin; x0 < end; ++x0) { ...stages... }
///     });
///   }
/// The calling convention is support/kernel_handle.h's: buffers in the order
/// of ir::signature(kernel).buffers, symbols in the graph's order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/print_options.h"
#include "lowering/ir/kernel.h"
#include "support/status.h"

namespace cppi::cpu {

using PrintOptions = codegen::PrintOptions;

/// What the printer did with one kernel (tests assert these claims).
struct PrintedKernel {
  std::string name;  // the extern "C" symbol
  bool vectorized = false;
  int vector_width = 1;
  bool parallel = false;  // under cppi_parallel_for or cppi_parallel_reduce
  /// With PrintOptions::loop_ir_dumps: its loop nest after each pass
  /// (loop_ir_scheduled.txt).
  std::string loop_ir;
};

struct PrintedModule {
  std::string source;                  // cpu_module_source(kernel_sources)
  std::vector<PrintedKernel> kernels;  // in input order
  std::vector<std::string> kernel_sources;  // each kernel's definition, in input order

  int vectorized_kernel_count() const;
};

/// One translation unit with one extern "C" function per kernel. Kernel
/// names must be distinct C identifiers; `graph_symbols` lists the graph's
/// size symbols in the order the symbols array passes them.
Expected<PrintedModule> print_cpu_module(const std::vector<ir::KernelPtr>& kernels,
                                         const std::vector<std::string>& graph_symbols,
                                         const PrintOptions& options = {});

/// A translation unit of the given kernel definitions (PrintedModule::
/// kernel_sources, any subset in any order): the include, then each.
std::string cpu_module_source(const std::vector<const std::string*>& kernel_sources);

}  // namespace cppi::cpu
