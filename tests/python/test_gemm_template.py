"""The GEMM template (gpu_codegen/prelude/cppinductor_cuda_gemm.cuh) compiles
for sm_90a in every tile configuration and epilogue gpu_codegen/tools/
gemm_probe.py measures, for both layouts of B and FP8, with no register spills
in the small-M and Hopper kernels' configurations (the ones meant to stream B
at full bandwidth, and the wgmma tiles that hold 128 accumulators a thread). Needs
the CUDA toolkit's nvcc (skipped without it); its results and speed are
checked on a GPU by gemm_probe.py (docs/gemm-templates.md)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "gpu_codegen/tools"))
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if pathlib.Path("/usr/local/cuda/bin/nvcc").exists() else None)

pytestmark = pytest.mark.skipif(NVCC is None, reason="needs the CUDA toolkit's nvcc")


@pytest.mark.parametrize("shape", ["m1", "m16_gelu", "m16_gelu_n", "m1_n", "m64_gelu", "m64_residual", "m8192_gelu",
                                   "m4096", "f8_m16", "f8_m64", "f8_m4096"])
def test_every_probe_configuration_compiles(shape, tmp_path):
    import gemm_probe

    m, _, _, epilogue, b_k_contiguous = gemm_probe.SHAPES[shape]
    fp8 = epilogue == "scaled_relu"
    tiles = gemm_probe.tiles_for(m, b_k_contiguous, fp8)
    src = tmp_path / "gemm.cu"
    src.write_text(gemm_probe.source(tiles, epilogue, b_k_contiguous))
    result = subprocess.run([NVCC, "-arch=sm_90a", "-std=c++17", f"-I{ROOT / 'gpu_codegen/prelude'}", "-cubin",
                             "-o", str(tmp_path / "gemm.cubin"), str(src), "-Xptxas", "-v"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    kernels = result.stderr.count("Compiling entry function")
    assert kernels == len(tiles), result.stderr[-2000:]
    # Per kernel: "Compiling entry function 'kN'", its properties' line, then its stack and spills.
    spills = {int(k): int(n) for k, n in re.findall(
        r"entry function 'k(\d+)'[^\n]*\n[^\n]*\n\s*\d+ bytes stack frame, (\d+) bytes spill stores", result.stderr)}
    streaming = [i for i, t in enumerate(tiles)
                 if isinstance(t, (gemm_probe.Skinny, gemm_probe.SkinnyN, gemm_probe.Swapped, gemm_probe.Wide))]
    assert streaming
    assert all(spills[i] == 0 for i in streaming), (spills, result.stderr[-3000:])
