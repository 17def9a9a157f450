/// \file
/// PTX loaded into a CUDA context, its kernels, and launching them on a
/// stream torch hands us. Contexts are torch's: we use the calling thread's
/// current context and only when there is none retain a device's primary
/// context (the one torch itself uses), never create our own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpu_codegen/runtime/cuda_api.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "support/status.h"

namespace cppi::gpu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace detail {
struct LoadedModule;
struct KernelState;
struct LaunchOrder;
}  // namespace detail

/// One `__global__` function of a loaded module. Copies are cheap and keep
/// the module loaded, so a kernel never outlives its code.
class CudaKernel {
 public:
  const std::string& name() const;
  CUfunction handle() const;
  CUcontext context() const;
  int max_threads_per_block() const;  ///< for this kernel, given its register use
  int num_registers() const;
  int static_shared_bytes() const;

 private:
  friend class CudaModule;
  friend Status launch(const CudaKernel&, Dim3, Dim3, unsigned, uintptr_t, void**);
  explicit CudaKernel(std::shared_ptr<detail::KernelState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::KernelState> state_;
};

/// A module loaded into the current context: PTX JIT-compiled by the driver,
/// or a cubin as it is. The module is unloaded when the CudaModule and every
/// CudaKernel taken from it are gone.
class CudaModule {
 public:
  /// Loads on the calling thread's current context (or, when there is none,
  /// the primary context of device 0 made current). A driver JIT failure is
  /// CompileFailed with the driver's error log.
  static Expected<CudaModule> load_ptx(const std::string& ptx);
  /// A compile_cuda result: its cubin when it has one, else its PTX.
  static Expected<CudaModule> load(const PtxProgram& program);

  /// The kernel named `name` (an `extern "C" __global__` function, or its
  /// mangled name). NotFound is InvalidInput naming the kernel.
  ///
  /// `module_state`: the kernel keeps state between launches in the module's
  /// `__device__` variables (split-row partials and arrival counters), so two
  /// of its launches must never overlap. launch() then orders each launch
  /// after the previous one of the same function of this module, whatever
  /// stream either is on (see launch()). Every CudaKernel taken for one
  /// function of one module shares that order.
  Expected<CudaKernel> function(const std::string& name, bool module_state = false) const;

  /// The driver JIT's info log (register and spill counts when verbose).
  const std::string& jit_log() const;
  CUcontext context() const;

 private:
  explicit CudaModule(std::shared_ptr<detail::LoadedModule> module) : module_(std::move(module)) {}
  /// `ptx`: the image's text when it is PTX (for error messages); null for a cubin.
  static Expected<CudaModule> load_image(const void* image, const std::string* ptx);
  std::shared_ptr<detail::LoadedModule> module_;
};

/// Launches `kernel` on `stream` (torch.cuda.current_stream().cuda_stream; 0
/// is the legacy default stream). `args` is cuLaunchKernel's kernelParams:
/// one pointer per kernel parameter, pointing at the argument's value.
/// Dynamic shared memory above 48 KiB is opted into per kernel on first use.
/// The calling thread's context must be the kernel's (or none, in which case
/// the kernel's is made current, as torch would). Launch is asynchronous:
/// faults inside the kernel surface at the next synchronisation.
///
/// A kernel with module state (CudaModule::function) is serialised across
/// streams: after each launch an event is recorded on its stream, and a
/// launch on a different stream first makes that stream wait for the event
/// (cuStreamWaitEvent), so launches on two streams, from any threads, run one
/// after the other in the order launch() was called. Launches on one stream
/// are ordered by the stream itself (one cuEventRecord each, nothing else).
/// Under stream capture (cuStreamIsCapturing) the launch is captured without
/// any event work: an event recorded outside a capture cannot be waited on
/// inside it, nor one recorded inside waited on outside. The captured graph's
/// launches are then ordered by the stream it is replayed on only; replaying
/// it while eager launches of the same compiled kernel run on another stream
/// is not guarded against.
Status launch(const CudaKernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes,
              uintptr_t stream, void** args);

/// Makes a context current on this thread when none is: the primary context
/// of `device`, retained (as torch retains it; never released by us).
/// Returns the context that is current afterwards.
Expected<CUcontext> ensure_current_context(int device = 0);

/// The device of the current context (or of `device`'s primary context,
/// made current, when there is none).
Expected<CUdevice> current_device(int device = 0);

/// What the GPU schedule needs to know about the device it targets.
struct DeviceProperties {
  CUdevice device = 0;
  std::string name;
  int compute_capability = 0;  ///< major*10+minor, e.g. 90 for an H100/H200
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int max_shared_bytes_per_block = 0;  ///< with the opt-in launch() performs
};

/// Properties of current_device(device).
Expected<DeviceProperties> current_device_properties(int device = 0);

/// major*10+minor of current_device(device), e.g. 90 for an H100/H200.
Expected<int> current_device_compute_capability(int device = 0);

}  // namespace cppi::gpu
