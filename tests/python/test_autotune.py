"""max-autotune on the CPU (python/cppinductor/autotune.py, backend/autotune.h):
kernels are timed at their first call and the winner runs from then on; a
wrong candidate is dropped; the winner is cached on disk, so another process
compiles it alone and times nothing; a corrupted entry is ignored with a
log line; the time bound holds; results equal eager throughout."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import cppinductor
from cppinductor import debug
from cppinductor.autotune import KernelTuner

pytestmark = pytest.mark.usefixtures("fresh_tuning_cache")


def norms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # A row softmax (accumulator candidates), a column sum (tile candidates),
    # small enough that thread and chunk candidates count too.
    return torch.softmax(x, -1) * w + x.sum(0)


def inputs():
    return torch.randn(256, 300), torch.randn(300)


def compile_and_run(options: dict, args=None):
    args = args or inputs()
    with debug.recording() as records:
        fn = torch.compile(norms, backend="cppinductor", options={"mode": "max-autotune", **options})
        out = fn(*args)
    torch.testing.assert_close(out, norms(*args), rtol=1e-4, atol=1e-4)
    (record,) = records
    return fn, record, args


def test_each_kernel_is_timed_once_and_the_winner_runs_from_then_on():
    fn, record, args = compile_and_run({})
    tuned = list(record.autotune)
    assert len(tuned) >= 2, tuned
    for t in tuned:
        assert t["source"] == "measured"
        assert len(t["candidates"]) >= 2 and t["candidates"][0]["label"] == "heuristic"
        winner = next(c for c in t["candidates"] if c["label"] == t["winner"])
        assert winner["time_us"] is not None and winner["dropped"] is None
        assert winner["schedule"] == t["schedule"]
        # Never slower than the heuristic by its own measure.
        assert winner["time_us"] <= t["candidates"][0]["time_us"]
    for _ in range(3):
        torch.testing.assert_close(fn(*args), norms(*args), rtol=1e-4, atol=1e-4)
    assert len(record.autotune) == len(tuned)  # nothing timed twice


def test_kernels_that_update_their_inputs_are_timed_from_the_same_contents():
    def update(state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        state.mul_(0.5).add_(torch.softmax(x, -1))  # read and written in place: each run changes it
        return state.sum(0)

    state, x = torch.randn(256, 300), torch.randn(256, 300)
    expected_state = state.clone()
    fn = torch.compile(update, backend="cppinductor", mode="max-autotune")
    with debug.recording() as records:
        for _ in range(2):
            torch.testing.assert_close(fn(state, x), update(expected_state, x), rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(state, expected_state)
    assert records[0].autotune


def test_default_mode_tunes_nothing():
    with debug.recording() as records:
        torch.compile(norms, backend="cppinductor")(*inputs())
    assert records[0].autotune == []
    assert records[0].compiled.kernel_tuning(0) is None


def test_a_wrong_candidate_is_dropped():
    _, record, _ = compile_and_run({"autotune_fault_TESTING_ONLY": True})
    for t in record.autotune:
        second = t["candidates"][1]
        assert second["dropped"] is not None and "differs from the heuristic's" in second["dropped"], t
        assert t["winner"] != second["label"]


def test_a_candidate_summing_in_another_order_is_not_dropped():
    # Long rows of terms of 10 or so, some summing to near zero: another accumulator count rounds those by more
    # than float32's elementwise tolerance allows them, but by no more than such terms make any sum move.
    x = torch.randn(512, 8192, generator=torch.Generator().manual_seed(0)) * 10
    with debug.recording() as records:
        out = torch.compile(lambda t: t.sum(-1), backend="cppinductor", options={"mode": "max-autotune"})(x)
    torch.testing.assert_close(out, x.double().sum(-1).float(), rtol=1e-4, atol=1e-2)
    (t,) = records[0].autotune
    assert len(t["candidates"]) >= 2 and all(c["dropped"] is None for c in t["candidates"]), t


def test_the_time_bound_leaves_the_heuristic():
    _, record, _ = compile_and_run({"max_autotune_seconds": 0.0})
    assert record.autotune
    for t in record.autotune:
        assert t["winner"] == "heuristic"
        assert "time bound" in t["source"]


def test_explain_lists_candidates_and_the_winner():
    x, w = inputs()
    report = cppinductor.explain(norms, mode="max-autotune")(x, w)
    text = str(report)
    assert "max-autotune kernel" in text, text
    assert "heuristic" in text and " * " in text, text
    assert report.to_dict()["graphs"][0]["autotune"]


_SECOND_PROCESS = textwrap.dedent("""
    import json, sys, torch
    from cppinductor import debug
    sys.path.insert(0, {tests!r})
    from test_autotune import norms, inputs
    torch.manual_seed(0)
    with debug.recording() as records:
        fn = torch.compile(norms, backend="cppinductor",
                           options={{"mode": "max-autotune", "debug_dir": {dump!r}}})
        args = inputs()
        torch.testing.assert_close(fn(*args), norms(*args), rtol=1e-4, atol=1e-4)
    print(json.dumps(records[0].autotune))
""")


def test_a_second_process_compiles_the_cached_winners_and_times_nothing(tmp_path):
    _, first, _ = compile_and_run({})
    winners = {t["kernel"]: t["schedule"] for t in first.autotune}
    script = _SECOND_PROCESS.format(tests=os.path.dirname(__file__), dump=str(tmp_path / "dump"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CPPINDUCTOR_CACHE_DIR": os.environ["CPPINDUCTOR_CACHE_DIR"]})
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {t["kernel"] for t in second} == set(winners)
    for t in second:
        assert t["source"] == "cache" and t["candidates"] == [], t
        assert t["schedule"] == winners[t["kernel"]]
    # The code compiled is the winner's, and no candidate was compiled.
    (kernels,) = [os.path.join(d, "kernels.cpp") for d, _, files in os.walk(tmp_path / "dump") if "kernels.cpp" in files]
    source = open(kernels).read()
    for schedule in winners.values():
        assert "// schedule: " + schedule in source
    assert not any("kernels_autotune_candidates.cpp" in files for _, _, files in os.walk(tmp_path / "dump"))


def test_a_corrupted_cache_entry_is_ignored_with_a_log_line(caplog):
    _, first, _ = compile_and_run({})
    directory = os.path.join(os.environ["CPPINDUCTOR_CACHE_DIR"], "autotune")
    entries = sorted(os.listdir(directory))
    assert len(entries) == len(first.autotune)
    for name in entries:
        with open(os.path.join(directory, name), "r+b") as f:
            f.seek(10)
            f.write(b"garbage")
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="cppinductor.autotune"):
        _, again, _ = compile_and_run({})
    assert "ignored a corrupted tuning cache entry" in caplog.text
    assert all(t["source"] == "measured" for t in again.autotune)  # tuned afresh, and cached again
    for name in entries:
        with open(os.path.join(directory, name), "rb") as f:
            assert b"garbage" not in f.read()


def test_the_tuners_give_way_to_the_winners(monkeypatch):
    tuners = []
    init = KernelTuner.__init__

    def remember(self, *args, **kwargs):
        init(self, *args, **kwargs)
        tuners.append(self)

    monkeypatch.setattr(KernelTuner, "__init__", remember)
    _, record, _ = compile_and_run({})
    assert {t.name for t in tuners} == {t["kernel"] for t in record.autotune}
    for tuner in tuners:
        assert tuner.winner is not None and tuner.scopes
        # Every function made from the wrapper's source calls the winner itself now.
        assert all(scope[tuner.global_name] is tuner.winner for scope in tuner.scopes)


_SECOND_DYNAMIC_PROCESS = textwrap.dedent("""
    import json, sys, torch
    from cppinductor import debug
    sys.path.insert(0, {tests!r})
    from test_autotune import norms
    with debug.recording() as records:
        fn = torch.compile(norms, backend="cppinductor", dynamic=True, options={{"mode": "max-autotune"}})
        for rows in {rows!r}:
            x, w = torch.randn(rows, 300), torch.randn(300)
            torch.testing.assert_close(fn(x, w), norms(x, w), rtol=1e-4, atol=1e-4)
    print(json.dumps(records[0].autotune))
""")


def test_dynamic_shapes_are_tuned_once_per_size_bucket_and_cached_per_bucket():
    """Sizes that round up to the same power of two share a winner; another
    bucket is timed again (a kernel's best schedule changes with its sizes);
    a second process finds every bucket's winner in the cache."""
    rows = (100, 120, 1000)  # buckets 128, 128, 1024
    with debug.recording() as records:
        fn = torch.compile(norms, backend="cppinductor", dynamic=True, options={"mode": "max-autotune"})
        for n in rows:
            x, w = torch.randn(n, 300), torch.randn(300)
            torch.testing.assert_close(fn(x, w), norms(x, w), rtol=1e-4, atol=1e-4)
    (record,) = records
    tuned = record.autotune
    kernels = {t["kernel"] for t in tuned}
    assert kernels and all(t["source"] == "measured" for t in tuned), tuned
    for name in kernels:
        sizes = [t["sizes"] for t in tuned if t["kernel"] == name]
        assert len(sizes) == 2 and sizes[0] != sizes[1] and "128" in sizes[0] and "1024" in sizes[1], sizes
    assert "for sizes up to" in "\n".join(cppinductor.report._autotune_lines(tuned))

    script = _SECOND_DYNAMIC_PROCESS.format(tests=os.path.dirname(__file__), rows=rows)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CPPINDUCTOR_CACHE_DIR": os.environ["CPPINDUCTOR_CACHE_DIR"]})
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted((t["kernel"], t["sizes"], t["schedule"]) for t in second) == sorted(
        (t["kernel"], t["sizes"], t["schedule"]) for t in tuned)
    assert all(t["source"] == "cache" for t in second), second


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_kernels_are_timed_and_the_winner_runs():
    x, w = (t.cuda() for t in inputs())
    with debug.recording() as records:
        fn = torch.compile(norms, backend="cppinductor", mode="max-autotune-no-cudagraphs")
        for _ in range(3):
            torch.testing.assert_close(fn(x, w), norms(x, w), rtol=1e-4, atol=1e-4)
    tuned = records[0].autotune
    assert tuned, "no CUDA kernel was tuned"
    for t in tuned:
        assert t["source"] == "measured" and len(t["candidates"]) >= 2, t
        assert all(c["time_us"] is not None or c["dropped"] for c in t["candidates"]), t
