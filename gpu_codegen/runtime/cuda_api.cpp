#include "gpu_codegen/runtime/cuda_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace cppi::gpu {
namespace {

// Resolves `symbol` (or `fallback`) into `slot`; records the first miss.
template <typename Fn>
void resolve(void* handle, const char* symbol, const char* fallback, Fn& slot,
             std::string& missing) {
  void* address = dlsym(handle, symbol);
  if (!address && fallback) address = dlsym(handle, fallback);
  if (!address) {
    if (missing.empty()) missing = symbol;
    return;
  }
  slot = reinterpret_cast<Fn>(address);
}

Expected<void*> open_library(const std::string& path, const char* what) {
  dlerror();
  // RTLD_LOCAL: our entry points must not capture other libraries' symbols.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* reason = dlerror();
    return Error::unsupported(
        cat("cannot load ", what, " '", path, "': ", reason ? reason : "unknown dlopen error"));
  }
  return handle;
}

struct DriverState {
  std::once_flag once;
  std::optional<Expected<const CudaDriverApi*>> result;
};

DriverState& driver_state() {
  static DriverState* state = new DriverState();  // never destroyed: used during exit
  return *state;
}

Expected<const CudaDriverApi*> load_and_init_driver() {
  std::string errors;
  for (const char* soname : {"libcuda.so.1", "libcuda.so"}) {
    Expected<const CudaDriverApi*> api = load_cuda_driver_library(soname);
    if (!api.ok()) {
      errors += cat("\n  ", api.error().message);
      continue;
    }
    const CudaDriverApi& d = *api.value();
    CUresult r = d.cuInit(0);
    if (r != cu::CUDA_SUCCESS)
      return Error::unsupported(
          cat("the CUDA driver is present but unusable: ", cuda_error_text(d, r, "cuInit")));
    return api;
  }
  return Error::unsupported(cat("no CUDA driver library:", errors));
}

struct NvrtcState {
  std::mutex mutex;
  std::atomic<const NvrtcApi*> api{nullptr};
  bool searched_default = false;
  std::string search_errors;
};

NvrtcState& nvrtc_state() {
  static NvrtcState* state = new NvrtcState();
  return *state;
}

std::vector<std::string> default_nvrtc_candidates() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CPPINDUCTOR_NVRTC_LIBRARY"); env && *env)
    candidates.emplace_back(env);
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    candidates.emplace_back(soname);
  return candidates;
}

}  // namespace

Expected<const CudaDriverApi*> load_cuda_driver_library(const std::string& path) {
  Expected<void*> handle = open_library(path, "CUDA driver");
  if (!handle.ok()) return handle.error();
  auto api = std::make_unique<CudaDriverApi>();
  api->library = path;
  std::string missing;
#define CPPI_RESOLVE(symbol, fallback, params) \
  resolve(handle.value(), #symbol, fallback, api->symbol, missing);
  CPPI_CUDA_DRIVER_FUNCTIONS(CPPI_RESOLVE)
#undef CPPI_RESOLVE
  if (!missing.empty()) {
    dlclose(handle.value());
    return Error::unsupported(
        cat("'", path, "' is not a usable CUDA driver: it has no symbol ", missing));
  }
  std::string optional_missing;  // an older driver: those entries stay null
#define CPPI_RESOLVE(symbol, fallback, params) \
  resolve(handle.value(), #symbol, fallback, api->symbol, optional_missing);
  CPPI_CUDA_DRIVER_OPTIONAL_FUNCTIONS(CPPI_RESOLVE)
#undef CPPI_RESOLVE
  if (api->cuDriverGetVersion(&api->driver_version) != cu::CUDA_SUCCESS) api->driver_version = 0;
  return api.release();  // kept for the life of the process, as the library is
}

Expected<const NvrtcApi*> load_nvrtc_library(const std::string& path) {
  Expected<void*> handle = open_library(path, "NVRTC");
  if (!handle.ok()) return handle.error();
  auto api = std::make_unique<NvrtcApi>();
  api->library = path;
  std::string missing;
#define CPPI_RESOLVE(symbol, fallback, params) \
  resolve(handle.value(), #symbol, fallback, api->symbol, missing);
  CPPI_NVRTC_FUNCTIONS(CPPI_RESOLVE)
#undef CPPI_RESOLVE
  resolve(handle.value(), "nvrtcGetErrorString", nullptr, api->nvrtcGetErrorString, missing);
  if (!missing.empty()) {
    dlclose(handle.value());
    return Error::unsupported(
        cat("'", path, "' is not a usable NVRTC: it has no symbol ", missing));
  }
  if (api->nvrtcVersion(&api->version_major, &api->version_minor) != cu::NVRTC_SUCCESS)
    return Error::unsupported(cat("'", path, "': nvrtcVersion failed"));
  return api.release();
}

Expected<const CudaDriverApi*> cuda_driver() {
  DriverState& state = driver_state();
  std::call_once(state.once, [&] { state.result = load_and_init_driver(); });
  return *state.result;
}

bool cuda_driver_available() { return cuda_driver().ok(); }

Expected<const NvrtcApi*> nvrtc() {
  NvrtcState& state = nvrtc_state();
  if (const NvrtcApi* api = state.api.load(std::memory_order_acquire)) return api;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (const NvrtcApi* api = state.api.load(std::memory_order_acquire)) return api;
  if (!state.searched_default) {
    state.searched_default = true;
    for (const std::string& candidate : default_nvrtc_candidates()) {
      Expected<const NvrtcApi*> api = load_nvrtc_library(candidate);
      if (api.ok()) {
        state.api.store(api.value(), std::memory_order_release);
        return api;
      }
      state.search_errors += cat("\n  ", api.error().message);
    }
  }
  return Error::unsupported(
      cat("NVRTC is not available (set CPPINDUCTOR_NVRTC_LIBRARY or call set_nvrtc_library):",
          state.search_errors));
}

bool nvrtc_available() { return nvrtc().ok(); }

Status set_nvrtc_library(const std::string& path) {
  Expected<const NvrtcApi*> api = load_nvrtc_library(path);
  if (!api.ok()) return api.error();
  NvrtcState& state = nvrtc_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  // The previous table stays allocated: another thread may be compiling with it.
  state.api.store(api.value(), std::memory_order_release);
  return Status::success();
}

std::string cuda_error_text(const CudaDriverApi& api, CUresult result, const char* call) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(result, &name) != cu::CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
  if (api.cuGetErrorString(result, &text) != cu::CUDA_SUCCESS || !text) text = "unknown error";
  return cat(call, ": ", name, " (", result, "): ", text);
}

std::string nvrtc_error_text(const NvrtcApi& api, nvrtcResult result, const char* call) {
  const char* text = api.nvrtcGetErrorString(result);
  return cat(call, ": ", text ? text : "NVRTC_ERROR unknown", " (", result, ")");
}

Status check_cuda(const CudaDriverApi& api, CUresult result, const char* call) {
  if (result == cu::CUDA_SUCCESS) return Status::success();
  return Error::internal(cuda_error_text(api, result, call));
}

}  // namespace cppi::gpu
