/// \file
/// GEMM kernels with their epilogues (codegen/gemm_epilogue.h) compiled into
/// callable KernelHandles: one NVRTC module for a graph's GEMM candidates,
/// each kernel launched on a fixed grid (its shapes are constants).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu_codegen/cuda_kernels.h"
#include "support/kernel_handle.h"
#include "support/status.h"

namespace cppi::gpu {

/// One printed GEMM kernel and how it launches.
struct GemmKernelSource {
  std::string name;
  std::string text;  // print_gemm_epilogue_kernel's
  int64_t blocks = 1;
  int threads = 0, shared_bytes = 0;
  int buffer_args = 0;  // its pointer parameters
};

/// A compiled GEMM kernel: run() passes buffers[0..buffer_args) as its
/// pointer parameters (sizes are in its code; symbols are ignored) and
/// launches asynchronously on `stream`.
class CudaGemmKernelHandle final : public KernelHandle {
 public:
  CudaGemmKernelHandle(GemmKernelSource source, CudaKernel kernel)
      : source_(std::move(source)), kernel_(std::move(kernel)) {}
  const std::string& name() const override { return source_.name; }
  const char* device() const override { return "cuda"; }
  void run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const override;

 private:
  GemmKernelSource source_;
  CudaKernel kernel_;
};

struct CompiledGemmKernels {
  std::vector<std::shared_ptr<KernelHandle>> kernels;  // in input order
  std::string source;                                   // the module (.cu)
  double nvrtc_ms = 0.0;
};

/// Compiles `kernels` (distinct names) as one module, the GEMM template
/// served to NVRTC from memory; errors as compile_cuda_kernels'.
Expected<CompiledGemmKernels> compile_gemm_kernels(const std::vector<GemmKernelSource>& kernels,
                                                   const CudaKernelOptions& options = {});

}  // namespace cppi::gpu
