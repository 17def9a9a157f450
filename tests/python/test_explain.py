"""explain(), the debug dumps, environment variables and run_and_get_code."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import cppinductor
from cppinductor.utils import run_and_get_code


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def breaks_everywhere(x):
    y = x.sin()
    print("graph break")
    if y.sum() > 0:  # data-dependent control flow
        y = y * 2
    return y + y.sum().item()


def test_break_counts_equal_dynamo_explain():
    x = torch.randn(8)
    ours = cppinductor.explain(breaks_everywhere)(x)
    theirs = torch._dynamo.explain(breaks_everywhere)(x)
    assert ours.graph_count == theirs.graph_count
    assert ours.graph_break_count == theirs.graph_break_count
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 3
    assert all(b["location"].endswith(".py:" + b["location"].rsplit(":", 1)[1]) for b in ours.break_reasons)
    text = str(ours)
    assert "print() inside compiled code" in text
    assert "torch.where" in text
    assert "capture_scalar_outputs" in text


def test_to_dict_has_exactly_the_documented_keys():
    d = cppinductor.explain(lambda x: torch.mm(x, x).sort(dim=0).values.relu())(torch.randn(4, 4)).to_dict()
    assert set(d) == {"graph_count", "graph_break_count", "break_reasons", "graphs", "roofs"}
    assert d["roofs"] is None  # only with run=True
    (g,) = d["graphs"]
    assert set(g) == {
        "ops", "lowered_ops", "fallbacks", "externs", "kernels", "fusion_refusals", "compile_time_s", "buffers",
        "cudagraphs", "autotune",
    }
    assert g["autotune"] == []  # max-autotune's choices: none in the default mode
    assert "total" in g["compile_time_s"]
    assert {"op": "aten.mm.default"} in g["externs"]
    sort = [f for f in g["fallbacks"] if f["op"] == "aten.sort.default"]
    assert sort and sort[0]["reason"]
    for k in g["kernels"]:
        cost = {"bytes_read", "bytes_written", "flops"}
        assert set(k) - {"cost_unknown"} == {"name", "device", "kind", "nodes", "vectorized", "schedule", *cost}
        assert ("cost_unknown" in k) == (k["flops"] is None), k  # sort: no FLOP formula
        assert k["kind"] in {"pointwise", "reduction", "scan", "template", "extern", "fallback"}
        assert k["nodes"], k
    assert all(f["reason"] for f in g["fallbacks"])


def test_backward_graphs_are_reported():
    model = torch.nn.Linear(4, 3)

    def step(x):
        loss = model(x).relu().sum()
        loss.backward()
        return loss

    report = cppinductor.explain(step)(torch.randn(2, 4))
    kinds = [g.kind for g in report.graphs]
    assert "forward" in kinds and "backward" in kinds


def test_graph_fallback_lists_every_op_with_the_reason():
    with pytest.warns(UserWarning, match="eager"):
        report = cppinductor.explain(lambda z: (z * 2).abs())(torch.randn(3, dtype=torch.complex64))
    (g,) = report.graphs
    assert g.lowered_ops == 0 and g.fallbacks
    assert all("complex64" in f["reason"] for f in g.fallbacks)


def test_debug_dir_holds_one_folder_per_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("CPPINDUCTOR_DEBUG_DIR", str(tmp_path))
    torch.compile(lambda x: x.cos() + 1, backend="cppinductor")(torch.randn(5))
    (folder,) = os.listdir(tmp_path)
    files = set(os.listdir(tmp_path / folder))
    assert {"fx_graph.txt", "fx_graph.json", "wrapper_plan.txt", "explain.txt"} <= files
    assert "aten.cos" in (tmp_path / folder / "fx_graph.txt").read_text()


def test_invalid_environment_values_name_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("CPPINDUCTOR_DUMP_CODE", "yes")
    with pytest.raises(Exception, match="CPPINDUCTOR_DUMP_CODE"):
        torch.compile(lambda x: x + 1, backend="cppinductor")(torch.randn(2))
    monkeypatch.delenv("CPPINDUCTOR_DUMP_CODE")
    torch._dynamo.reset()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("CPPINDUCTOR_DEBUG_DIR", str(not_a_dir))
    with pytest.raises(Exception, match="CPPINDUCTOR_DEBUG_DIR"):
        torch.compile(lambda x: x + 2, backend="cppinductor")(torch.randn(2))


def test_run_and_get_code_returns_the_result_and_sources():
    fn = torch.compile(lambda x: (x + 1).relu(), backend="cppinductor")
    x = torch.randn(6)
    result, sources = run_and_get_code(fn, x)
    torch.testing.assert_close(result, (x + 1).relu())
    assert isinstance(sources, list) and all(isinstance(s, str) for s in sources)


def test_explain_command_runs_a_script(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch
        def f(x):
            y = x.sin()
            print("hello from the script")
            return y.sort().values
        torch.compile(f)(torch.randn(4))
    """))
    out = subprocess.run([sys.executable, "-m", "cppinductor.explain", str(script)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Graph breaks: 1" in out.stdout
    assert "prog.py:5" in out.stdout
    assert "aten.sort.default" in out.stdout


def test_pointwise_chain_is_one_vectorized_kernel():
    # The claims explain makes are checked against what codegen did: one fused,
    # vectorised CPU kernel for relu(x + b) * 2, no fallback.
    report = cppinductor.explain(lambda x, b: (x + b).relu() * 2, options={"fallback": "error"})(
        torch.randn(64, 256), torch.randn(256)
    )
    (g,) = report.graphs
    assert g.fallbacks == [] and g.externs == []
    (k,) = g.kernels
    assert k["kind"] == "pointwise" and k["vectorized"] and k["device"] == "cpu"
    assert set(k["nodes"]) >= {"add", "relu", "mul"}


def test_each_kernel_says_why_it_was_scheduled_so():
    # The scheduler's reasons reach explain and the generated source: a large
    # elementwise kernel is split among threads, a small one is not.
    fn = lambda x: x.relu() * 2
    big = cppinductor.explain(fn, options={"fallback": "error"})(torch.randn(1 << 20))
    (k,) = big.graphs[0].kernels
    assert "parallel over 1 outer loop" in k["schedule"] and "vectorised" in k["schedule"], k["schedule"]
    small = cppinductor.explain(fn, options={"fallback": "error"})(torch.randn(100))
    (k,) = small.graphs[0].kernels
    assert k["schedule"].startswith("serial: 100 elements of work"), k["schedule"]
    assert "schedule: serial: 100 elements of work" in str(small)
    externs = cppinductor.explain(lambda a: a @ a)(torch.randn(8, 8)).graphs[0].kernels
    assert [k["schedule"] for k in externs] == [""]
    _, sources = run_and_get_code(torch.compile(fn, backend="cppinductor"), torch.randn(100))
    assert "// why: serial: 100 elements of work" in sources[0]


def test_softmax_is_one_vectorized_reduction_kernel():
    report = cppinductor.explain(lambda x: torch.softmax(x, -1), options={"fallback": "error"})(torch.randn(32, 100))
    (g,) = report.graphs
    (k,) = g.kernels
    assert k["kind"] == "reduction" and k["vectorized"]


def test_generated_code_carries_provenance():
    fn = torch.compile(lambda x: torch.sigmoid(x) * 3, backend="cppinductor")
    _, sources = run_and_get_code(fn, torch.randn(128))
    (src,) = sources
    assert "origins:" in src and "sigmoid" in src
    assert "test_explain.py" in src  # the user's source line


def test_perf_hints_name_fallbacks_and_refused_fusions_with_their_bytes(caplog):
    """Once per graph under cppinductor.perf_hints: each op left to ATen and
    each refused fusion that sends a buffer through memory, with its bytes."""
    import logging

    def f(x):
        return torch.softmax(x, 0).sort(0).values

    x = torch.randn(2048, 64)
    with caplog.at_level(logging.INFO, logger="cppinductor.perf_hints"):
        torch.testing.assert_close(torch.compile(f, backend="cppinductor")(x), f(x))
    hints = [r.message for r in caplog.records if r.name == "cppinductor.perf_hints"]
    assert any("aten.sort.default runs in ATen" in h for h in hints), hints
    # The column max (64 floats) is written by one kernel and read back by the other.
    assert any("amax and div not fused, 0.5 KB through memory per call" in h for h in hints), hints
    (graph,) = cppinductor.explain(f)(x).to_dict()["graphs"]
    (refusal,) = graph["fusion_refusals"]
    assert refusal["bytes"] == 2 * 64 * 4, refusal


def test_the_codegen_corpus_tool_tells_same_code_from_changed(tmp_path):
    from cppinductor.tools import codegen_corpus

    for run in ("before", "after"):
        assert codegen_corpus.dump(str(tmp_path / run), ["relu_bias", "softmax"], "tiny") == []
    assert codegen_corpus.compare(str(tmp_path / "before"), str(tmp_path / "after")) == {}
    # One kernel edited: that workload, and only it, differs.
    (path,) = [os.path.join(d, "kernels.cpp") for d, _, files in os.walk(tmp_path / "after" / "softmax")
               if "kernels.cpp" in files]
    with open(path, "a") as f:
        f.write("// edited\n")
    assert list(codegen_corpus.compare(str(tmp_path / "before"), str(tmp_path / "after"))) == ["softmax"]
    assert codegen_corpus.main(["compare", str(tmp_path / "before"), str(tmp_path / "after")]) == 1
