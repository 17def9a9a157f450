/// \file
/// How C++ errors become Python exceptions, shared by the pybind11 bindings
/// and the raw kernel launchers: UnsupportedError (the caller may fall back
/// to eager), CompilerError (anything else), IndexError for an index a kernel
/// found out of range (as eager raises).
#pragma once

#include <pybind11/pybind11.h>

#include "support/status.h"

namespace cppi::python {

/// Creates the exception types as attributes of `m` (once, at import).
void register_errors(pybind11::module_& m);

/// Sets the Python error for `e` (the caller then returns nullptr to Python).
void set_python_error(const Error& e);

/// Sets the Python error and throws pybind11::error_already_set.
[[noreturn]] void raise(const Error& e);

}  // namespace cppi::python
