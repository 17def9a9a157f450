#include "gpu_codegen/runtime/cuda_module.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cppi::gpu {
namespace detail {

// Where the last launch of a kernel with module state went: its stream and an
// event recorded after it, so that a launch on another stream can wait for it.
struct LaunchOrder {
  std::mutex mutex;  // held across wait, launch and record of one launch
  CUevent event = nullptr;  // created on the first launch, in the module's context
  CUstream stream = nullptr;
  bool recorded = false;  // `event` marks the end of the last launch, on `stream`
};

struct LoadedModule {
  const CudaDriverApi* api = nullptr;
  CUmodule module = nullptr;
  CUcontext context = nullptr;
  std::string jit_log;
  // One per function with module state, shared by every CudaKernel of it.
  std::mutex orders_mutex;
  std::unordered_map<CUfunction, std::unique_ptr<LaunchOrder>> orders;

  ~LoadedModule() {
    // cuModuleUnload acts on the module's context, which may not be current
    // on this thread. Errors are ignored: at process exit the driver may
    // already be shut down (CUDA_ERROR_DEINITIALIZED), and there is no one
    // to report to from a destructor.
    if (api->cuCtxPushCurrent_v2(context) != cu::CUDA_SUCCESS) return;
    for (auto& [function, order] : orders)
      if (order->event) api->cuEventDestroy_v2(order->event);
    api->cuModuleUnload(module);
    CUcontext popped = nullptr;
    api->cuCtxPopCurrent_v2(&popped);
  }
};

struct KernelState {
  std::shared_ptr<LoadedModule> module;
  CUfunction function = nullptr;
  LaunchOrder* order = nullptr;  // owned by `module`; set when it has module state
  std::string name;
  int max_threads_per_block = 0;
  int num_registers = 0;
  int static_shared_bytes = 0;
  // The dynamic shared memory this function may use: 48 KiB until raised.
  // Only ever raised, under the mutex, so a concurrent launch needing more
  // never finds it lowered under its feet.
  std::atomic<unsigned> dynamic_shared_limit{48 * 1024};
  std::mutex raise_limit;
};

}  // namespace detail

namespace {

constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;

// The ".version X.Y" line of a PTX text, for error messages.
std::string ptx_isa_version(const std::string& ptx) {
  const size_t at = ptx.find(".version ");
  if (at == std::string::npos) return "?";
  const size_t end = ptx.find('\n', at);
  return ptx.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
}

std::string from_log_buffer(const std::vector<char>& buffer) {
  std::string log(buffer.data(), strnlen(buffer.data(), buffer.size()));
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace

const std::string& CudaKernel::name() const { return state_->name; }
CUfunction CudaKernel::handle() const { return state_->function; }
CUcontext CudaKernel::context() const { return state_->module->context; }
int CudaKernel::max_threads_per_block() const { return state_->max_threads_per_block; }
int CudaKernel::num_registers() const { return state_->num_registers; }
int CudaKernel::static_shared_bytes() const { return state_->static_shared_bytes; }

Expected<CUcontext> ensure_current_context(int device) {
  Expected<const CudaDriverApi*> api = cuda_driver();
  if (!api.ok()) return api.error();
  const CudaDriverApi& d = *api.value();
  CUcontext context = nullptr;
  if (Status s = check_cuda(d, d.cuCtxGetCurrent(&context), "cuCtxGetCurrent"); !s.ok())
    return s.error();
  if (context) return context;
  CUdevice dev = 0;
  if (Status s = check_cuda(d, d.cuDeviceGet(&dev, device), "cuDeviceGet"); !s.ok())
    return Error::invalid_input(cat("CUDA device ", device, ": ", s.error().message));
  if (Status s =
          check_cuda(d, d.cuDevicePrimaryCtxRetain(&context, dev), "cuDevicePrimaryCtxRetain");
      !s.ok())
    return s.error();
  if (Status s = check_cuda(d, d.cuCtxSetCurrent(context), "cuCtxSetCurrent"); !s.ok())
    return s.error();
  return context;
}

Expected<CUdevice> current_device(int device) {
  Expected<CUcontext> context = ensure_current_context(device);
  if (!context.ok()) return context.error();
  const CudaDriverApi& d = *cuda_driver().value();
  CUdevice dev = 0;
  if (Status s = check_cuda(d, d.cuCtxGetDevice(&dev), "cuCtxGetDevice"); !s.ok()) return s.error();
  return dev;
}

Expected<DeviceProperties> current_device_properties(int device) {
  Expected<CUdevice> dev = current_device(device);
  if (!dev.ok()) return dev.error();
  const CudaDriverApi& d = *cuda_driver().value();
  DeviceProperties properties;
  properties.device = dev.value();
  int major = 0, minor = 0;
  struct {
    int attribute;
    int* value;
    const char* what;
  } queries[] = {
      {cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major, "COMPUTE_CAPABILITY_MAJOR"},
      {cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor, "COMPUTE_CAPABILITY_MINOR"},
      {cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &properties.multiprocessors,
       "MULTIPROCESSOR_COUNT"},
      {cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &properties.max_threads_per_block,
       "MAX_THREADS_PER_BLOCK"},
      {cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       &properties.max_shared_bytes_per_block, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
  };
  for (const auto& q : queries)
    if (Status s = check_cuda(d, d.cuDeviceGetAttribute(q.value, q.attribute, dev.value()),
                              cat("cuDeviceGetAttribute(", q.what, ")").c_str());
        !s.ok())
      return s.error();
  properties.compute_capability = major * 10 + minor;
  char name[256] = {};
  if (Status s =
          check_cuda(d, d.cuDeviceGetName(name, sizeof name, dev.value()), "cuDeviceGetName");
      !s.ok())
    return s.error();
  properties.name = name;
  return properties;
}

Expected<int> current_device_compute_capability(int device) {
  Expected<DeviceProperties> properties = current_device_properties(device);
  if (!properties.ok()) return properties.error();
  return properties->compute_capability;
}

Expected<CudaModule> CudaModule::load(const PtxProgram& program) {
  return program.cubin.empty() ? load_ptx(program.ptx) : load_image(program.cubin.data(), nullptr);
}

Expected<CudaModule> CudaModule::load_ptx(const std::string& ptx) { return load_image(ptx.c_str(), &ptx); }

Expected<CudaModule> CudaModule::load_image(const void* image, const std::string* ptx) {
  Expected<CUcontext> context = ensure_current_context(0);
  if (!context.ok()) return context.error();
  const CudaDriverApi& d = *cuda_driver().value();

  std::vector<char> info_log(16 * 1024, '\0');
  std::vector<char> error_log(16 * 1024, '\0');
  int options[] = {cu::CU_JIT_INFO_LOG_BUFFER, cu::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   cu::CU_JIT_ERROR_LOG_BUFFER, cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Sizes travel in the void* slots themselves, as the driver API specifies.
  void* values[] = {info_log.data(), reinterpret_cast<void*>(info_log.size()), error_log.data(),
                    reinterpret_cast<void*>(error_log.size())};

  CUmodule module = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&module, image, 4, options, values);
  if (r != cu::CUDA_SUCCESS) {
    std::string message = cat("the CUDA driver could not load the ", ptx ? "PTX" : "cubin", " (",
                              cuda_error_text(d, r, "cuModuleLoadDataEx"), ")");
    if (ptx && r == cu::CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      message += cat("; PTX ISA ", ptx_isa_version(*ptx), " is newer than this driver (CUDA ",
                     d.driver_version / 1000, ".", d.driver_version % 1000 / 10,
                     ") accepts: use an NVRTC no newer than the driver");
    const std::string log = from_log_buffer(error_log);
    if (!log.empty()) message += ":\n" + log;
    return Error::compile_failed(message);
  }
  auto loaded = std::make_shared<detail::LoadedModule>();
  loaded->api = &d;
  loaded->module = module;
  loaded->context = context.value();
  loaded->jit_log = from_log_buffer(info_log);
  return CudaModule(std::move(loaded));
}

Expected<CudaKernel> CudaModule::function(const std::string& name, bool module_state) const {
  const CudaDriverApi& d = *module_->api;
  CUfunction function = nullptr;
  CUresult r = d.cuModuleGetFunction(&function, module_->module, name.c_str());
  if (r == cu::CUDA_ERROR_NOT_FOUND)
    return Error::invalid_input(cat("the module has no kernel named '", name, "'"));
  if (Status s = check_cuda(d, r, "cuModuleGetFunction"); !s.ok()) return s.error();

  auto state = std::make_shared<detail::KernelState>();
  state->module = module_;
  state->function = function;
  state->name = name;
  if (module_state) {
    std::lock_guard<std::mutex> lock(module_->orders_mutex);
    std::unique_ptr<detail::LaunchOrder>& order = module_->orders[function];
    if (!order) order = std::make_unique<detail::LaunchOrder>();
    state->order = order.get();
  }
  struct {
    int attribute;
    int* value;
    const char* what;
  } queries[] = {
      {cu::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &state->max_threads_per_block,
       "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)"},
      {cu::CU_FUNC_ATTRIBUTE_NUM_REGS, &state->num_registers, "cuFuncGetAttribute(NUM_REGS)"},
      {cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &state->static_shared_bytes,
       "cuFuncGetAttribute(SHARED_SIZE_BYTES)"},
  };
  for (const auto& q : queries)
    if (Status s = check_cuda(d, d.cuFuncGetAttribute(q.value, q.attribute, function), q.what);
        !s.ok())
      return s.error();
  return CudaKernel(std::move(state));
}

const std::string& CudaModule::jit_log() const { return module_->jit_log; }
CUcontext CudaModule::context() const { return module_->context; }

namespace {

Status raise_dynamic_shared_limit(const CudaDriverApi& d, detail::KernelState& k,
                                  unsigned shared_bytes) {
  std::lock_guard<std::mutex> lock(k.raise_limit);
  if (shared_bytes <= k.dynamic_shared_limit.load(std::memory_order_acquire))
    return Status::success();  // another launch raised it meanwhile
  CUresult r = d.cuFuncSetAttribute(k.function, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    static_cast<int>(shared_bytes));
  if (r != cu::CUDA_SUCCESS)
    return Error::invalid_input(
        cat("launch of '", k.name, "' with ", shared_bytes,
            " bytes of dynamic shared memory: ", cuda_error_text(d, r, "cuFuncSetAttribute")));
  k.dynamic_shared_limit.store(shared_bytes, std::memory_order_release);
  return Status::success();
}

// The per-thread default stream's handle names a different stream on every
// thread, so equal handles do not mean one stream.
const CUstream kPerThreadDefaultStream = reinterpret_cast<CUstream>(uintptr_t{2});

// Before a launch of a kernel with module state (order.mutex held): makes
// `stream` wait for the kernel's last launch when that went to another
// stream. Sets `capturing` when the stream is being captured into a graph,
// where no event work is done (see launch() in the header).
Status order_before_launch(const CudaDriverApi& d, detail::LaunchOrder& order, CUstream stream,
                           bool& capturing) {
  int status = cu::CU_STREAM_CAPTURE_STATUS_NONE;
  if (Status s = check_cuda(d, d.cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
      !s.ok())
    return s;
  capturing = status != cu::CU_STREAM_CAPTURE_STATUS_NONE;
  if (capturing) return Status::success();
  if (!order.event) {
    if (Status s = check_cuda(d, d.cuEventCreate(&order.event, cu::CU_EVENT_DISABLE_TIMING),
                              "cuEventCreate");
        !s.ok())
      return s;
  }
  const bool same_stream = order.stream == stream && stream != kPerThreadDefaultStream;
  if (order.recorded && !same_stream)
    return check_cuda(d, d.cuStreamWaitEvent(stream, order.event, 0), "cuStreamWaitEvent");
  return Status::success();
}

// After the launch: the event now marks its end, for the next launch.
Status order_after_launch(const CudaDriverApi& d, detail::LaunchOrder& order, CUstream stream) {
  CUresult r = d.cuEventRecord(order.event, stream);
  if (r != cu::CUDA_SUCCESS) {
    // Without the event a later launch elsewhere could overlap this one:
    // finish it here instead (it waited for every earlier one), so the order
    // holds either way.
    if (d.cuStreamSynchronize(stream) == cu::CUDA_SUCCESS) order.recorded = false;
    return check_cuda(d, r, "cuEventRecord");
  }
  order.stream = stream;
  order.recorded = true;
  return Status::success();
}

}  // namespace

Status launch(const CudaKernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes,
              uintptr_t stream, void** args) {
  detail::KernelState& k = *kernel.state_;
  const CudaDriverApi& d = *k.module->api;

  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || 1ull * grid.x * grid.y * grid.z == 0)
    return Error::invalid_input(cat("launch of '", k.name, "' with an empty grid or block"));
  if (threads > static_cast<unsigned long long>(k.max_threads_per_block))
    return Error::invalid_input(cat("launch of '", k.name, "' with ", threads,
                                    " threads per block; it allows ", k.max_threads_per_block,
                                    " (it uses ", k.num_registers, " registers per thread)"));

  CUcontext current = nullptr;
  if (Status s = check_cuda(d, d.cuCtxGetCurrent(&current), "cuCtxGetCurrent"); !s.ok()) return s;
  if (!current) {
    if (Status s = check_cuda(d, d.cuCtxSetCurrent(k.module->context), "cuCtxSetCurrent"); !s.ok())
      return s;
  } else if (current != k.module->context) {
    return Error::invalid_input(cat("launch of '", k.name,
                                    "': the current CUDA context is not the one the kernel was "
                                    "loaded into (another device?)"));
  }

  // Above 48 KiB the kernel must opt in, once per size increase.
  if (shared_bytes > kDefaultDynamicSharedLimit &&
      shared_bytes > k.dynamic_shared_limit.load(std::memory_order_acquire)) {
    if (Status s = raise_dynamic_shared_limit(d, k, shared_bytes); !s.ok()) return s;
  }

  const CUstream cu_stream = reinterpret_cast<CUstream>(stream);
  // Module state: the order's mutex makes wait, launch and record of one
  // call atomic with respect to other threads launching the same kernel.
  std::unique_lock<std::mutex> ordered;
  bool capturing = false;
  if (k.order) {
    ordered = std::unique_lock<std::mutex>(k.order->mutex);
    if (Status s = order_before_launch(d, *k.order, cu_stream, capturing); !s.ok())
      return Error::internal(cat("launch of '", k.name, "': ", s.error().message));
  }

  CUresult r = d.cuLaunchKernel(k.function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                shared_bytes, cu_stream, args, nullptr);
  if (r != cu::CUDA_SUCCESS)
    return Error::internal(cat("launch of '", k.name, "' grid (", grid.x, ",", grid.y, ",", grid.z,
                               ") block (", block.x, ",", block.y, ",", block.z, ") shared ",
                               shared_bytes, ": ", cuda_error_text(d, r, "cuLaunchKernel")));
  if (k.order && !capturing) {
    if (Status s = order_after_launch(d, *k.order, cu_stream); !s.ok())
      return Error::internal(cat("launch of '", k.name, "': ", s.error().message));
  }
  return Status::success();
}

}  // namespace cppi::gpu
