/// \file
/// The liveness scan over a CUDA-graph recording's cached outputs
/// (python/cppinductor/cudagraph_pool.py): which of them anything but the
/// recording reaches, and which a former holder changed. A replayed
/// training step checks each of its ~70 cached outputs before every replay
/// that rewrites it; in Python that was about a tenth of the step's host
/// time, here it is one call per recording and replay. The scan reads the
/// lists it is given and never keeps them.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace cppi::python {

/// What one pass over a recording's cached outputs finds.
struct CachedScan {
  /// A storage is reached by more than its output and the recording's own
  /// storage object (a view, a tensor AccumulateGrad put into .grad).
  bool reached = false;
  /// The outputs held by more than the list: a Python name, or a C++ holder
  /// (an autograd saved variable) seen in the TensorImpl's use count.
  std::vector<Py_ssize_t> held;
  /// The outputs nobody holds that are no longer what the replay made them:
  /// a former holder changed their version (values, sizes or strides) or
  /// data pointer, asked them for gradients or gave them backward hooks.
  std::vector<Py_ssize_t> changed;
};

/// Scans `tensors` (the recording's cached outputs, None where there is
/// none). `storage_ids[i]` is the `_cdata` of the storage object the
/// recording keeps for `tensors[i]`, `versions[i]` and `data_ptrs[i]` what
/// the replay made; `storage_use_count` is torch._C._storage_Use_Count.
/// `changed` is filled only `with_changed` (for the recording about to
/// replay). Everything a replay's checks need, in one call: a replayed step
/// checks each output a handful of times, and each read is a Python call.
CachedScan scan_cached(pybind11::handle tensors, pybind11::handle storage_ids, pybind11::handle versions,
                       pybind11::handle data_ptrs, pybind11::handle storage_use_count, bool with_changed);

}  // namespace cppi::python
