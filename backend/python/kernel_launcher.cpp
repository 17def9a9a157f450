#include "backend/python/kernel_launcher.h"

#include <array>
#include <exception>
#include <vector>

#include "backend/python/errors.h"

namespace py = pybind11;

namespace cppi::python {
namespace {

struct Launcher {
  std::shared_ptr<KernelHandle> kernel;
  Py_ssize_t num_buffers = 0;
};

constexpr const char* kCapsuleName = "cppinductor.kernel_launcher";

void* (*tensor_data_ptr)(PyObject*) = nullptr;
PyObject* tensor_type = nullptr;

/// The data pointer of a launch argument; false with a Python error set.
bool buffer_pointer(PyObject* obj, void** out) {
  if (PyLong_Check(obj)) {
    *out = PyLong_AsVoidPtr(obj);
    return !(*out == nullptr && PyErr_Occurred());
  }
  if (tensor_data_ptr != nullptr && PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(tensor_type))) {
    try {
      *out = tensor_data_ptr(obj);  // throws for a tensor without storage
      return true;
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return false;
    } catch (...) {
      PyErr_SetString(PyExc_RuntimeError, "cannot read the data pointer of a kernel argument");
      return false;
    }
  }
  PyObject* ptr = PyObject_CallMethod(obj, "data_ptr", nullptr);
  if (ptr == nullptr) return false;
  *out = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  return !(*out == nullptr && PyErr_Occurred());
}

bool read_symbols(PyObject* seq, std::vector<int64_t>& out) {
  PyObject* fast = PySequence_Fast(seq, "kernel symbols must be a sequence of ints");
  if (fast == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(items[i]);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out.push_back(v);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* launcher = static_cast<Launcher*>(PyCapsule_GetPointer(self, kCapsuleName));
  if (launcher == nullptr) return nullptr;
  Py_ssize_t n = launcher->num_buffers;
  if (nargs < n || nargs > n + 2) {
    PyErr_Format(PyExc_TypeError, "kernel %s takes %zd buffers, then optionally symbols and a stream; got %zd",
                 launcher->kernel->name().c_str(), n, nargs);
    return nullptr;
  }
  std::array<void*, 16> small;
  std::vector<void*> large;
  void** buffers = small.data();
  if (n > static_cast<Py_ssize_t>(small.size())) {
    large.resize(n);
    buffers = large.data();
  }
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!buffer_pointer(args[i], &buffers[i])) return nullptr;
  std::vector<int64_t> symbols;
  if (nargs > n && !read_symbols(args[n], symbols)) return nullptr;
  uintptr_t stream = 0;
  if (nargs > n + 1) {
    void* s = PyLong_AsVoidPtr(args[n + 1]);
    if (s == nullptr && PyErr_Occurred()) return nullptr;
    stream = reinterpret_cast<uintptr_t>(s);
  }
  // Errors from the kernel (an index out of range, a division by zero)
  // become Python exceptions once the GIL is back.
  std::exception_ptr failure;
  Py_BEGIN_ALLOW_THREADS;
  try {
    launcher->kernel->run(buffers, symbols.data(), stream);
  } catch (...) {
    failure = std::current_exception();
  }
  Py_END_ALLOW_THREADS;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const CompilerError& e) {
      set_python_error(e.error());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef launch_def = {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&launch)),
                          METH_FASTCALL, "Runs the kernel on the given buffers (see kernel_launcher.h)."};

/// make_pointer_check's state: which items of the argument list must sit at
/// which addresses.
struct PointerCheck {
  std::vector<std::pair<Py_ssize_t, void*>> expected;
};
constexpr const char* kCheckCapsuleName = "cppinductor.pointer_check";

PyObject* check_pointers(PyObject* self, PyObject* list) {
  auto* check = static_cast<PointerCheck*>(PyCapsule_GetPointer(self, kCheckCapsuleName));
  if (check == nullptr) return nullptr;
  if (!PyList_Check(list)) {
    PyErr_SetString(PyExc_TypeError, "pointer check: expected the list of a call's arguments");
    return nullptr;
  }
  for (const auto& [index, ptr] : check->expected) {
    if (index >= PyList_GET_SIZE(list)) Py_RETURN_FALSE;
    void* actual = nullptr;
    if (!buffer_pointer(PyList_GET_ITEM(list, index), &actual)) return nullptr;
    if (actual != ptr) Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

PyMethodDef check_def = {"check_pointers", reinterpret_cast<PyCFunction>(&check_pointers), METH_O,
                         "Whether each listed argument is at its recorded address (see kernel_launcher.h)."};

/// A C function (`def`) whose self is a capsule owning `state`: the state
/// lives as long as the function.
template <class T>
py::object function_owning(T* state, const char* capsule_name, PyMethodDef* def) {
  PyObject* capsule = PyCapsule_New(state, capsule_name, [](PyObject* c) {
    delete static_cast<T*>(PyCapsule_GetPointer(c, PyCapsule_GetName(c)));
  });
  if (capsule == nullptr) {
    delete state;
    throw py::error_already_set();
  }
  PyObject* function = PyCFunction_New(def, capsule);
  Py_DECREF(capsule);  // the function holds it
  if (function == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(function);
}

}  // namespace

py::object make_pointer_check(const std::vector<std::pair<int64_t, uintptr_t>>& expected) {
  auto* check = new PointerCheck;
  for (const auto& [index, ptr] : expected) check->expected.emplace_back(index, reinterpret_cast<void*>(ptr));
  return function_owning(check, kCheckCapsuleName, &check_def);
}

py::object make_kernel_launcher(std::shared_ptr<KernelHandle> kernel, int num_buffers) {
  return function_owning(new Launcher{std::move(kernel), num_buffers}, kCapsuleName, &launch_def);
}

void set_tensor_data_ptr_function(uintptr_t address, py::object type) {
  if (!PyType_Check(type.ptr())) throw py::type_error("set_tensor_data_ptr_function: tensor_type must be a type");
  Py_XDECREF(tensor_type);
  tensor_type = type.release().ptr();
  tensor_data_ptr = reinterpret_cast<void* (*)(PyObject*)>(address);
}

}  // namespace cppi::python
