/// \file
/// The parallel runtime that compiled CPU kernels call into, and its settings.
///
/// Kernels split loops with `cppi_parallel_for` (cppinductor_prelude.h), which
/// calls `cppi_runtime.parallel`, implemented here on libgomp's C ABI
/// (GOMP_parallel). We load the libgomp the process already has (torch's
/// wheel ships one) instead of linking an OpenMP runtime: two runtimes with
/// spinning workers in one process made alternating eager/compiled calls
/// several times slower (DESIGN "CPU codegen"), so kernels share torch's
/// threads.
#pragma once

#include <functional>
#include <string>

#include "support/status.h"

namespace cppi::cpu {

/// Picks the libgomp to run parallel loops on. The Python side passes torch's
/// own (torch/lib/libgomp.so.1) before the first compile. Without a call, the
/// runtime uses the libgomp already loaded in the process, else loads
/// "libgomp.so.1" from the default search path, else runs loops serially.
/// Fails if the library cannot be loaded or lacks GOMP_parallel; once a
/// parallel loop has run, switching to another library is refused.
Status set_openmp_library(const std::string& path);

/// The libgomp in use ("" if none could be loaded, i.e. loops run serially).
std::string openmp_library();

/// Threads per parallel loop (Python passes torch.get_num_threads()).
/// n <= 0 restores the default: the OpenMP runtime's omp_get_max_threads().
void set_num_threads(int n);
int get_num_threads();

/// Runs a compiled kernel and throws an IndexOutOfRange CompilerError if it
/// met an index outside its dimension (cppi_check_index), an InvalidInput
/// one "ZeroDivisionError" (eager's message) if it divided an integer by
/// zero (cppi_nonzero_divisor). Its parallel workers report to this call,
/// not to kernels other threads run.
void run_checked(const std::function<void()>& kernel);

}  // namespace cppi::cpu

/// The table kernels see as `cppi_runtime` (layout in cppinductor_prelude.h).
/// The JIT resolves the symbol to this; the g++ loader copies it into each
/// kernel .so.
extern "C" const struct cppi_runtime_abi* cppi_runtime_table();
