"""Host time per phase of a training step, for each backend in one process,
in interleaved rounds: zero_grad, the compiled forward, backward() and the
optimizer step (µs, medians of 9 rounds of 200 steps). A phase's host time
is where a launch-bound step's time goes; cProfile (call_profile.py) shows
only its Python part.

    python3 gpu_codegen/tools/step_phases.py [--mode reduce-overhead] [--backends inductor,cppinductor]

The model is the launch suite's layer stack (8 x (Linear(64) -> LayerNorm ->
GELU), 8 x 64 input), MSE loss, SGD.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from cppinductor.bench.workloads import LayerStack


def _setup(backend: str, mode: str):
    torch.manual_seed(0)
    model = LayerStack(64, 8).cuda()
    x, target = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled = torch.compile(lambda x, t: F.mse_loss(model(x), t), backend=backend, mode=mode)
    for _ in range(5):  # warm-up, recording
        opt.zero_grad(set_to_none=True)
        compiled(x, target).backward()
        opt.step()
    return x, target, opt, compiled


def _round(setup, steps: int) -> list[float]:
    x, target, opt, compiled = setup
    total = [0, 0, 0, 0]
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter_ns()
        loss = compiled(x, target)
        t2 = time.perf_counter_ns()
        loss.backward()
        t3 = time.perf_counter_ns()
        opt.step()
        t4 = time.perf_counter_ns()
        for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            total[i] += d
    torch.cuda.synchronize()
    return [t / steps / 1e3 for t in total]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="reduce-overhead")
    p.add_argument("--backends", default="inductor,cppinductor")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    setups = {b: _setup(b, args.mode) for b in args.backends.split(",")}
    rounds: dict[str, list[list[float]]] = {b: [] for b in setups}
    for _ in range(args.rounds):
        for b, s in setups.items():
            rounds[b].append(_round(s, args.steps))
    print(f"host µs per step, {args.mode}: zero_grad / forward / backward / optimizer step (total)")
    for b, rs in rounds.items():
        phases = [statistics.median(col) for col in zip(*rs)]
        print(f"{b:12s} " + " / ".join(f"{v:.1f}" for v in phases) + f"  ({statistics.median(sum(r) for r in rs):.1f})")


if __name__ == "__main__":
    main()
