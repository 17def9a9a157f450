"""A roofline per kernel: where each kernel of a compiled graph stands against
the machine's memory bandwidth and peak FLOP/s.

    report = cppinductor.explain(fn, run=True)(*args)
    print(report)                          # the kernel list with achieved GB/s and GFLOP/s, and a roofline table
    roofline.plot(report, "roofline.png")  # the same as a chart (needs matplotlib)

Bytes and FLOPs of our kernels come from their loop IR (C++
lowering/ir/kernel_cost.h: each buffer a kernel loads or stores counted
once, one FLOP per floating-point op per iteration). ATen calls (externs such
as mm and convolution, fallbacks) get torch's flop counter for the ops it has
a formula for, and the sizes of their input and output tensors as bytes;
other ATen calls are listed as not placed, with the reason.

Times come from torch.profiler: every compiled call is a range
("cppinductor graph 3 (forward)") holding one range per CPU kernel (named as
wrapper.kernel_range_name says) and the ATen calls it makes. A kernel's time is
the median of its calls. The roofs are measured once per process and device:
the bandwidth of a large tensor copy (read + write) and the FLOP/s of a large
float32 matmul, a practical peak. A kernel whose arithmetic intensity (FLOPs
per byte) is below the ridge point (peak FLOP/s over bandwidth) is
memory-bound and judged by its GB/s against the copy's; above it,
compute-bound and judged by its FLOP/s against the matmul's.
"""

from __future__ import annotations

import functools
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
from torch._prims_common import compute_required_storage_length

from . import debug

MISSING_MATPLOTLIB = "roofline plots need matplotlib, which is not installed: pip install matplotlib"
_GRAPH_RANGE = re.compile(r"cppinductor graph (\d+) \((\w+)\)$")


@dataclass(frozen=True)
class Roofs:
    device: str
    bandwidth: float  # bytes/s: a large tensor copy, bytes read + written
    peak_flops: float  # FLOP/s: a large float32 matmul

    @property
    def ridge(self) -> float:
        """FLOPs per byte where a kernel stops being memory-bound."""
        return self.peak_flops / self.bandwidth

    def to_dict(self) -> dict:
        return {"device": self.device, "bandwidth_gb_per_s": self.bandwidth / 1e9,
                "peak_gflop_per_s": self.peak_flops / 1e9, "ridge_flops_per_byte": self.ridge}


def _best_seconds(step: Callable[[], Any], device: torch.device, repeat: int) -> float:
    step()  # first touch: page faults, lazy initialisation
    best = float("inf")
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


@functools.lru_cache(maxsize=None)
def machine_roofs(device: str = "cpu") -> Roofs:
    """The roofs of `device`, measured on the first call in a process (about
    a second on a CPU): a 256 MiB copy (far beyond the caches) and a float32
    matmul of 1536 (CPU) or 8192 (CUDA), the best of a few runs each (the
    best, since other work on the machine only ever slows a run down)."""
    dev = torch.device(device)
    elements = 64 * 2**20
    src = torch.ones(elements, device=dev)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), dev, repeat=8)
    n = 8192 if dev.type == "cuda" else 1536
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    out = torch.empty(n, n, device=dev)
    mm_s = _best_seconds(lambda: torch.mm(a, b, out=out), dev, repeat=6)
    return Roofs(str(dev), 2 * elements * src.element_size() / copy_s, 2 * n**3 / mm_s)


# --- costs of ATen calls -------------------------------------------------------------------------------


def _storage_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor's elements span (an expanded one counts what it holds)."""
    return compute_required_storage_length(t.shape, t.stride(), 0) * t.element_size()


def _tensors(value: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    torch.utils._pytree.tree_map(lambda v: out.append(v) if isinstance(v, torch.Tensor) else None, value)
    return out


def _static(t: torch.Tensor) -> bool:
    return all(type(v) is int for v in (*t.shape, *t.stride()))


def _sdpa_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query.shape, key.shape, value.shape)


# Ops the flop counter has no formula for whose FLOPs are plain: the CPU's
# attention counts as the CUDA flash attention it mirrors (both matmuls).
_FLOP_FORMULAS: dict[Any, Callable[..., int]] = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default: _sdpa_flops,
}


def aten_call_cost(node: torch.fx.Node) -> dict:
    """{"bytes_read", "bytes_written", "flops"} of an ATen call (an extern or
    a fallback) from its FX node's example values; a None where unknown, and
    then "cost_unknown" says why. Bytes: its distinct input tensors and its
    outputs, whole. FLOPs: torch's flop counter (mm: 2*M*N*K, convolution,
    attention, ...), run on meta tensors of the node's shapes."""
    unknown = {"bytes_read": None, "bytes_written": None, "flops": None}
    op = node.target
    if not isinstance(op, torch._ops.OpOverload):
        return {**unknown, "cost_unknown": f"{op} is not an ATen op"}
    seen: dict[str, torch.Tensor] = {}
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: seen.setdefault(n.name, n.meta.get("val")))
    inputs = [t for v in seen.values() for t in _tensors(v)]
    outputs = _tensors(node.meta.get("val"))
    if not all(_static(t) for t in inputs + outputs):
        return {**unknown, "cost_unknown": "symbolic sizes"}
    cost = {"bytes_read": sum(_storage_bytes(t) for t in inputs),
            "bytes_written": sum(_storage_bytes(t) for t in outputs), "flops": None}
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    def meta(n: torch.fx.Node) -> Any:
        return torch.utils._pytree.tree_map(
            lambda v: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
            if isinstance(v, torch.Tensor) else v, n.meta.get("val"))

    if op not in _FLOP_FORMULAS and op.overloadpacket not in flop_registry:
        return {**cost, "cost_unknown": f"torch's flop counter has no formula for {op}"}
    try:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), meta)
        if op in _FLOP_FORMULAS:
            return {**cost, "flops": _FLOP_FORMULAS[op](*args, **kwargs)}
        with FlopCounterMode(display=False) as counter:
            op(*args, **kwargs)
    except Exception as e:  # an op the meta device cannot run
        return {**cost, "cost_unknown": f"counting its FLOPs failed: {type(e).__name__}: {e}"}
    return {**cost, "flops": counter.get_total_flops()}


# --- timing ----------------------------------------------------------------------------------------------


def _kernel_range_names(record: debug.GraphRecord) -> dict[str, int]:
    """Profiler range name -> index in the graph's kernel list, for its CPU kernels."""
    from .wrapper import kernel_range_name

    compiled = record.compiled
    return {kernel_range_name(compiled, i): i for i, d in enumerate(compiled.kernel_devices) if d == "cpu"}


def _aten_names(record: debug.GraphRecord) -> list[tuple[int, str]]:
    """(index in the kernel list, profiler event name) of each ATen call, in call order."""
    nodes = {n.name: n for n in record.gm.graph.nodes}
    out = []
    for i, k in enumerate(record.compiled.kernel_infos):
        node = nodes.get(k["nodes"][0]) if k["kind"] in ("extern", "fallback") else None
        if node is not None and isinstance(node.target, torch._ops.OpOverload):
            out.append((i, node.target._schema.name))
    return out


def time_kernels(call: Callable[[], Any], records: Sequence[debug.GraphRecord], repeat: int = 10
                 ) -> dict[tuple[int, int], float]:
    """Runs `call` once to warm up, then `repeat` times under torch.profiler;
    returns the median seconds per call of every kernel and ATen call of the
    compiled graphs in `records`, by (graph id, index in its kernel list)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeat):
            call()
    by_id = {r.id: r for r in records if r.compiled is not None and r.graph_fallback is None}
    names = {gid: (_kernel_range_names(r), _aten_names(r)) for gid, r in by_id.items()}
    samples: dict[tuple[int, int], list[float]] = {}
    for event in prof.events():
        match = _GRAPH_RANGE.match(event.name)
        if not match or int(match.group(1)) not in names:
            continue
        gid = int(match.group(1))
        kernels, aten = names[gid]
        next_aten = 0
        for child in sorted(event.cpu_children, key=lambda e: e.time_range.start):
            if child.name in kernels:
                index = kernels[child.name]
            elif next_aten < len(aten) and child.name == aten[next_aten][1]:
                index = aten[next_aten][0]
                next_aten += 1
            else:
                continue  # views, allocations
            samples.setdefault((gid, index), []).append(child.time_range.elapsed_us() * 1e-6)
    return {key: statistics.median(times) for key, times in samples.items()}


# --- placement -------------------------------------------------------------------------------------------


def place(kernel: dict, seconds: float | None, roofs: Roofs) -> None:
    """Adds to an explain kernel entry its time and place on the roofline, or
    "not_placed" with the reason."""
    if seconds is None or seconds <= 0:
        kernel["not_placed"] = ("CUDA kernels are not timed (their profiler range times the launch)"
                                if kernel["device"] == "cuda" else "not timed: it did not run under the profiler")
        return
    kernel["time_s"] = seconds
    moved, flops = kernel.get("bytes_read"), kernel.get("flops")
    if isinstance(moved, int) and isinstance(kernel.get("bytes_written"), int):
        moved += kernel["bytes_written"]
    else:
        moved = None
    if moved is None or not isinstance(flops, int):
        kernel["not_placed"] = kernel.get("cost_unknown") or "its cost has symbolic sizes"
        return
    if moved == 0:
        kernel["not_placed"] = "it moves no bytes"
        return
    intensity = flops / moved
    memory_bound = intensity < roofs.ridge
    kernel["gb_per_s"] = moved / seconds / 1e9
    kernel["gflop_per_s"] = flops / seconds / 1e9
    kernel["flops_per_byte"] = intensity
    kernel["bound"] = "memory" if memory_bound else "compute"
    kernel["roof_percent"] = 100 * (moved / seconds / roofs.bandwidth if memory_bound
                                    else flops / seconds / roofs.peak_flops)


def place_graphs(graphs: Sequence[Any], records: Sequence[debug.GraphRecord],
                 times: Mapping[tuple[int, int], float], roofs: Roofs) -> None:
    """Places every kernel of every GraphReport (graphs[i] reports records[i])."""
    for graph, record in zip(graphs, records):
        for index, kernel in enumerate(graph.kernels):
            place(kernel, times.get((record.id, index)), roofs)


# --- presentation ----------------------------------------------------------------------------------------


def format_count(n: float | str, unit: str) -> str:
    """1.25 MB, 3.00 GFLOP; a symbolic count as its expression."""
    if isinstance(n, str):
        return f"{n} {unit}"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:.0f} {unit}"


def format_table(graphs: Sequence[Any], roofs: Roofs) -> list[str]:
    """The roofline table: one row per placed kernel, then those not placed."""
    lines = [f"Roofline ({roofs.device}): copy {roofs.bandwidth / 1e9:.1f} GB/s, matmul "
             f"{roofs.peak_flops / 1e9:.1f} GFLOP/s, ridge {roofs.ridge:.2f} FLOP/byte",
             f"  {'graph':>5}  {'kernel':<36} {'ms':>8} {'GB/s':>8} {'GFLOP/s':>8} {'FLOP/B':>7}  "
             f"{'bound':<8} {'% roof':>6}"]
    unplaced = []
    for i, g in enumerate(graphs):
        for k in g.kernels:
            if "bound" not in k:
                if "not_placed" in k:
                    unplaced.append(f"  {i:>5}  {k['name']}: {k['not_placed']}")
                continue
            lines.append(f"  {i:>5}  {k['name'][:36]:<36} {k['time_s'] * 1e3:8.3f} {k['gb_per_s']:8.2f} "
                         f"{k['gflop_per_s']:8.2f} {k['flops_per_byte']:7.2f}  {k['bound']:<8} "
                         f"{k['roof_percent']:5.0f}%")
    if unplaced:
        lines.append("  not placed:")
        lines.extend(unplaced)
    return lines


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(MISSING_MATPLOTLIB) from None


def plot(reports: Any, path: str, title: str | None = None) -> None:
    """Writes a roofline chart (PNG) of the placed kernels of an explain
    report made with run=True, or of several ({label: report}, one colour
    each): the roofs as lines, each kernel at its FLOPs per byte and achieved
    FLOP/s (ours as dots, ATen calls as crosses). Kernels without FLOPs (copies) have no place on a log scale: the
    legend counts them. Raises ImportError without matplotlib."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not isinstance(reports, Mapping):
        reports = {"": reports}
    roofs = next((r.roofs for r in reports.values() if r.roofs is not None), None)
    if roofs is None:
        raise ValueError("roofline.plot needs an explain report made with run=True")
    fig, ax = plt.subplots(figsize=(9, 6))
    points = [(label, k) for label, r in reports.items() for g in r.graphs for k in g.kernels if "bound" in k]
    shown = [(label, k) for label, k in points if k["flops_per_byte"] > 0]
    lo = min([k["flops_per_byte"] for _, k in shown] + [roofs.ridge / 100])
    hi = max([k["flops_per_byte"] for _, k in shown] + [roofs.ridge * 100])
    xs = [lo / 2 * (hi * 4 / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(roofs.peak_flops, x * roofs.bandwidth) / 1e9 for x in xs], color="black",
            label=f"roof: {roofs.bandwidth / 1e9:.1f} GB/s copy, {roofs.peak_flops / 1e9:.0f} GFLOP/s matmul")
    for i, label in enumerate(reports):
        colour = f"C{i % 10}"
        for aten, marker, what in ((False, "o", "kernels"), (True, "x", "ATen calls")):
            mine = [k for lab, k in shown if lab == label and (k["kind"] in ("extern", "fallback")) == aten]
            if mine:
                ax.scatter([k["flops_per_byte"] for k in mine], [k["gflop_per_s"] for k in mine], s=20, alpha=0.8,
                           color=colour, marker=marker, label=f"{label + ': ' if label else ''}{len(mine)} {what}")
    if len(points) > len(shown):
        ax.plot([], [], " ", label=f"{len(points) - len(shown)} kernels without FLOPs not shown")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(title or f"cppinductor kernels on the roofline ({roofs.device})")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
