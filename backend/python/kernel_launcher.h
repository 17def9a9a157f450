/// \file
/// A compiled kernel as a Python callable the generated wrapper
/// (python/cppinductor/wrapper.py) calls once per kernel step:
///
///     launch(buffer0, ..., bufferN-1[, symbols[, stream]])
///
/// Buffers are tensors (or data pointers as ints), symbols a sequence of
/// ints (default none), stream a CUDA stream handle (default 0). A raw
/// METH_FASTCALL function: no argument conversion layer and no list of
/// pointers built in Python, so a kernel step costs less than through a
/// pybind11 method taking data_ptr() ints (it runs once per kernel per call).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "support/kernel_handle.h"

namespace cppi::python {

/// A launcher for `kernel` taking exactly `num_buffers` buffers. It keeps the
/// kernel (and its compiled code) alive.
pybind11::object make_kernel_launcher(std::shared_ptr<KernelHandle> kernel, int num_buffers);

/// check(args) -> bool: whether args[i] (a list of a call's arguments) has
/// data pointer p for each (i, p) of `expected`, read as launchers read them.
/// A CUDA graph's static inputs are checked so, once per replay.
pybind11::object make_pointer_check(const std::vector<std::pair<int64_t, uintptr_t>>& expected);

/// Lets launchers read a tensor's data pointer without a Python call:
/// `address` is torch's `void* (*)(PyObject*)` for that
/// (torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr, what
/// Inductor's CPU kernels use), `tensor_type` torch.Tensor. Without it,
/// launchers call `data_ptr()`.
void set_tensor_data_ptr_function(uintptr_t address, pybind11::object tensor_type);

}  // namespace cppi::python
