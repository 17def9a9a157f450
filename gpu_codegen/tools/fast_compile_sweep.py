"""What NVRTC's -Ofast-compile levels cost at run time and save at compile time, on the GPU.

For every bench workload (full CUDA sizes) and every `cuda_fast_compile` level, compiles the workload
with cppinductor in this process and reports the NVRTC milliseconds per kernel (the backend's
counters), the first call's seconds (everything it compiles) and the steady per-call milliseconds
(CUDA events over batches of calls). The timing rounds interleave the levels, so a slow stretch of the
machine hits all levels alike; the table keeps each level's best round.
  python3 gpu_codegen/tools/fast_compile_sweep.py [--levels off,min] [--rounds 2] [--only a,b] [--ops]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch._dynamo

import cppinductor  # noqa: F401  (registers the backend)
from cppinductor.backend import compile_counters
from cppinductor.bench import workloads


def _steady_ms(step, batches: int = 7, calls: int = 10) -> float:
    """Median over batches of `calls` back-to-back calls, timed by CUDA events: the
    GPU's time per call, not the host's launch path (which a busy host slows)."""
    for _ in range(3):
        step()
    times = []
    for _ in range(batches):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(calls):
            step()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / calls)
    return statistics.median(times)


def measure(workload, level: str, sizes) -> tuple[float, float, float]:
    """(NVRTC ms per kernel, first call s, steady ms) of one workload (or OPS name) at one level."""
    torch._dynamo.reset()
    case = op_case(workload) if isinstance(workload, str) else workload.build(sizes, "cuda", torch.float32)
    options = {"cuda_fast_compile": level}
    step = case.make_step(lambda fn: torch.compile(fn, backend="cppinductor", options=options))
    before = compile_counters()
    torch.cuda.synchronize()
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - start
    after = compile_counters()
    kernels = after["kernels"] - before["kernels"]
    nvrtc_ms = 1e3 * (after["kernel_compile_s"] - before["kernel_compile_s"]) / max(kernels, 1)
    return nvrtc_ms, first_s, _steady_ms(step)


# Pointwise math over 64M floats (x in N(0, 1), y in [0.5, 1.5)): which functions' libdevice code
# runs slower when NVVM skips optimisations.
OPS = {
    "exp": lambda x, y: x.exp(), "log": lambda x, y: y.log(), "sin": lambda x, y: x.sin(),
    "tanh": lambda x, y: x.tanh(), "erf": lambda x, y: x.erf(), "sigmoid": lambda x, y: x.sigmoid(),
    "gelu": lambda x, y: torch.nn.functional.gelu(x), "gelu_tanh": lambda x, y: torch.nn.functional.gelu(x, approximate="tanh"),
    "pow": lambda x, y: y.pow(2.5), "div": lambda x, y: x / y, "sqrt": lambda x, y: y.sqrt(),
    "rsqrt": lambda x, y: y.rsqrt(), "atan2": lambda x, y: torch.atan2(x, y), "lgamma": lambda x, y: y.lgamma(),
    "expm1": lambda x, y: x.expm1(), "log1p": lambda x, y: y.log1p(), "fmod": lambda x, y: torch.fmod(x, y),
    "silu": lambda x, y: torch.nn.functional.silu(x), "softplus": lambda x, y: torch.nn.functional.softplus(x),
    "cat_pad": lambda x, y: torch.nn.functional.pad(x[:, :4093], (3, 0)).exp(),
    "transpose": lambda x, y: x.t() + 1,
}


def op_case(name: str):
    x = torch.randn(16384, 4096, device="cuda")
    y = torch.rand(16384, 4096, device="cuda") + 0.5
    fn = OPS[name]

    class Case:
        def make_step(self, compile):
            f = compile(fn)
            return lambda: f(x, y)

    return Case()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--levels", default="off,min,mid,max")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", default="")
    p.add_argument("--size", default="full", choices=("full", "quick"))
    p.add_argument("--ops", action="store_true", help="also time single pointwise functions (OPS)")
    args = p.parse_args()
    levels = args.levels.split(",")
    only = [n for n in args.only.split(",") if n]
    sizes = workloads.sizes_for("cuda", args.size)
    cases = [(w.name, w) for w in workloads.WORKLOADS if not only or w.name in only]
    if args.ops:
        cases += [(name, name) for name in OPS if not only or name in only]
    # The first round compiles, level after level: NVRTC keeps one automatic
    # precompiled header, made again whenever the flags change, so mixing
    # levels would charge that to every compile. Later rounds find the PTX
    # in the cache and time the calls only, the levels interleaved.
    best: dict[tuple[str, str], tuple[float, float, float]] = {}
    for level in levels:
        for name, case in cases:
            best[name, level] = measure(case, level, sizes)
    for _ in range(args.rounds - 1):
        for name, case in cases:
            for level in levels:
                r = measure(case, level, sizes)
                if r[2] < best[name, level][2]:
                    best[name, level] = (best[name, level][0], best[name, level][1], r[2])
    print(f"{'workload':18s} " + " ".join(f"{lv + ' nvrtc ms/k':>14s} {lv + ' run ms':>11s}" for lv in levels)
          + "   run vs " + levels[0])
    for name, _ in cases:
        base = best[name, levels[0]][2]
        ratios = " ".join(f"{best[name, lv][2] / base:.3f}" for lv in levels[1:])
        print(f"{name:18s} " + " ".join(f"{best[name, lv][0]:14.1f} {best[name, lv][2]:11.3f}" for lv in levels)
              + f"   {ratios}", flush=True)


if __name__ == "__main__":
    main()
