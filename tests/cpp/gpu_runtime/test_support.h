/// \file
/// What the GPU runtime tests share: finding NVRTC, skipping without a GPU,
/// and kernels small enough to check by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu_codegen/runtime/cuda_api.h"

namespace cppi::gpu::testing {

/// Installs the NVRTC named at configure time unless the environment names one.
inline bool have_nvrtc() {
  static const bool available = [] {
    const char* env = std::getenv("CPPINDUCTOR_NVRTC_LIBRARY");
    if ((!env || !*env) && *CPPI_TEST_NVRTC_LIBRARY) {
      Status s = set_nvrtc_library(CPPI_TEST_NVRTC_LIBRARY);
      if (!s.ok()) ADD_FAILURE() << s.error().message;
    }
    return nvrtc_available();
  }();
  return available;
}

#define CPPI_REQUIRE_NVRTC()                                                \
  do {                                                                      \
    if (!::cppi::gpu::testing::have_nvrtc())                                \
      GTEST_SKIP() << "no NVRTC: " << ::cppi::gpu::nvrtc().error().message; \
  } while (0)

#define CPPI_REQUIRE_GPU()                                                      \
  do {                                                                          \
    CPPI_REQUIRE_NVRTC();                                                       \
    if (!::cppi::gpu::cuda_driver_available())                                  \
      GTEST_SKIP() << "no GPU: " << ::cppi::gpu::cuda_driver().error().message; \
  } while (0)

inline const char* kVectorAddSource = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
)";

}  // namespace cppi::gpu::testing
