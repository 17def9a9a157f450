"""max-autotune's GEMM epilogues on CUDA (backend/gemm_choices.h): a matmul
whose result only one pointwise kernel reads is also compiled as one GEMM
kernel with that kernel as its epilogue (gpu_codegen/codegen/gemm_epilogue.h),
timed at the first call against cuBLAS followed by the kernel. Every GEMM
candidate must match cuBLAS + the kernel (none dropped for its results), the
call's results equal eager's whichever wins, the winner is cached for the next
process, and operands that are not as compiled run the extern. The printed
source is checked without a GPU in tests/cpp/gpu_codegen/gemm_epilogue_test.cpp."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_map

from cppinductor import debug

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"),
              pytest.mark.usefixtures("fresh_tuning_cache")]

EXTERN = "cuBLAS, then the kernel"
# sm_90 (H100, H200) adds the wgmma kernel fed by the copy engine, up to 64 rows.
SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def up_projection(x, w):
    return F.gelu(x @ w.t())


def residual(x, w, r):
    return r + x @ w.t()


def operands(m: int, k: int, n: int, dtype: torch.dtype):
    gen = torch.Generator(device="cuda").manual_seed(m)
    x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=dtype, generator=gen) / math.sqrt(k)
    return x, w


def gemm_reports(record) -> list[dict]:
    return [t for t in record.autotune if t["kernel"].endswith("with its matmul")]


def run(fn, args, calls: int = 3):
    with debug.recording() as records:
        compiled = torch.compile(fn, backend="cppinductor", mode="max-autotune-no-cudagraphs")
        expected = tree_map(lambda t: t.to(args[0].dtype), fn(*(a.double() for a in args)))
        for _ in range(calls):
            torch.testing.assert_close(compiled(*args), expected, rtol=2e-2, atol=2e-2)
    (record,) = records
    return record


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_matmul_and_its_epilogue_are_timed_fused_and_match_eager(m, dtype):
    record = run(up_projection, operands(m, 512, 1024, dtype))
    (report,) = gemm_reports(record)
    assert report["source"] == "measured", report
    labels = [c["label"] for c in report["candidates"]]
    assert labels[0] == EXTERN and sum(label.startswith("gemm_skinny") for label in labels) == 3
    assert sum(label.startswith("gemm_tma_swapped") for label in labels) == (3 if SM90 else 0)
    assert len(labels) == (7 if SM90 else 4)
    for c in report["candidates"]:
        assert not (c["dropped"] or "").startswith(("output", "did not run")), report  # wrong or broken
    assert report["winner"] in labels


@pytest.mark.skipif(not SM90, reason="the wgmma kernel is sm_90's")
@pytest.mark.parametrize("m,k,n", [(33, 520, 1000), (64, 512, 1024), (24, 4096, 192)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_wgmma_kernel_up_to_64_rows(m, k, n, dtype):
    # Rows, k and columns past the tiles' (33 of 64, 520 of 576, 1000 of 1024)
    # are the copy engine's zeros; every candidate must match cuBLAS + the kernel.
    record = run(up_projection, operands(m, k, n, dtype))
    (report,) = gemm_reports(record)
    labels = [c["label"] for c in report["candidates"]]
    assert labels[0] == EXTERN and len(labels) == 4 and all(x.startswith("gemm_tma_swapped") for x in labels[1:])
    for c in report["candidates"]:
        assert not (c["dropped"] or "").startswith(("output", "did not run")), report
    x, w = operands(m, k, n, dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    torch._dynamo.reset()
    (report,) = gemm_reports(run(linear_bias_silu, (x, w, bias)))
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report


@pytest.mark.skipif(not SM90, reason="the wgmma kernel is sm_90's")
@pytest.mark.parametrize("m", [40, 64])
def test_the_wgmma_kernel_with_n_contiguous_weights(m):
    # w stored K x N (GPT-2's Conv1D): wgmma reads B's boxes as its transposed operand.
    x, w = operands(m, 520, 1000, torch.bfloat16)
    w = w.t().contiguous()
    bias = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
    (report,) = gemm_reports(run(conv1d_bias_gelu, (x, w, bias)))
    labels = [c["label"] for c in report["candidates"]]
    assert len(labels) == 4 and all(label.startswith("gemm_tma_swapped") for label in labels[1:]), labels
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report


@pytest.mark.parametrize("m", [16, 48])
def test_under_cuda_graphs(m):
    # mode="max-autotune": the first call tunes, later calls replay the winner's graph.
    if m > 16 and not SM90:
        pytest.skip("more than 16 rows: the wgmma kernel, sm_90's")
    x, w = operands(m, 512, 1024, torch.bfloat16)
    with debug.recording() as records:
        compiled = torch.compile(up_projection, backend="cppinductor", mode="max-autotune")
        expected = up_projection(x.double(), w.double()).to(x.dtype)
        for _ in range(4):
            torch.testing.assert_close(compiled(x, w), expected, rtol=2e-2, atol=2e-2)
    assert len(gemm_reports(records[0])) == 1


def linear_bias_silu(x, w, bias):
    return F.silu(F.linear(x, w, bias))


@pytest.mark.parametrize("m", [1, 16])
def test_addmm_adds_its_bias_before_the_rounding(m):
    x, w = operands(m, 512, 1024, torch.bfloat16)
    bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    (report,) = gemm_reports(run(linear_bias_silu, (x, w, bias)))
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report


def conv1d_relu(x, w):
    return torch.relu(x @ w)


def conv1d_bias_gelu(x, w, bias):
    return F.gelu(torch.addmm(bias, x, w))


@pytest.mark.parametrize("m", [1, 16])
def test_n_contiguous_weights(m):
    # w stored K x N (GPT-2's Conv1D): the N-contiguous small-M kernel.
    x, w = operands(m, 512, 1024, torch.bfloat16)
    w = w.t().contiguous()
    (report,) = gemm_reports(run(conv1d_relu, (x, w)))
    labels = [c["label"] for c in report["candidates"]]
    assert sum(label.startswith("gemm_skinny_n") for label in labels) == 3, labels
    assert sum(label.startswith("gemm_tma_swapped") for label in labels) == (3 if SM90 else 0), labels
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report
    bias = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    (report,) = gemm_reports(run(conv1d_bias_gelu, (x, w, bias)))
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report


def test_a_residual_epilogue():
    x, w = operands(8, 1024, 512, torch.bfloat16)
    r = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16)
    (report,) = gemm_reports(run(residual, (x, w, r)))
    assert all(not (c["dropped"] or "").startswith("output") for c in report["candidates"]), report


def scaled_relu(a, b, scale_a, scale_b):
    return torch.relu(torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16))


def scaled_bias_gelu(a, b, scale_a, scale_b, bias):
    return F.gelu(torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.bfloat16))


@pytest.mark.skipif(not SM90, reason="the FP8 wgmma kernel is sm_90's")
@pytest.mark.parametrize("m", [16, 48, 64])
@pytest.mark.parametrize("scales", ["one", "per_row", "bias"])
def test_fp8_scaled_mm_and_its_epilogue(m, scales):
    # torch._scaled_mm needs float8_e4m3fn operands in multiples of 16 and B column-major.
    gen = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, 528, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(1008, 528, device="cuda", generator=gen).to(torch.float8_e4m3fn).t()
    if scales == "per_row":
        args = (a, b, torch.rand(m, 1, device="cuda", generator=gen) / 20, torch.rand(1, 1008, device="cuda") + 0.5)
    else:
        args = (a, b, torch.tensor(0.05, device="cuda"), torch.tensor(0.5, device="cuda"))
    fn = scaled_bias_gelu if scales == "bias" else scaled_relu
    if scales == "bias":
        args += (torch.randn(1008, device="cuda", dtype=torch.bfloat16, generator=gen),)
    check_fp8(fn, args)


@pytest.mark.skipif(not SM90, reason="the FP8 wgmma kernel is sm_90's")
@pytest.mark.parametrize("m", [16, 64])
@pytest.mark.parametrize("e5m2", ["a", "b"])
def test_fp8_with_an_e5m2_operand(m, e5m2):
    # FP8 training multiplies e5m2 gradients by e4m3 weights or activations (never two e5m2: torch refuses those).
    gen = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, 528, device="cuda", generator=gen).to(torch.float8_e5m2 if e5m2 == "a" else torch.float8_e4m3fn)
    b = torch.randn(1008, 528, device="cuda", generator=gen).to(torch.float8_e5m2 if e5m2 == "b" else torch.float8_e4m3fn)
    check_fp8(scaled_relu, (a, b.t(), torch.tensor(0.05, device="cuda"), torch.tensor(0.5, device="cuda")))


def check_fp8(fn, args):
    """`fn` compiled matches eager on `args` in three calls, and its matmul's three wgmma candidates ran and agreed
    with cuBLASLt + the kernel."""
    with debug.recording() as records:
        compiled = torch.compile(fn, backend="cppinductor", mode="max-autotune-no-cudagraphs")
        for _ in range(3):  # no float64 _scaled_mm: against eager's, which rounds once to bfloat16 as we do
            torch.testing.assert_close(compiled(*args), fn(*args), rtol=2e-2, atol=2e-2)
    (report,) = gemm_reports(records[0])
    labels = [c["label"] for c in report["candidates"]]
    assert labels[0] == EXTERN and len(labels) == 4 and all(x.startswith("gemm_tma_swapped") for x in labels[1:])
    assert all(not (c["dropped"] or "").startswith(("output", "did not run")) for c in report["candidates"]), report


def gemm_refusals(record) -> list[str]:
    return [r["reason"] for r in record.remarks
            if r["kind"] == "fusion_refusal" and r["reason"].startswith("max-autotune's GEMM epilogue")]


def test_matmuls_the_template_does_not_take_are_left_to_cublas_with_the_reason():
    # Above the small-M kernels' rows: 16, or 64 on sm_90.
    rows = 65 if SM90 else 17
    record = run(up_projection, operands(rows, 512, 1024, torch.bfloat16))
    assert gemm_reports(record) == []
    assert [r for r in gemm_refusals(record) if f"{rows} rows" in r], record.remarks
    # float32: no 16-bit tensor cores, and no reason to give.
    record = run(up_projection, operands(4, 512, 1024, torch.float32))
    assert gemm_reports(record) == [] and gemm_refusals(record) == []


def returned_and_activated(x, w):
    h = x @ w.t()
    return h, F.gelu(h)


def test_a_returned_result_is_not_fused():
    record = run(returned_and_activated, operands(4, 512, 1024, torch.bfloat16))
    assert gemm_reports(record) == []
    assert any("returned" in r for r in gemm_refusals(record)), record.remarks


def test_operands_not_as_compiled_run_the_extern():
    # A's rows start one element in: its pointer is not 16-byte aligned, so
    # the fused kernels (16-byte loads) cannot read it and the extern runs.
    x, _ = operands(4, 520, 1024, torch.bfloat16)
    _, w = operands(4, 512, 1024, torch.bfloat16)
    shifted = x[:, 1:513]
    record = run(up_projection, (shifted, w))
    assert all(t["source"] != "measured" for t in gemm_reports(record)), record.autotune


_SECOND_PROCESS = textwrap.dedent("""
    import json, math, torch, torch.nn.functional as F
    from cppinductor import debug
    gen = torch.Generator(device="cuda").manual_seed(16)
    x = torch.randn(16, 512, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16, generator=gen) / math.sqrt(512)
    def up_projection(x, w):
        return F.gelu(x @ w.t())
    with debug.recording() as records:
        out = torch.compile(up_projection, backend="cppinductor", mode="max-autotune-no-cudagraphs")(x, w)
    torch.testing.assert_close(out, up_projection(x, w), rtol=2e-2, atol=2e-2)
    print(json.dumps(records[0].autotune))
""")


def test_a_second_process_runs_the_cached_winner():
    (first,) = gemm_reports(run(up_projection, operands(16, 512, 1024, torch.bfloat16)))
    proc = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], capture_output=True, text=True, env=os.environ,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    second = [t for t in json.loads(proc.stdout.strip().splitlines()[-1]) if t["kernel"].endswith("with its matmul")]
    if first["winner"] == EXTERN:
        assert second == []  # the extern won: nothing to choose, nothing fused
    else:
        assert [(t["source"], t["winner"]) for t in second] == [("cache", first["winner"])]
