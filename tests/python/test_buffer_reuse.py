"""End to end: kernel buffers take over the storage of dead ones
(backend/buffer_reuse.h), results stay eager's, and fewer buffers are fresh."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cppinductor
from check import check_model
from cppinductor import debug
from cppinductor.memory import buffer_counters, track_live_bytes


def mm_chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Intermediates no fusion can remove: each feeds an extern matmul."""
    a = torch.relu(x) @ w
    b = torch.sin(a) @ w
    c = torch.cos(b) @ w
    d = torch.tanh(c) @ w
    return torch.sigmoid(d)


# mm_chain's buffers per call with reuse (test_chain_of_unfusable_intermediates...).
CHAIN_COUNTS = {"cpu": {"fresh": 2, "reused": 7}, "cuda": {"fresh": 1, "reused": 4}}


def allocation_counts(fn, args, **check_kwargs) -> dict[str, int]:
    """check_model's compiled graphs' kernel buffers per call, summed over graphs."""
    with debug.recording() as records:
        check_model(fn, args, runs=1, **check_kwargs)
    totals = {"fresh": 0, "reused": 0}
    for r in records:
        assert r.compiled is not None, r.graph_fallback
        for k, v in r.compiled.allocation_counts.items():
            totals[k] += v
    return totals


def plan_text(fn, args, tmp_path) -> str:
    torch.compile(fn, backend="cppinductor", options={"debug_dir": str(tmp_path)})(*args)
    plans = [os.path.join(d, "wrapper_plan.txt") for d, _, files in os.walk(tmp_path) if "wrapper_plan.txt" in files]
    assert len(plans) == 1
    return open(plans[0]).read()


def test_chain_of_unfusable_intermediates_allocates_fewer_fresh_buffers(device):
    args = (torch.randn(16, 16, device=device), torch.randn(16, 16, device=device) / 4)
    before = allocation_counts(mm_chain, args, options={"reuse_buffers": False})
    torch._dynamo.reset()
    after = allocation_counts(mm_chain, args)
    # relu, sin, cos, tanh and the returned sigmoid; on the CPU the four
    # products too (out= variants into planned buffers).
    assert before == {"fresh": 9 if device == "cpu" else 5, "reused": 0}
    # sin, cos, tanh and sigmoid each write over the mm result they read last
    # (in place); relu reads the caller's input, which is never taken. On the
    # CPU the first product is fresh and each later one takes the storage
    # that died in the product before it (relu's, then sin's, then cos's).
    assert after == CHAIN_COUNTS[device]


def test_reused_buffers_are_what_calls_allocate(device):
    args = (torch.randn(16, 16, device=device), torch.randn(16, 16, device=device) / 4)
    compiled = torch.compile(mm_chain, backend="cppinductor")
    compiled(*args)
    start = buffer_counters()
    compiled(*args)
    compiled(*args)
    end = buffer_counters()
    assert end["calls"] - start["calls"] == 2
    assert end["fresh"] - start["fresh"] == 2 * CHAIN_COUNTS[device]["fresh"]
    assert end["reused"] - start["reused"] == 2 * CHAIN_COUNTS[device]["reused"]


def test_wrapper_plan_shows_reuse(tmp_path):
    text = plan_text(mm_chain, (torch.randn(16, 16), torch.randn(16, 16)), tmp_path)
    assert text.count("= in place of mm") == 4, text
    assert "free     " in text, text


def test_an_extern_result_is_reused_once_dead(device, tmp_path):
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = x @ w                  # ATen's result: dies in the softmax kernel
        b = torch.softmax(a, -1)
        c = b @ w
        d, e = torch.relu(c), torch.tanh(c)  # one kernel, two new buffers: b's storage and c's
        return torch.sigmoid(d @ w + e @ w)

    args = (torch.randn(16, 16, device=device), torch.randn(16, 16, device=device))
    check_model(f, args, reduction=True)
    text = plan_text(f, args, tmp_path)
    assert "alloc    div float32[16, 16] = in place of mm\n" in text, text  # b over a
    assert "= reuse div\n" in text, text  # d or e takes b's storage (a's before it), dead after c


def test_a_storage_smaller_than_planned_is_not_reused():
    from cppinductor.runtime import _reuse

    small = torch.ones(4)
    fresh = _reuse(small, (4, 4), (4, 1), torch.float32, 64, "cpu")
    assert fresh.untyped_storage().data_ptr() != small.untyped_storage().data_ptr()
    assert fresh.shape == (4, 4) and fresh.stride() == (4, 1)
    big = torch.ones(16)
    view = _reuse(big, (2, 2), (1, 2), torch.int32, 16, "cpu")
    assert view.untyped_storage().data_ptr() == big.untyped_storage().data_ptr()
    assert view.dtype == torch.int32 and view.stride() == (1, 2)


def test_explain_reports_buffers_per_call():
    report = cppinductor.explain(mm_chain)(torch.randn(16, 16), torch.randn(16, 16))
    (graph,) = report.graphs
    assert graph.buffers == CHAIN_COUNTS["cpu"]
    assert "buffers per call: 2 fresh, 7 reused" in str(report)


def test_reuse_across_dtypes_reinterprets_the_storage(device, tmp_path):
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x) @ w                      # relu's float32 buffer dies here
        codes = (a * 8).to(torch.int32)            # same bytes, another dtype: reuses it
        ranked = torch.sort(codes, dim=-1).values  # an ATen fallback reads it
        return ranked.float() + a

    args = (torch.randn(16, 16, device=device), torch.randn(16, 16, device=device))
    check_model(f, args)
    text = plan_text(f, args, tmp_path)
    assert "_to_copy int32[16, 16] = reuse relu\n" in text, text


def test_dynamic_shapes_reuse_symbolic_buffers():
    args = (torch.randn(12, 16), torch.randn(16, 16) / 4)
    counts = allocation_counts(mm_chain, args, dynamic=True)
    assert counts == CHAIN_COUNTS["cpu"], counts
    compiled = torch.compile(mm_chain, backend="cppinductor", dynamic=True)
    for rows in (5, 9, 12):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(compiled(x, args[1]), mm_chain(x, args[1]))


def wrapper_source(fn, args, tmp_path, **compile_kwargs) -> str:
    compiled = torch.compile(fn, backend="cppinductor", options={"debug_dir": str(tmp_path)}, **compile_kwargs)
    compiled(*args)
    (path,) = [os.path.join(d, "wrapper.py") for d, _, files in os.walk(tmp_path) if "wrapper.py" in files]
    return open(path).read()


def matmuls(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, p: torch.Tensor, q: torch.Tensor):
    """mm, addmm with a broadcast bias and bmm, whose result is returned as it is."""
    a = torch.relu(x) @ w
    c = torch.addmm(bias, torch.sin(a), w.t())  # w.t(): a transposed operand, still a dense result
    d = torch.bmm(p, q * 2)
    return torch.tanh(c), d


def test_cpu_matmuls_write_into_planned_buffers(tmp_path):
    """On the CPU mm, addmm and bmm run their out= variants into buffers the
    memory plan places (Inductor's extern_kernels.mm(..., out=buf)), so a
    product may take over a dead buffer's storage."""
    args = (torch.randn(16, 16), torch.randn(16, 16) / 4, torch.randn(16), torch.randn(3, 8, 5), torch.randn(3, 5, 7))
    check_model(matmuls, args)
    plan = plan_text(matmuls, args, tmp_path / "plan")
    for op in ("mm", "addmm", "bmm"):
        assert f"extern   {op} = aten.{op}.default (out=)\n" in plan, plan
    # relu's buffer dies in the mm that reads it; sin writes over mm's, and
    # the addmm takes relu's.
    assert "alloc    addmm float32[16, 16] = reuse relu\n" in plan, plan
    source = wrapper_source(matmuls, args, tmp_path / "source")
    for op in ("mm", "addmm", "bmm"):
        assert f"torch_{op}(" in source and f", out={op})" in source, source


def test_cpu_matmul_out_buffers_under_dynamic_shapes_and_training():
    w, bias = torch.randn(16, 16) / 4, torch.randn(16)
    compiled = torch.compile(matmuls, backend="cppinductor", dynamic=True)
    for rows in (5, 9, 12):
        args = (torch.randn(rows, 16), w, bias, torch.randn(2, rows, 3), torch.randn(2, 3, rows))
        for got, want in zip(compiled(*args), matmuls(*args)):
            torch.testing.assert_close(got, want)
    torch._dynamo.reset()
    counts = allocation_counts(MLP(), (torch.randn(8, 16),), grad=True, reduction=True)
    assert counts["reused"] >= 1, counts


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def test_mlp_training_reuses_buffers_and_matches_eager(device):
    counts = allocation_counts(MLP().to(device), (torch.randn(8, 16, device=device),), grad=True, reduction=True)
    assert counts["reused"] >= 1, counts


def test_transformer_training_reuses_buffers_and_matches_eager(device):
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).to(device)
    counts = allocation_counts(layer, (torch.randn(2, 6, 16, device=device),), grad=True, reduction=True)
    assert counts["reused"] >= 1, counts


def test_peak_live_bytes_is_measured_and_not_above_the_plan_without_reuse():
    args = (torch.randn(64, 64), torch.randn(64, 64) / 8)
    peaks = {}
    for reuse in (False, True):
        torch._dynamo.reset()
        compiled = torch.compile(mm_chain, backend="cppinductor", options={"reuse_buffers": reuse})
        compiled(*args)
        with track_live_bytes() as live:
            compiled(*args)
        assert len(live.peaks) == 1
        peaks[reuse] = live.peak
    # x, w and three 64x64 float32 values at most (an input, a product, a result).
    assert 3 * 64 * 64 * 4 <= peaks[True] <= peaks[False]


def test_memory_plan_tool_reports_both_plans():
    from cppinductor.bench.workloads import BY_NAME
    from cppinductor.tools import memory_plan

    off, on = memory_plan.measure(BY_NAME["transformer_train"], ["no reuse", "reuse"], "cpu", "tiny", rounds=1)
    assert off.reused == 0 and on.reused >= 1
    assert on.fresh + on.reused == off.fresh
    assert on.peak_live_bytes > 0 and off.peak_live_bytes > 0 and on.time_ms > 0
    table = memory_plan.format_rows([off, on])
    assert "no reuse" in table and f" {on.reused} " in table
