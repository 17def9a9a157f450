"""Presenting rows: the fixed-width table on stdout and the JSON file."""

from __future__ import annotations

import json
import os
import platform
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .row import OK, Row

_STATUS = {OK: "ok", "incorrect": "WRONG", "error": "ERROR"}


def _num(fmt: str) -> Callable[[Optional[float]], str]:
    return lambda v: "-" if v is None else format(v, fmt)


def _graph_counts(r: Row) -> str:
    if r.graphs is None:
        return "-"
    return "/".join("-" if v is None else str(v) for v in (r.graphs, r.graph_breaks, r.fallbacks))


# (header, width, cell) — numbers right-aligned, text left-aligned
_COLUMNS: List[Tuple[str, int, Callable[[Row], str]]] = [
    ("workload", 17, lambda r: r.workload),
    ("backend", 27, lambda r: r.backend),  # "cppinductor:reduce-overhead"
    ("shape", 16, lambda r: r.shape),
    ("ms", 9, lambda r: _num(".3f")(r.time_ms)),
    ("x eager", 7, lambda r: _num(".2f")(r.speedup_vs_eager)),
    ("x ind", 6, lambda r: _num(".2f")(r.speedup_vs_inductor)),
    ("GB/s", 7, lambda r: _num(".1f")(r.gbps)),
    ("TFLOP/s", 7, lambda r: _num(".1f")(r.tflops)),
    ("%copy", 6, lambda r: _num(".0f")(r.pct_of_copy)),
    ("alt", 5, lambda r: _num(".2f")(r.alternating_ratio)),
    ("compile s", 9, lambda r: _num(".3f")(r.compile_s_warm)),
    ("fresh s", 7, lambda r: _num(".2f")(r.compile_s_fresh)),
    ("+aot s", 7, lambda r: _num(".3f")(r.compile_over_aot_eager_s)),
    ("kern", 4, lambda r: "-" if r.kernels is None else str(r.kernels)),
    ("ms/kern", 7, lambda r: _num(".1f")(r.kernel_compile_ms)),
    ("peak MB", 7, lambda r: _num(".1f")(r.peak_mb)),
    ("g/brk/fb", 8, lambda r: _graph_counts(r)),
    ("check", 5, lambda r: _STATUS.get(r.status, r.status)),
]
_TEXT_COLUMNS = {"workload", "backend", "shape", "check"}

LEGEND = (
    "ms: median steady-state time per call · x eager / x ind: speedup over eager / inductor\n"
    "GB/s: minimal bytes (inputs read + outputs written once) / time · %copy: vs eager x.clone() of the same size\n"
    "TFLOP/s (gemm suite): 2·M·N·K per matmul / time\n"
    "alt: eager and compiled halves alternating / the two halves each run alone in a loop (alternating only)\n"
    "compile s: first call - steady time, warm process, cold caches · fresh s: same, first graph of a new process\n"
    "+aot s: compile time on top of Dynamo + AOTAutograd (aot_eager) · kern: kernels generated · "
    "ms/kern: compile time per kernel · peak MB (CUDA): memory of the case over its first three calls\n"
    "g/brk/fb: graphs Dynamo compiled, graph breaks, ops left to eager ATen (cppinductor) on the first call\n"
    "name:mode rows compare against Inductor in the same mode (x ind)"
)


def host_cpu_description() -> str:
    """The CPU's model name and the vector ISAs it runs ("AMD EPYC, avx2")."""
    from .. import _C

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return ", ".join([model, *_C.host_cpu_isas()])


def _line(cells: Sequence[str]) -> str:
    out = []
    for (header, width, _), cell in zip(_COLUMNS, cells):
        out.append(cell.ljust(width) if header in _TEXT_COLUMNS else cell.rjust(width))
    return "  ".join(out).rstrip()


def _error_notes(rows: Sequence[Row]) -> List[str]:
    """One line per distinct error; a backend failing the same way everywhere gets one line."""
    by_message: Dict[Tuple[str, str], List[str]] = {}
    for r in rows:
        if r.error:
            by_message.setdefault((r.backend, r.error), []).append(r.workload)
    workloads_run = len({r.workload for r in rows})
    notes = []
    for (backend, error), workloads in by_message.items():
        message = error if len(error) <= 300 else error[:297] + "..."
        where = "all workloads" if len(workloads) == workloads_run > 1 else ",".join(workloads)
        notes.append(f"{where}/{backend}: {message}")
    return notes


def busy_warning(rows: Sequence[Row], cores: Optional[int] = None) -> Optional[str]:
    """Other processes competing for the CPU make timings meaningless; say so rather than hide it."""
    cores = cores or os.cpu_count() or 1
    loads = [r.load_avg for r in rows if r.load_avg is not None]
    if not loads or max(loads) <= 1.5 * cores:
        return None
    return (f"WARNING: machine busy (1-min load average up to {max(loads):.1f} on {cores} cores): "
            "other processes competed for the CPU, timings are unreliable")


def format_table(rows: Sequence[Row]) -> str:
    lines = []
    if rows:
        r = rows[0]
        modes = sorted({x.mode for x in rows if x.mode})
        mode = f" · mode {','.join(modes)}" if modes else ""
        isas = sorted({x.cpu_isa for x in rows if x.cpu_isa})
        isa = f" · cpu isa {','.join(isas)} (host: {host_cpu_description()})" if isas else ""
        binaries = sorted({x.cuda_binary for x in rows if x.cuda_binary})
        binary = f" · cuda binary {','.join(binaries)}" if binaries else ""
        lines.append(f"cppinductor bench · {r.device} · {r.threads} threads · torch {r.torch_version} · {r.dtype}"
                     f"{mode}{isa}{binary}")
        refs = {(x.shape, x.copy_gbps, x.copy_prealloc_gbps) for x in rows if x.copy_gbps}
        for shape, clone, prealloc in sorted(refs, key=str):
            lines.append(f"copy reference {shape}: clone {clone:.1f} GB/s, copy_ into preallocated {prealloc:.1f} GB/s")
        busy = busy_warning(rows)
        if busy:
            lines.append(busy)
        lines.append("")
    lines.append(_line([h for h, _, _ in _COLUMNS]))
    lines.append(_line(["-" * w for _, w, _ in _COLUMNS]))
    previous = None
    for r in rows:
        cells = [cell(r) for _, _, cell in _COLUMNS]
        if r.workload == previous:
            cells[0] = ""
        previous = r.workload
        lines.append(_line(cells))
    notes = _error_notes(rows)
    if notes:
        lines.append("")
        lines += notes
    lines.append("")
    lines.append(LEGEND)
    return "\n".join(lines)


def write_json(rows: Sequence[Row], path: str) -> None:
    with open(path, "w") as f:
        json.dump([r.to_json() for r in rows], f, indent=1)
        f.write("\n")


def read_json(path: str) -> List[Row]:
    with open(path) as f:
        return [Row.from_json(d) for d in json.load(f)]
