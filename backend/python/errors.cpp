#include "backend/python/errors.h"

namespace py = pybind11;

namespace cppi::python {
namespace {

PyObject* unsupported_error = nullptr;
PyObject* compiler_error = nullptr;

}  // namespace

void register_errors(py::module_& m) {
  // Owned for the life of the process, as the module that exposes them.
  compiler_error = PyErr_NewException("cppinductor._C.CompilerError", PyExc_RuntimeError, nullptr);
  unsupported_error = PyErr_NewException("cppinductor._C.UnsupportedError", compiler_error, nullptr);
  m.attr("CompilerError") = py::reinterpret_borrow<py::object>(compiler_error);
  m.attr("UnsupportedError") = py::reinterpret_borrow<py::object>(unsupported_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CompilerError& e) {
      set_python_error(e.error());
    }
  });
}

void set_python_error(const Error& e) {
  if (e.kind == Error::Kind::IndexOutOfRange) {
    PyErr_SetString(PyExc_IndexError, e.message.c_str());  // as eager raises for the same input
    return;
  }
  PyErr_SetString(e.kind == Error::Kind::Unsupported ? unsupported_error : compiler_error, e.message.c_str());
}

void raise(const Error& e) {
  set_python_error(e);
  throw py::error_already_set();
}

}  // namespace cppi::python
