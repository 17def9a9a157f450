#include "backend/python/cudagraph_outputs.h"

namespace py = pybind11;

namespace cppi::python {
namespace {

/// The items of a list, borrowed; throws a TypeError for anything else. The
/// scans call only torch's own methods on them, which never touch the list.
PyObject** list_items(py::handle list, Py_ssize_t* size, const char* what) {
  if (!PyList_Check(list.ptr())) throw py::type_error(std::string(what) + " must be a list");
  *size = PyList_GET_SIZE(list.ptr());
  return reinterpret_cast<PyListObject*>(list.ptr())->ob_item;
}

/// An int a method or attribute of `obj` returns (both are Python calls).
int64_t read_int(PyObject* value) {
  if (value == nullptr) throw py::error_already_set();
  int64_t n = PyLong_AsLongLong(value);
  Py_DECREF(value);
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  return n;
}

int64_t tensor_use_count(PyObject* t) {
  static PyObject* name = PyUnicode_InternFromString("_use_count");
  return read_int(PyObject_CallMethodNoArgs(t, name));
}

/// Whether anything but the list holds `t`: another Python reference (the
/// list's is one), or a C++ one seen in the TensorImpl's use count.
bool held(PyObject* t) { return Py_REFCNT(t) > 1 || tensor_use_count(t) > 1; }

}  // namespace

int cached_holders(py::handle tensors, py::handle storages, py::handle storage_use_count, Py_ssize_t start,
                   int wanted) {
  static PyObject* cdata = PyUnicode_InternFromString("_cdata");
  Py_ssize_t n = 0, m = 0;
  PyObject** items = list_items(tensors, &n, "tensors");
  PyObject** kept = list_items(storages, &m, "storages");
  if (m != n) throw py::value_error("cached_holders: one storage per tensor");
  int bits = 0;
  for (Py_ssize_t i = start; i < n && bits != wanted; ++i) {
    if (items[i] == Py_None) continue;
    if ((wanted & ~bits & kTensorHeld) && held(items[i])) bits |= kTensorHeld;
    if (wanted & ~bits & kStorageReached) {
      PyObject* address = PyObject_GetAttr(kept[i], cdata);
      if (address == nullptr) throw py::error_already_set();
      PyObject* count = PyObject_CallOneArg(storage_use_count.ptr(), address);
      Py_DECREF(address);
      if (read_int(count) > 2) bits |= kStorageReached;  // more than the output and our storage object
    }
  }
  return bits;
}

std::vector<Py_ssize_t> held_cached(py::handle tensors, Py_ssize_t start) {
  Py_ssize_t n = 0;
  PyObject** items = list_items(tensors, &n, "tensors");
  std::vector<Py_ssize_t> out;
  for (Py_ssize_t i = start; i < n; ++i)
    if (items[i] != Py_None && held(items[i])) out.push_back(i);
  return out;
}

std::vector<Py_ssize_t> changed_cached(py::handle tensors, py::handle versions, py::handle data_ptrs) {
  static PyObject* version = PyUnicode_InternFromString("_version");
  static PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
  static PyObject* requires_grad = PyUnicode_InternFromString("requires_grad");
  static PyObject* hooks = PyUnicode_InternFromString("_backward_hooks");
  Py_ssize_t n = 0, nv = 0, np = 0;
  PyObject** items = list_items(tensors, &n, "tensors");
  PyObject** expected_versions = list_items(versions, &nv, "versions");
  PyObject** expected_ptrs = list_items(data_ptrs, &np, "data_ptrs");
  if (nv != n || np != n) throw py::value_error("changed_cached: one version and one data pointer per tensor");
  std::vector<Py_ssize_t> out;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = items[i];
    if (t == Py_None) continue;
    bool changed = read_int(PyObject_GetAttr(t, version)) != PyLong_AsLongLong(expected_versions[i]) ||
                   read_int(PyObject_CallMethodNoArgs(t, data_ptr)) != PyLong_AsLongLong(expected_ptrs[i]);
    if (!changed) {
      PyObject* grad = PyObject_GetAttr(t, requires_grad);
      if (grad == nullptr) throw py::error_already_set();
      changed = grad == Py_True;
      Py_DECREF(grad);
    }
    if (!changed) {
      PyObject* h = PyObject_GetAttr(t, hooks);
      if (h == nullptr) throw py::error_already_set();
      changed = h != Py_None;
      Py_DECREF(h);
    }
    if (changed) out.push_back(i);
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return out;
}

}  // namespace cppi::python
