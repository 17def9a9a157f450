"""Count the kernels a backend generates for a program, and what fell back.

    counts = cppinductor_counts(program)   # runs check_model under recording()
    inductor = inductor_counts(program)    # the same program through Inductor

A Program is a function (or nn.Module) with its inputs and whether it is
trained (check_model's grad=True: forward + backward from random output
gradients). Both backends compile the same program through check_model, so
the numbers compare the same graphs (forward, backward, inference) and the
results are checked against eager on the way.
"""

from __future__ import annotations

import os
import re
import tempfile
from unittest import mock
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch._dynamo

from check import check_model
from cppinductor import debug
from cppinductor.report import graph_report

# Kernels we generate; "extern" and "fallback" entries are ATen calls.
GENERATED_KINDS = {"pointwise", "reduction"}
# The only ops that may run through ATen: matmuls, convolutions and attention.
EXTERN_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten._scaled_dot_product_")


@dataclass
class Program:
    name: str
    build: Callable[[], tuple[Callable, tuple]]  # -> (fn or module, args); called once per backend
    grad: bool = False
    check_kwargs: dict = field(default_factory=dict)  # more check_model arguments (reduction=True, ...)


@dataclass
class Counts:
    kernels: int
    kernels_per_graph: dict[str, int]  # "forward"/"backward"/"inference" (numbered when repeated)
    fallbacks: list[dict]  # {graph, op, reason}
    externs: list[str]
    refusals: list[dict]  # {graph, a, b, reason}

    def describe(self) -> str:
        lines = [f"kernels {self.kernels} {self.kernels_per_graph}"]
        lines += [f"fallback in {f['graph']}: {f['op']}: {f['reason']}" for f in self.fallbacks]
        lines += [f"fusion refusal in {r['graph']}: {r['a']} / {r['b']}: {r['reason']}" for r in self.refusals]
        return "\n".join(lines)


def _graph_name(kind: str, seen: dict[str, int]) -> str:
    seen[kind] = seen.get(kind, 0) + 1
    return kind if seen[kind] == 1 else f"{kind}{seen[kind]}"


def cppinductor_counts(program: Program) -> Counts:
    """Runs the program through check_model with cppinductor; what every compiled graph generated."""
    fn, args = program.build()
    torch._dynamo.reset()
    with debug.recording() as records:
        check_model(fn, args, grad=program.grad, **program.check_kwargs)
    per_graph: dict[str, int] = {}
    fallbacks, externs, refusals = [], [], []
    seen: dict[str, int] = {}
    for record in records:
        report = graph_report(record)
        name = _graph_name(report.kind, seen)
        per_graph[name] = sum(k["kind"] in GENERATED_KINDS for k in report.kernels)
        fallbacks += [{"graph": name, **f} for f in report.fallbacks]
        externs += [e["op"] for e in report.externs]
        refusals += [{"graph": name, **r} for r in report.fusion_refusals]
    return Counts(sum(per_graph.values()), per_graph, fallbacks, externs, refusals)


def disallowed_externs(counts: Counts) -> list[str]:
    return [op for op in counts.externs if not op.startswith(EXTERN_OPS)]


_inductor_cache_dir: str | None = None


@dataclass
class InductorCounts:
    # torch._inductor.metrics.generated_kernel_count, what issue 3 compares
    # with. On CPU it counts more than one per fused loop nest for reductions
    # (measured: softmax 4, log_softmax, layer_norm and var_mean 8).
    metric: int
    # Kernel functions in Inductor's output code (`cpp_fused_x = async_compile.cpp_pybinding(...)`).
    # Inductor's CPU scheduling puts consecutive loop nests into one function
    # until an extern call (the 6 unfused loops of an SGD update are one
    # function), so this undercounts loop nests: reported, not asserted.
    functions: int
    functions_per_graph: list[int]  # in compile order


_KERNEL_DEFINITION = re.compile(r"^\w+ = async_compile\.(?!wait)\w+\(", re.M)


def inductor_counts(program: Program) -> InductorCounts:
    """Kernels Inductor generates for the same program."""
    global _inductor_cache_dir
    import torch._inductor.config as inductor_config
    from torch._inductor import metrics
    from torch._inductor.utils import run_and_get_code

    if _inductor_cache_dir is None:  # a fresh cache, so Inductor really compiles (and counts)
        _inductor_cache_dir = tempfile.mkdtemp(prefix="cppinductor_test_inductor_")
    fn, args = program.build()
    torch._dynamo.reset()
    metrics.reset()
    with mock.patch.dict(os.environ, {"TORCHINDUCTOR_CACHE_DIR": _inductor_cache_dir}), inductor_config.patch(
        fx_graph_cache=False, autotune_local_cache=False
    ):
        _, sources = run_and_get_code(
            lambda: check_model(fn, args, grad=program.grad, backend="inductor", **program.check_kwargs)
        )
    per_graph = [len(_KERNEL_DEFINITION.findall(source)) for source in sources]
    return InductorCounts(metrics.generated_kernel_count, sum(per_graph), per_graph)
