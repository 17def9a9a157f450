"""Per-kernel GPU time of bench workloads under Inductor and cppinductor (torch.profiler).

Shows which kernel of a compiled workload is slower than the other backend's:
  python3 gpu_codegen/tools/kernel_profile.py transformer mlp_train [--size quick|full]
  python3 gpu_codegen/tools/kernel_profile.py resnet gpt2_train --dtype bfloat16   (model suite, large batch)
  python3 gpu_codegen/tools/kernel_profile.py distributed_transformer   (the distributed suite's model, one GPU)
  python3 gpu_codegen/tools/kernel_profile.py layer_stack_train --size quick --mode reduce-overhead
"""

from __future__ import annotations

import argparse

import torch
import torch._dynamo
from torch.profiler import ProfilerActivity, profile

import cppinductor  # noqa: F401  (registers the backend)
from cppinductor.bench import distributed, workloads


class _DistributedModelCase:
    """One GPU's training step of the distributed suite's model (no process group)."""

    def __init__(self, size: str, dtype: torch.dtype):
        self.size = distributed.SIZES[size]
        self.dtype = dtype
        self.shape = f"{self.size.batch}x{self.size.tokens} tokens, dim {self.size.dim}"

    def make_step(self, compile_):
        torch.manual_seed(0)
        model = distributed.TinyTransformer(self.size).cuda().to(self.dtype)
        step_model = compile_(model)
        tokens = torch.randint(0, self.size.vocab, (self.size.batch, self.size.tokens), device="cuda")
        targets = torch.roll(tokens, -1, dims=1)

        def step():
            step_model(tokens, targets).backward()
            for p in model.parameters():
                p.grad = None
        return step


def build_case(name: str, sizes, dtype: torch.dtype, size: str = "full"):
    if name == "distributed_transformer":
        return _DistributedModelCase(size, dtype)
    if name in workloads.BY_NAME:
        return workloads.BY_NAME[name].build(sizes, "cuda", dtype)
    from cppinductor.bench import models

    specs = {s.name: s for s in models.SPECS}
    train = name.endswith("_train")
    return models.model_case(specs[name.removesuffix("_train")], "cuda", dtype, "large", train)


def profile_one(name: str, backend: str, sizes, dtype: torch.dtype, steps: int, top: int, size: str,
                mode: str = "default") -> None:
    torch._dynamo.reset()
    case = build_case(name, sizes, dtype, size)
    step = case.make_step(lambda fn: torch.compile(fn, backend=backend, mode=mode))
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    rows = []
    total = 0.0
    for e in prof.key_averages():
        t = e.device_time_total / steps / 1e3  # ms per step
        if t <= 0:
            continue
        total += t
        rows.append((t, e.count // steps, e.key))
    rows.sort(reverse=True)
    print(f"== {name} [{case.shape}] under {backend} ({mode}): {total:.3f} ms of kernels per step")
    for t, n, key in rows[:top]:
        print(f"  {t:8.3f} ms  x{n:<3d} {key[:110]}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("workloads", nargs="+")
    p.add_argument("--size", default="full")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--backends", default="inductor,cppinductor")
    p.add_argument("--top", type=int, default=14, help="kernels listed per backend")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--mode", default="default", help="torch.compile mode of both backends")
    args = p.parse_args()
    sizes = workloads.sizes_for("cuda", args.size)
    for name in args.workloads:
        for backend in args.backends.split(","):
            profile_one(name, backend, sizes, getattr(torch, args.dtype), args.steps, args.top, args.size, args.mode)


if __name__ == "__main__":
    main()
