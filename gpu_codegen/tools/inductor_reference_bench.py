"""Inductor (Triton) timings of the workloads gpu_codegen_bench times, on the
same shapes, for the comparison the GPU codegen is held to. Needs torch with
CUDA and triton; run on the GPU machine:

    python3 gpu_codegen/tools/inductor_reference_bench.py

Median of triton.testing.do_bench over compiled functions (torch.compile,
default mode); GB/s counts the same bytes as gpu_codegen_bench (inputs read
once, outputs written once). The copy reference is dst.copy_(src) on 1 GiB.
"""
import sys

import torch
import torch.nn.functional as F
import triton.testing


def bench(fn, *args):
    fn(*args)
    torch.cuda.synchronize()
    return triton.testing.do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median")


def main():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape, dtype=torch.float32):
        return (torch.rand(*shape, device=dev, generator=g) * 6 - 3).to(dtype)

    src = rand(1 << 28)
    dst = torch.empty_like(src)
    copy_ms = bench(lambda a, b: b.copy_(a), src, dst)
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
    print(f"copy reference: 1 GiB in {copy_ms:.3f} ms = {copy_gbs:.0f} GB/s (read + write)")
    del src, dst

    x = rand(65536, 4096)
    b = rand(4096)
    xh = rand(65536, 8192, dtype=torch.float16)
    bh = rand(8192, dtype=torch.float16)
    x1 = rand(1 << 28)
    s = rand(16384, 4096)
    w = rand(4096)
    bb = rand(4096)
    workloads = [
        ("relu(x+b)*2 f32", lambda x, b: torch.relu(x + b) * 2, (x, b), 2 * x.numel() * 4 + b.numel() * 4),
        ("relu(x+b)*2 f16", lambda x, b: torch.relu(x + b) * 2, (xh, bh), 2 * xh.numel() * 2 + bh.numel() * 2),
        ("sin(x)+cos(x) f32", lambda x: torch.sin(x) + torch.cos(x), (x1,), 2 * x1.numel() * 4),
        ("gelu(x+b) f32", lambda x, b: F.gelu(x + b), (x, b), 2 * x.numel() * 4 + b.numel() * 4),
        ("softmax f32", lambda x: torch.softmax(x, -1), (s,), 2 * s.numel() * 4),
        ("layer_norm f32", lambda x, w, b: F.layer_norm(x, (4096,), w, b, 1e-5), (s, w, bb),
         2 * s.numel() * 4 + 2 * 4096 * 4),
        ("var_mean f32", lambda x: torch.var_mean(x, -1), (s,), s.numel() * 4 + 2 * 16384 * 4),
        ("column_sum f32", lambda x: x.sum(0), (s,), s.numel() * 4 + 4096 * 4),
    ]
    print(f"\n{'kernel':36s} {'ms':>9s} {'GB/s':>8s} {'%copy':>7s}")
    for name, fn, args, nbytes in workloads:
        try:
            ms = bench(torch.compile(fn), *args)
        except Exception as e:  # keep going: one failure should not hide the rest
            print(f"{name:36s} failed: {e}", file=sys.stderr)
            continue
        gbs = nbytes / ms / 1e6
        print(f"{name:36s} {ms:9.4f} {gbs:8.0f} {100 * gbs / copy_gbs:6.1f}%", flush=True)


if __name__ == "__main__":
    main()
