"""What compiled calls allocate and hold, measured on real calls.

    with cppinductor.memory.track_live_bytes() as live:
        step()
    live.peaks          # per compiled call, in call order: peak bytes held
    live.peak           # the largest

A call's live bytes at a step are the bytes of the distinct storages its
slots reference when the step has run, before its frees: inputs it still holds, buffers our kernels allocated
(fresh or reused), ATen results, and buffers the plan keeps for a later
reuse. The peak is taken over the steps of the call. This is what the plan
holds, not what the allocator keeps cached.

`buffer_counters()` (runtime.py) counts the kernel buffers calls allocate
fresh and reuse; it is always on.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from . import runtime
from .runtime import buffer_counters

__all__ = ["LiveBytes", "track_live_bytes", "buffer_counters"]


@dataclass
class LiveBytes:
    peaks: list[int] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return max(self.peaks, default=0)


def _storages(value: Any, out: dict[int, int]) -> None:
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        out[storage.data_ptr()] = storage.nbytes()
    elif isinstance(value, (list, tuple)):
        for item in value:
            _storages(item, out)


def live_bytes(values: tuple) -> int:
    storages: dict[int, int] = {}
    for value in values:
        _storages(value, storages)
    return sum(storages.values())


@contextmanager
def track_live_bytes() -> Iterator[LiveBytes]:
    """Records each compiled call's peak live bytes while active (slow: it
    walks the slots after every step)."""
    stats = LiveBytes()
    previous = runtime._step_observer[0]

    def observe(values: tuple, call_starts: bool) -> None:
        if call_starts:
            stats.peaks.append(0)
        stats.peaks[-1] = max(stats.peaks[-1], live_bytes(values))

    runtime._step_observer[0] = observe
    try:
        yield stats
    finally:
        runtime._step_observer[0] = previous
