"""Timing: one call (first-call / compile time) and the steady-state median.

CPU calls are timed with perf_counter around each call; CUDA calls with a pair
of events per call on the current stream, read after one synchronize, so
launch overhead between calls is not counted. The repeat count adapts so a
measurement lasts about ``min_time`` seconds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple, Union

import torch


@dataclass(frozen=True)
class TimingPolicy:
    min_time: float  # seconds one steady-state measurement should last
    warmup: int  # calls after the first, not timed
    min_reps: int
    max_reps: int


POLICIES = {
    "full": TimingPolicy(min_time=1.0, warmup=3, min_reps=10, max_reps=1000),
    "quick": TimingPolicy(min_time=0.25, warmup=2, min_reps=5, max_reps=200),
    "tiny": TimingPolicy(min_time=0.005, warmup=1, min_reps=3, max_reps=20),
}


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_once(fn: Callable[[], Any], device: str) -> Tuple[float, Any]:
    """Wall time of one call including everything it triggers (compilation), and its result."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - start, result


def _times(fn: Callable[[], Any], device: str, reps: int) -> List[float]:
    if torch.device(device).type == "cuda":
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in pairs]
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


@dataclass(frozen=True)
class SteadyTime:
    median_s: float
    reps: int


def steady_time(fn: Callable[[], Any], device: str, policy: TimingPolicy) -> SteadyTime:
    """Median time per call after warm-up; the caller has already made the first call."""
    for _ in range(policy.warmup):
        fn()
    estimate = statistics.median(_times(fn, device, 2))
    reps = int(policy.min_time / max(estimate, 1e-7))
    reps = max(policy.min_reps, min(policy.max_reps, reps))
    return SteadyTime(statistics.median(_times(fn, device, reps)), reps)


def interleaved_steady_times(fns: Dict[str, Callable[[], Any]], device: str, policy: TimingPolicy,
                             rounds: int = 5) -> Dict[str, Union[SteadyTime, BaseException]]:
    """Median time per call of each function, measured in interleaved rounds.

    Each round times a batch of calls of every function in turn (the order
    rotating from round to round) and keeps each batch's median; a function's
    time is the median of its rounds. Load from other processes that comes
    and goes, or a machine whose clock drifts, then hits every function
    alike: on these shared machines ratios from backends timed one after the
    other were seen off by 2x. Each function's batch lasts about
    policy.min_time / rounds; the caller has already made the first calls.
    A function that raises is timed no further: its entry is the exception.
    """
    names = list(fns)
    failed: Dict[str, BaseException] = {}

    def attempt(name: str, run: Callable[[], Any]) -> None:
        if name in failed:
            return
        try:
            run()
        except Exception as e:  # this function's row says so; the others go on
            failed[name] = e

    reps: Dict[str, int] = {}

    def calibrate(name: str) -> None:
        for _ in range(policy.warmup):
            fns[name]()
        estimate = statistics.median(_times(fns[name], device, 2))
        per_round = int(policy.min_time / rounds / max(estimate, 1e-7))
        reps[name] = max(-(-policy.min_reps // rounds), min(policy.max_reps, per_round))

    for name in names:
        attempt(name, lambda: calibrate(name))
    medians: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            attempt(name, lambda: medians[name].append(statistics.median(_times(fns[name], device, reps[name]))))
    return {name: failed.get(name) or SteadyTime(statistics.median(medians[name]), reps[name] * rounds)
            for name in names}


@dataclass(frozen=True)
class Alternation:
    eager_part_s: float  # median per call of the eager half, in a loop of its own
    compiled_part_s: float  # the same for the compiled half
    ratio: float  # alternating / (eager alone + compiled alone), median over rounds


def alternation(eager_part: Callable[[], Any], compiled_part: Callable[[], Any], device: str,
                policy: TimingPolicy, rounds: int = 5) -> Alternation:
    """How much slower the two halves run alternating than each in a loop of its own.

    Each round times a loop of the eager half, one of the compiled half and one
    alternating them, back to back, and takes the per-call median of each; the
    ratio is computed per round and its median reported, so load from other
    processes that comes and goes hits all three loops of a round alike.
    """

    def both() -> None:
        eager_part()
        compiled_part()

    for _ in range(policy.warmup):
        both()
    estimate = statistics.median(_times(both, device, 3))
    reps = max(policy.min_reps, min(policy.max_reps, int(policy.min_time / rounds / max(estimate, 1e-7))))
    a_s, b_s, ratios = [], [], []
    for _ in range(rounds):
        a = statistics.median(_times(eager_part, device, reps))
        b = statistics.median(_times(compiled_part, device, reps))
        c = statistics.median(_times(both, device, reps))
        a_s.append(a)
        b_s.append(b)
        ratios.append(c / (a + b))
    return Alternation(statistics.median(a_s), statistics.median(b_s), statistics.median(ratios))
