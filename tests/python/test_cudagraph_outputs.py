"""The liveness scans over a CUDA-graph recording's cached outputs
(backend/python/cudagraph_outputs.h), on CPU tensors: what they read (use
counts, versions, data pointers) is the same on every device. A C++ holder
(an autograd saved variable, a .grad) is tested in test_cudagraphs.py."""

import torch

from cppinductor import _C
from cppinductor.cudagraph_pool import _storage_use_count_of_cdata


def _cache(n: int) -> tuple[list, list, list, list]:
    """n cached outputs as a recording keeps them: the tensors, their
    storage objects, and the versions and data pointers a replay made."""
    tensors = [torch.arange(4.0) for _ in range(n)]
    storages = [t.untyped_storage() for t in tensors]
    return tensors, storages, [t._version for t in tensors], [t.data_ptr() for t in tensors]


def _scan(tensors: list, storages: list, versions: list, ptrs: list) -> tuple:
    ids = [s._cdata for s in storages]
    return _C.scan_cached(tensors, ids, versions, ptrs, _storage_use_count_of_cdata)


def test_outputs_nobody_holds_have_no_holders():
    tensors, *rest = _cache(3)
    tensors[1] = None
    assert _scan(tensors, *rest) == (False, [], [])


def test_a_python_reference_holds_an_output():
    tensors, *rest = _cache(3)
    kept = tensors[2]
    assert _scan(tensors, *rest) == (False, [2], [])
    del kept
    assert _scan(tensors, *rest) == (False, [], [])


def test_a_view_reaches_an_outputs_storage():
    tensors, *rest = _cache(3)
    view = tensors[1][1:]  # reaches the storage, and holds its base (._base)
    assert _scan(tensors, *rest) == (True, [1], [])
    tensors[0] = tensors[1] = None  # the view's output no longer cached: nothing the scan reads reaches it
    assert _scan(tensors, *rest) == (False, [], [])
    del view


def test_outputs_a_former_holder_changed():
    tensors, *rest = _cache(5)
    assert _scan(tensors, *rest) == (False, [], [])
    tensors[0].add_(1)
    tensors[1].data = torch.zeros(4)
    tensors[2].requires_grad_()
    tensors[3] = None
    assert _scan(tensors, *rest) == (False, [], [0, 1, 2])


def test_a_held_output_is_not_reported_changed():
    tensors, *rest = _cache(2)
    kept = tensors[0]
    kept.add_(1)
    assert _scan(tensors, *rest) == (False, [0], [])  # retired, not remade: its holder keeps it
    del kept


def test_bad_arguments_raise_python_errors():
    tensors, storages, versions, ptrs = _cache(2)
    for call in (lambda: _scan(tuple(tensors), storages, versions, ptrs),
                 lambda: _scan(tensors, storages[:1], versions, ptrs),
                 lambda: _scan(tensors, storages, [0], ptrs)):
        try:
            call()
        except (TypeError, ValueError):
            continue
        raise AssertionError("no error")
