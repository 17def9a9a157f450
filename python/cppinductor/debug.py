"""Compile records and debug dumps.

Every graph the backend compiles produces a GraphRecord (what lowered, what
fell back and why, kernels, sources, stage times). explain() and
utils.run_and_get_code() collect them through `recording()`; dumps go to
CPPINDUCTOR_DEBUG_DIR (or options["debug_dir"]), one folder per graph.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch.fx

from .options import Options, env_flag

output_code_log = logging.getLogger("cppinductor.output_code")

_graph_ids = itertools.count()
_collectors: list[list["GraphRecord"]] = []


def new_graph_id() -> int:
    """Numbers graphs for dumps and the wrapper's file name, in compile order."""
    return next(_graph_ids)


@dataclass
class GraphRecord:
    kind: str  # forward | backward | inference
    gm: torch.fx.GraphModule
    id: int = field(default_factory=new_graph_id)
    graph_fallback: str | None = None
    compiled: Any = None  # _C.CompiledGraph
    wrapper_source: str | None = None  # the Python function that runs it (wrapper.py)
    python_times: dict[str, float] = field(default_factory=dict)  # Python-side stages (export)
    # In a CUDA-graph mode: whether the graph is captured, or why not
    # (a cudagraphs.CudaGraphState; str() says it).
    cudagraphs: Any = None
    # Updates of graph inputs left as a copy of the whole input and a copy
    # back, and why (graph_passes.reinplace_input_scatters).
    input_copies: list[str] = field(default_factory=list)
    # max-autotune: per tuned kernel, its candidates, their times and the
    # winner (autotune.py), filled at the graph's first call.
    autotune: list[dict] = field(default_factory=list)

    @property
    def remarks(self) -> list[dict]:
        return list(self.compiled.remarks) if self.compiled is not None else []

    @property
    def sources(self) -> list[tuple[str, str]]:
        return list(self.compiled.sources) if self.compiled is not None else []

    @property
    def stage_times(self) -> list[tuple[str, float]]:
        return list(self.compiled.stage_times) if self.compiled is not None else []


@contextlib.contextmanager
def recording() -> Iterator[list[GraphRecord]]:
    """Collects the GraphRecords of every graph compiled inside the block."""
    records: list[GraphRecord] = []
    _collectors.append(records)
    try:
        yield records
    finally:
        _collectors.remove(records)


def debug_root(options: Options) -> str | None:
    if options.get("debug_dir"):
        return options.get("debug_dir")
    root = os.environ.get("CPPINDUCTOR_DEBUG_DIR") or None
    if root and os.path.exists(root) and not os.path.isdir(root):
        raise ValueError(f"cppinductor: environment variable CPPINDUCTOR_DEBUG_DIR={root!r} is not a directory")
    return root


def graph_dump_dir(options: Options, record: GraphRecord) -> str | None:
    root = debug_root(options)
    if not root:
        return None
    path = os.path.join(root, f"graph_{record.id:03d}_{record.kind}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "fx_graph.txt"), "w") as f:
        f.write(record.gm.print_readable(print_output=False))
    return path


def finish(record: GraphRecord, compiled: Any, dump_dir: str | None) -> None:
    """Publishes a compiled (or fallen-back) graph to collectors, dumps and logs."""
    record.compiled = compiled
    for records in _collectors:
        records.append(record)
    if dump_dir:
        from .report import format_graph, graph_report  # report imports this module

        with open(os.path.join(dump_dir, "explain.txt"), "w") as f:
            f.write("\n".join(format_graph(record.id, graph_report(record))) + "\n")
        if record.wrapper_source:
            with open(os.path.join(dump_dir, "wrapper.py"), "w") as f:
                f.write(record.wrapper_source)
        if record.graph_fallback:
            with open(os.path.join(dump_dir, "graph_fallback.txt"), "w") as f:
                f.write(record.graph_fallback + "\n")
    if env_flag("CPPINDUCTOR_DUMP_CODE") or output_code_log.isEnabledFor(logging.DEBUG):
        for name, text in record.sources:
            output_code_log.info("# graph %d (%s): %s\n%s", record.id, record.kind, name, text)
        if record.wrapper_source:
            output_code_log.info("# graph %d (%s): wrapper.py\n%s", record.id, record.kind, record.wrapper_source)
