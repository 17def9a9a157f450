"""max-autotune at run time: a kernel's candidate schedules timed on its first
call, and the fastest kept.

With mode="max-autotune" (or "max-autotune-no-cudagraphs", or the option
max_autotune=True) the compile (backend/autotune.h) gives each kernel its
candidate schedules: the heuristic's, then the schedules the same rules pick
for other targets (CPU: one thread, other chunk sizes, accumulator counts,
column tiles, 32-byte vectors on AVX-512; GPU: other block sizes and threads
per row, fewer column slices, no split rows). CUDA kernels are timed with
CUDA events on the stream they launch on. Until its first call, the wrapper's global for
such a kernel is a KernelTuner. That call runs every candidate on the call's
own tensors, each from the same starting contents (a kernel that reads what
it writes has those buffers saved and put back before each run; others
write the same values each time, and nothing of theirs is copied):

- a candidate that fails to compile or run, or whose results differ from
  the heuristic's beyond reordered float sums, is dropped with the reason;
- the others are timed in interleaved rounds, medians compared; one must
  beat the heuristic by more than the noise (`_MARGIN`) to win, so tuning
  never makes a kernel slower than default mode's;
- the winner replaces the tuner in the wrapper's globals (later calls pay
  nothing) and runs the call for real; the result goes to the tuning cache,
  so another process compiles the winner alone and times nothing.

A kernel over size symbols (dynamic shapes) is tuned once per size bucket:
its symbols' values rounded up to powers of two (64 and 100 rows share the
bucket 128; 5000 rows get 8192). Its tuner stays in the wrapper's globals
and picks the bucket's winner per call; each bucket has its own cache entry.

A graph's tuning stops at its time bound (option max_autotune_seconds): the
kernels not yet tuned keep the heuristic's schedule, and say so. explain()
lists each kernel's candidates, their times and the winner
(GraphRecord.autotune).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from . import _C

log = logging.getLogger("cppinductor.autotune")

# A candidate replaces the heuristic only when its median is this much lower.
_MARGIN = 0.97
# Timing rounds per kernel: at least, and at most; after the least, rounds
# stop once a kernel's timing took _ROUND_TIME seconds.
_MIN_ROUNDS, _MAX_ROUNDS, _ROUND_TIME = 3, 15, 0.05
# A candidate whose first run took this many times the heuristic's is not timed.
_FAR_SLOWER = 2.0
# How far a candidate's results may be from the heuristic's (sums reorder).
_TOLERANCE = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


@dataclass
class GraphTuning:
    """One graph's tuning: its time bound, and the reports its kernels add
    (GraphRecord.autotune)."""

    seconds: float
    reports: list[dict] = field(default_factory=list)
    fault: bool = False  # max_autotune's fault injection: corrupts candidate 1's results
    spent: float = 0.0

    def launcher(self, compiled: Any, kernel: int, num_buffers: int, plain: Any) -> Any:
        """What the wrapper calls for `kernel`: a KernelTuner when it has
        candidates to time, else `plain` (reporting a cache hit)."""
        info = compiled.kernel_tuning(kernel)
        if info is None:
            return plain
        name = compiled.kernel_names[kernel]
        if info["problem"]:
            log.warning("%s: %s", name, info["problem"])
        if info["cached_label"]:
            self.reports.append({"kernel": name, "winner": info["cached_label"], "schedule": info["cached_schedule"],
                                 "source": "cache", "candidates": [], "seconds": 0.0})
            return plain
        if len(info["candidates"]) < 2:
            return plain
        launchers = [compiled.candidate_launcher(kernel, j, num_buffers) for j in range(len(info["candidates"]))]
        return KernelTuner(name, info, launchers, self, lambda j: compiled.wait_for_candidate(kernel, j), num_buffers)

    def gemm_launcher(self, compiled: Any, index: int, choice: dict, kernel_name: str, kernel: Any,
                      num_buffers: int, extern: Any) -> Any:
        """What the wrapper calls for GEMM choice `index` (backend/gemm_choices.h)
        with the kernel's buffers, then A, B, the bias and the scales (where
        the choice has them): the cached winner's GEMM kernel, or a
        KernelTuner over the extern followed by `kernel` (that choice's
        candidate 0: `extern(A, B, ..., out=result)`, then the kernel) and the
        GEMM kernels with the kernel as their epilogue."""
        labels = choice["candidates"]
        name = f"{kernel_name} with its matmul"
        operands = 2 + (choice["bias_slot"] >= 0) + 2 * (choice["scale_a_slot"] >= 0)
        if choice["cached_label"]:
            self.reports.append({"kernel": name, "winner": choice["cached_label"], "schedule": choice["cached_label"],
                                 "source": "cache", "candidates": [], "seconds": 0.0})
            return compiled.gemm_launcher(index, 0, num_buffers + operands)
        result = choice["result_arg"]

        def extern_then_kernel(*args: Any) -> Any:
            extern(*args[num_buffers:num_buffers + operands], out=args[result])
            return kernel(*args[:num_buffers], *args[num_buffers + operands:])

        launchers = [extern_then_kernel] + [compiled.gemm_launcher(index, j, num_buffers + operands)
                                            for j in range(1, len(labels))]
        info = {"key": choice["key"], "candidates": labels, "written": choice["written"],
                "read_written": choice["read_written"], "symbol_positions": []}
        return KernelTuner(name, info, launchers, self, lambda j: None, num_buffers + operands)


class KernelTuner:
    """Stands in for a kernel's launcher in the wrapper's globals until the
    kernel's first call, which tunes it (see the module docstring)."""

    def __init__(self, name: str, info: dict, launchers: list[Any], graph: GraphTuning, wait: Any,
                 num_buffers: int = 0) -> None:
        self.name = name
        self.wait = wait  # wait(j): until candidate j is compiled (raises if it failed to)
        self.global_name = name  # the wrapper's name for it (set when printed)
        self.info = info
        self.launchers = launchers
        self.graph = graph
        self.scopes: list[dict] = []  # the globals of every function that calls it
        self.winner: Any = None  # the chosen candidate's launcher, once tuned
        # Dynamic shapes: the symbols' positions in the launch's symbol list
        # (after the buffers), and each size bucket's winner.
        self.positions: list[int] = list(info.get("symbol_positions") or [])
        self.num_buffers = num_buffers
        self.bucket_winners: dict[tuple, Any] = {}

    def __call__(self, *args: Any) -> Any:
        if self.positions:
            symbols = args[self.num_buffers]
            bucket = tuple(_bucket(int(symbols[p])) for p in self.positions)
            launch = self.bucket_winners.get(bucket)
            if launch is None:
                launch = self.bucket_winners[bucket] = self._for_bucket(args, bucket)
            return launch(*args)
        if self.winner is None:
            self.winner = self._tune(args, self.info["key"])
            for scope in self.scopes:
                scope[self.global_name] = self.winner
        return self.winner(*args)

    def _for_bucket(self, args: tuple, bucket: tuple) -> Any:
        """The winner for sizes in `bucket`: its cache entry's, else measured now."""
        key = hashlib.sha256(f"{self.info['key']} sizes {bucket}".encode()).hexdigest()
        sizes = "x".join(str(1 << b) for b in bucket)
        schedule, problem = _C.read_tuning_winner(key)
        if problem:
            log.warning("%s: %s", self.name, problem)
        for j, (label, candidate_schedule) in enumerate(self.info["candidates"]):
            if schedule is not None and candidate_schedule == schedule:
                self.wait(j)
                self.graph.reports.append({"kernel": self.name, "winner": label, "schedule": schedule,
                                           "source": "cache", "candidates": [], "seconds": 0.0,
                                           "sizes": sizes})
                return self.launchers[j]
        return self._tune(args, key, sizes)

    def _tune(self, args: tuple, key: str, sizes: str | None = None) -> Any:
        start = time.perf_counter()
        labels = self.info["candidates"]
        results = [{"label": label, "schedule": schedule, "time_us": None, "dropped": None}
                   for label, schedule in labels]
        report = {"kernel": self.name, "winner": labels[0][0], "schedule": labels[0][1], "source": "measured",
                  "candidates": results, "seconds": 0.0}
        if sizes is not None:
            report["sizes"] = sizes
        self.graph.reports.append(report)
        remaining = self.graph.seconds - self.graph.spent
        if remaining <= 0:
            report["source"] = "heuristic: the graph's tuning time bound was reached"
            for r in results[1:]:
                r["dropped"] = "not timed: the time bound was reached"
            return self.launchers[0]
        written = [args[i] for i in self.info["written"] if isinstance(args[i], torch.Tensor)]
        # Runs that read what the last one wrote start from saved contents,
        # and the call's own run after them too; others just write the same
        # values again, so nothing of theirs is saved (no extra memory).
        restore: Any = None
        if _reads_what_it_writes(args, self.info):
            saved = [t.clone() for t in written]
            restore = lambda: [t.copy_(s) for t, s in zip(written, saved)]  # noqa: E731

        alive = self._check_candidates(args, written, restore, results)
        times = self._time(args, alive, restore, start + remaining)
        if restore is not None:
            restore()
        for j, ts in times.items():
            results[j]["time_us"] = round(sorted(ts)[len(ts) // 2] * 1e6, 2)
        best = min(times, key=lambda j: results[j]["time_us"])
        if results[best]["time_us"] > _MARGIN * results[0]["time_us"]:
            best = 0
        report["winner"], report["schedule"] = labels[best]
        log.info("%s: %r kept (%s us; the heuristic's %s us)", self.name, labels[best][0], results[best]["time_us"],
                 results[0]["time_us"])
        report["seconds"] = round(time.perf_counter() - start, 4)
        self.graph.spent += time.perf_counter() - start
        self._write_cache(report, key)
        return self.launchers[best]

    def _check_candidates(self, args: tuple, written: list[torch.Tensor], restore: Any,
                          results: list[dict]) -> list[int]:
        """Runs each candidate once, compares what it wrote with the
        heuristic's, and returns the ones kept (`restore`, unless None,
        before each run)."""
        reference: list[torch.Tensor] = []
        alive = []
        first = 0.0
        for j, launch in enumerate(self.launchers):
            try:
                self.wait(j)
                if restore is not None:
                    restore()
                took = _run_time(launch, args)
            except Exception as e:  # a candidate's module that did not compile, a kernel that raised
                if j == 0:
                    raise
                results[j]["dropped"] = f"did not run: {e}"
                continue
            if j == 1 and self.graph.fault and written:
                _corrupt(written[0])
            if j == 0:
                reference, first = [t.clone() for t in written], took
            else:
                why = _mismatch(reference, written)
                if why is None and took > _FAR_SLOWER * first:
                    results[j]["time_us"] = round(took * 1e6, 2)
                    why = f"not timed: its run took {took / first:.1f}x the heuristic's"
                if why is not None:
                    results[j]["dropped"] = why
                    log.info("%s: candidate %r dropped: %s", self.name, results[j]["label"], why)
                    continue
            alive.append(j)
        return alive

    def _time(self, args: tuple, alive: list[int], restore: Any, deadline: float) -> dict[int, list]:
        """Each kept candidate's run times, in interleaved rounds (each run
        after `restore`, unless None), until enough rounds or the graph's
        deadline."""
        times: dict[int, list] = {j: [] for j in alive}
        start = time.perf_counter()
        for round_ in range(_MAX_ROUNDS):
            for j in alive:
                if restore is not None:
                    restore()
                times[j].append(_run_time(self.launchers[j], args))
            now = time.perf_counter()
            if now > deadline or (round_ + 1 >= _MIN_ROUNDS and now - start > _ROUND_TIME):
                break
        return times

    def _write_cache(self, report: dict, key: str) -> None:
        payload = f"{_C.TUNING_CACHE_HEADER}\n{report['schedule']}\n{json.dumps(report)}\n"
        try:
            _C.write_tuning_entry(key, payload)
        except (_C.CompilerError, _C.UnsupportedError, ValueError, OSError) as e:
            log.warning("%s: the tuning result was not cached: %s", self.name, e)


def _bucket(size: int) -> int:
    """The size bucket of one symbol's value: b with 2^(b-1) < size <= 2^b."""
    return (max(size, 1) - 1).bit_length()


def _run_time(launch: Any, args: tuple) -> float:
    """Seconds one launch takes: CUDA events around a CUDA kernel on the
    stream it launches on (the current one), the host's clock otherwise."""
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch(*args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    launch(*args)
    return time.perf_counter() - t


def _reads_what_it_writes(args: tuple, info: dict) -> bool:
    """Whether a run of the kernel reads what an earlier run wrote: a buffer
    it reads and writes, or an output sharing storage with an input (a
    buffer written in place over one the kernel reads)."""
    if info["read_written"]:
        return True
    written = set(info["written"])
    outputs = {args[i].untyped_storage().data_ptr() for i in written if isinstance(args[i], torch.Tensor)}
    return any(isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() in outputs
               for i, a in enumerate(args) if i not in written)


def _corrupt(t: torch.Tensor) -> None:
    flat = t.view(-1)
    if flat.numel():
        flat[0] = ~flat[0] if t.dtype == torch.bool else flat[0] + 1


# CPU elements compared at a time, into two reused buffers: torch.allclose
# over 16M floats made fresh 64 MB temporaries (0.30 s a compare; this,
# 0.03). A GPU compares whole tensors: its chunks would cost a launch each.
_COMPARE_CHUNK = 1 << 18


def _mismatch(expected: list[torch.Tensor], actual: list[torch.Tensor]) -> str | None:
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = e.reshape(-1), a.reshape(-1)
        if e.dtype not in _TOLERANCE:
            if not torch.equal(a, e):
                return f"output {i} differs from the heuristic's"
            continue
        rtol, atol = _TOLERANCE[e.dtype]
        chunk = max(1, e.numel() if e.is_cuda else _COMPARE_CHUNK)
        diff = torch.empty(min(e.numel(), chunk), dtype=e.dtype, device=e.device)
        bound = torch.empty(0, dtype=e.dtype, device=e.device)
        # A candidate that sums in another order (more accumulators, other
        # vectors) rounds differently: a row sum of 4096 floats near zero by
        # cancellation moved by 8e-5. So the absolute part of the bound is
        # also rtol of the output's largest finite magnitude: a sum's rounding
        # scales with its terms, not with its result, while a wrong element
        # is off by about that magnitude.
        for start in range(0, e.numel(), chunk):
            b = bound.resize_(min(chunk, e.numel() - start))
            torch.abs(e[start:start + chunk], out=b).nan_to_num_(0.0, 0.0, 0.0)
            atol = max(atol, rtol * float(b.max()))
        for start in range(0, e.numel(), chunk):
            ec, ac = e[start:start + chunk], a[start:start + chunk]
            d, b = diff[:ec.numel()], bound.resize_(ec.numel())
            torch.sub(ac, ec, out=d).abs_()
            torch.abs(ec, out=b).mul_(rtol).add_(atol)
            # NaN differences fail the test; NaN against NaN (and inf against inf) is a match.
            if not bool((d <= b).all()) and not bool(torch.isclose(ac, ec, rtol, atol, equal_nan=True).all()):
                worst = (ac.double() - ec.double()).abs().nan_to_num(float("inf")).max().item()
                return f"output {i} differs from the heuristic's by up to {worst:.3g}"
    return None
