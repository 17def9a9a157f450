/// \file
/// The calling convention between the wrapper and a compiled kernel, shared by
/// both codegens and the runtime.
///
/// Every generated kernel has the C signature
///     void name(void* const* buffers, const int64_t* symbols)
/// on CPU (an `extern "C"` function) — `buffers[i]` is the data pointer of
/// the kernel's i-th buffer argument (already offset to its first element),
/// `symbols` the values of the graph's size symbols in Graph::symbols order.
/// CUDA kernels take the same two arrays, launched on the given stream.
#pragma once

#include <cstdint>
#include <string>

namespace cppi {

class KernelHandle {
 public:
  virtual ~KernelHandle() = default;
  virtual const std::string& name() const = 0;
  /// "cpu" or "cuda".
  virtual const char* device() const = 0;
  virtual void run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const = 0;
};

}  // namespace cppi
