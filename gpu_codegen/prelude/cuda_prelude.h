/// \file
/// The CUDA prelude's text, embedded into the library at build time from
/// cppinductor_cuda_prelude.cuh (NVRTC cannot be relied on to find files).
#pragma once

#include <string_view>

namespace cppi::gpu {

/// The name generated kernels #include; compile_cuda serves it from memory.
inline constexpr const char* kCudaPreludeName = "cppinductor_cuda_prelude.cuh";

std::string_view cuda_prelude_source();

}  // namespace cppi::gpu
