"""Warm start (warm_start.py): compiled graphs in AOTAutograd's cache, reused
by another process; entries that cannot be trusted or stored are skipped."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_function

import cppinductor  # noqa: F401
from cppinductor import backend, warm_start
from cppinductor.export import export_graph


def _aten_graphs(fn, *args) -> list[torch.fx.GraphModule]:
    """The forward and backward ATen graphs AOTAutograd hands a compiler."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm)

    aot_function(fn, fw_compiler=keep, bw_compiler=keep)(*args)[0].sum().backward()
    return graphs


def _training_step(x, w, b):
    y = torch.nn.functional.layer_norm(x @ w + b, (8,))
    return torch.relu(y).transpose(0, 1).reshape(-1)[::3] * 2, y.sum(0)


def test_a_recipe_rebuilds_the_graph_our_exporter_sees():
    x = torch.randn(6, 8)
    w = torch.randn(8, 8, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    graphs = _aten_graphs(_training_step, x, w, b)
    assert len(graphs) == 2
    for gm in graphs:
        recipe, why = warm_start.recipe_of(gm)
        assert why is None
        rebuilt = pickle.loads(recipe).build()
        assert export_graph(rebuilt) == export_graph(gm)
        assert [n.meta.get("val") is None for n in rebuilt.graph.nodes] == [
            n.meta.get("val") is None for n in gm.graph.nodes]


def test_graphs_with_symbolic_shapes_are_not_stored():
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda x: x * 2, tracing_mode="symbolic")(torch.randn(5, 3))
    recipe, why = warm_start.recipe_of(gm)
    assert recipe is None and "symbolic" in why


def test_a_directory_others_can_write_turns_warm_start_off(tmp_path, monkeypatch, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(shared))
    assert "writable by other users" in warm_start.cache_dir_problem()
    opts = backend.parse_options(None, {"warm_start": True})
    with caplog.at_level("WARNING", logger="cppinductor.backend"):
        assert not backend._warm_start(opts, [])
    assert "warm start is off" in caplog.text
    shared.chmod(0o700)
    assert warm_start.cache_dir_problem() is None
    assert backend._warm_start(opts, [])


def test_auto_stores_training_graphs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    opts = backend.parse_options(None, {})
    param = torch.randn(3, requires_grad=True)
    assert backend._warm_start(opts, [param, torch.randn(3)])
    with torch.no_grad():
        assert not backend._warm_start(opts, [param])
    assert not backend._warm_start(opts, [torch.randn(3)])
    assert not backend._warm_start(backend.parse_options(None, {"warm_start": False}), [param])


def test_an_uncacheable_graph_compiles_and_is_counted_as_a_bypass(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    counters.clear()
    w = torch.randn(4, requires_grad=True)
    f = torch.compile(lambda x: (x * w).sin(), backend="cppinductor", dynamic=True,
                      options={"warm_start": True, "fallback": "error"})
    x = torch.randn(7, 4)
    f(x).sum().backward()
    assert torch.allclose(f(x), (x * w).sin())
    assert counters["aot_autograd"]["autograd_cache_bypass"] >= 1
    assert counters["aot_autograd"]["autograd_cache_saved"] == 0


_STEP = textwrap.dedent("""
    import json, sys, torch
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    compiled = torch.compile(model, backend="cppinductor", options={"fallback": "error"})
    out = compiled(x)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(x)
    ref.square().sum().backward()
    print(json.dumps({
        "aot": dict(counters["aot_autograd"]),
        "out": (out - ref).abs().max().item(),
        "grads": max((g - p.grad).abs().max().item() for g, p in zip(grads, model.parameters())),
    }))
""")


def _run_step(tmp_path: Path) -> dict:
    script = tmp_path / "step.py"
    script.write_text(_STEP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "aot"), CPPINDUCTOR_CACHE_DIR=str(tmp_path / "kernels"))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["out"] < 1e-5 and result["grads"] < 1e-4, result
    return result["aot"]


def test_a_second_process_loads_the_training_step_and_a_corrupt_entry_is_skipped(tmp_path):
    first = _run_step(tmp_path)
    assert first.get("autograd_cache_saved") == 1, first
    second = _run_step(tmp_path)
    assert second.get("autograd_cache_hit") == 1, second
    entries = [p for p in (tmp_path / "aot").rglob("*") if p.is_file() and "aotautograd" in p.parts]
    assert entries
    for p in entries:
        p.write_bytes(b"not a pickle")
    third = _run_step(tmp_path)  # still right: the entry is ignored and the step compiles again
    assert third.get("autograd_cache_hit", 0) == 0, third


def test_a_stored_graph_keeps_what_aotautograd_knew_of_it():
    """A cache hit has no AOTAutograd context: the static inputs (parameters,
    read where they are by a CUDA graph, not copied per call) and where the
    saved tensors start come from the entry."""
    from cppinductor.cudagraphs import AotFacts

    (gm, _) = _aten_graphs(_training_step, torch.randn(4, 8), torch.randn(8, 8, requires_grad=True),
                           torch.randn(8, requires_grad=True))
    facts = AotFacts(static_indices=(1, 2), saved_start=2)
    recipe, why = warm_start.recipe_of(gm)
    assert why is None
    code = warm_start.GraphCode(lambda args: None, recipe, None, "reduce-overhead", {}, "forward", _keep_rebuild,
                                facts)
    code.prepare_for_serialization()
    _rebuilt.clear()
    pickle.loads(pickle.dumps(code)).post_compile([], None, {})
    ((_, _, mode, _, kind, loaded_facts),) = _rebuilt
    assert (mode, kind, loaded_facts) == ("reduce-overhead", "forward", facts)


_rebuilt: list[tuple] = []


def _keep_rebuild(*args):
    """A GraphCode's compile_graph (module level: it pickles by name)."""
    _rebuilt.append(args)
    return lambda call_args: None


def test_aot_compile_saves_an_inference_graph_that_loads_without_dynamo(tmp_path):
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32))
    x = torch.randn(4, 16)

    def forward(m, inp):
        return m(inp)

    with torch.no_grad():
        compiled = torch.compile(forward, fullgraph=True, backend="cppinductor",
                                 options={"fallback": "error"}).aot_compile(((model, x), {}))
        compiled.save_compiled_function(str(tmp_path / "forward.bin"))
        torch._dynamo.reset()
        counters.clear()
        with open(tmp_path / "forward.bin", "rb") as f:
            loaded = torch.compiler.load_compiled_function(f)
        assert torch.allclose(loaded(model, x), model(x), atol=1e-5)
    assert counters["stats"]["unique_graphs"] == 0  # Dynamo traced nothing
