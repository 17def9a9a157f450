"""The copy bandwidth reference and GB/s arithmetic.

Two references per tensor size, both eager and measured in the same run:
``x.clone()`` (read + allocate + write, what a workload returning a new tensor
also pays) and ``out.copy_(x)`` into a preallocated tensor (the raw memory
bandwidth). "% of copy" is against clone: on CPU a fresh large allocation
costs page faults that every workload's output pays as well, so comparing
against copy_ would measure the allocator, not the kernel. Both are reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from .timing import TimingPolicy, steady_time, time_once


def gbps(bytes_moved: Optional[int], seconds: Optional[float]) -> Optional[float]:
    if bytes_moved is None or not seconds:
        return None
    return bytes_moved / seconds / 1e9


@dataclass(frozen=True)
class CopyReference:
    clone_gbps: float
    prealloc_gbps: float


class CopyReferences:
    """Measures each (shape, dtype, device) once per run."""

    def __init__(self, device: str, policy: TimingPolicy) -> None:
        self._device = device
        self._policy = policy
        self._cache: Dict[Tuple, CopyReference] = {}

    def for_tensor(self, x: torch.Tensor) -> CopyReference:
        key = (tuple(x.shape), x.dtype, str(x.device))
        if key not in self._cache:
            self._cache[key] = self._measure(x)
        return self._cache[key]

    def _measure(self, x: torch.Tensor) -> CopyReference:
        moved = 2 * x.numel() * x.element_size()
        out = torch.empty_like(x)
        results = []
        for step in (lambda: x.clone(), lambda: out.copy_(x)):
            time_once(step, self._device)
            results.append(gbps(moved, steady_time(step, self._device, self._policy).median_s))
        return CopyReference(*results)
