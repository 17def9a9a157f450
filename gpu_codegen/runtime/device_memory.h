/// \file
/// Device memory and event timing straight from the driver, for code that
/// has no torch tensors at hand: the C++ tests, gpu_runtime_smoke, and
/// benchmarks of candidate kernels. Compiled graphs use torch's allocator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu_codegen/runtime/cuda_api.h"
#include "support/status.h"

namespace cppi::gpu {

/// An owning cuMemAlloc allocation on the current context (freed in the
/// destructor). Copies are synchronous.
class DeviceBuffer {
 public:
  static Expected<DeviceBuffer> allocate(size_t bytes);

  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  Status upload(const void* host, size_t bytes);
  Status download(void* host, size_t bytes) const;
  Status fill_bytes(unsigned char value);

 private:
  DeviceBuffer(CUdeviceptr ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

/// Waits for all work on the current context; surfaces asynchronous faults
/// (an illegal address inside a kernel) as an Error.
Status synchronize_context();

/// Milliseconds between two events recorded on a stream.
class EventTimer {
 public:
  static Expected<EventTimer> create();
  EventTimer(EventTimer&& other) noexcept;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  EventTimer& operator=(EventTimer&&) = delete;
  ~EventTimer();

  Status start(uintptr_t stream);
  Status stop(uintptr_t stream);
  /// Waits for the stop event.
  Expected<float> elapsed_ms();

 private:
  EventTimer(CUevent start, CUevent stop) : start_(start), stop_(stop) {}
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
};

}  // namespace cppi::gpu
