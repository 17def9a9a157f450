"""The explain report: what Dynamo captured and what our compiler did with it.

    report = cppinductor.explain(fn_or_module)(*args, **kwargs)
    print(report)            # readable, with advice for common graph breaks
    report.to_dict()         # the same as plain data

    cppinductor.explain(fn, run=True)(*args)   # also times each kernel and places it
                                               # on the machine's roofline (roofline.py)

One run of `fn` gives both halves: a Dynamo backend accumulates graphs and
break reasons exactly as torch._dynamo.explain does, then hands each graph to
the cppinductor backend, whose GraphRecords (forward, backward, inference)
carry lowering, fusion and codegen decisions.

    python -m cppinductor.explain script.py [args]   runs a script under explain:
        every function the script passes to torch.compile is compiled with
        cppinductor, and the report covers all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import debug, roofline
from .backend import cppinductor


@dataclass
class GraphReport:
    kind: str
    ops: int
    lowered_ops: int
    fallbacks: list[dict]
    externs: list[dict]
    # name, device, kind, nodes, vectorized, schedule; bytes_read, bytes_written
    # and flops per call (ints; expressions over size symbols where sizes are
    # dynamic; None for an ATen call torch cannot count, "cost_unknown" says
    # why); with run=True also time_s, gb_per_s, gflop_per_s, flops_per_byte,
    # bound and roof_percent, or not_placed (roofline.py).
    kernels: list[dict]
    fusion_refusals: list[dict]
    compile_time_s: dict[str, float]
    # Kernel buffers one call allocates: {"fresh": n, "reused": m} (reused
    # ones take over a dead buffer's storage); zeros when the graph runs in eager.
    buffers: dict[str, int] = field(default_factory=lambda: {"fresh": 0, "reused": 0})
    # In mode="reduce-overhead" / "max-autotune": whether CUDA graphs are
    # used for this graph, or why not (cudagraphs.py); None in other modes.
    cudagraphs: str | None = None
    # max-autotune: per tuned kernel, its candidates (label, schedule,
    # time_us, dropped) and the winner, measured or from the tuning cache
    # (autotune.py); empty in other modes or before the first call.
    autotune: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "ops": self.ops,
            "lowered_ops": self.lowered_ops,
            "fallbacks": self.fallbacks,
            "externs": self.externs,
            "kernels": self.kernels,
            "fusion_refusals": self.fusion_refusals,
            "compile_time_s": self.compile_time_s,
            "buffers": self.buffers,
            "cudagraphs": self.cudagraphs,
            "autotune": self.autotune,
        }


@dataclass
class ExplainReport:
    graph_count: int
    graph_break_count: int
    break_reasons: list[dict]
    graphs: list[GraphReport] = field(default_factory=list)
    # With run=True: the machine's measured roofs the kernels are placed against.
    roofs: roofline.Roofs | None = None

    def to_dict(self) -> dict:
        return {
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "break_reasons": list(self.break_reasons),
            "graphs": [g.to_dict() for g in self.graphs],
            "roofs": None if self.roofs is None else self.roofs.to_dict(),
        }

    def __str__(self) -> str:
        return format_report(self)


def _aten_ops(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
    ]


def graph_report(record: debug.GraphRecord) -> GraphReport:
    """The per-graph half of the report, from one GraphRecord. Each kernel
    entry carries its bytes read and written and its FLOPs per call: our
    kernels' from their IR, ATen calls' where torch can count them."""
    ops = _aten_ops(record.gm)
    times = dict(record.python_times)
    if record.graph_fallback is not None:
        # The whole graph runs in eager: every op is a fallback with the graph's reason.
        fallbacks = [{"op": str(n.target), "reason": record.graph_fallback} for n in ops]
        kernels = [
            {"name": n.name, "device": _device_of(n), "kind": "fallback", "nodes": [n.name], "vectorized": False,
             "schedule": "", **roofline.aten_call_cost(n)}
            for n in ops
        ]
        times["total"] = sum(times.values())
        return GraphReport(record.kind, len(ops), 0, fallbacks, [], kernels, [], times,
                           cudagraphs=_cudagraphs(record))
    remarks = record.remarks
    fallbacks = [{"op": r["op"], "reason": r["reason"]} for r in remarks if r["kind"] == "fallback"]
    externs = [{"op": r["op"]} for r in remarks if r["kind"] == "extern"]
    refusals = [
        {"a": r["node"], "b": r["other"], "reason": r["reason"], **({"bytes": r["bytes"]} if "bytes" in r else {})}
        for r in remarks if r["kind"] == "fusion_refusal"
    ]
    for stage, seconds in record.stage_times:
        if stage != "total":
            times[stage] = times.get(stage, 0.0) + seconds
    times["total"] = sum(times.values())
    lowered = len(ops) - len(fallbacks) - len(externs)
    nodes = {n.name: n for n in record.gm.graph.nodes}
    kernels = [k if "flops" in k else {**k, **roofline.aten_call_cost(nodes[k["nodes"][0]])}
               for k in record.compiled.kernel_infos]  # ATen calls have no cost from the IR
    return GraphReport(
        record.kind, len(ops), lowered, fallbacks, externs, kernels, refusals, times,
        dict(record.compiled.allocation_counts), _cudagraphs(record), list(record.autotune),
    )


def _cudagraphs(record: debug.GraphRecord) -> str | None:
    return None if record.cudagraphs is None else str(record.cudagraphs)


def _device_of(node: torch.fx.Node) -> str:
    val = node.meta.get("val")
    return val.device.type if isinstance(val, torch.Tensor) else "cpu"


def _location(reason: Any) -> str:
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return ""
    frame = stack[-1]
    return f"{frame.filename}:{frame.lineno}"


class _Explainer:
    """A Dynamo backend that accumulates graphs and break reasons as
    torch._dynamo.explain does, and compiles each graph with cppinductor."""

    def __init__(self, mode: str | None = None, options: dict | None = None) -> None:
        self.mode, self.options = mode, options
        self.graphs: list = []
        self.op_count = 0
        self.ops_per_graph: list = []
        self.break_reasons: list = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        from torch._dynamo.backends.debugging import _explain_graph_detail

        gm, self.graphs, self.op_count, self.ops_per_graph, self.break_reasons = _explain_graph_detail(
            gm, self.graphs, self.op_count, self.ops_per_graph, self.break_reasons
        )
        return cppinductor(gm, example_inputs, mode=self.mode, options=self.options)

    def report(self, records: list[debug.GraphRecord]) -> ExplainReport:
        graph_count = len(self.graphs)
        return ExplainReport(
            graph_count=graph_count,
            graph_break_count=max(graph_count - 1, 0),
            break_reasons=[{"reason": r.reason, "location": _location(r)} for r in self.break_reasons],
            graphs=[graph_report(r) for r in records],
        )


def explain(
    fn: Callable[..., Any], *, mode: str | None = None, options: dict | None = None, run: bool = False,
    repeat: int = 10,
) -> Callable[..., ExplainReport]:
    """Returns a function that runs `fn` under torch.compile(backend="cppinductor") and reports.

    run=True: after compiling, `fn` runs once more to warm up and `repeat`
    times under torch.profiler; each kernel gets its median time, achieved
    GB/s and GFLOP/s, and its place on the machine's roofline (memory- or
    compute-bound, % of that roof), and the report ends with the roofline
    table (roofline.py). `fn` must tolerate the extra calls."""

    def explained(*args: Any, **kwargs: Any) -> ExplainReport:
        torch._dynamo.reset()
        explainer = _Explainer(mode, options)
        times = {}
        try:
            with debug.recording() as records:
                compiled = torch._dynamo.optimize(explainer, nopython=False)(fn)
                compiled(*args, **kwargs)
                if run:
                    times = roofline.time_kernels(lambda: compiled(*args, **kwargs), records, repeat)
        finally:
            torch._dynamo.reset()
        report = explainer.report(records)
        if run:
            report.roofs = roofline.machine_roofs(_roof_device(report))
            roofline.place_graphs(report.graphs, records, times, report.roofs)
        return report

    return explained


def _roof_device(report: ExplainReport) -> str:
    """The device the report's kernels run on: CUDA if any does (CUDA kernels
    are not placed, but their graphs' ATen calls are), else the CPU."""
    devices = {k["device"] for g in report.graphs for k in g.kernels}
    return "cuda" if "cuda" in devices else "cpu"


def explain_script(path: str, argv: list[str]) -> ExplainReport:
    """Runs a script as __main__, compiling every torch.compile'd function in
    it with cppinductor under the explainer, and reports on all of them."""
    import runpy
    import sys

    explainer = _Explainer()
    real_compile = torch.compile

    def compile_under_explain(model=None, **kwargs):
        kwargs["backend"] = explainer
        kwargs.pop("mode", None)
        kwargs.pop("options", None)
        if model is None:
            return lambda m: real_compile(m, **kwargs)
        return real_compile(model, **kwargs)

    torch._dynamo.reset()
    saved_argv = sys.argv
    sys.argv = [path, *argv]
    torch.compile = compile_under_explain
    try:
        with debug.recording() as records:
            runpy.run_path(path, run_name="__main__")
    finally:
        torch.compile = real_compile
        sys.argv = saved_argv
    return explainer.report(records)


# Advice for the graph breaks users hit most, keyed by a fragment of Dynamo's reason.
_ADVICE = [
    ("`print`", "print() inside compiled code breaks the graph: remove it, or log outside the compiled function."),
    ("Tensor.item()", "`.item()` leaves the graph: keep the value as a 0-d tensor, or set "
     "torch._dynamo.config.capture_scalar_outputs = True."),
    ("generic_jump", "Python control flow on a tensor's value (if/while on a tensor) breaks the graph: "
     "compute both branches and select with torch.where(cond, a, b), or use torch.cond."),
    ("Data-dependent", "Python control flow on a tensor's value breaks the graph: use torch.where or torch.cond."),
    ("tolist", "`.tolist()` leaves the graph: keep values as tensors."),
    ("numpy", "NumPy calls on tensors leave the graph: use the torch equivalents."),
]


def advice_for(reason: str) -> str | None:
    for fragment, text in _ADVICE:
        if fragment in reason:
            return text
    return None


def format_report(report: ExplainReport) -> str:
    lines = [
        f"Graphs captured by Dynamo: {report.graph_count}",
        f"Graph breaks: {report.graph_break_count}",
    ]
    for i, b in enumerate(report.break_reasons, 1):
        first = b["reason"].strip().splitlines()[0]
        lines.append(f"  break {i} at {b['location'] or '?'}: {first}")
        advice = advice_for(b["reason"])
        if advice:
            lines.append(f"    advice: {advice}")
    for i, g in enumerate(report.graphs):
        lines.append("")
        lines.extend(format_graph(i, g))
    if report.roofs is not None:
        lines.append("")
        lines.extend(roofline.format_table(report.graphs, report.roofs))
    return "\n".join(lines)


def format_graph(index: int, g: GraphReport) -> list[str]:
    lines = [
        f"Compiled graph {index} ({g.kind}): {g.ops} ATen ops, {g.lowered_ops} lowered, "
        f"{len(g.externs)} extern, {len(g.fallbacks)} fallback"
    ]
    for k in g.kernels:
        vec = " vectorized" if k["vectorized"] else ""
        lines.append(f"  {k['kind']:10} {k['name']} [{k['device']}{vec}] <- {', '.join(k['nodes'])}")
        if k.get("schedule"):
            lines.append(f"             schedule: {k['schedule']}")
        lines.extend(f"             {line}" for line in _kernel_cost_lines(k))
    for f in g.fallbacks:
        lines.append(f"  fallback {f['op']}: {f['reason']}")
    for r in g.fusion_refusals:
        traffic = f" ({_megabytes(r['bytes'])} through memory per call)" if "bytes" in r else ""
        lines.append(f"  not fused {r['a']} + {r['b']}{traffic}: {r['reason']}")
    lines.append(f"  buffers per call: {g.buffers['fresh']} fresh, {g.buffers['reused']} reused")
    if g.cudagraphs is not None:
        lines.append(f"  CUDA graphs: {g.cudagraphs}")
    lines.extend(_autotune_lines(g.autotune))
    stages = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in g.compile_time_s.items())
    lines.append(f"  compile time: {stages}")
    return lines



def _autotune_lines(tuned: list[dict]) -> list[str]:
    """max-autotune's choices: per kernel the winner, then each candidate's
    time or why it was dropped."""
    lines = []
    for t in tuned:
        how = "from the tuning cache" if t["source"] == "cache" else t["source"]
        sizes = f" for sizes up to {t['sizes']}" if t.get("sizes") else ""
        lines.append(f"  max-autotune {t['kernel']}{sizes}: {t['winner']!r} ({how}, {t['seconds'] * 1e3:.0f} ms tuning)")
        for c in t["candidates"]:
            took = f"{c['time_us']:.1f} us" if c["time_us"] is not None else "-"
            mark = "*" if c["label"] == t["winner"] else " "
            dropped = f"  dropped: {c['dropped']}" if c["dropped"] else ""
            lines.append(f"           {mark} {c['label']:24} {took:>12}{dropped}")
    return lines


def _kernel_cost_lines(k: dict) -> list[str]:
    """Bytes and FLOPs per call, then where timing placed the kernel."""
    lines = []
    if k.get("flops") is not None:
        count = roofline.format_count
        lines.append(f"cost: {count(k['bytes_read'], 'B')} read, {count(k['bytes_written'], 'B')} written, "
                     f"{count(k['flops'], 'FLOP')}")
    if "bound" in k:
        lines.append(f"timed: {k['time_s'] * 1e3:.3f} ms, {k['gb_per_s']:.2f} GB/s, {k['gflop_per_s']:.2f} GFLOP/s: "
                     f"{k['bound']}-bound at {k['roof_percent']:.0f}% of its roof")
    elif "not_placed" in k:
        lines.append(f"not placed: {k['not_placed']}")
    return lines


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**17 else f"{n / 2**10:.1f} KB"


def perf_hints(record: debug.GraphRecord) -> list[str]:
    """What costs this graph speed, one line each: ops that run in ATen
    (fallbacks, or the whole graph), updates of inputs left as whole copies,
    and fusions refused that send a buffer through memory, the largest first.
    CUDA graphs say why they are not used at their own decision
    (cudagraphs.py)."""
    report = graph_report(record)
    name = f"graph {record.id} ({record.kind})"
    if record.graph_fallback is not None:
        return [f"{name} runs in eager PyTorch: {record.graph_fallback}"]
    hints = [f"{name}: {f['op']} runs in ATen (not compiled): {f['reason']}" for f in report.fallbacks]
    hints += [f"{name}: {why}" for why in record.input_copies]
    refusals = sorted((r for r in report.fusion_refusals if "bytes" in r), key=lambda r: -r["bytes"])
    hints += [f"{name}: {r['a']} and {r['b']} not fused, {_megabytes(r['bytes'])} through memory per call: "
              f"{r['reason']}" for r in refusals]
    return hints
