"""The OpInfo sweep (cppinductor.tools.opinfo_sweep) on a fixed subset of ops,
and proof that its accuracy check catches a wrong result."""

from __future__ import annotations

import json

import pytest
import torch

from cppinductor.tools import opinfo_sweep

# Pointwise, reductions, scans and sorts (fallbacks), views, indexing,
# matmul (extern), normalisation: fast to compile, deterministic.
SUBSET = [
    "abs", "add", "mul", "sub", "div.no_rounding_mode", "exp", "log", "sigmoid", "tanh",
    "where", "clamp", "nn.functional.relu", "nn.functional.hardtanh",
    "sum", "mean", "amax", "var", "softmax", "cumsum", "sort",
    "transpose", "cat", "gather", "index_select", "mm", "nn.functional.layer_norm",
]


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_subset_is_correct():
    results = opinfo_sweep.sweep(SUBSET, max_samples=2, timeout_s=60)
    assert [r.name for r in results] == SUBSET
    wrong = {r.name: (r.status, r.reason) for r in results if r.status != "correct"}
    assert not wrong, wrong
    assert all(r.samples_run > 0 for r in results)
    # a scan has no lowering today: the sweep must say so, not hide it
    by_name = {r.name: r for r in results}
    assert by_name["add"].lowered is True
    if by_name["cumsum"].lowered is False:
        assert by_name["cumsum"].fallbacks and "cumsum" in by_name["cumsum"].fallbacks[0]["op"]


def test_ops_the_sweep_found_falling_back_are_now_lowered():
    """Ops an earlier sweep listed as fallbacks: lowered (unfold, fmax, fmin,
    angle, diagonal_scatter, empty_permuted through cosine_embedding_loss) or
    decomposed into lowered ops (addmv, ldexp, narrow_copy, permute_copy,
    as_strided_copy, unfold_copy, dist); correct and compiled without a
    fallback."""
    ops = ["unfold", "fmax", "fmin", "angle", "diagonal_scatter", "nn.functional.cosine_embedding_loss", "addmv",
           "ldexp", "narrow_copy", "permute_copy", "as_strided_copy", "unfold_copy", "dist"]
    results = opinfo_sweep.sweep(ops, max_samples=3, timeout_s=60)
    assert {r.name: (r.status, r.lowered) for r in results} == {name: ("correct", True) for name in ops}, [
        (r.name, r.status, r.reason) for r in results]


def test_injected_relu_bug_is_reported_incorrect():
    (relu,) = opinfo_sweep.sweep(["nn.functional.relu"], max_samples=2, inject_relu_bug=True, timeout_s=60)
    assert relu.status == "incorrect", relu
    assert "sample 0 output" in relu.reason
    (add,) = opinfo_sweep.sweep(["add"], max_samples=1, inject_relu_bug=True, timeout_s=60)
    assert add.status == "correct"  # the injection is relu's alone


def test_random_ops_are_listed_not_compared():
    (r,) = opinfo_sweep.sweep(["bernoulli"], timeout_s=60)
    assert r.status == "random" and r.samples_run == 0


def test_unknown_op_is_a_harness_error():
    (r,) = opinfo_sweep.sweep(["no_such_op"], timeout_s=60)
    assert r.status == "harness_error" and "no such" in r.reason


def test_comparison_rules():
    nan = float("nan")
    f = torch.tensor([1.0, nan, 3.0])
    assert opinfo_sweep.mismatch(f.clone(), f, opinfo_sweep.STRICT_TOLERANCE, "out") is None  # NaN == NaN
    assert opinfo_sweep.mismatch(f + 1e-7, f, opinfo_sweep.STRICT_TOLERANCE, "out") is None
    reason, leaves = opinfo_sweep.mismatch(f + 1e-3, f, opinfo_sweep.STRICT_TOLERANCE, "out")
    assert leaves == [0] and "out" in reason  # a float value difference: float64 may forgive it
    big = torch.tensor([10**9])
    reason, leaves = opinfo_sweep.mismatch(big + 1, big, opinfo_sweep.STRICT_TOLERANCE, "out")
    assert leaves == []  # integers compare exactly
    reason, _ = opinfo_sweep.mismatch(f.double(), f, opinfo_sweep.STRICT_TOLERANCE, "out")
    assert "torch.float64" in reason
    assert opinfo_sweep.mismatch((f, 2), (f, 3), opinfo_sweep.STRICT_TOLERANCE, "out") is not None


def test_float64_reference_forgives_reordering_not_errors():
    torch.manual_seed(0)
    x = torch.randn(100000, dtype=torch.float64)
    truth = x.sum()
    eager = x.float().sum()
    close = (truth + (eager.double() - truth) * 1.5).float()  # as far off as eager, roughly
    far = (truth + 1.0).float()
    assert opinfo_sweep.forgiven_by_float64(close, eager, truth, [0])
    assert not opinfo_sweep.forgiven_by_float64(far, eager, truth, [0])


def test_cli_writes_json(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    code = opinfo_sweep.main(["--ops", "add,cumsum", "--max-samples", "1", "--no-isolate", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "lowered without fallback" in text and "cumsum" in text
    data = json.loads(out.read_text())
    assert data["summary"]["ops"] == 2 and data["summary"]["correct"] == 2
    assert {r["name"] for r in data["results"]} == {"add", "cumsum"}
