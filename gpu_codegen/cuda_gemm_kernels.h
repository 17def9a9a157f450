/// \file
/// GEMM kernels with their epilogues (codegen/gemm_epilogue.h) compiled into
/// callable KernelHandles: one NVRTC module for a graph's GEMM candidates,
/// each kernel launched on a fixed grid (its shapes are constants).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu_codegen/cuda_kernels.h"
#include "support/kernel_handle.h"
#include "support/status.h"

namespace cppi::gpu {

/// How a kernel taking A and B as tensor maps (a GemmTile::Kind::Tma tile)
/// sees them: matrices in rows (row strides lda, ldb, in elements), boxes 128
/// bytes wide (the 128-byte swizzle: 64 16-bit elements or 128 FP8 ones):
/// a_rows rows of A's k; b_rows rows of B's k (B stored N x K,
/// `b_k_contiguous`), else 64 k rows of 64 of B's columns (B stored K x N).
struct GemmTensorMaps {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  int a_rows = 0, b_rows = 0;
  bool half = false;  // float16, else bfloat16
  bool b_k_contiguous = true;
  bool fp8 = false;  // A and B of float8_e4m3fn (bytes to the copy engine)
};

/// One printed GEMM kernel and how it launches.
struct GemmKernelSource {
  std::string name;
  std::string text;  // print_gemm_epilogue_kernel's
  int64_t blocks = 1;
  int grid_y = 1;
  int threads = 0, shared_bytes = 0;
  int buffer_args = 0;  // its pointer parameters, A and B included
  int a_arg = 0;        // A's place among them (B's next)
  std::optional<GemmTensorMaps> maps;
};

/// A compiled GEMM kernel: run() passes buffers[0..buffer_args) as its
/// pointer parameters (sizes are in its code; symbols are ignored) and
/// launches asynchronously on `stream`. With source.maps, A and B
/// (buffers[a_arg], buffers[a_arg + 1]) go as tensor maps, encoded by the
/// driver on the host for each new pair of addresses.
class CudaGemmKernelHandle final : public KernelHandle {
 public:
  CudaGemmKernelHandle(GemmKernelSource source, CudaKernel kernel)
      : source_(std::move(source)), kernel_(std::move(kernel)) {}
  const std::string& name() const override { return source_.name; }
  const char* device() const override { return "cuda"; }
  void run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const override;

 private:
  /// A CUtensorMap's bytes (cuTensorMapEncodeTiled wants them 64-byte aligned).
  struct alignas(64) TensorMapBytes {
    std::array<unsigned char, 128> bytes{};
  };
  GemmKernelSource source_;
  CudaKernel kernel_;
  mutable std::mutex maps_mutex_;  // the last addresses' maps, reused while they repeat
  mutable const void* mapped_[2] = {nullptr, nullptr};
  mutable TensorMapBytes maps_[2];
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
