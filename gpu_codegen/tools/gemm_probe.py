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

  PYTHONPATH=python python3 gpu_codegen/tools/gemm_probe.py [--json FILE] [--shapes m16,...] [--cold]

The epilogue is split into values and stores as the compiler prints it
(cppi_gemm::SplitEpilogue); CPPI_PROBE_PLAIN_EPILOGUE=1 gives one functor per
element instead, CPPI_PROBE_GEMM_HEADER=path another copy of the template.
Above 64 rows the configurations are the Hopper kernel for any M
(`cppi_gemm::gemm_tma`) and the mma.sync tile kernel.
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
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRELUDE = (ROOT / "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh").read_text()
GEMM = pathlib.Path(os.environ.get("CPPI_PROBE_GEMM_HEADER", ROOT / "gpu_codegen/prelude/cppinductor_cuda_gemm.cuh")).read_text()
FLAGS = ["-arch=compute_90a", "--std=c++17", "-default-device", "--fmad=true"]


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
    """A configuration of the tile kernel (`cppi_gemm::gemm`)."""
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

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32

    def grid(self, m: int, n: int, resident: int) -> tuple[int, int]:
        return math.ceil(m / self.bm) * math.ceil(n / self.bn), self.split_k

    def buffers(self, m: int, n: int, grid: tuple[int, int]) -> tuple[int, int]:
        """Floats of split-K workspace, ints of counters."""
        return self.split_k * m * n, grid[0]

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        a = self.bm * (self.bk + 8)
        b = self.bn * (self.bk + 8) if b_k_contiguous else self.bk * (self.bn + 8)
        return self.stages * (a + b) * 2

    def call(self, b_k_contiguous: bool) -> str:
        cfg = (f"cppi_gemm::Config<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, {self.warps_n}, {self.stages}, "
               f"{self.split_k}, {'true' if b_k_contiguous else 'false'}, false>")
        return f"cppi_gemm::gemm<{cfg}>"


@dataclass(frozen=True)
class Skinny:
    """A configuration of the small-M kernel (`cppi_gemm::gemm_skinny`; K-contiguous B only)."""
    mt: int
    nw: int
    warps: int
    unroll: int
    split_k: int
    prefetch: bool = False
    min_blocks: int = 1  # __launch_bounds__'s blocks per SM (registers per thread capped to fit them)

    @property
    def name(self) -> str:
        return (f"skinny_m{16 * self.mt}_n{8 * self.nw}_w{self.warps}_u{self.unroll}_k{self.split_k}"
                f"{'_pf' if self.prefetch else ''}{f'_b{self.min_blocks}' if self.min_blocks > 1 else ''}")

    @property
    def threads(self) -> int:
        return self.warps * 32

    def grid(self, m: int, n: int, resident: int) -> tuple[int, int]:
        return math.ceil(n / (8 * self.nw)), self.split_k

    def buffers(self, m: int, n: int, grid: tuple[int, int]) -> tuple[int, int]:
        return self.split_k * m * n, grid[0]

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        return self.warps * self.mt * self.nw * 4 * 32 * 4

    def call(self, b_k_contiguous: bool) -> str:
        assert b_k_contiguous
        return (f"cppi_gemm::gemm_skinny<cppi_gemm::SkinnyConfig<{self.mt}, {self.nw}, {self.warps}, {self.unroll}, "
                f"{self.split_k}, false, {'true' if self.prefetch else 'false'}>>")


@dataclass(frozen=True)
class Swapped:
    """A configuration of the Hopper kernel (`cppi_gemm::gemm_tma_swapped`: B by TMA, wgmma with B's rows on
    its 64-row side; either layout of B)."""
    mn: int
    consumers: int
    stages: int
    split_k: int
    boxes: int = 1
    cluster: int = 1
    fp8: bool = False  # A and B float8_e4m3fn (torch._scaled_mm's)

    @property
    def name(self) -> str:
        return f"tma_n{self.mn}_c{self.consumers}_s{self.stages}_k{self.split_k}_x{self.boxes}_cl{self.cluster}"

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    def grid(self, m: int, n: int, resident: int) -> tuple[int, int]:
        return math.ceil(n / (64 * self.consumers)), self.split_k * self.cluster

    def buffers(self, m: int, n: int, grid: tuple[int, int]) -> tuple[int, int]:
        return self.split_k * m * n, grid[0]

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        return self.stages * self.boxes * (64 * self.consumers + self.mn) * 128 + 2 * self.stages * 8 + 1024

    def call(self, b_k_contiguous: bool) -> str:
        return (f"cppi_gemm::gemm_tma_swapped<cppi_gemm::SwappedConfig<{self.mn}, {self.consumers}, {self.stages}, "
                f"{self.split_k}, {self.boxes}, {self.cluster}, false, {'true' if b_k_contiguous else 'false'}, "
                f"{'true' if self.fp8 else 'false'}>>")


@dataclass(frozen=True)
class Wide:
    """A configuration of the Hopper kernel for any M (`cppi_gemm::gemm_tma`: A and B by TMA, tiles of
    64 x consumers rows and bn columns, persistent blocks)."""
    bn: int
    consumers: int
    stages: int
    cluster: int = 1  # 2: pairs of blocks along M, each loading half of B for both
    fp8: bool = False
    group_m: int = 8
    staged: bool = True  # the epilogue through shared memory, 32 columns of a row per warp

    @property
    def name(self) -> str:
        return (f"wide_{64 * self.consumers}x{self.bn}_s{self.stages}_cl{self.cluster}_g{self.group_m}"
                f"{'' if self.staged else '_direct'}")

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    def grid(self, m: int, n: int, resident: int) -> tuple[int, int]:
        """Persistent: one block per resident slot. `resident` is blocks per SM, or with a cluster the clusters
        that run at once (launch_grid)."""
        tiles = math.ceil(m / (64 * self.consumers * self.cluster)) * math.ceil(n / self.bn)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        return min(tiles, resident * sms if self.cluster == 1 else resident), self.cluster

    def buffers(self, m: int, n: int, grid: tuple[int, int]) -> tuple[int, int]:
        return 0, 1

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        staged = 4 * self.consumers * 16 * 33 * 4 if self.staged else 0
        return self.stages * (64 * self.consumers + self.bn) * 128 + staged + 2 * self.stages * 8 + 1024

    def call(self, b_k_contiguous: bool) -> str:
        return (f"cppi_gemm::gemm_tma<cppi_gemm::TmaConfig<{self.bn}, {self.consumers}, {self.stages}, {self.cluster}, false, "
                f"{'true' if b_k_contiguous else 'false'}, {'true' if self.fp8 else 'false'}, {self.group_m}, "
                f"{'true' if self.staged else 'false'}>>")


def tensor_map(t: torch.Tensor, box_rows: int):
    """A CUtensorMap over a row-major 2D bfloat16 or float8 tensor (row stride t.stride(0)): boxes of 128
    bytes (the 128-byte swizzle) x box_rows rows, zeros outside. Returns the 64-byte aligned buffer."""
    raw = (ctypes.c_uint8 * 192)()
    addr = (ctypes.addressof(raw) + 63) // 64 * 64
    size = t.element_size()
    dims = (ctypes.c_uint64 * 2)(t.shape[1], t.shape[0])
    strides = (ctypes.c_uint64 * 1)(t.stride(0) * size)
    box = (ctypes.c_uint32 * 2)(128 // size, box_rows)
    ones = (ctypes.c_uint32 * 2)(1, 1)
    # BFLOAT16 = 9 (UINT8 = 0 for float8), INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_L2_256B = 3,
    # OOB_FILL_NONE = 0
    _check(_lib("cuda").cuTensorMapEncodeTiled(ctypes.c_void_p(addr), 9 if size == 2 else 0, 2,
                                               ctypes.c_void_p(t.data_ptr()), dims, strides, box, ones, 0, 3, 3, 0),
           "cuTensorMapEncodeTiled")
    return raw, ctypes.c_void_p(addr)


@dataclass(frozen=True)
class SkinnyN:
    """A configuration of the small-M kernel for N-contiguous B (`cppi_gemm::gemm_skinny_n`)."""
    vec: int
    warps: int
    unroll: int
    min_blocks: int = 1

    @property
    def name(self) -> str:
        return f"skinny_n_v{self.vec}_w{self.warps}_u{self.unroll}{f'_b{self.min_blocks}' if self.min_blocks > 1 else ''}"

    @property
    def threads(self) -> int:
        return self.warps * 32

    def grid(self, m: int, n: int, resident: int) -> tuple[int, int]:
        return math.ceil(n / (8 * self.vec)), 1

    def shared_bytes(self, b_k_contiguous: bool) -> int:
        return self.warps * self.vec * 4 * 32 * 4

    def buffers(self, m: int, n: int, grid: tuple[int, int]) -> tuple[int, int]:
        return 0, 1

    def call(self, b_k_contiguous: bool) -> str:
        assert not b_k_contiguous
        return f"cppi_gemm::gemm_skinny_n<cppi_gemm::SkinnyNConfig<{self.vec}, {self.warps}, {self.unroll}, false>>"


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
    # No store at all (the result is never finite-checked: NaN alone is stored): the kernel's time without
    # its epilogue's stores, which the probe times but does not check.
    "sink": ("if (!(v != v)) return; float x = v;", lambda a, b, e: a @ b),
    # FP8 (a, b float8_e4m3fn): torch._scaled_mm with scales 1/64 and 1/2 (`e`) and a bfloat16 result, then relu.
    "scaled_relu": ("float x = cppi_bf16_bits_to_float(cppi_float_to_bf16_bits(v * (0.015625f * 0.5f)));"
                    " x = x > 0.f ? x : 0.f;",
                    lambda a, b, e: torch.relu(torch._scaled_mm(a, b, e[0], e[1], out_dtype=torch.bfloat16))),
}


# The epilogue as one functor per element (the compiler's before stop 61), not split into values and stores.
PLAIN_EPILOGUE = os.environ.get("CPPI_PROBE_PLAIN_EPILOGUE") == "1"


def source(tiles: list[Tile | Skinny | Swapped | SkinnyN], epilogue: str, b_k_contiguous: bool) -> str:
    body = EPILOGUES[epilogue][0]
    out = ['#include "cppinductor_cuda_gemm.cuh"']
    if PLAIN_EPILOGUE:
        out += ["struct Epi { const uint16_t* extra; uint16_t* out; int64_t N;",
                "  __device__ __forceinline__ void operator()(int64_t m, int64_t n, float v) const {",
                f"    {body}", "    out[m * N + n] = cppi_float_to_bf16_bits(x);", "  }", "};",
                "#define EPI(extra, out, N) Epi{extra, out, N}"]
    else:
        # As the compiler prints it: the values of a thread's elements, then their stores ("sink" stores NaN only).
        value_body = "float x = v;" if epilogue == "sink" else body
        out += ["struct Value { const uint16_t* extra; int64_t N;",
                "  __device__ __forceinline__ uint16_t operator()(int64_t m, int64_t n, float v) const {",
                f"    {value_body}", "    return cppi_float_to_bf16_bits(x);", "  }", "};",
                "struct Store { uint16_t* out; int64_t N;",
                "  __device__ __forceinline__ void operator()(int64_t m, int64_t n, uint16_t x) const {",
                f"    {'if ((x & 0x7fff) > 0x7f80) ' if epilogue == 'sink' else ''}out[m * N + n] = x;", "  }", "};",
                "#define EPI(extra, out, N) cppi_gemm::SplitEpilogue<Value, Store>{Value{extra, N}, Store{out, N}}"]
    for i, t in enumerate(tiles):
        if isinstance(t, Wide):
            cluster = f" __cluster_dims__(1, {t.cluster}, 1)" if t.cluster > 1 else ""
            out += [f"extern \"C\" __global__ void __launch_bounds__({t.threads}){cluster} k{i}(",
                    "    const __grid_constant__ cppi_gemm::TensorMap a_map, const __grid_constant__ cppi_gemm::TensorMap"
                    " b_map, const uint16_t* extra, uint16_t* out, int64_t M, int64_t N, int64_t K) {",
                    f"  {t.call(b_k_contiguous)}(a_map, b_map, M, N, K, EPI(extra, out, N));", "}"]
            continue
        if isinstance(t, Swapped):
            cluster = f" __cluster_dims__(1, {t.cluster}, 1)" if t.cluster > 1 else ""
            out += [f"extern \"C\" __global__ void __launch_bounds__({t.threads}){cluster} k{i}(",
                    "    const __grid_constant__ cppi_gemm::TensorMap a_map, const __grid_constant__ cppi_gemm::TensorMap"
                    " b_map, const uint16_t* extra, uint16_t* out, int64_t M, int64_t N, int64_t K, float* ws, int* ctr) {",
                    f"  {t.call(b_k_contiguous)}(a_map, b_map, M, N, K, EPI(extra, out, N), ws, ctr);", "}"]
            continue
        bounds = f"{t.threads}, {t.min_blocks}" if getattr(t, "min_blocks", 1) > 1 else f"{t.threads}"
        out += [f"extern \"C\" __global__ void __launch_bounds__({bounds}) k{i}(",
                "    const uint16_t* a, const uint16_t* b, const uint16_t* extra, uint16_t* out, int64_t M,"
                " int64_t N, int64_t K, int64_t lda, int64_t ldb, float* ws, int* ctr) {",
                f"  {t.call(b_k_contiguous)}(a, b, M, N, K, lda, ldb, EPI(extra, out, N)"
                f"{'' if isinstance(t, SkinnyN) else ', ws, ctr'});", "}"]
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


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


def launch_grid(fn, tile: Tile | Skinny | Swapped | SkinnyN | Wide, shared: int, m: int, n: int) -> tuple[int, int]:
    """The tile's grid; a clustered Wide tile is handed the clusters that can run at once instead of the
    blocks per SM."""
    resident = ctypes.c_int()
    _check(_lib("cuda").cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(resident), fn, tile.threads,
                                                                    ctypes.c_size_t(shared)), "occupancy")
    if isinstance(tile, Wide) and tile.cluster > 1:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        config = _LaunchConfig((ctypes.c_uint * 3)(sms // tile.cluster, tile.cluster, 1),
                               (ctypes.c_uint * 3)(tile.threads, 1, 1), shared, None, None, 0)
        _check(_lib("cuda").cuOccupancyMaxActiveClusters(ctypes.byref(resident), fn, ctypes.byref(config)),
               "cluster occupancy")
        print(f"    {tile.name}: {resident.value} clusters at once", flush=True)
    return tile.grid(m, n, resident.value)


def launcher(fn, tile: Tile | Skinny | Swapped | SkinnyN, shared: int, a, b, extra, out, ws, ctr):
    m, k = a.shape
    n = b.shape[1]
    lda = a.stride(0)
    ldb = b.stride(1) if b.stride(0) == 1 else b.stride(0)
    tail = [ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(ctr.data_ptr())]
    maps = []
    if isinstance(tile, (Swapped, Wide)):
        wide = isinstance(tile, Wide)
        b_rows = (tile.bn // tile.cluster if wide else 64 * tile.consumers) if b.stride(0) == 1 else 64
        b_map = tensor_map(b.t(), b_rows) if b.stride(0) == 1 else tensor_map(b, 64)
        maps = [tensor_map(a, 64 * tile.consumers if wide else tile.mn), b_map]
        values = [ctypes.c_void_p(t.data_ptr()) for t in (extra, out)] + [ctypes.c_int64(v) for v in (m, n, k)]
        values += [] if wide else tail
        pointers = [mp[1] for mp in maps] + [ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values]
    else:
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (a, b, extra, out)]
        ints = [ctypes.c_int64(v) for v in (m, n, k, lda, ldb)]
        values = ptrs + ints + tail
        pointers = [ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values]
    args = (ctypes.c_void_p * len(pointers))(*pointers)
    threads = tile.threads
    grid = launch_grid(fn, tile, shared, m, n)

    def run():
        stream = torch.cuda.current_stream().cuda_stream
        _check(_lib("cuda").cuLaunchKernel(fn, grid[0], grid[1], 1, threads, 1, 1, shared, ctypes.c_void_p(stream), args,
                                   None), "cuLaunchKernel")
        return out

    run.keep = (values, maps, a, b, extra, out, ws, ctr)  # what the launches point at must outlive them
    return run


def skinny_for(m: int) -> list[Skinny]:
    """Small-M configurations: bytes of B in flight per warp (NW x UNROLL x 512) against the
    registers A's fragments take at larger M (no spills: tests/python/test_gemm_template.py)."""
    mt = math.ceil(m / 16)
    if mt == 1:
        shapes = ((4, 8, 4, 1), (2, 8, 4, 1), (4, 4, 4, 1), (4, 8, 4, 2), (2, 4, 4, 2), (4, 8, 2, 1))
        variants = [Skinny(mt, nw, w, u, k, pf) for nw, w, u, k in shapes for pf in (False, True)]
        variants += [Skinny(mt, 4, 8, 3, 1, pf, 2) for pf in (False, True)] + [Skinny(mt, 2, 8, 4, 1, True, 2)]
    else:
        shapes = ((4, 8, 2, 1), (2, 8, 2, 1), (4, 4, 2, 1), (4, 8, 2, 2), (2, 4, 2, 2), (8, 8, 1, 1))
        variants = [Skinny(mt, nw, w, u, k) for nw, w, u, k in shapes] + [Skinny(mt, 4, 8, 2, 1, True)]
    return [v for v in variants if mt * v.nw * 4 % v.warps == 0]


def swapped_for(m: int) -> list[Swapped]:
    """Hopper kernel configurations: stages of bytes in flight, warpgroups per block (A's reuse) and
    K splits (the grid's waves)."""
    mn = next(v for v in (8, 16, 32, 64) if v >= m)
    shapes = ((1, 6, 1, 2, 1), (1, 4, 1, 2, 1), (2, 3, 1, 2, 1), (1, 6, 1, 2, 2), (1, 4, 1, 2, 2), (1, 3, 1, 2, 2),
              (2, 3, 1, 2, 2), (1, 3, 1, 2, 4), (1, 2, 1, 2, 4), (2, 2, 1, 2, 4), (1, 8, 1, 1, 2), (1, 2, 1, 4, 2),
              (1, 4, 2, 2, 2))
    configs = [Swapped(mn, c, st, k, x, cl) for c, st, k, x, cl in shapes]
    return [c for c in configs if c.shared_bytes(True) <= 227 * 1024]


def skinny_n_for(m: int) -> list[SkinnyN]:
    if m > 16:
        return []
    return [SkinnyN(4, 8, 4), SkinnyN(8, 8, 2), SkinnyN(4, 8, 2), SkinnyN(8, 8, 4), SkinnyN(4, 4, 4),
            SkinnyN(4, 8, 4, 2), SkinnyN(4, 16, 2)]


def wide_for(fp8: bool) -> list[Wide]:
    """Configurations of the Hopper kernel for any M: tile shapes (the waves they leave, the bytes per
    FLOP they read) and stages."""
    if fp8:
        return [Wide(128, 2, 6, 2, True), Wide(128, 2, 6, 2, True, staged=False), Wide(128, 2, 6, 1, True),
                Wide(128, 2, 6, 1, True, staged=False), Wide(128, 2, 4, 2, True), Wide(128, 1, 8, 2, True)]
    return [Wide(256, 2, 4, 2), Wide(256, 2, 4, 2, staged=False), Wide(256, 2, 4), Wide(256, 2, 4, staged=False),
            Wide(128, 2, 6, 2), Wide(128, 2, 6, 2, staged=False), Wide(256, 2, 3, 2), Wide(128, 1, 8, 2),
            Wide(256, 1, 5, 2), Wide(64, 2, 8)]


def tiles_for(m: int, b_k_contiguous: bool = True, fp8: bool = False) -> list[Tile | Skinny | Swapped | SkinnyN | Wide]:
    """The configurations probed at M = m (FP8: the Hopper kernels' alone)."""
    if m > 64:
        return wide_for(fp8) + ([] if fp8 else _tile_configs(m))
    if fp8:
        return [replace(t, fp8=True) for t in swapped_for(m)]
    skinny = (swapped_for(m) + (skinny_for(m) if b_k_contiguous else skinny_n_for(m))) if m <= 64 else []
    return skinny + _tile_configs(m)


def _tile_configs(m: int) -> list[Tile]:
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


def in_turn(fns: list):
    """A function that calls the next of `fns` on each call (the cold-weights timing)."""
    turn = [0]

    def run():
        fn = fns[turn[0] % len(fns)]
        turn[0] += 1
        return fn()

    return run


def probe(m: int, k: int, n: int, epilogue: str, b_k_contiguous: bool, cold: bool = False) -> dict:
    """`cold`: each timed call reads its own copy of B, and the copies are
    twice the L2 and more, so B comes from memory as a model's weights do
    (otherwise the replays find B in the L2 from the call before)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16
    fp8 = epilogue == "scaled_relu"
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=gen) / (1 if fp8 else math.sqrt(k))
    if fp8:
        a, w = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    b = w.t() if b_k_contiguous else w.t().contiguous()
    extra = torch.randn(n if epilogue == "bias_gelu" else m * n, device="cuda", dtype=dt, generator=gen)
    if epilogue == "residual":
        extra = extra.view(m, n)
    if fp8:  # the scales, each a tensor of its own on the device before any capture
        extra = (torch.tensor(0.015625, device="cuda"), torch.tensor(0.5, device="cuda"))
    reference_fn = EPILOGUES[epilogue][1]
    expected = reference_fn(a, b, extra)
    one = torch.tensor(1.0, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = math.ceil(2 * l2 / (b.element_size() * n * k)) if cold else 0
    bs = [b] + [b.clone(memory_format=torch.preserve_format) for _ in range(copies)]
    tiles = tiles_for(m, b_k_contiguous, fp8)
    ptx, nvrtc_s = compile_ptx(source(tiles, epilogue, b_k_contiguous))
    module = Module(ptx)
    fns = {"eager": in_turn([lambda b=b: reference_fn(a, b, extra) for b in bs]),
           "cublas_only": in_turn([(lambda b=b: torch._scaled_mm(a, b, one, one, out_dtype=dt)) if fp8
                                   else (lambda b=b: a @ b) for b in bs])}
    torch._dynamo.reset()
    inductor = torch.compile(reference_fn)
    inductor(a, b, extra)
    fns["inductor"] = in_turn([lambda b=b: inductor(a, b, extra) for b in bs])
    errors = {}
    for i, t in enumerate(tiles):
        shared = t.shared_bytes(b_k_contiguous)
        out = torch.empty(m, n, device="cuda", dtype=dt)
        fn = module.function(f"k{i}", shared)
        ws_floats, counters = t.buffers(m, n, launch_grid(fn, t, shared, m, n))
        ws = torch.empty(ws_floats, device="cuda", dtype=torch.float32)
        ctr = torch.zeros(counters, device="cuda", dtype=torch.int32)
        runs = [launcher(fn, t, shared, a, b, extra[0] if fp8 else extra, out, ws, ctr) for b in bs]
        run = runs[0]
        for _ in range(2):  # twice: the split-K counters must be back at zero
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            if epilogue != "sink" and not torch.allclose(out.float(), expected.float(), rtol=1.6e-2, atol=1e-2):
                errors[t.name] = float((out.float() - expected.float()).abs().max())
        if t.name not in errors:
            fns[t.name] = in_turn(runs)
    times = time_all(fns)
    best = min((v, k) for k, v in times.items() if k not in ("eager", "cublas_only", "inductor"))
    flops = 2 * m * n * k
    return {"shape": f"{m}x{k}x{n}", "n": n, "k": k, "epilogue": epilogue, "cold": cold, "b": "K-contiguous" if b_k_contiguous else "N-contiguous",
            "nvrtc_s": nvrtc_s, "kernels": len(tiles), "wrong": errors, "us": times, "best": best[1],
            "best_us": best[0], "x_eager": times["eager"] / best[0], "x_inductor": times["inductor"] / best[0],
            "tflops_best": flops / best[0] / 1e6, "b_bytes": b.element_size() * n * k}


SHAPES = {  # name: (m, k, n, epilogue, b K-contiguous)
    "m1": (1, 4096, 4096, "relu", True),
    "m16": (16, 4096, 4096, "relu", True),
    "m16_gelu": (16, 4096, 11008, "bias_gelu", True),
    "m1_gelu": (1, 4096, 11008, "bias_gelu", True),
    "m16_gelu_n": (16, 4096, 11008, "bias_gelu", False),
    "m1_n": (1, 4096, 4096, "relu", False),
    "m16_n": (16, 4096, 4096, "relu", False),
    "m32": (32, 4096, 4096, "relu", True),
    "m32_gelu": (32, 4096, 11008, "bias_gelu", True),
    "m64": (64, 4096, 4096, "relu", True),
    "m64_gelu": (64, 4096, 11008, "bias_gelu", True),
    "m32_residual_k": (32, 11008, 4096, "residual", True),
    "m16_residual": (16, 11008, 4096, "residual", True),
    "m64_residual": (64, 11008, 4096, "residual", False),
    "m64_n": (64, 4096, 4096, "relu", False),
    "m32_gelu_n": (32, 4096, 11008, "bias_gelu", False),
    "m64_residual_k": (64, 11008, 4096, "residual", True),
    "m8192_gelu": (8192, 4096, 11008, "bias_gelu", True),
    "m4096": (4096, 4096, 4096, "relu", False),
    "m4096_k": (4096, 4096, 4096, "relu", True),
    "m4096_sink": (4096, 4096, 4096, "sink", True),
    "m300_odd": (300, 1032, 1000, "residual", True),
    "m300_odd_n": (300, 1032, 1000, "bias_gelu", False),
    "f8_m300_odd": (300, 1040, 1008, "scaled_relu", True),
    "m128_gelu": (128, 4096, 11008, "bias_gelu", True),
    "m256": (256, 4096, 4096, "relu", True),
    "m8192_n": (8192, 4096, 4096, "relu", False),
    "f8_m4096": (4096, 4096, 4096, "scaled_relu", True),
    "f8_m8192": (8192, 8192, 8192, "scaled_relu", True),
    "f8_m16": (16, 4096, 4096, "scaled_relu", True),
    "f8_m64": (64, 4096, 4096, "scaled_relu", True),
    "f8_m1_up": (1, 4096, 11008, "scaled_relu", True),
    "f8_m32_up": (32, 4096, 11008, "scaled_relu", True),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--json")
    p.add_argument("--cold", action="store_true", help="B from memory, not from the L2 (see probe)")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    results = []
    for name in args.shapes.split(","):
        r = probe(*SHAPES[name], cold=args.cold)
        results.append(r)
        us = r["us"]
        print(f"{name:14s} {r['shape']:>16s} {r['epilogue']:9s} {r['b']:12s} nvrtc {r['nvrtc_s']:.2f}s/{r['kernels']} "
              f"eager {us['eager']:8.1f} cublas {us['cublas_only']:8.1f} inductor {us['inductor']:8.1f} "
              f"best {r['best_us']:8.1f} ({r['best']}) x eager {r['x_eager']:.2f} x ind {r['x_inductor']:.2f} "
              f"{r['tflops_best']:.0f} TFLOP/s, B at {r['b_bytes'] / r['best_us'] / 1e6:.2f} TB/s wrong {r['wrong'] or '-'}", flush=True)
        others = sorted((v, k) for k, v in us.items() if k not in ("eager", "cublas_only", "inductor"))
        print("    " + " ".join(f"{k}={v:.1f}" for v, k in others), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
