"""Kernels generated per graph, and compile time per kernel, when the compiler reports them.

Read as process-wide cumulative counters before and after a first call; the
difference is that graph's share. Sources:
- Inductor: ``torch._inductor.metrics.generated_kernel_count`` (no per-kernel time);
- cppinductor (or any backend package named like its backend): an optional
  ``compile_counters()`` returning ``{"kernels": int, "kernel_compile_s": float}``,
  cumulative for the process; absent, the columns stay empty.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class KernelCounters:
    kernels: int
    kernel_compile_s: Optional[float] = None


def read(backend_label: str) -> Optional[KernelCounters]:
    backend_label = backend_label.partition(":")[0]  # "inductor:reduce-overhead" counts as inductor
    if backend_label == "inductor":
        metrics = sys.modules.get("torch._inductor.metrics")
        return None if metrics is None else KernelCounters(metrics.generated_kernel_count)
    counters = getattr(sys.modules.get(backend_label), "compile_counters", None)
    if counters is None:
        return None
    try:
        values = counters()
        return KernelCounters(int(values["kernels"]), values.get("kernel_compile_s"))
    except Exception:  # a broken counter must not break the measurement
        return None


def difference(before: Optional[KernelCounters], after: Optional[KernelCounters]) -> Optional[KernelCounters]:
    if after is None:
        return None
    kernels = after.kernels - (before.kernels if before else 0)
    if after.kernel_compile_s is None:
        return KernelCounters(kernels)
    seconds = after.kernel_compile_s - ((before.kernel_compile_s or 0.0) if before else 0.0)
    return KernelCounters(kernels, seconds)
