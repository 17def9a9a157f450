"""python -m cppinductor.tools.memory_plan [--only a,b] [--quick] [--device cpu|cuda]

What buffer reuse (backend/buffer_reuse.h) does to the bench's workloads. For
each workload, in one process: Inductor, then cppinductor with
reuse_buffers off (every kernel buffer fresh: the plan before reuse) and on.
Per step (a training step is a forward and a backward call) it reports the
steady time (variants interleaved over several rounds), the kernel buffers allocated fresh and reused, and the peak
live bytes of the step's compiled calls (cppinductor.memory: the bytes of
the storages a call's slots hold, at the worst step of the worst call).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from ..bench.caches import fresh_caches
from ..bench.timing import POLICIES, steady_time
from ..bench.workloads import Workload, select, sizes_for
from ..memory import buffer_counters, track_live_bytes

DEFAULT_WORKLOADS = ("mlp_train", "transformer_train", "transformer")


@dataclass
class Measurement:
    workload: str
    variant: str  # inductor | no reuse | reuse
    time_ms: float
    fresh: Optional[int] = None  # kernel buffers per step
    reused: Optional[int] = None
    peak_live_bytes: Optional[int] = None


def _compiler(variant: str) -> Callable[[Callable], Callable]:
    if variant == "inductor":
        return lambda fn: torch.compile(fn, backend="inductor")
    options = {"reuse_buffers": variant == "reuse"}
    return lambda fn: torch.compile(fn, backend="cppinductor", options=options)


def measure(workload: Workload, variants: List[str], device: str, size: str, rounds: int) -> List[Measurement]:
    """All variants compiled side by side, then timed in interleaved rounds
    (the median of the rounds' medians): a busy machine slows every variant
    alike rather than whichever ran during the busy spell."""
    policy = POLICIES[size]
    rows, steps = [], []
    with fresh_caches():
        for variant in variants:
            case = workload.build(sizes_for(device, size), device, torch.float32)
            step = case.make_step(_compiler(variant))
            step()  # compiles
            row = Measurement(workload.name, variant, 0.0)
            if variant != "inductor":
                before = buffer_counters()
                step()
                after = buffer_counters()
                row.fresh, row.reused = after["fresh"] - before["fresh"], after["reused"] - before["reused"]
                with track_live_bytes() as live:
                    step()
                row.peak_live_bytes = live.peak
            rows.append(row)
            steps.append(step)
        times: List[List[float]] = [[] for _ in variants]
        for _ in range(rounds):
            for i, step in enumerate(steps):
                times[i].append(steady_time(step, device, policy).median_s)
    for row, samples in zip(rows, times):
        row.time_ms = statistics.median(samples) * 1e3
    return rows


def format_rows(rows: List[Measurement]) -> str:
    lines = [f"{'workload':18} {'variant':9} {'ms':>9} {'x ind':>6} {'fresh':>6} {'reused':>6} {'peak live MB':>12}"]
    inductor = {r.workload: r.time_ms for r in rows if r.variant == "inductor"}
    for r in rows:
        ratio = f"{inductor[r.workload] / r.time_ms:.2f}" if r.workload in inductor and r.time_ms else "-"
        fresh = "-" if r.fresh is None else str(r.fresh)
        reused = "-" if r.reused is None else str(r.reused)
        peak = "-" if r.peak_live_bytes is None else f"{r.peak_live_bytes / 2**20:.1f}"
        lines.append(f"{r.workload:18} {r.variant:9} {r.time_ms:9.2f} {ratio:>6} {fresh:>6} {reused:>6} {peak:>12}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cppinductor.tools.memory_plan", description=__doc__.splitlines()[2])
    p.add_argument("--only", default=",".join(DEFAULT_WORKLOADS), help="bench workloads (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="the bench's --quick sizes")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--no-inductor", action="store_true", help="skip Inductor (no x ind column)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (default: %(default)s)")
    p.add_argument("--size", choices=("full", "quick", "tiny"), help=argparse.SUPPRESS)  # tests: tiny
    args = p.parse_args(argv)
    size = args.size or ("quick" if args.quick else "full")
    variants = ["no reuse", "reuse"] if args.no_inductor else ["inductor", "no reuse", "reuse"]
    rows = [
        row
        for w in select([n.strip() for n in args.only.split(",") if n.strip()], quick=False)
        for row in measure(w, variants, args.device, size, args.rounds)
    ]
    print(format_rows(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
