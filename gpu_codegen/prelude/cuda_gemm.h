/// \file
/// The GEMM template's text (cppinductor_cuda_gemm.cuh), embedded into the
/// library at build time, as the prelude is (cuda_prelude.h).
#pragma once

#include <string_view>

namespace cppi::gpu {

/// The name GEMM kernels #include; their compile hands NVRTC this text under it.
inline constexpr const char* kCudaGemmName = "cppinductor_cuda_gemm.cuh";

std::string_view cuda_gemm_source();

}  // namespace cppi::gpu
