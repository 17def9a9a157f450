/// \file
/// The CUDA driver and NVRTC entry points the GPU runtime uses, loaded at run
/// time with dlopen so that the compiler core builds, imports and runs its CPU
/// paths on machines with neither cuda.h/nvrtc.h nor the libraries.
///
/// We declare the handful of types and prototypes ourselves, spelled as in
/// cuda.h / nvrtc.h (handles are pointers to the same opaque structs, result
/// codes and enums are `int`). tests/cpp/gpu_runtime/test_api_matches_headers
/// checks every prototype against the real headers where they exist.
///
/// Each function list is an X-macro: X(symbol, fallback symbol or nullptr,
/// parameter list). Members are named after the exported symbol (`_v2` where
/// the driver versions the ABI), so a call site says which ABI it uses.
///
/// Loading is lazy and thread-safe; a library that loaded once is never
/// unloaded (kernels and contexts may still refer to it at exit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/status.h"

// The opaque handle structs, with cuda.h's / nvrtc.h's names, so our handle
// types are the very same types when both headers meet in one file.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUtensorMap_st;
struct _nvrtcProgram;

namespace cppi::gpu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using nvrtcResult = int;
using nvrtcProgram = _nvrtcProgram*;

/// The enum values we pass or compare, with their cuda.h names and values.
namespace cu {
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

inline constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

inline constexpr unsigned CU_EVENT_DEFAULT = 0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;

inline constexpr nvrtcResult NVRTC_SUCCESS = 0;
inline constexpr nvrtcResult NVRTC_ERROR_COMPILATION = 6;
}  // namespace cu

// X(symbol, fallback symbol or nullptr, parameters); every one returns CUresult.
#define CPPI_CUDA_DRIVER_FUNCTIONS(X)                                                             \
  X(cuInit, nullptr, (unsigned int flags))                                                        \
  X(cuDriverGetVersion, nullptr, (int* driver_version))                                           \
  X(cuGetErrorName, nullptr, (CUresult error, const char** name))                                 \
  X(cuGetErrorString, nullptr, (CUresult error, const char** text))                               \
  X(cuDeviceGet, nullptr, (CUdevice * device, int ordinal))                                       \
  X(cuDeviceGetCount, nullptr, (int* count))                                                      \
  X(cuDeviceGetName, nullptr, (char* name, int len, CUdevice dev))                                \
  X(cuDeviceGetAttribute, nullptr, (int* value, int attribute, CUdevice dev))                     \
  X(cuDevicePrimaryCtxRetain, nullptr, (CUcontext * context, CUdevice dev))                       \
  X(cuDevicePrimaryCtxRelease_v2, nullptr, (CUdevice dev))                                        \
  X(cuCtxGetCurrent, nullptr, (CUcontext * context))                                              \
  X(cuCtxSetCurrent, nullptr, (CUcontext context))                                                \
  X(cuCtxPushCurrent_v2, nullptr, (CUcontext context))                                            \
  X(cuCtxPopCurrent_v2, nullptr, (CUcontext * context))                                           \
  X(cuCtxGetDevice, nullptr, (CUdevice * device))                                                 \
  X(cuCtxSynchronize, nullptr, ())                                                                \
  X(cuModuleLoadDataEx, nullptr,                                                                  \
    (CUmodule * module, const void* image, unsigned int num_options, int* options,                \
     void** option_values))                                                                       \
  X(cuModuleGetFunction, nullptr, (CUfunction * function, CUmodule module, const char* name))     \
  X(cuModuleUnload, nullptr, (CUmodule module))                                                   \
  X(cuFuncGetAttribute, nullptr, (int* value, int attribute, CUfunction function))                \
  X(cuFuncSetAttribute, nullptr, (CUfunction function, int attribute, int value))                 \
  X(cuLaunchKernel, nullptr,                                                                      \
    (CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,                 \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, \
     CUstream stream, void** kernel_params, void** extra))                                        \
  X(cuMemAlloc_v2, nullptr, (CUdeviceptr * ptr, size_t bytes))                                    \
  X(cuMemFree_v2, nullptr, (CUdeviceptr ptr))                                                     \
  X(cuMemcpyHtoD_v2, nullptr, (CUdeviceptr dst, const void* src, size_t bytes))                   \
  X(cuMemcpyDtoH_v2, nullptr, (void* dst, CUdeviceptr src, size_t bytes))                         \
  X(cuMemsetD8_v2, nullptr, (CUdeviceptr dst, unsigned char value, size_t count))                 \
  X(cuStreamCreate, nullptr, (CUstream * stream, unsigned int flags))                              \
  X(cuStreamDestroy_v2, nullptr, (CUstream stream))                                               \
  X(cuStreamSynchronize, nullptr, (CUstream stream))                                              \
  X(cuStreamWaitEvent, nullptr, (CUstream stream, CUevent event, unsigned int flags))             \
  X(cuStreamIsCapturing, nullptr, (CUstream stream, int* capture_status))                         \
  X(cuEventCreate, nullptr, (CUevent * event, unsigned int flags))                                \
  X(cuEventRecord, nullptr, (CUevent event, CUstream stream))                                     \
  X(cuEventSynchronize, nullptr, (CUevent event))                                                 \
  X(cuEventElapsedTime_v2, "cuEventElapsedTime", (float* ms, CUevent start, CUevent end))         \
  X(cuEventDestroy_v2, nullptr, (CUevent event))

// Entry points of newer drivers (CUDA 12 and later), left null by older ones:
// callers check before use.
#define CPPI_CUDA_DRIVER_OPTIONAL_FUNCTIONS(X)                                                    \
  X(cuTensorMapEncodeTiled, nullptr,                                                              \
    (CUtensorMap_st * tensor_map, int data_type, std::uint32_t rank, void* global_address,        \
     const std::uint64_t* global_dim, const std::uint64_t* global_strides,                        \
     const std::uint32_t* box_dim, const std::uint32_t* element_strides, int interleave,          \
     int swizzle, int l2_promotion, int oob_fill))

// Every one returns nvrtcResult; nvrtcGetErrorString is declared by hand.
#define CPPI_NVRTC_FUNCTIONS(X)                                                     \
  X(nvrtcVersion, nullptr, (int* major, int* minor))                                \
  X(nvrtcGetNumSupportedArchs, nullptr, (int* count))                               \
  X(nvrtcGetSupportedArchs, nullptr, (int* archs))                                  \
  X(nvrtcCreateProgram, nullptr,                                                    \
    (nvrtcProgram * program, const char* source, const char* name, int num_headers, \
     const char* const* headers, const char* const* include_names))                 \
  X(nvrtcCompileProgram, nullptr,                                                   \
    (nvrtcProgram program, int num_options, const char* const* options))            \
  X(nvrtcGetPTXSize, nullptr, (nvrtcProgram program, size_t* size))                 \
  X(nvrtcGetPTX, nullptr, (nvrtcProgram program, char* ptx))                        \
  X(nvrtcGetCUBINSize, nullptr, (nvrtcProgram program, size_t* size))               \
  X(nvrtcGetCUBIN, nullptr, (nvrtcProgram program, char* cubin))                    \
  X(nvrtcGetProgramLogSize, nullptr, (nvrtcProgram program, size_t* size))          \
  X(nvrtcGetProgramLog, nullptr, (nvrtcProgram program, char* log))                 \
  X(nvrtcDestroyProgram, nullptr, (nvrtcProgram * program))

/// The driver entry points, resolved from one libcuda.
struct CudaDriverApi {
#define CPPI_DECLARE_ENTRY(symbol, fallback, params) CUresult(*symbol) params = nullptr;
  CPPI_CUDA_DRIVER_FUNCTIONS(CPPI_DECLARE_ENTRY)
  CPPI_CUDA_DRIVER_OPTIONAL_FUNCTIONS(CPPI_DECLARE_ENTRY)
#undef CPPI_DECLARE_ENTRY
  std::string library;     ///< what dlopen was given
  int driver_version = 0;  ///< e.g. 13000 for CUDA 13.0
};

/// The NVRTC entry points, resolved from one libnvrtc.
struct NvrtcApi {
#define CPPI_DECLARE_ENTRY(symbol, fallback, params) nvrtcResult(*symbol) params = nullptr;
  CPPI_NVRTC_FUNCTIONS(CPPI_DECLARE_ENTRY)
#undef CPPI_DECLARE_ENTRY
  const char* (*nvrtcGetErrorString)(nvrtcResult result) = nullptr;
  std::string library;
  int version_major = 0;
  int version_minor = 0;
};

/// The process's CUDA driver, loaded on first use (libcuda.so.1, then
/// libcuda.so) and initialised with cuInit(0). dlopen of an already loaded
/// soname returns the copy torch uses, so contexts and streams are shared.
/// Fails with Error::Kind::Unsupported when there is no library or no device;
/// the failure is remembered (the driver does not appear later in a process).
Expected<const CudaDriverApi*> cuda_driver();
bool cuda_driver_available();

/// NVRTC, loaded on first use from, in order: the library given to
/// set_nvrtc_library, $CPPINDUCTOR_NVRTC_LIBRARY, then the sonames
/// libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so. Fails with
/// Error::Kind::Unsupported when none loads; a later set_nvrtc_library can
/// still succeed.
Expected<const NvrtcApi*> nvrtc();
bool nvrtc_available();

/// Uses the NVRTC at `path` from now on (the Python side passes the one
/// bundled with torch's wheel, which no soname search finds). On failure the
/// NVRTC in use, if any, stays.
Status set_nvrtc_library(const std::string& path);

/// Resolve every entry point from the library at `path` (a path or a soname)
/// without installing it; the two functions above are built on these, tests
/// use them to see how a broken library is reported. Does not call cuInit.
Expected<const CudaDriverApi*> load_cuda_driver_library(const std::string& path);
Expected<const NvrtcApi*> load_nvrtc_library(const std::string& path);

/// "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed".
std::string cuda_error_text(const CudaDriverApi& api, CUresult result, const char* call);
std::string nvrtc_error_text(const NvrtcApi& api, nvrtcResult result, const char* call);

/// Success, or an Internal error carrying cuda_error_text.
Status check_cuda(const CudaDriverApi& api, CUresult result, const char* call);

}  // namespace cppi::gpu
