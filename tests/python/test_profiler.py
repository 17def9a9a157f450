"""torch.profiler sees our graphs and kernels: a range per compiled call
("cppinductor graph N (kind)") and one per kernel, named after the ops fused
into it; nothing of this runs when no profiler is active."""

import json

import torch
from torch.profiler import profile

from cppinductor import debug


def _softmax_graph(x, b):
    return torch.softmax(torch.relu(x + b) * 2, -1)


def test_the_graph_and_its_kernels_are_profiler_ranges(tmp_path):
    x, b = torch.randn(64, 100), torch.randn(100)
    with debug.recording() as records:
        compiled = torch.compile(_softmax_graph, backend="cppinductor")
        torch.testing.assert_close(compiled(x, b), _softmax_graph(x, b))
    (record,) = records
    with profile() as prof:
        for _ in range(3):
            torch.testing.assert_close(compiled(x, b), _softmax_graph(x, b))
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts.get(f"cppinductor graph {record.id} (inference)") == 3, sorted(counts)
    kernels = [k for k in counts if k.startswith("kernel0_")]
    assert kernels == ["kernel0_add_relu_mul_amax_sub_etc"], sorted(counts)
    assert counts[kernels[0]] == 3
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert f"cppinductor graph {record.id} (inference)" in names and kernels[0] in names


def test_training_graphs_are_ranges_by_kind():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())
    compiled = torch.compile(model, backend="cppinductor")
    x = torch.randn(4, 16)
    compiled(x).sum().backward()
    with profile() as prof:
        compiled(x).sum().backward()
    keys = {e.key for e in prof.key_averages()}
    assert any(k.startswith("cppinductor graph") and k.endswith("(forward)") for k in keys), sorted(keys)
    assert any(k.startswith("cppinductor graph") and k.endswith("(backward)") for k in keys), sorted(keys)


def test_without_a_profiler_the_profiled_variant_is_never_built():
    x, b = torch.randn(8, 10), torch.randn(10)
    from cppinductor import runtime

    functions = []
    real_init = runtime.CompiledFunction.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        functions.append(self)

    runtime.CompiledFunction.__init__ = init
    try:
        compiled = torch.compile(_softmax_graph, backend="cppinductor")
        for _ in range(3):
            compiled(x, b)
    finally:
        runtime.CompiledFunction.__init__ = real_init
    (function,) = functions
    assert function._run_profiled is None
    assert "range_enter" not in function.source and "range_enter" in function._code.profiled_source
