"""Loads per loop iteration, per NVRTC optimisation level, and registers, without a GPU.

Compiles each CUDA module in a directory (gpu_codegen_bench --sources DIR, or
nvrtc_time.py --dump DIR; both write the cppinductor_cuda_codegen.cuh the
modules include beside them) with NVRTC at each --Ofast-compile level, assembles
the PTX for sm_90 with ptxas and disassembles it with nvdisasm, then lists the
global and shared loads (LDG, LDS) inside each loop of the SASS (a backward
branch closes a loop; a nested loop's loads count in its outer loop too) and
the registers per thread. A loop whose loads are fewer at one level than at
another was unrolled less there: fewer loads in flight per thread. More
registers can mean fewer resident blocks. Usage:

  CPPINDUCTOR_NVRTC_LIBRARY=.../libnvrtc.so.13 \\
    python gpu_codegen/tools/sass_loops.py DIR [--levels off,min] [--ptxas PATH] [--nvdisasm PATH]

nvdisasm is not in the CUDA toolkit's nvcc packages; the PyPI wheel
nvidia-cuda-nvdisasm carries it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import re
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRELUDE = (ROOT / "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh").read_bytes()
# nvrtc_flags(90, {}, 1300) in gpu_codegen/runtime/nvrtc_compiler.cpp.
FLAGS = ["-arch=compute_90", "--std=c++17", "-default-device", "--fmad=true", "--ftz=false",
         "--prec-div=true", "--prec-sqrt=true", "--minimal", "-pch"]


def nvrtc_ptx(lib: ctypes.CDLL, source: bytes, flags: list[str], codegen_header: bytes) -> tuple[str, float]:
    prog = ctypes.c_void_p()
    headers = (ctypes.c_char_p * 2)(PRELUDE, codegen_header)
    names = (ctypes.c_char_p * 2)(b"cppinductor_cuda_prelude.cuh", b"cppinductor_cuda_codegen.cuh")
    start = time.perf_counter()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source, b"k.cu", 2, headers, names) == 0
    argv = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
    r = lib.nvrtcCompileProgram(prog, len(flags), argv)
    ms = (time.perf_counter() - start) * 1e3
    size = ctypes.c_size_t()
    if r != 0:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.value.decode())
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return buf.value.decode(), ms


def sass_of(ptx: str, ptxas: str, nvdisasm: str) -> tuple[str, list[int]]:
    """The SASS and each kernel's registers per thread."""
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d)
        (p / "k.ptx").write_text(ptx)
        info = subprocess.run([ptxas, "-arch=sm_90", "-O3", "-v", str(p / "k.ptx"), "-o", str(p / "k.cubin")],
                              check=True, capture_output=True, text=True).stderr
        sass = subprocess.run([nvdisasm, "-c", str(p / "k.cubin")], check=True, capture_output=True,
                              text=True).stdout
        return sass, [int(r) for r in re.findall(r"Used (\d+) registers", info)]


def loop_loads(sass: str) -> list[str]:
    """Loads of each loop as "<global>" or "<global>+<shared>s", in program order of the loops' heads."""
    lines = sass.splitlines()
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"^(\.L_x_\d+):", line.strip())
        if m:
            labels[m.group(1)] = i
    loops = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA[^`]*`\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i + 1) < i:
            head = labels[m.group(1)]
            g = sum("LDG" in lines[j] for j in range(head, i))
            sh = sum("LDS" in lines[j] for j in range(head, i))
            loops.append((head, f"{g}+{sh}s" if sh else str(g)))
    return [n for _, n in sorted(loops)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--levels", default="off,min")
    p.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    p.add_argument("--nvdisasm", default="nvdisasm")
    args = p.parse_args()
    lib = ctypes.CDLL(os.environ["CPPINDUCTOR_NVRTC_LIBRARY"])
    levels = args.levels.split(",")
    files = sorted(pathlib.Path(args.dir).glob("*.cu"))
    # The header the modules include, written beside them by both dumpers.
    codegen_header = (pathlib.Path(args.dir) / "cppinductor_cuda_codegen.cuh").read_bytes()
    print(f"{'module':60s} " + " ".join(f"{lv + ' ms':>8s} {'regs':>5s} {lv + ' loads/loop':28s}" for lv in levels))
    for f in files:
        cells = []
        for level in levels:
            flags = FLAGS + ([f"--Ofast-compile={level}"] if level != "off" else [])
            ptx, ms = nvrtc_ptx(lib, f.read_bytes(), flags, codegen_header)
            sass, regs = sass_of(ptx, args.ptxas, args.nvdisasm)
            cells.append(f"{ms:8.1f} {','.join(map(str, regs)):>5s} {' '.join(loop_loads(sass)):28s}")
        print(f"{f.stem[:60]:60s} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
