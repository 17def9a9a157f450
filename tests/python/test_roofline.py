"""explain()'s roofline: bytes and FLOPs per kernel from the IR, exact for
graphs whose counts are known; run=True times every kernel and places it
against the machine's roofs; the chart (matplotlib optional). No assertion
depends on how fast anything ran."""

import sys

import pytest
import torch

import cppinductor
from cppinductor import roofline


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _kernels(fn, *args, **explain_kwargs):
    report = cppinductor.explain(fn, **explain_kwargs)(*args)
    (graph,) = report.graphs
    return report, graph.kernels


def _cost(k):
    return k["bytes_read"], k["bytes_written"], k["flops"]


def test_pointwise_add_reads_both_inputs_once_and_does_one_flop_per_element():
    x, y = torch.randn(1000, 1000), torch.randn(1000, 1000)
    _, (k,) = _kernels(lambda x, y: x + y, x, y)
    assert _cost(k) == (8_000_000, 4_000_000, 1_000_000)


def test_a_broadcast_operand_counts_its_own_size_once():
    x, b = torch.randn(1000, 1000), torch.randn(1000)
    _, (k,) = _kernels(lambda x, b: torch.relu(x + b), x, b)
    assert _cost(k) == (4_000_000 + 4_000, 4_000_000, 2_000_000)  # add, maximum


def test_row_sum():
    _, (k,) = _kernels(lambda x: x.sum(-1), torch.randn(1000, 1000))
    assert _cost(k) == (4_000_000, 4_000, 1_000_000)  # one add per element folded


def test_softmax_reads_its_input_once_however_many_passes():
    _, (k,) = _kernels(lambda x: torch.softmax(x, -1), torch.randn(1000, 1000))
    # Per element: max 1, exp(x - max) 2 (stashed in the output), sum 1, the
    # rescale 1; 1 / sum once per row. The stash's read-back is the kernel's own.
    assert _cost(k) == (4_000_000, 4_000_000, 5 * 1_000_000 + 1_000)


def test_externs_are_counted_by_torch_and_what_has_no_formula_says_so():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    _, kernels = _kernels(lambda a, b: torch.sort(torch.mm(a, b), 0).values, a, b)
    mm = next(k for k in kernels if k["kind"] == "extern")
    assert _cost(mm) == (4 * (64 * 32 + 32 * 16), 4 * 64 * 16, 2 * 64 * 32 * 16)
    sort = next(k for k in kernels if k["kind"] == "fallback")
    assert sort["flops"] is None and "no formula" in sort["cost_unknown"]


def test_dynamic_shapes_give_expressions_over_the_size_symbols():
    compiled = torch.compile(lambda x: x * 2, backend="cppinductor", dynamic=True)
    from cppinductor import debug

    with debug.recording() as records:
        compiled(torch.randn(8, 5))
    (k,) = records[0].compiled.kernel_infos
    assert isinstance(k["bytes_read"], str) and "s" in k["bytes_read"], k


@pytest.fixture(scope="module")
def timed_report():
    torch._dynamo.reset()
    x, w, b = torch.randn(256, 128), torch.randn(128, 128), torch.randn(128)
    report = cppinductor.explain(lambda x, w, b: torch.softmax(torch.relu(x @ w + b), -1).sum(0), run=True,
                                 repeat=3)(x, w, b)
    torch._dynamo.reset()
    return report


def test_run_times_and_places_every_kernel(timed_report):
    roofs = timed_report.roofs
    assert roofs.bandwidth > 0 and roofs.peak_flops > 0 and roofs.ridge > 0
    (graph,) = timed_report.graphs
    assert any(k["kind"] == "extern" for k in graph.kernels)
    for k in graph.kernels:
        assert "not_placed" not in k, k
        assert k["time_s"] > 0 and k["gb_per_s"] > 0 and k["gflop_per_s"] >= 0, k
        assert k["bound"] in ("memory", "compute")
        assert k["bound"] == ("memory" if k["flops_per_byte"] < roofs.ridge else "compute")
        assert k["roof_percent"] > 0
    text = str(timed_report)
    assert "Roofline (cpu): copy" in text and "GFLOP/s" in text
    assert timed_report.to_dict()["roofs"]["ridge_flops_per_byte"] == pytest.approx(roofs.ridge)


def test_roofs_are_measured_once_per_process_and_device(timed_report):
    assert roofline.machine_roofs("cpu") is timed_report.roofs


def test_placement_arithmetic():
    roofs = roofline.Roofs("cpu", bandwidth=10e9, peak_flops=100e9)  # ridge 10 FLOP/byte
    copy = {"device": "cpu", "bytes_read": 4_000_000, "bytes_written": 4_000_000, "flops": 0}
    roofline.place(copy, 1e-3, roofs)
    assert (copy["gb_per_s"], copy["bound"], copy["roof_percent"]) == (8.0, "memory", pytest.approx(80.0))
    mm = {"device": "cpu", "bytes_read": 1_000_000, "bytes_written": 0, "flops": 50_000_000}
    roofline.place(mm, 1e-3, roofs)
    assert (mm["gflop_per_s"], mm["bound"], mm["roof_percent"]) == (50.0, "compute", pytest.approx(50.0))
    unknown = {"device": "cpu", "bytes_read": 8, "bytes_written": 8, "flops": None, "cost_unknown": "why"}
    roofline.place(unknown, 1e-3, roofs)
    assert unknown["not_placed"] == "why" and unknown["time_s"] == 1e-3
    roofline.place(cuda := {"device": "cuda", "flops": 1}, None, roofs)
    assert "CUDA" in cuda["not_placed"]


def test_plot_writes_a_png(tmp_path, timed_report):
    pytest.importorskip("matplotlib")
    path = tmp_path / "roofline.png"
    roofline.plot(timed_report, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_fails_clearly(tmp_path, timed_report, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        roofline.plot(timed_report, str(tmp_path / "x.png"))


def test_plot_needs_a_timed_report(tmp_path):
    pytest.importorskip("matplotlib")
    report = cppinductor.explain(lambda x: x + 1)(torch.randn(4))
    with pytest.raises(ValueError, match="run=True"):
        roofline.plot(report, str(tmp_path / "x.png"))
