"""The GEMM template (gpu_codegen/prelude/cppinductor_cuda_gemm.cuh) on its own:
NVRTC compile time, correctness against eager, and time against cuBLAS plus a
separate epilogue kernel, before the template is wired into the compiler.

For each shape and epilogue it prints one module of kernels, one per tile
configuration, compiles it with NVRTC (ctypes; the flags the compiler uses
for max-autotune), launches each kernel through the driver API on torch
tensors, checks the result against eager (bfloat16 tolerances), and times in
interleaved rounds with CUDA events, each function's calls captured in a CUDA
graph (GPU time, no launch cost on the host): eager (cuBLAS, then the epilogue as a
second kernel), cuBLAS alone (the matmul without its epilogue: the floor a
separate epilogue cannot beat), Inductor (default mode) and every
configuration. Usage (on a GPU machine):

  PYTHONPATH=python python3 gpu_codegen/tools/gemm_probe.py [--json FILE] [--shapes m16,...]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import math
import os
import pathlib
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRELUDE = (ROOT / "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh").read_text()
GEMM = (ROOT / "gpu_codegen/prelude/cppinductor_cuda_gemm.cuh").read_text()
FLAGS = ["-arch=sm_90", "--std=c++17", "-default-device", "--fmad=true"]


def _nvrtc() -> ctypes.CDLL:
    names = [os.environ.get("CPPINDUCTOR_NVRTC_LIBRARY", ""), "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    names += glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libnvrtc.so*"))
    for name in filter(None, names):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise SystemExit("no libnvrtc found (set CPPINDUCTOR_NVRTC_LIBRARY)")


_LIBS: dict[str, ctypes.CDLL] = {}


def _lib(name: str) -> ctypes.CDLL:
    """libnvrtc or libcuda, loaded at first use (printing sources needs neither)."""
    if name not in _LIBS:
        _LIBS[name] = _nvrtc() if name == "nvrtc" else ctypes.CDLL("libcuda.so.1")
    return _LIBS[name]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")


def compile_ptx(source: str) -> tuple[bytes, float]:
    """PTX of `source` and the seconds NVRTC took."""
    prog = ctypes.c_void_p()
    headers = [PRELUDE.encode(), GEMM.encode()]
    names = [b"cppinductor_cuda_prelude.cuh", b"cppinductor_cuda_gemm.cuh"]
    start = time.perf_counter()
    _check(_lib("nvrtc").nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"gemm.cu", 2,
                                    (ctypes.c_char_p * 2)(*headers), (ctypes.c_char_p * 2)(*names)), "create")
    opts = [f.encode() for f in FLAGS]
    rc = _lib("nvrtc").nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    seconds = time.perf_counter() - start
    size = ctypes.c_size_t()
    _lib("nvrtc").nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    _lib("nvrtc").nvrtcGetProgramLog(prog, log)
    if rc != 0:
        raise RuntimeError(f"NVRTC: {log.value.decode()[:4000]}")
    _lib("nvrtc").nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    _lib("nvrtc").nvrtcGetPTX(prog, ptx)
    return ptx.raw, seconds


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int
    split_k: int

    @property
    def name(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}_s{self.stages}_k{self.split_k}"

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        a = self.bm * (self.bk + 8)
        b = self.bn * (self.bk + 8) if b_k_contiguous else self.bk * (self.bn + 8)
        return self.stages * (a + b) * 2


# Epilogues as eager computes them: the matmul rounded to bfloat16 (addmm:
# with its bias added first), then the pointwise op in float32, rounded.
EPILOGUES = {
    "relu": ("float x = cppi_bf16_bits_to_float(cppi_float_to_bf16_bits(v)); x = x > 0.f ? x : 0.f;",
             lambda a, b, e: torch.relu(a @ b)),
    "bias_gelu": ("float x = cppi_bf16_bits_to_float(cppi_float_to_bf16_bits(v + cppi_bf16_bits_to_float(extra[n])));"
                  " x = 0.5f * x * (1.f + erff(x * 0.70710678118654752f));",
                  lambda a, b, e: F.gelu(torch.addmm(e, a, b))),
    "residual": ("float x = cppi_bf16_bits_to_float(extra[m * N + n]) +"
                 " cppi_bf16_bits_to_float(cppi_float_to_bf16_bits(v));",
                 lambda a, b, e: e + a @ b),
}


def source(tiles: list[Tile], epilogue: str, b_k_contiguous: bool) -> str:
    body = EPILOGUES[epilogue][0]
    out = ['#include "cppinductor_cuda_gemm.cuh"',
           "struct Epi { const uint16_t* extra; uint16_t* out; int64_t N;",
           "  __device__ __forceinline__ void operator()(int64_t m, int64_t n, float v) const {",
           f"    {body}", "    out[m * N + n] = cppi_float_to_bf16_bits(x);", "  }", "};"]
    for i, t in enumerate(tiles):
        cfg = (f"cppi_gemm::Config<{t.bm}, {t.bn}, {t.bk}, {t.warps_m}, {t.warps_n}, {t.stages}, {t.split_k}, "
               f"{'true' if b_k_contiguous else 'false'}, false>")
        out += [f"extern \"C\" __global__ void __launch_bounds__({t.warps_m * t.warps_n * 32}) k{i}(",
                "    const uint16_t* a, const uint16_t* b, const uint16_t* extra, uint16_t* out, int64_t M,"
                " int64_t N, int64_t K, int64_t lda, int64_t ldb, float* ws, int* ctr) {",
                f"  cppi_gemm::gemm<{cfg}>(a, b, M, N, K, lda, ldb, Epi{{extra, out, N}}, ws, ctr);", "}"]
    return "\n".join(out) + "\n"


class Module:
    def __init__(self, ptx: bytes) -> None:
        self.handle = ctypes.c_void_p()
        _check(_lib("cuda").cuModuleLoadData(ctypes.byref(self.handle), ptx), "cuModuleLoadData")

    def function(self, name: str, shared: int) -> ctypes.c_void_p:
        f = ctypes.c_void_p()
        _check(_lib("cuda").cuModuleGetFunction(ctypes.byref(f), self.handle, name.encode()), "cuModuleGetFunction")
        _check(_lib("cuda").cuFuncSetAttribute(f, 8, shared), "max dynamic shared")  # MAX_DYNAMIC_SHARED_SIZE_BYTES
        return f


def launcher(fn, tile: Tile, shared: int, a, b, extra, out, ws, ctr):
    m, k = a.shape
    n = b.shape[1]
    lda = a.stride(0)
    ldb = b.stride(1) if b.stride(0) == 1 else b.stride(0)
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (a, b, extra, out)]
    ints = [ctypes.c_int64(v) for v in (m, n, k, lda, ldb)]
    tail = [ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(ctr.data_ptr())]
    values = ptrs + ints + tail
    args = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    grid = math.ceil(m / tile.bm) * math.ceil(n / tile.bn)
    threads = tile.warps_m * tile.warps_n * 32

    def run():
        stream = torch.cuda.current_stream().cuda_stream
        _check(_lib("cuda").cuLaunchKernel(fn, grid, tile.split_k, 1, threads, 1, 1, shared, ctypes.c_void_p(stream), args,
                                   None), "cuLaunchKernel")
        return out

    run.keep = (values, a, b, extra, out, ws, ctr)  # what the launches point at must outlive them
    return run


def tiles_for(m: int) -> list[Tile]:
    if m <= 16:
        return ([Tile(16, 64, 64, 1, 4, 4, s) for s in (1, 2, 4)] + [Tile(16, 64, 128, 1, 4, 4, s) for s in (1, 2)]
                + [Tile(16, 128, 128, 1, 4, 3, s) for s in (1, 2)] + [Tile(16, 32, 128, 1, 2, 4, s) for s in (1, 2)]
                + [Tile(16, 128, 64, 1, 4, 4, s) for s in (1, 3)] + [Tile(16, 64, 128, 1, 4, 4, 3)]
                + [Tile(16, 256, 128, 1, 8, 3, 1)])
    if m <= 64:
        return ([Tile(64, 64, 64, 2, 2, 4, s) for s in (1, 2, 3)] + [Tile(64, 64, 128, 2, 2, 3, s) for s in (1, 2)]
                + [Tile(32, 64, 128, 1, 4, 4, s) for s in (1, 2)] + [Tile(64, 128, 64, 2, 4, 3, 1)])
    return [Tile(128, 128, 32, 2, 2, 4, 1), Tile(128, 128, 32, 2, 4, 4, 1), Tile(128, 256, 32, 2, 4, 3, 1),
            Tile(128, 128, 64, 2, 2, 3, 1)]


def time_all(fns: dict, rounds: int = 9, iters: int = 20) -> dict[str, float]:
    """Median µs of GPU time per call of each function: `iters` calls
    captured in a CUDA graph (no host launch cost), replays timed with CUDA
    events in interleaved rounds."""
    graphs = {}
    for k, f in fns.items():
        f()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                f()
        graphs[k] = g
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, g in graphs.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            times[k].append(start.elapsed_time(end) * 1e3 / iters)
    return {k: statistics.median(v) for k, v in times.items()}


def probe(m: int, k: int, n: int, epilogue: str, b_k_contiguous: bool) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=gen) / math.sqrt(k)
    b = w.t() if b_k_contiguous else w.t().contiguous()
    extra = torch.randn(n if epilogue == "bias_gelu" else m * n, device="cuda", dtype=dt, generator=gen)
    if epilogue == "residual":
        extra = extra.view(m, n)
    reference_fn = EPILOGUES[epilogue][1]
    expected = reference_fn(a, b, extra)
    tiles = tiles_for(m)
    ptx, nvrtc_s = compile_ptx(source(tiles, epilogue, b_k_contiguous))
    module = Module(ptx)
    fns = {"eager": lambda: reference_fn(a, b, extra), "cublas_only": lambda: a @ b}
    torch._dynamo.reset()
    inductor = torch.compile(reference_fn)
    inductor(a, b, extra)
    fns["inductor"] = lambda: inductor(a, b, extra)
    errors = {}
    for i, t in enumerate(tiles):
        shared = t.shared_bytes(b_k_contiguous)
        out = torch.empty(m, n, device="cuda", dtype=dt)
        ws = torch.empty(t.split_k * m * n, device="cuda", dtype=torch.float32)
        ctr = torch.zeros(math.ceil(m / t.bm) * math.ceil(n / t.bn), device="cuda", dtype=torch.int32)
        run = launcher(module.function(f"k{i}", shared), t, shared, a, b, extra, out, ws, ctr)
        for _ in range(2):  # twice: the split-K counters must be back at zero
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            if not torch.allclose(out.float(), expected.float(), rtol=1.6e-2, atol=1e-2):
                errors[t.name] = float((out.float() - expected.float()).abs().max())
        if t.name not in errors:
            fns[t.name] = run
    times = time_all(fns)
    best = min((v, k) for k, v in times.items() if k not in ("eager", "cublas_only", "inductor"))
    flops = 2 * m * n * k
    return {"shape": f"{m}x{k}x{n}", "epilogue": epilogue, "b": "K-contiguous" if b_k_contiguous else "N-contiguous",
            "nvrtc_s": nvrtc_s, "kernels": len(tiles), "wrong": errors, "us": times, "best": best[1],
            "best_us": best[0], "x_eager": times["eager"] / best[0], "x_inductor": times["inductor"] / best[0],
            "tflops_best": flops / best[0] / 1e6}


SHAPES = {  # name: (m, k, n, epilogue, b K-contiguous)
    "m1": (1, 4096, 4096, "relu", True),
    "m16": (16, 4096, 4096, "relu", True),
    "m16_gelu": (16, 4096, 11008, "bias_gelu", True),
    "m16_gelu_n": (16, 4096, 11008, "bias_gelu", False),
    "m64_gelu": (64, 4096, 11008, "bias_gelu", True),
    "m16_residual": (16, 11008, 4096, "residual", True),
    "m64_residual": (64, 11008, 4096, "residual", False),
    "m8192_gelu": (8192, 4096, 11008, "bias_gelu", True),
    "m4096": (4096, 4096, 4096, "relu", False),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    results = []
    for name in args.shapes.split(","):
        r = probe(*SHAPES[name])
        results.append(r)
        us = r["us"]
        print(f"{name:14s} {r['shape']:>16s} {r['epilogue']:9s} {r['b']:12s} nvrtc {r['nvrtc_s']:.2f}s/{r['kernels']} "
              f"eager {us['eager']:8.1f} cublas {us['cublas_only']:8.1f} inductor {us['inductor']:8.1f} "
              f"best {r['best_us']:8.1f} ({r['best']}) x eager {r['x_eager']:.2f} x ind {r['x_inductor']:.2f} "
              f"{r['tflops_best']:.0f} TFLOP/s wrong {r['wrong'] or '-'}", flush=True)
        others = sorted((v, k) for k, v in us.items() if k not in ("eager", "cublas_only", "inductor"))
        print("    " + " ".join(f"{k}={v:.1f}" for v, k in others), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
