"""The distributed bench suite as a test: a small transformer trained for 5
SGD steps under DDP (compiled around and inside) and FSDP2, two processes,
eager against cppinductor in the same processes. Gloo on the CPU; NCCL on
two GPUs (skipped on a machine with fewer), in both the default mode and
reduce-overhead. Each run has a deadline: a hang fails the test, it does not
stall the suite."""

import pytest
import torch
import torch.distributed as dist

from cppinductor.bench.backends import parse_backends
from cppinductor.bench.distributed import STRATEGIES, config_for, format_distributed, run_distributed

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="needs torch.distributed")

_TWO_GPUS = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2
                               or not dist.is_nccl_available(), reason="needs two GPUs and NCCL")


def _run(device: str, backends: str):
    config = config_for(device, "tiny", parse_backends(backends), rounds=2, steps_per_round=1, timeout_s=420)
    rows = run_distributed(config)
    print(format_distributed(rows))
    return rows


def _assert_trains_as_eager(rows, compiled_labels):
    assert {(r["strategy"], r["backend"]) for r in rows} == {(s, b) for s in STRATEGIES
                                                              for b in ("eager", *compiled_labels)}
    for r in rows:
        assert "error" not in r, (r, r.get("traceback"))
        assert r.get("step_ms", 0) > 0, r
        if r["backend"] == "eager":
            continue
        assert r["correct"], r
        assert not r["fallbacks"], r
        # Our backend compiled the training graphs of every strategy.
        assert "forward" in r["our_graphs"] and "backward" in r["our_graphs"], r


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")
def test_cpu_gloo_every_strategy_trains_as_eager():
    _assert_trains_as_eager(_run("cpu", "eager,cppinductor"), ["cppinductor"])


@_TWO_GPUS
def test_two_gpus_nccl_every_strategy_trains_as_eager_in_both_modes():
    rows = _run("cuda", "eager,cppinductor,cppinductor:reduce-overhead")
    _assert_trains_as_eager(rows, ["cppinductor", "cppinductor:reduce-overhead"])
    for r in rows:
        if r["backend"] == "cppinductor:reduce-overhead":
            assert r["cudagraphs"], r  # each graph says whether it was captured, or why not
        if r["backend"] != "eager":
            assert r["peak_mib"] > 0, r


def test_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy"):
        config_for("cpu", "tiny", parse_backends("eager"), ["zero3"])
