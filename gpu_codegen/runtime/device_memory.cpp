#include "gpu_codegen/runtime/device_memory.h"

#include <utility>

#include "gpu_codegen/runtime/cuda_module.h"

namespace cppi::gpu {
namespace {

Expected<const CudaDriverApi*> driver_with_context() {
  Expected<CUcontext> context = ensure_current_context(0);
  if (!context.ok()) return context.error();
  return cuda_driver();
}

}  // namespace

Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  Expected<const CudaDriverApi*> api = driver_with_context();
  if (!api.ok()) return api.error();
  CUdeviceptr ptr = 0;
  if (Status s = check_cuda(*api.value(), api.value()->cuMemAlloc_v2(&ptr, bytes), "cuMemAlloc");
      !s.ok())
    return s.error();
  return DeviceBuffer(ptr, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cuda_driver().value()->cuMemFree_v2(ptr_);  // an error at exit has no one to go to
}

Status DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) return Error::invalid_input(cat("upload of ", bytes, " bytes into ", bytes_));
  const CudaDriverApi& d = *cuda_driver().value();
  return check_cuda(d, d.cuMemcpyHtoD_v2(ptr_, host, bytes), "cuMemcpyHtoD");
}

Status DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_)
    return Error::invalid_input(cat("download of ", bytes, " bytes from ", bytes_));
  const CudaDriverApi& d = *cuda_driver().value();
  return check_cuda(d, d.cuMemcpyDtoH_v2(host, ptr_, bytes), "cuMemcpyDtoH");
}

Status DeviceBuffer::fill_bytes(unsigned char value) {
  const CudaDriverApi& d = *cuda_driver().value();
  return check_cuda(d, d.cuMemsetD8_v2(ptr_, value, bytes_), "cuMemsetD8");
}

Status synchronize_context() {
  Expected<const CudaDriverApi*> api = driver_with_context();
  if (!api.ok()) return api.error();
  return check_cuda(*api.value(), api.value()->cuCtxSynchronize(), "cuCtxSynchronize");
}

Expected<EventTimer> EventTimer::create() {
  Expected<const CudaDriverApi*> api = driver_with_context();
  if (!api.ok()) return api.error();
  const CudaDriverApi& d = *api.value();
  CUevent start = nullptr, stop = nullptr;
  if (Status s = check_cuda(d, d.cuEventCreate(&start, cu::CU_EVENT_DEFAULT), "cuEventCreate");
      !s.ok())
    return s.error();
  if (Status s = check_cuda(d, d.cuEventCreate(&stop, cu::CU_EVENT_DEFAULT), "cuEventCreate");
      !s.ok()) {
    d.cuEventDestroy_v2(start);
    return s.error();
  }
  return EventTimer(start, stop);
}

EventTimer::EventTimer(EventTimer&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), stop_(std::exchange(other.stop_, nullptr)) {}

EventTimer::~EventTimer() {
  if (!start_) return;
  const CudaDriverApi& d = *cuda_driver().value();
  d.cuEventDestroy_v2(start_);
  d.cuEventDestroy_v2(stop_);
}

Status EventTimer::start(uintptr_t stream) {
  const CudaDriverApi& d = *cuda_driver().value();
  return check_cuda(d, d.cuEventRecord(start_, reinterpret_cast<CUstream>(stream)),
                    "cuEventRecord");
}

Status EventTimer::stop(uintptr_t stream) {
  const CudaDriverApi& d = *cuda_driver().value();
  return check_cuda(d, d.cuEventRecord(stop_, reinterpret_cast<CUstream>(stream)), "cuEventRecord");
}

Expected<float> EventTimer::elapsed_ms() {
  const CudaDriverApi& d = *cuda_driver().value();
  if (Status s = check_cuda(d, d.cuEventSynchronize(stop_), "cuEventSynchronize"); !s.ok())
    return s.error();
  float ms = 0.0f;
  if (Status s = check_cuda(d, d.cuEventElapsedTime_v2(&ms, start_, stop_), "cuEventElapsedTime");
      !s.ok())
    return s.error();
  return ms;
}

}  // namespace cppi::gpu
