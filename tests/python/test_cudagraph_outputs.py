"""The liveness scans over a CUDA-graph recording's cached outputs
(backend/python/cudagraph_outputs.h), on CPU tensors: what they read (use
counts, versions, data pointers) is the same on every device. A C++ holder
(an autograd saved variable, a .grad) is tested in test_cudagraphs.py."""

import torch

from cppinductor import _C
from cppinductor.cudagraph_pool import _STORAGE_REACHED, _TENSOR_HELD, _storage_use_count_of_cdata

BOTH = _STORAGE_REACHED | _TENSOR_HELD


def _cache(n: int) -> tuple[list, list]:
    tensors = [torch.arange(4.0) for _ in range(n)]
    return tensors, [t.untyped_storage() for t in tensors]


def _holders(tensors: list, storages: list, start: int = 0, wanted: int = BOTH) -> int:
    return _C.cached_holders(tensors, storages, _storage_use_count_of_cdata, start, wanted)


def test_outputs_nobody_holds_have_no_holders():
    tensors, storages = _cache(3)
    tensors[1] = None
    assert _holders(tensors, storages) == 0
    assert _C.held_cached(tensors, 0) == []


def test_a_python_reference_holds_an_output():
    tensors, storages = _cache(3)
    kept = tensors[2]
    assert _holders(tensors, storages) == _TENSOR_HELD
    assert _holders(tensors, storages, wanted=_STORAGE_REACHED) == 0
    assert _C.held_cached(tensors, 0) == [2]
    assert _C.held_cached(tensors, 1) == [2]
    del kept
    assert _holders(tensors, storages) == 0


def test_a_view_reaches_an_outputs_storage():
    tensors, storages = _cache(3)
    view = tensors[1][1:]  # reaches the storage, and holds its base (._base)
    assert _holders(tensors, storages, wanted=_STORAGE_REACHED) == _STORAGE_REACHED
    assert _holders(tensors, storages) == BOTH
    assert _holders(tensors, storages, start=2) == 0
    del view
    assert _holders(tensors, storages) == 0


def test_outputs_a_former_holder_changed():
    tensors, _ = _cache(5)
    versions = [t._version for t in tensors]
    ptrs = [t.data_ptr() for t in tensors]
    assert _C.changed_cached(tensors, versions, ptrs) == []
    tensors[0].add_(1)
    tensors[1].data = torch.zeros(4)
    tensors[2].requires_grad_()
    tensors[3] = None
    assert _C.changed_cached(tensors, versions, ptrs) == [0, 1, 2]


def test_bad_arguments_raise_python_errors():
    tensors, storages = _cache(2)
    for call in (lambda: _holders(tuple(tensors), storages), lambda: _holders(tensors, storages[:1]),
                 lambda: _C.changed_cached(tensors, [0], [0, 0])):
        try:
            call()
        except (TypeError, ValueError):
            continue
        raise AssertionError("no error")
