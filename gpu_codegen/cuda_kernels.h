/// \file
/// Scheduled CUDA kernels -> callable KernelHandles: prints one module for
/// all kernels of a graph (print_cuda_module), compiles it with NVRTC to PTX
/// for the current device (compile_cuda; or to cubins, as several programs
/// side by side), loads it (CudaModule) and wraps
/// each kernel in a handle that computes its grid from the size symbols at
/// launch, picks the vectorised or scalar variant after checking alignment,
/// and launches on the caller's stream. The mirror of
/// cpu_codegen/cpu_kernels.h.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/runtime/cuda_module.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "lowering/ir/kernel.h"
#include "support/kernel_handle.h"
#include "support/status.h"

namespace cppi::gpu {

struct CudaKernelOptions {
  CudaPrintOptions print;
  NvrtcOptions nvrtc;
  /// major*10+minor to compile for; 0 = the current device's.
  int compute_capability = 0;
};

/// A compiled kernel. run() launches asynchronously on `stream` (a CUstream,
/// 0 = the legacy default stream); launch failures throw CompilerError, and so
/// does a scalar twin that NVRTC or the driver cannot compile.
class CudaKernelHandle final : public KernelHandle {
 public:
  /// A vectorised kernel (info.scalar_twin set) compiles its twin from
  /// info.scalar_twin_source, with `twin_options`, on the first launch whose
  /// buffers or sizes fail the vector checks.
  CudaKernelHandle(PrintedCudaKernel info, CudaKernel kernel, CudaKernelOptions twin_options = {});

  const std::string& name() const override { return info_.name; }
  const char* device() const override { return "cuda"; }
  void run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const override;

  const PrintedCudaKernel& info() const { return info_; }
  /// The launch configuration run() would use (for tests and benchmarks).
  struct Launch {
    Dim3 grid, block;
    bool vectorized = false;  // the vectorised variant passes its checks
    int64_t iterations = 0;
  };
  Launch plan(void* const* buffers, const int64_t* symbols) const;
  /// The scalar twin, compiled now if it was not yet (Internal when the
  /// kernel has none).
  Expected<CudaKernel> scalar_twin() const;
  /// Whether the twin has been compiled (tests: aligned launches never do).
  bool scalar_twin_compiled() const;

 private:
  int64_t evaluate(const ir::IndexExpr& e, const int64_t* symbols) const;

  PrintedCudaKernel info_;
  CudaKernel kernel_;
  CudaKernelOptions twin_options_;
  mutable std::mutex twin_mutex_;
  mutable std::optional<CudaKernel> scalar_;
  std::vector<std::string> symbol_names_;  // by graph position, for evaluate()
};

struct CompiledCudaKernels {
  std::vector<std::shared_ptr<CudaKernelHandle>> kernels;  // in input order
  std::string source;                                       // the printed module (.cu)
  std::string ptx;                                          // what NVRTC produced (.ptx; empty for cubins)
  std::string nvrtc_log;
  int arch = 0;             // the compute_XX (or sm_XX) compiled for
  double nvrtc_ms = 0.0;    // wall time of the compile; 0 when every program came from a cache
  double load_ms = 0.0;     // loading the modules: the driver's JIT of PTX (cuModuleLoadData)
};

/// The NVRTC programs a printed module compiles as: runs of whole kernels,
/// each with the module's preamble, `programs` of them at most (fewer where
/// a program would hold under kMinKernelsPerProgram kernels); their kernels
/// in order are the module's. `first_kernel[p]` is program p's first kernel.
inline constexpr size_t kMinKernelsPerProgram = 4;
struct ModulePrograms {
  std::vector<std::string> sources;
  std::vector<size_t> first_kernel;
};
ModulePrograms split_module(const PrintedCudaModule& module, size_t programs);

/// Prints, compiles and loads `kernels`: one module, or under
/// NvrtcOptions::cubin (where ptxas is most of the compile) one program per
/// thread the host has, up to eight, compiled side by side. Print failures are
/// Internal errors; NVRTC or driver JIT failures CompileFailed with the log;
/// no GPU or no NVRTC is Unsupported.
Expected<CompiledCudaKernels> compile_cuda_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                   const std::vector<std::string>& graph_symbols,
                                                   const CudaKernelOptions& options = {});

}  // namespace cppi::gpu
