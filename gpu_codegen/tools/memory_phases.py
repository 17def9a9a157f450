"""Where a training step's peak memory comes from, per step and phase, for
each backend and mode: the transformer layer of the CUDA-graph tests, five
SGD steps, the peak (above the memory held before the first step) during the
forward, the backward and the optimizer step, and what the forward leaves
allocated for the backward. Inductor's reduce-overhead rows fall below zero:
its captures free the cuBLAS workspaces made before step 1.

    python3 gpu_codegen/tools/memory_phases.py [--steps 5] [--backends cppinductor,inductor]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import torch
from torch import nn


def _make() -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).cuda()


def _mib(n: int) -> str:
    return f"{n / 2**20:6.1f}"


def _phases(backend: str, mode: str, steps: int) -> list[tuple[int, int, int, int]]:
    model = _make()
    step_model = torch.compile(model, backend=backend, mode=mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator(device="cuda").manual_seed(1)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    rows = []
    for _ in range(steps):
        x = torch.randn(8, 64, 256, device="cuda", generator=gen)
        torch.cuda.reset_peak_memory_stats()
        loss = step_model(x).square().mean()
        torch.cuda.synchronize()
        fwd_peak, held = torch.cuda.max_memory_allocated() - base, torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        loss.backward()
        torch.cuda.synchronize()
        bwd_peak = torch.cuda.max_memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        rows.append((fwd_peak, held, bwd_peak, torch.cuda.max_memory_allocated() - base))
    return rows


def _one(config: str, steps: int) -> None:
    backend, mode = config.split(":")
    # The libraries' per-stream workspaces (cuBLAS, cuBLASLt: tens of MiB,
    # made once per process and stream) are made before measuring, on the
    # default stream and on our capture stream; Inductor's capture stream
    # pays them inside its numbers.
    from cppinductor import cudagraph_pool

    pool = cudagraph_pool.pool_for(torch.device("cuda", torch.cuda.current_device()))
    for stream in (torch.cuda.current_stream(), pool.stream):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            _make()(torch.randn(2, 4, 256, device="cuda")).sum().backward()
        torch.cuda.synchronize()
    for i, row in enumerate(_phases(backend, mode, steps), 1):
        print(f"{backend:12s} {mode:16s} step {i}: " + " | ".join(_mib(v) for v in row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--backends", default="cppinductor,inductor")
    p.add_argument("--one", help=argparse.SUPPRESS)  # backend:mode, run in this process
    args = p.parse_args()
    if args.one:
        _one(args.one, args.steps)
        return
    print("MiB above the memory held before step 1: fwd peak | held after fwd | bwd peak | opt peak")
    for backend in args.backends.split(","):
        for mode in ("default", "reduce-overhead"):
            # One process each: a mode's pools and workspaces would move the next one's baseline.
            out = subprocess.run([sys.executable, __file__, "--one", f"{backend}:{mode}", "--steps", str(args.steps)],
                                 capture_output=True, text=True)
            print(out.stdout, end="" if out.returncode == 0 else out.stderr[-2000:])


if __name__ == "__main__":
    main()
