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

/// Whether attribute `name` of `obj` is `value` (compared by identity).
bool attribute_is(PyObject* obj, PyObject* name, PyObject* value) {
  PyObject* attribute = PyObject_GetAttr(obj, name);
  if (attribute == nullptr) throw py::error_already_set();
  bool same = attribute == value;
  Py_DECREF(attribute);
  return same;
}

}  // namespace

CachedScan scan_cached(py::handle tensors, py::handle storage_ids, py::handle versions, py::handle data_ptrs,
                       py::handle storage_use_count, bool with_changed) {
  static PyObject* version = PyUnicode_InternFromString("_version");
  static PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
  static PyObject* requires_grad = PyUnicode_InternFromString("requires_grad");
  static PyObject* hooks = PyUnicode_InternFromString("_backward_hooks");
  Py_ssize_t n = 0, ns = 0, nv = 0, np = 0;
  PyObject** items = list_items(tensors, &n, "tensors");
  PyObject** storages = list_items(storage_ids, &ns, "storage_ids");
  PyObject** expected_versions = list_items(versions, &nv, "versions");
  PyObject** expected_ptrs = list_items(data_ptrs, &np, "data_ptrs");
  if (ns != n || nv != n || np != n)
    throw py::value_error("scan_cached: one storage id, version and data pointer per tensor");
  CachedScan scan;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = items[i];
    if (t == Py_None) continue;
    // More than the output and the recording's storage object.
    if (!scan.reached && read_int(PyObject_CallOneArg(storage_use_count.ptr(), storages[i])) > 2)
      scan.reached = true;
    if (held(t)) {
      scan.held.push_back(i);
      continue;
    }
    if (!with_changed) continue;
    bool changed = read_int(PyObject_GetAttr(t, version)) != PyLong_AsLongLong(expected_versions[i]) ||
                   read_int(PyObject_CallMethodNoArgs(t, data_ptr)) != PyLong_AsLongLong(expected_ptrs[i]) ||
                   attribute_is(t, requires_grad, Py_True) || !attribute_is(t, hooks, Py_None);
    if (changed) scan.changed.push_back(i);
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return scan;
}

}  // namespace cppi::python
