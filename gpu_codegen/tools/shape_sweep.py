"""Shapes and programs the benchmark does not have: cppinductor against Inductor and eager.

Per-call milliseconds (median of 40; CUDA events on the GPU) of each case under each backend, results
checked against eager. Finds schedules tuned to the bench's shapes that fall over elsewhere (a transposed
pointwise result, a 32000-wide softmax, a column variance):
  python3 gpu_codegen/tools/shape_sweep.py [--cpu] [substring ...]   # only cases whose name has one
The CPU cases are smaller (2 cores). GPU cases under ~0.05 ms measure the Python call path more than the
kernel.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

import cppinductor  # noqa: F401  (registers the backend)

dev = "cuda"


def t(shape, dtype=torch.float32):
    return torch.randn(*shape, device=dev, dtype=dtype)


def bench(f, args, n=40):
    for _ in range(3):
        f(*args)
    if dev == "cpu":
        ts = []
        for _ in range(n):
            start = time.perf_counter()
            f(*args)
            ts.append((time.perf_counter() - start) * 1e3)
        return sorted(ts)[n // 2]
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        f(*args)
        b.record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) for a, b in ev)
    return ts[n // 2]


def cpu_cases():
    """(name, fn, args) per case for 2 cores: inputs of 1-16 MB."""
    return [
        ("softmax 1000x1000", lambda x: torch.softmax(x, -1), [t((1000, 1000))]),
        ("softmax 128x50257", lambda x: torch.softmax(x, -1), [t((128, 50257))]),
        ("softmax 65536x64", lambda x: torch.softmax(x, -1), [t((65536, 64))]),
        ("softmax dim0 1024x1024", lambda x: torch.softmax(x, 0), [t((1024, 1024))]),
        ("softmax dim0 1000x1000", lambda x: torch.softmax(x, 0), [t((1000, 1000))]),
        ("log_softmax 256x32000", lambda x: torch.log_softmax(x, -1), [t((256, 32000))]),
        ("layer_norm 1024x768", lambda x, w, b: F.layer_norm(x, (768,), w, b), [t((1024, 768)), t((768,)), t((768,))]),
        ("layer_norm 512x4097", lambda x, w, b: F.layer_norm(x, (4097,), w, b), [t((512, 4097)), t((4097,)), t((4097,))]),
        ("layer_norm 20000x100", lambda x, w, b: F.layer_norm(x, (100,), w, b), [t((20000, 100)), t((100,)), t((100,))]),
        ("rms_norm 1024x4096", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, [t((1024, 4096)), t((4096,))]),
        ("sum dim0 100000x64", lambda x: x.sum(0), [t((100000, 64))]),
        ("sum dim1 64x100000", lambda x: x.sum(1), [t((64, 100000))]),
        ("bn var_mean (0,2,3) 8x64x56x56", lambda x: torch.var_mean(x, (0, 2, 3)), [t((8, 64, 56, 56))]),
        ("mean (2,3) 8x64x56x56", lambda x: x.mean((2, 3)), [t((8, 64, 56, 56))]),
        ("bias relu NCHW 8x64x56x56", lambda x, b: torch.relu(x + b), [t((8, 64, 56, 56)), t((64, 1, 1))]),
        ("transpose+1 2048^2", lambda x: x.t() + 1, [t((2048, 2048))]),
        ("permute 0213 4x512x16x64", lambda x: (x.permute(0, 2, 1, 3) * 2).contiguous(), [t((4, 512, 16, 64))]),
        ("argmax 1024x1000", lambda x: x.argmax(-1), [t((1024, 1000))]),
        ("var 0 2048x2048", lambda x: x.var(0), [t((2048, 2048))]),
        ("cross_entropy 256x32000", lambda x, y: F.cross_entropy(x, y), [t((256, 32000)), torch.randint(0, 32000, (256,))]),
        ("embedding+ln 2048x1024", lambda i, w: F.layer_norm(F.embedding(i, w), (1024,)), [torch.randint(0, 50000, (2048,)), t((50000, 1024))]),
    ]


def cases():
    """(name, fn, args) per case; built on demand (the inputs take GPU memory)."""
    if dev == "cpu":
        return cpu_cases()
    return [
        ("softmax 1000x1000", lambda x: torch.softmax(x, -1), [t((1000, 1000))]),
        ("softmax 4096x768", lambda x: torch.softmax(x, -1), [t((4096, 768))]),
        ("softmax 128x50257", lambda x: torch.softmax(x, -1), [t((128, 50257))]),
        ("softmax 65536x64", lambda x: torch.softmax(x, -1), [t((65536, 64))]),
        ("softmax 4096x4096 f16", lambda x: torch.softmax(x, -1), [t((4096, 4096), torch.float16)]),
        ("softmax dim0 4096x1024", lambda x: torch.softmax(x, 0), [t((4096, 1024))]),
        ("log_softmax 8192x32000", lambda x: torch.log_softmax(x, -1), [t((8192, 32000))]),
        ("layer_norm 4096x768", lambda x, w, b: F.layer_norm(x, (768,), w, b), [t((4096, 768)), t((768,)), t((768,))]),
        ("layer_norm 2048x4097", lambda x, w, b: F.layer_norm(x, (4097,), w, b), [t((2048, 4097)), t((4097,)), t((4097,))]),
        ("layer_norm 100000x100", lambda x, w, b: F.layer_norm(x, (100,), w, b), [t((100000, 100)), t((100,)), t((100,))]),
        ("layer_norm bf16 8192x2048", lambda x, w, b: F.layer_norm(x, (2048,), w, b), [t((8192, 2048), torch.bfloat16), t((2048,), torch.bfloat16), t((2048,), torch.bfloat16)]),
        ("rms_norm 8192x4096", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, [t((8192, 4096)), t((4096,))]),
        ("sum dim0 1000x1000", lambda x: x.sum(0), [t((1000, 1000))]),
        ("sum dim0 100000x64", lambda x: x.sum(0), [t((100000, 64))]),
        ("sum dim1 64x100000", lambda x: x.sum(1), [t((64, 100000))]),
        ("full sum 2^24", lambda x: x.sum(), [t((1 << 24,))]),
        ("bn stats (0,2,3) 32x64x56x56", lambda x: x.mean((0, 2, 3)), [t((32, 64, 56, 56))]),
        ("mean (2,3) 32x64x56x56", lambda x: x.mean((2, 3)), [t((32, 64, 56, 56))]),
        ("bias relu NCHW 32x64x56x56", lambda x, b: torch.relu(x + b), [t((32, 64, 56, 56)), t((64, 1, 1))]),
        ("transpose+1 4096^2", lambda x: x.t() + 1, [t((4096, 4096))]),
        ("permute 0213 16x1024x16x64", lambda x: (x.permute(0, 2, 1, 3) * 2).contiguous(), [t((16, 1024, 16, 64))]),
        ("argmax 4096x1000", lambda x: x.argmax(-1), [t((4096, 1000))]),
        ("gelu 1000003", lambda x: F.gelu(x), [t((1000003,))]),
        ("max dim1 8192x8192", lambda x: x.amax(1), [t((8192, 8192))]),
        ("var 0 8192x8192", lambda x: x.var(0), [t((8192, 8192))]),
        ("cross_entropy 8192x32000", lambda x, y: F.cross_entropy(x, y), [t((8192, 32000)), torch.randint(0, 32000, (8192,), device=dev)]),
        ("embedding+ln 8192x1024", lambda i, w: F.layer_norm(F.embedding(i, w), (1024,)), [torch.randint(0, 50000, (8192,), device=dev), t((50000, 1024))]),
        ("where mask fill 8192x8192", lambda x: torch.where(x > 0, x, x * 0.1), [t((8192, 8192))]),
        ("bn var_mean (0,2,3) 32x64x56x56", lambda x: torch.var_mean(x, (0, 2, 3)), [t((32, 64, 56, 56))]),
        ("softmax 4096x50257", lambda x: torch.softmax(x, -1), [t((4096, 50257))]),
        ("var_mean 1 8192x8192", lambda x: torch.var_mean(x, 1), [t((8192, 8192))]),
        ("x.t() * y 4096^2", lambda x, y: x.t() * y.t(), [t((4096, 4096)), t((4096, 4096))]),
    ]


def main(only: list[str]) -> None:
    torch.manual_seed(0)
    print(f"{'case':32s} {'eager':>8s} {'inductor':>9s} {'ours':>8s} {'x ind':>6s}", flush=True)
    for name, fn, args in cases():
        if only and not any(o in name for o in only):
            continue
        res = {}
        low = args[0].dtype != torch.float32
        for backend in ("eager", "inductor", "cppinductor"):
            torch._dynamo.reset()
            f = fn if backend == "eager" else torch.compile(fn, backend=backend)
            try:
                with torch.no_grad():
                    torch.testing.assert_close(f(*args), fn(*args), atol=2e-2 if low else 1e-4,
                                               rtol=2e-2 if low else 1e-4, equal_nan=True)
                    res[backend] = bench(f, args)
            except Exception as e:  # report and go on: one broken case must not hide the others
                res[backend] = float("nan")
                print(f"  {name} {backend}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        print(f"{name:32s} {res['eager']:8.4f} {res['inductor']:9.4f} {res['cppinductor']:8.4f} "
              f"{res['inductor'] / res['cppinductor']:6.2f}", flush=True)


if __name__ == "__main__":
    if "--cpu" in sys.argv:
        dev = "cpu"
    main([a for a in sys.argv[1:] if a != "--cpu"])
