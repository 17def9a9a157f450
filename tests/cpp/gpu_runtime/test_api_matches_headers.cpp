// Our self-declared driver/NVRTC prototypes and constants against cuda.h and
// nvrtc.h: a wrong parameter type would otherwise only show as a crash on a
// GPU machine. Enums and result codes are `int` on our side, so the real
// signature is compared after mapping every enum (and pointer to enum) to int.
#include <cuda.h>
#if CPPI_HAVE_NVRTC_H
#include <nvrtc.h>
#endif

#include <gtest/gtest.h>

#include <type_traits>

#include "gpu_codegen/runtime/cuda_api.h"

namespace cppi::gpu {
namespace {

template <typename T, typename = void>
struct AsDeclared {
  using type = T;
};
template <typename T>
struct AsDeclared<T, std::enable_if_t<std::is_enum_v<T>>> {
  using type = int;
};
template <typename T>
struct AsDeclared<T*, std::enable_if_t<std::is_enum_v<T>>> {
  using type = int*;
};
template <typename T>
using as_declared_t = typename AsDeclared<T>::type;

template <typename F>
struct Signature;
template <typename R, typename... Args>
struct Signature<R (*)(Args...)> {
  using type = as_declared_t<R> (*)(as_declared_t<Args>...);
};

static_assert(std::is_same_v<cppi::gpu::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<cppi::gpu::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<cppi::gpu::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<cppi::gpu::CUstream, ::CUstream>);
static_assert(std::is_same_v<cppi::gpu::CUevent, ::CUevent>);
static_assert(std::is_same_v<cppi::gpu::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<cppi::gpu::CUdeviceptr, ::CUdeviceptr>);
static_assert(sizeof(::CUresult) == sizeof(int));

#define CPPI_CHECK_PROTOTYPE(symbol, fallback, params)                                       \
  static_assert(                                                                             \
      std::is_same_v<decltype(CudaDriverApi::symbol), Signature<decltype(&::symbol)>::type>, \
      #symbol " differs from cuda.h");
CPPI_CUDA_DRIVER_FUNCTIONS(CPPI_CHECK_PROTOTYPE)
CPPI_CUDA_DRIVER_OPTIONAL_FUNCTIONS(CPPI_CHECK_PROTOTYPE)
#undef CPPI_CHECK_PROTOTYPE

#if CPPI_HAVE_NVRTC_H
static_assert(std::is_same_v<cppi::gpu::nvrtcProgram, ::nvrtcProgram>);
#define CPPI_CHECK_PROTOTYPE(symbol, fallback, params)                                            \
  static_assert(std::is_same_v<decltype(NvrtcApi::symbol), Signature<decltype(&::symbol)>::type>, \
                #symbol " differs from nvrtc.h");
CPPI_NVRTC_FUNCTIONS(CPPI_CHECK_PROTOTYPE)
#undef CPPI_CHECK_PROTOTYPE
static_assert(std::is_same_v<decltype(NvrtcApi::nvrtcGetErrorString),
                             Signature<decltype(&::nvrtcGetErrorString)>::type>);
#endif

TEST(CudaApiMatchesHeaders, Constants) {
  EXPECT_EQ(cu::CUDA_SUCCESS, ::CUDA_SUCCESS);
  EXPECT_EQ(cu::CUDA_ERROR_INVALID_VALUE, ::CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu::CUDA_ERROR_NOT_INITIALIZED, ::CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu::CUDA_ERROR_DEINITIALIZED, ::CUDA_ERROR_DEINITIALIZED);
  EXPECT_EQ(cu::CUDA_ERROR_STUB_LIBRARY, ::CUDA_ERROR_STUB_LIBRARY);
  EXPECT_EQ(cu::CUDA_ERROR_NO_DEVICE, ::CUDA_ERROR_NO_DEVICE);
  EXPECT_EQ(cu::CUDA_ERROR_INVALID_CONTEXT, ::CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu::CUDA_ERROR_INVALID_PTX, ::CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(cu::CUDA_ERROR_UNSUPPORTED_PTX_VERSION, ::CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  EXPECT_EQ(cu::CUDA_ERROR_NOT_FOUND, ::CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  EXPECT_EQ(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  EXPECT_EQ(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  EXPECT_EQ(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  EXPECT_EQ(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  EXPECT_EQ(cu::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  EXPECT_EQ(cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, ::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  EXPECT_EQ(cu::CU_FUNC_ATTRIBUTE_NUM_REGS, ::CU_FUNC_ATTRIBUTE_NUM_REGS);
  EXPECT_EQ(cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            ::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  EXPECT_EQ(cu::CU_JIT_INFO_LOG_BUFFER, ::CU_JIT_INFO_LOG_BUFFER);
  EXPECT_EQ(cu::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, ::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
  EXPECT_EQ(cu::CU_JIT_ERROR_LOG_BUFFER, ::CU_JIT_ERROR_LOG_BUFFER);
  EXPECT_EQ(cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, ::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
  EXPECT_EQ(cu::CU_EVENT_DEFAULT, static_cast<unsigned>(::CU_EVENT_DEFAULT));
  EXPECT_EQ(cu::CU_EVENT_DISABLE_TIMING, static_cast<unsigned>(::CU_EVENT_DISABLE_TIMING));
  EXPECT_EQ(cu::CU_STREAM_NON_BLOCKING, static_cast<unsigned>(::CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(cu::CU_STREAM_CAPTURE_STATUS_NONE, ::CU_STREAM_CAPTURE_STATUS_NONE);
#if CPPI_HAVE_NVRTC_H
  EXPECT_EQ(cu::NVRTC_SUCCESS, ::NVRTC_SUCCESS);
  EXPECT_EQ(cu::NVRTC_ERROR_COMPILATION, ::NVRTC_ERROR_COMPILATION);
#endif
}

}  // namespace
}  // namespace cppi::gpu
