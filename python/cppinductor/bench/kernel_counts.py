"""Kernels generated per graph, and compile time per kernel, when the compiler
reports them; graphs, graph breaks and eager fallbacks per first call.

Read as process-wide cumulative counters before and after a first call; the
difference is that graph's share. Sources:
- Inductor: ``torch._inductor.metrics.generated_kernel_count`` (no per-kernel time);
- cppinductor (or any backend package named like its backend): an optional
  ``compile_counters()`` returning ``{"kernels": int, "kernel_compile_s": float}``,
  cumulative for the process; absent, the columns stay empty.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Optional


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


@dataclass
class GraphCounts:
    graphs: Optional[int] = None  # graphs Dynamo handed the backend
    breaks: Optional[int] = None  # graph breaks Dynamo took
    fallbacks: Optional[int] = None  # cppinductor: ops left to eager ATen (a whole-graph fallback counts each op)


@contextlib.contextmanager
def graph_counts(backend: Any) -> Iterator[GraphCounts]:
    """Counts what a compiled backend's calls inside the block compiled:
    Dynamo's graphs and graph breaks (its process-wide counters, before and
    after) and, for cppinductor, the ops it left to eager."""
    counts = GraphCounts()
    if backend.is_eager:
        yield counts
        return
    from torch._dynamo.utils import counters

    graphs_before = counters["stats"]["unique_graphs"]
    breaks_before = sum(counters["graph_break"].values())
    with contextlib.ExitStack() as stack:
        records = None
        if backend.name == "cppinductor":
            from .. import debug

            records = stack.enter_context(debug.recording())
        yield counts
    counts.graphs = counters["stats"]["unique_graphs"] - graphs_before
    counts.breaks = sum(counters["graph_break"].values()) - breaks_before
    if records is not None:
        from ..report import graph_report

        counts.fallbacks = sum(len(graph_report(r).fallbacks) for r in records)
