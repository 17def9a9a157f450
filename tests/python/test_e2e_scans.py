"""Scans end to end: cumsum and cumprod compile to our own kernels
(`fallback="error"`) and match eager over every dim of 1-D to 3-D inputs,
transposed inputs, every dtype eager scans (integers and bool into int64,
half precision through float32), dtype=, 0-d and empty inputs, and their
gradients (a cumsum of the flipped gradient; cumprod's backward, which scans
twice). A pointwise producer is computed inside the scan's kernel. On
CUDA, a few long rows or columns split across blocks, each looking back at
the totals of the blocks before it, with results that do not change from
run to run.
cummax, cummin and logcumsumexp run through ATen, with a reason.
"""

from __future__ import annotations

import pytest
import torch

from check import check_model

NO_FALLBACK = {"fallback": "error"}


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape", [(7,), (5, 9), (4, 6, 11)])
def test_scans_along_every_dim(op, shape, device):
    for dim in range(-len(shape), len(shape)):
        x = torch.rand(shape, device=device) + 0.5  # products of up to 11 terms stay in range

        def f(x, dim=dim):
            return getattr(torch, op)(x, dim) * 2, getattr(torch, op)(x.transpose(0, -1), dim)

        check_model(f, (x,), options=NO_FALLBACK, reduction=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64, torch.bool, torch.float16,
                                   torch.bfloat16, torch.uint8])
def test_scan_dtypes(dtype, device):
    if dtype.is_floating_point:
        x = torch.rand(6, 40, device=device).to(dtype) + 0.5
    elif dtype == torch.bool:
        x = torch.rand(6, 40, device=device) > 0.5
    else:
        x = torch.randint(-3, 4, (6, 40), device=device).to(dtype) if dtype != torch.uint8 else \
            torch.randint(0, 4, (6, 40), device=device).to(dtype)

    def f(x):
        return torch.cumsum(x, 1), torch.cumsum(x, 0), torch.cumprod(x[:, :12], 1)

    check_model(f, (x,), options=NO_FALLBACK, reduction=True)


def test_scan_dtype_argument_converts_first(device):
    def f(x):
        return torch.cumsum(x, 1, dtype=torch.float64), torch.cumsum(x * 7.9, 0, dtype=torch.int32), \
            torch.cumprod(x, 1, dtype=torch.float16)

    check_model(f, (torch.rand(5, 8, device=device) + 0.5,), options=NO_FALLBACK, reduction=True)


def test_scans_of_0d_and_empty_inputs(device):
    def f(x, e):
        return torch.cumsum(x, 0), torch.cumprod(x, -1), torch.cumsum(e, 1), torch.cumsum(e, 0)

    check_model(f, (torch.tensor(2.5, device=device), torch.randn(3, 0, device=device)), options=NO_FALLBACK)


@pytest.mark.parametrize("shape, dim", [((3, 5000), 1), ((300, 70), 0), ((2, 300, 70), 1), ((5000,), 0)])
def test_scans_longer_than_a_chunk(shape, dim, device):
    """A GPU walks rows in chunks of threads x 4 positions and columns in
    chunks of slices x 4 rows, each carrying its running value into the
    next: several chunks, a partial last one, 70 columns (a partial group
    of 32)."""
    x = 1 + torch.randn(shape, device=device) * 1e-3

    def f(x):
        return torch.cumsum(x, dim), torch.cumprod(x, dim), torch.cumsum(x.to(torch.float64), dim)

    check_model(f, (x,), options=NO_FALLBACK, reduction=True)


@pytest.mark.parametrize("offset, length", [(0, 4096), (1, 4096), (0, 4098), (2, 2050)])
def test_row_scans_aligned_or_not(offset, length, device):
    """A GPU row scan moves four positions a thread as one 16-byte vector
    when the rows' length, start and stride allow; the launch checks, and an
    input that starts one element in, or rows of 4098 or 2050, run the
    kernel's scalar twin instead, with the same results."""
    x = torch.randn(6, length + offset, device=device)[:, offset:]

    def f(x):
        return torch.cumsum(x.exp(), 1) / 8, torch.cumprod(1 + x * 1e-3, 1)

    check_model(f, (x,), options=NO_FALLBACK, reduction=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("shape, dim", [((1 << 20,), 0), ((3, 200001), 1), ((20000, 40), 0), ((9000, 2, 33), 0)])
def test_split_cuda_scans(shape, dim):
    """Few long rows (one row of 1M, three rows of 200001) and few columns
    (40 or 66 of them down 20000 or 9000 rows) leave a block per row or
    column group most of the GPU idle, so each splits across blocks: a
    first pass folds each block's share, a look-back combines the totals
    before it in a fixed order, a second pass stores. Floats match a float64
    scan, integers are exact, and repeated launches (each block's ticket
    says which launch it is in) give the same bits every time."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).cuda()
    i = torch.randint(-3, 4, shape, generator=g, dtype=torch.int32).cuda()
    s = torch.where(torch.rand(shape, generator=g) < 0.5, 1, -1).cuda()

    def f(x, i, s):
        return torch.cumsum(x, dim), torch.cumsum(i, dim), torch.cumprod(s, dim)

    compiled = torch.compile(f, backend="cppinductor", options=NO_FALLBACK)
    first = compiled(x, i, s)
    ref = torch.cumsum(x.double(), dim)
    assert ((first[0].double() - ref).abs().max() / ref.abs().max()).item() < 1e-5
    torch.testing.assert_close(first[1], torch.cumsum(i, dim), rtol=0, atol=0)
    torch.testing.assert_close(first[2], torch.cumprod(s, dim), rtol=0, atol=0)
    for _ in range(3):
        again = compiled(x, i, s)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


def test_long_rows_accumulate_as_eager():
    """100000 float32 terms: eager's CPU kernel accumulates in float64 and
    rounds each output once, and so do we (a float32 running sum drifts
    well past the float32 tolerance by the row's end)."""
    x = torch.rand(2, 100000) * 100

    def f(x):
        return torch.cumsum(x, 1)

    check_model(f, (x,), options=NO_FALLBACK, rtol=1e-6, atol=0)


def test_scan_gradients(device):
    def f(x):
        return torch.cumsum(x.sin(), 1) * torch.cumprod(x, 0)

    x = torch.rand(6, 9, device=device) + 0.5
    x[2, 3] = 0  # cumprod's backward has a path for zeros
    check_model(f, (x,), grad=True, options=NO_FALLBACK, reduction=True)


def test_a_pointwise_producer_runs_inside_the_scan():
    from cppinductor import debug

    with debug.recording() as records:
        check_model(lambda x: torch.cumsum(x.exp() * 3, 1), (torch.randn(8, 50),), options=NO_FALLBACK,
                    reduction=True)
    kernels = dict(records[-1].sources)["kernels.cpp"].split("// kernel: ")[1:]
    assert len(kernels) == 1, kernels
    assert "cppi_exp(" in kernels[0] and "running" in kernels[0], kernels[0]


@pytest.mark.parametrize("op", ["cummax", "cummin", "logcumsumexp"])
def test_other_scans_fall_back_with_a_reason(op):
    import cppinductor

    def f(x):
        r = getattr(torch, op)(x, 1)
        return r if op == "logcumsumexp" else r.values * 2

    check_model(f, (torch.randn(4, 9),), reduction=True)
    (g,) = cppinductor.explain(f)(torch.randn(4, 9)).graphs
    assert any(op in fb["op"] and "scan" in fb["reason"] for fb in g.fallbacks), g.fallbacks
    assert all(k["kind"] != "scan" for k in g.kernels), g.kernels


def test_explain_names_scan_kernels():
    import cppinductor

    (g,) = cppinductor.explain(lambda x: torch.cumsum(x, 0) + 1)(torch.randn(4, 9)).graphs
    assert [k["kind"] for k in g.kernels] == ["scan", "pointwise"], g.kernels
    assert not g.fallbacks
