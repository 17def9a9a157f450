"""NVRTC compile time of the bench workloads' CUDA modules, measured without a GPU.

Each workload is traced on CPU (small shapes of the same structure), its ATen
graphs are exported with the device rewritten to cuda:0, and the CUDA module
generate_cuda_source prints for them is compiled by NVRTC through ctypes with
the flags and the in-memory prelude compile_cuda uses. Prints ms per module and
per kernel (median of --repeat compiles). Usage:

  CPPINDUCTOR_NVRTC_LIBRARY=.../libnvrtc.so.13 PYTHONPATH=python \\
    python gpu_codegen/tools/nvrtc_time.py [--only sin_cos ...] [--flags "-X -Y"] [--dump DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import re
import statistics
import time

import torch
import torch._dynamo
from torch._functorch.aot_autograd import aot_module_simplified

from cppinductor import _C
from cppinductor.backend import rewrite_aten_graph
from cppinductor.bench import workloads
from cppinductor.decompositions import decomposition_table
from cppinductor.export import export_graph
from cppinductor.graph_passes import dense_attention_masks
from cppinductor.partition import partition

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRELUDE = (ROOT / "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh").read_text()
# What generated modules include; compile_cuda serves it beside the prelude.
CODEGEN_HEADER = _C.cuda_codegen_header()
# nvrtc_flags(90, {fast_compile = Min}, 1300) of gpu_codegen/runtime/nvrtc_compiler.cpp, the flags
# of a default-mode compile.
DEFAULT_FLAGS = ["-arch=compute_90", "--std=c++17", "-default-device", "--fmad=true", "--ftz=false",
                 "--prec-div=true", "--prec-sqrt=true", "--minimal", "-pch", "--Ofast-compile=min"]
# Rows and columns of the reductions: the schedule, hence the kernel text,
# depends on them (NVRTC_TIME_ROWS_COLS="16384,16384" is the GPU bench's).
_ROWS, _COLS = (int(v) for v in os.environ.get("NVRTC_TIME_ROWS_COLS", "1024,1024").split(","))
SIZES = workloads.Sizes(_ROWS, _COLS, (1024, 4096), 256,
                        tuple(int(v) for v in os.environ.get("NVRTC_TIME_MLP", "256,512,1024").split(",")),
                        (2, 64, 256, 4), (16, 8, 24))


def to_cuda(x):
    if isinstance(x, dict):
        return {k: ("cuda:0" if k == "device" and x[k] == "cpu" else to_cuda(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [to_cuda(v) for v in x]
    return x


def trace_cuda_sources(run) -> list[str]:
    """CUDA modules of every graph (forward and backward) that `run(compile)`
    compiles through `compile` (torch.compile with a backend that rewrites
    each graph as cppinductor's backend does for a GPU, prints each ATen
    graph's module for cuda:0 and runs the graph as it is)."""
    found: list[str] = []

    def grabber(kind):
        def grab(gm, example_inputs):
            rewrite_aten_graph(gm, {}, kind, [], cuda=True)
            found.append(_C.generate_cuda_source(to_cuda(export_graph(gm)), {"mode": "default"}))
            return gm.forward

        return grab

    def backend(gm, example_inputs):
        dense_attention_masks(gm, devices=("cpu",))
        return aot_module_simplified(gm, example_inputs, fw_compiler=grabber("forward"),
                                     bw_compiler=grabber("backward"), inference_compiler=grabber("inference"),
                                     decompositions=decomposition_table(), partition_fn=partition)

    torch._dynamo.reset()
    run(lambda fn: torch.compile(fn, backend=backend))
    return found


def sources_of(workload) -> list[str]:
    """CUDA modules of every graph (forward and backward) the workload compiles."""
    return trace_cuda_sources(lambda compile: workload.build(SIZES, "cpu", torch.float32).make_step(compile)())


class Nvrtc:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)

    def compile(self, source: str, flags: list[str]) -> tuple[float, str, str]:
        lib = self.lib
        prog = ctypes.c_void_p()
        headers = (ctypes.c_char_p * 2)(PRELUDE.encode(), CODEGEN_HEADER.encode())
        names = (ctypes.c_char_p * 2)(b"cppinductor_cuda_prelude.cuh", b"cppinductor_cuda_codegen.cuh")
        start = time.perf_counter()
        r = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 2, headers, names)
        assert r == 0, r
        argv = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        r = lib.nvrtcCompileProgram(prog, len(flags), argv)
        ms = (time.perf_counter() - start) * 1e3
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        ptx = ""
        if r == 0:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, buf)
            ptx = buf.value.decode()
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        if r != 0:
            raise RuntimeError(log.value.decode())
        return ms, log.value.decode(), ptx


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--only", nargs="*")
    p.add_argument("--flags", default=None, help="replace the default flags (space separated)")
    p.add_argument("--extra", default="", help="flags appended to the default ones")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dump", default=None)
    args = p.parse_args()
    nvrtc = Nvrtc(os.environ["CPPINDUCTOR_NVRTC_LIBRARY"])
    flags = args.flags.split() if args.flags is not None else list(DEFAULT_FLAGS)
    flags += args.extra.split()
    print("flags:", " ".join(flags))
    nvrtc.compile('#include "cppinductor_cuda_codegen.cuh"\n', flags)  # load NVRTC's builtins, make the PCH
    total_ms = total_kernels = 0.0
    for w in workloads.WORKLOADS:
        if args.only and w.name not in args.only:
            continue
        for i, src in enumerate(sources_of(w)):
            kernels = len(re.findall(r"__global__", src))
            if kernels == 0:
                continue
            runs = [nvrtc.compile(src, flags) for _ in range(args.repeat)]
            ms = statistics.median(r[0] for r in runs)
            if args.dump:
                d = pathlib.Path(args.dump)
                d.mkdir(parents=True, exist_ok=True)
                (d / f"{w.name}_{i}.cu").write_text(src)
                (d / "cppinductor_cuda_codegen.cuh").write_text(CODEGEN_HEADER)
                (d / f"{w.name}_{i}.ptx").write_text(runs[0][2])
            total_ms += ms
            total_kernels += kernels
            print(f"{w.name:12s} graph {i}: {kernels:2d} kernels  {len(src):6d} chars  {ms:7.1f} ms  "
                  f"{ms / kernels:6.1f} ms/kernel")
    if total_kernels:
        print(f"total {total_ms:.1f} ms over {int(total_kernels)} kernels: {total_ms / total_kernels:.1f} ms/kernel")


if __name__ == "__main__":
    main()
