"""The GEMM suite (`--suite gemm`): matmuls with the epilogues models put
after them, at the shapes of GPT-2- and LLaMA-class layers, M from one token
to a large batch.

- `mm_relu`: relu(a @ b), K = N = the hidden width (an attention projection);
- `addmm_gelu`: gelu(x @ w + bias), the MLP's up-projection (hidden -> MLP width);
- `addmm_silu`: silu(x @ w + bias), the same shape;
- `mm_residual`: r + x @ w, the MLP's down-projection with the residual added;
- `linear_silu`, `linear_residual`: silu(F.linear(x, w)) and r + F.linear(x, w),
  a LLaMA layer's gate and down projections: no bias, and the weight as nn.Linear
  stores it ([N, K], each row K-contiguous), where the others' w is [K, N];
- `bmm_scale`: (q @ k^T) * scale over heads, attention scores;
- `scaled_mm_relu` (CUDA only; compute capability 8.9 or newer): relu of an
  FP8 e4m3 `torch._scaled_mm` with per-tensor scales and a bfloat16 result.

Names end in M: `_m1`, `_m16`, `_m64` (decoding, small batches) or `_large`
(Sizes.gemm: 8192 x 4096 -> 11008 on CUDA, LLaMA-7B's; 512 x 1024 -> 2816 on
the CPU). Inputs take the bench's --dtype (FP8 rows convert from it). Rows
report TFLOP/s: 2 * M * N * K (times the batch) over the time.
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F

from .workloads import Case, Sizes, Workload, _generator, _inference, _randn

_TOLERANCE = (2e-3, 2e-3)  # float32 sums of K terms reordered; half types get bench.tolerance's
_SMALL_M = (1, 16, 64)


def mm_relu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ b)


def addmm_gelu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(torch.addmm(bias, x, w))


def addmm_silu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.silu(torch.addmm(bias, x, w))


def mm_residual(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return r + x @ w


def linear_silu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.silu(F.linear(x, w))


def linear_residual(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return r + F.linear(x, w)


def bmm_scale(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))


def scaled_mm_relu(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16))


def _flops(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * batch * m * n * k


def _matmul_case(fn: Callable, m: Optional[int], down: bool, extra: str,
                 linear: bool = False) -> Callable[[Sizes, str, torch.dtype], Case]:
    """fn(x[M, K], w[K, N], <extra>), extra "" (K = N = hidden), "bias" or
    "residual" (up-projection, or with `down` the down-projection); M None:
    the large M. `linear`: w is [N, K] (nn.Linear's weight) and extra "" the
    up-projection."""

    def build(s: Sizes, device: str, dtype: torch.dtype) -> Case:
        large, hidden, width = s.gemm
        rows = large if m is None else m
        k, n = (width, hidden) if down else (hidden, width) if extra or linear else (hidden, hidden)
        gen = _generator(device)
        # Scaled so outputs stay near 1 whatever K is: half types keep their precision.
        x = _randn(gen, (rows, k), device, dtype)
        w = _randn(gen, (n, k) if linear else (k, n), device, dtype) / math.sqrt(k)
        args = [x, w]
        if extra == "bias":
            args.append(_randn(gen, (n,), device, dtype))
        elif extra == "residual":
            args.append(_randn(gen, (rows, n), device, dtype))
        return Case(f"{rows}x{k}x{n}", _inference(fn, tuple(args)), flops=_flops(rows, n, k))

    return build


def _bmm_case(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    b, h, d, t = s.attention
    gen = _generator(device)
    q = _randn(gen, (b, h, t, d), device, dtype)
    k = _randn(gen, (b, h, t, d), device, dtype)
    return Case(f"{b * h}x{t}x{d}x{t}", _inference(bmm_scale, (q, k)), flops=_flops(t, t, d, b * h))


def _scaled_mm_case(m: Optional[int]) -> Callable[[Sizes, str, torch.dtype], Case]:
    def build(s: Sizes, device: str, dtype: torch.dtype) -> Case:
        if torch.cuda.get_device_capability(torch.device(device)) < (8, 9):
            raise RuntimeError("FP8 _scaled_mm needs compute capability 8.9 or newer")
        large, hidden, _ = s.gemm
        rows = large if m is None else m
        gen = _generator(device)
        a = _randn(gen, (rows, hidden), device, dtype).to(torch.float8_e4m3fn)
        b = _randn(gen, (hidden, hidden), device, dtype).to(torch.float8_e4m3fn).t()  # column-major, as it must be
        scale_a = torch.tensor(1.0 / math.sqrt(hidden), device=device)
        scale_b = torch.tensor(0.5, device=device)
        return Case(f"{rows}x{hidden}x{hidden} e4m3", _inference(scaled_mm_relu, (a, b, scale_a, scale_b)),
                    flops=_flops(rows, hidden, hidden))

    return build


def workloads() -> List[Workload]:
    """The suite's workloads, in table order."""
    out = []

    def add(name: str, description: str, build: Callable, devices: Optional[tuple] = None) -> None:
        out.append(Workload(name, "gemm", description, build, True, _TOLERANCE, suite="gemm", devices=devices))

    def suffix(m: Optional[int]) -> str:
        return "_large" if m is None else f"_m{m}"

    for m in _SMALL_M + (None,):
        add("mm_relu" + suffix(m), "relu(a @ b)", _matmul_case(mm_relu, m, False, ""))
        add("addmm_gelu" + suffix(m), "gelu(x @ w + bias), MLP up-projection", _matmul_case(addmm_gelu, m, False, "bias"))
    for m in (16, None):
        add("addmm_silu" + suffix(m), "silu(x @ w + bias)", _matmul_case(addmm_silu, m, False, "bias"))
        add("mm_residual" + suffix(m), "r + x @ w, MLP down-projection", _matmul_case(mm_residual, m, True, "residual"))
    for m in (1, 16, 64):
        add("linear_silu" + suffix(m), "silu(F.linear(x, w)), LLaMA's gate projection",
            _matmul_case(linear_silu, m, False, "", linear=True))
        add("linear_residual" + suffix(m), "r + F.linear(x, w), LLaMA's down-projection",
            _matmul_case(linear_residual, m, True, "residual", linear=True))
    add("bmm_scale", "(q @ k^T) * scale, attention scores", _bmm_case)
    for m in (16, 64, None):
        add("scaled_mm_relu" + suffix(m), "relu(_scaled_mm(a, b)), FP8 e4m3, bfloat16 out", _scaled_mm_case(m),
            devices=("cuda",))
    return out
