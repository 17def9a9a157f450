/// \file
/// Liveness scans over a CUDA-graph recording's cached outputs
/// (python/cppinductor/cudagraph_pool.py): which of them anything but the
/// recording reaches, and which a former holder changed. A training step
/// checks each of its ~60 cached outputs several times; in Python that was
/// about a tenth of a replayed step's host time, here it is one call per
/// scan.
///
/// `tensors` is the recording's list of cached outputs (None where there is
/// none); the scans read it and never keep it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace cppi::python {

/// What reaches the cached outputs from index `start` on.
enum CachedHolders : int {
  kStorageReached = 1,  ///< a storage by more than its output and `storages[i]` (a view, a .grad)
  kTensorHeld = 2,      ///< an output by more than the list (a Python name, an autograd saved variable)
};

/// Which of the CachedHolders bits in `wanted` hold for `tensors[start:]`.
/// `storages[i]` is the Python storage object the recording keeps for
/// `tensors[i]`; `storage_use_count` is torch._C._storage_Use_Count (it takes
/// a storage's `_cdata`).
int cached_holders(pybind11::handle tensors, pybind11::handle storages, pybind11::handle storage_use_count,
                   Py_ssize_t start, int wanted);

/// The indices from `start` on whose output is held (kTensorHeld).
std::vector<Py_ssize_t> held_cached(pybind11::handle tensors, Py_ssize_t start);

/// The indices whose output is no longer what the replay made it: its version
/// (`versions[i]`) or data pointer (`data_ptrs[i]`) changed, or it requires
/// grad or has backward hooks (a former holder asked for them).
std::vector<Py_ssize_t> changed_cached(pybind11::handle tensors, pybind11::handle versions,
                                       pybind11::handle data_ptrs);

}  // namespace cppi::python
