"""Indirect indexing end to end: gather, index_select, embedding, advanced
indexing (x[idx], x[idx0, idx1], x[:, idx]), index_put and scatter compile
without any ATen fallback (`fallback="error"`) and match eager, including
negative indices where eager accepts them (advanced indexing, index_put).
Accumulating scatters (index_put(accumulate=True), index_add, scatter_add,
scatter_reduce's sum, embedding's backward) compile too, repeated positions
adding up; the dtypes a GPU cannot add atomically, and CUDA under
torch.use_deterministic_algorithms, run through ATen. Out-of-range indices,
where eager raises, must not crash: compiled code clamps them into the
dimension (expr.h's semantics).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import subprocess
import sys
import textwrap

from check import check_model, compile_fn
from conftest import requires_cuda
from cppinductor import debug
from cppinductor.report import graph_report

NO_FALLBACK = {"fallback": "error"}


def test_gather(device):
    def f(x, i, j):
        return torch.gather(x, 1, i), torch.gather(x, 0, j) * 2

    x = torch.randn(5, 7, device=device)
    i = torch.randint(0, 7, (5, 3), device=device)  # eager's gather rejects negative indices
    j = torch.randint(0, 5, (2, 7), device=device)
    check_model(f, (x, i, j), options=NO_FALLBACK)


def test_index_select(device):
    def f(x, i):
        return torch.index_select(x, 0, i), torch.index_select(x, 1, i).relu()

    x = torch.randn(6, 6, device=device)
    check_model(f, (x, torch.tensor([5, 1, 0, 2, 2], device=device)), options=NO_FALLBACK)


def test_index_select_int32_dynamic(device):
    def f(x, i):
        return torch.index_select(x, 0, i) + 1

    for rows in (6, 9):
        x = torch.randn(rows, 5, device=device)
        i = torch.randint(0, rows, (4,), device=device, dtype=torch.int32)
        check_model(f, (x, i), dynamic=True, options=NO_FALLBACK)


def test_embedding(device):
    def f(w, idx):
        return F.embedding(idx, w) * 3

    w = torch.randn(20, 16, device=device)
    idx = torch.randint(0, 20, (4, 7), device=device)
    check_model(f, (w, idx), options=NO_FALLBACK)


def test_advanced_indexing_one_tensor(device):
    def f(x, i):
        return x[i], x[:, i], x[i] + 1

    x = torch.randn(8, 8, 3, device=device)
    check_model(f, (x, torch.tensor([[0, -1], [3, 7]], device=device)), options=NO_FALLBACK)


def test_advanced_indexing_two_tensors(device):
    def f(x, i0, i1):
        return x[i0, i1], x[i0.unsqueeze(1), i1], x[i0, :, i1[:3]].sigmoid()

    x = torch.randn(4, 5, 6, device=device)
    i0 = torch.tensor([0, 3, -1], device=device)
    i1 = torch.tensor([4, -2, 1], device=device)
    check_model(f, (x, i0, i1), options=NO_FALLBACK)


def test_index_put(device):
    def f(x, i, v):
        y = x.clone()
        y[i] = v
        return y, torch.index_put(x, (i,), v[0]) * 2

    x = torch.randn(6, 4, device=device)
    i = torch.tensor([4, 0, -1], device=device)
    check_model(f, (x, i, torch.randn(3, 4, device=device)), options=NO_FALLBACK)


def test_index_put_two_indices(device):
    def f(x, i, j, v):
        return torch.index_put(x, (i, j), v)

    x = torch.zeros(5, 6, device=device)
    i, j = torch.tensor([0, 4, -2], device=device), torch.tensor([5, 0, 3], device=device)
    check_model(f, (x, i, j, torch.tensor([1.0, 2.0, 3.0], device=device)), options=NO_FALLBACK)


def test_scatter(device):
    def f(x, i, src):
        return x.scatter(1, i, src), x.scatter(0, i[:2] % 4, 7.0)

    x = torch.zeros(4, 6, device=device)
    i = torch.stack([torch.randperm(6, device=device)[:3] for _ in range(4)])
    check_model(f, (x, i, torch.randn(4, 3, device=device)), options=NO_FALLBACK)


def test_scatter_of_one_position_per_row_is_pointwise(device):
    """A scalar scatter whose index has one position per row (cross-entropy's
    backward scatters its -1s so) is a pointwise where(): its backward is one
    kernel, with no fill of the whole tensor and no store through the index,
    ignore_index rows included; along dim 0 too, and onto a self that is not
    a constant. An index out of range still raises, as eager's does."""

    def loss(logits, target):
        return F.cross_entropy(logits, target)

    logits = torch.randn(16, 37, device=device)
    target = torch.randint(0, 37, (16,), device=device)
    target[3] = -100
    torch._dynamo.reset()
    with debug.recording() as records:
        check_model(loss, (logits, target), grad=True, options=NO_FALLBACK, reduction=True)
    backward = graph_report([r for r in records if r.kind == "backward"][0])
    assert [k["kind"] for k in backward.kernels if k["kind"] in ("pointwise", "reduction")] == ["reduction"]

    def along_rows(x, i):
        return x.scatter(0, i, 2.5) * 3, torch.zeros_like(x).scatter(1, i.t(), -1.0)

    x = torch.randn(5, 4, device=device)
    check_model(along_rows, (x, torch.tensor([[3, 0, 2, 2]], device=device)), options=NO_FALLBACK)

    if device == "cpu":
        compiled = compile_fn(lambda x, i: x.scatter(0, i, 2.5) * 3, options=NO_FALLBACK)
        with pytest.raises(IndexError, match="index 5 is out of bounds"):
            compiled(x, torch.tensor([[0, 5, 1, 2]]))


def test_cross_entropy_forward_gathers(device):
    # nll_loss is decomposed into a gather: it now compiles without ATen.
    def f(logits, target):
        return F.cross_entropy(logits, target)

    check_model(
        f,
        (torch.randn(8, 10, device=device), torch.randint(0, 10, (8,), device=device)),
        options=NO_FALLBACK,
        reduction=True,
    )


def test_embedding_training_backward(device):
    # embedding_dense_backward decomposes into index_put(accumulate=True):
    # row 1 is read three times, so three gradient rows add into it.
    emb = torch.nn.Embedding(10, 8).to(device)
    idx = torch.tensor([[1, 2, 1], [9, 0, 1]], device=device)
    check_model(emb, (idx,), grad=True, options=NO_FALLBACK)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16,
                                   torch.float16])
def test_accumulating_scatters_add_every_repeat(device, dtype):
    """Few positions, many hits: every add must land (a race would lose some).
    On CUDA 16-bit floats add into a float32 copy, rounded once after the
    adds, as ATen's kernel sums them."""

    def f(x, rows, v, cols, s):
        a = torch.index_put(x, (rows,), v, accumulate=True)
        b = torch.index_add(x, 0, rows.remainder(6), v, alpha=2)  # index_add takes no negative index
        c = torch.scatter_add(x, 1, cols, s)
        d = torch.scatter_reduce(x, 1, cols, s, "sum", include_self=False)
        return a, b, c, d * 2

    def values(*shape):
        if dtype.is_floating_point:
            return torch.randn(*shape, device=device).to(dtype)
        return torch.randint(-9, 9, shape, device=device, dtype=dtype)

    # Negative rows wrap, as eager's index_put does. bfloat16 keeps about 3
    # digits, so a sum of 117 of them is noise in eager itself: 8 per row.
    half = dtype in (torch.bfloat16, torch.float16)
    rows = torch.randint(-6, 6, (48 if half else 700,), device=device)
    cols = torch.randint(0, 3, (6, 40), device=device)
    args = (values(6, 40), rows, values(len(rows), 40), cols, values(6, 40))
    tol = {"rtol": 2e-2, "atol": 0.5} if half else {}
    check_model(f, args, options=NO_FALLBACK, **tol)


@requires_cuda
def test_a_bfloat16_gather_gradient_sums_a_frequent_row_as_eager_on_cuda():
    """x[rows] with row 0 met 3510 times: its gradient is the sum of 3510
    rows (index_put with accumulate, in x's dtype). Added into bfloat16 one
    by one, the sum would lose a digit or two on its way; eager's CUDA kernel
    sums in float and rounds once, and so do we. (Eager's CPU kernel adds in
    bfloat16: its error there is that large.)"""
    x = torch.randn(16, 32, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    rows = torch.zeros(4096, dtype=torch.int64, device="cuda")
    rows[::7] = 3
    check_model(lambda x, rows: x[rows] * 2, (x, rows), grad=True, options=NO_FALLBACK, rtol=1e-2, atol=1e-2)


def test_accumulating_scatter_under_deterministic_algorithms(device):
    """CUDA's atomic adds land in any order: under
    torch.use_deterministic_algorithms the scatter runs through ATen's
    deterministic kernel. On the CPU one thread adds in order, so it still
    compiles."""

    def f(x, i, v):
        return torch.index_put(x, (i,), v, accumulate=True) + 1

    args = (torch.randn(5, 8, device=device), torch.tensor([1, 3, 1, 1], device=device), torch.randn(4, 8, device=device))
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        if device == "cpu":
            check_model(f, args, options=NO_FALLBACK)
        else:
            with pytest.raises(Exception, match="use_deterministic_algorithms"):
                compile_fn(f, options=NO_FALLBACK)(*args)
            check_model(f, args)
    finally:
        torch.use_deterministic_algorithms(was)
        torch._dynamo.reset()


def test_out_of_range_index_raises_index_error_like_eager():
    """The kernel reports the index (it goes on clamped, touching no memory
    outside the tensor) and the call raises IndexError, as eager does; the
    next call with valid indices runs normally. Also from a parallel,
    vectorised loop (an embedding of 4096 rows)."""

    def f(x, i):
        return torch.index_select(x, 0, i) + 0

    x = torch.arange(12.0).reshape(4, 3)
    compiled = compile_fn(f, options=NO_FALLBACK)
    ok = torch.tensor([1, 3, 0])
    torch.testing.assert_close(compiled(x, ok), f(x, ok))
    # index_select takes no negative index; advanced indexing counts it from the end.
    for bad in (torch.tensor([4, 2]), torch.tensor([0, -1]), torch.tensor([1 << 40])):
        with pytest.raises(IndexError):
            f(x, bad)
        with pytest.raises(IndexError, match="out of bounds for dimension with size 4"):
            compiled(x, bad)
    torch.testing.assert_close(compiled(x, ok), f(x, ok))

    def take(x, i):
        return x[i] * 2

    compiled_take = compile_fn(take, options=NO_FALLBACK)
    torch.testing.assert_close(compiled_take(x, torch.tensor([-4, 3, -1])), take(x, torch.tensor([-4, 3, -1])))
    with pytest.raises(IndexError, match="index -5 is out of bounds"):
        compiled_take(x, torch.tensor([1, -5]))

    def embed(w, i):
        return F.embedding(i, w) * 2

    w = torch.randn(50, 256)
    idx = torch.randint(0, 50, (4096,))
    compiled_embed = compile_fn(embed, options=NO_FALLBACK)
    torch.testing.assert_close(compiled_embed(w, idx), embed(w, idx))
    idx[3000] = 50
    with pytest.raises(IndexError):
        embed(w, idx)
    with pytest.raises(IndexError, match="index 50 is out of bounds"):
        compiled_embed(w, idx)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_out_of_range_index_on_cuda_is_a_device_side_assert():
    """As in eager, an index out of range fails the CUDA kernel with a
    device-side assert, which loses the CUDA context: run in a process of its
    own. Valid indices (negative ones wrap for advanced indexing) still give
    eager's values there first."""
    script = textwrap.dedent("""
        import torch, torch.nn.functional as F
        import cppinductor
        w = torch.randn(10, 16, device="cuda")
        opts = {"fallback": "error"}
        embed = torch.compile(lambda i: F.embedding(i, w) * 2, backend="cppinductor", options=opts)
        take = torch.compile(lambda i: w[i] + 1, backend="cppinductor", options=opts)
        ok = torch.tensor([1, 9, 0], device="cuda")
        torch.testing.assert_close(embed(ok), F.embedding(ok, w) * 2)
        neg = torch.tensor([-1, -10, 3], device="cuda")
        torch.testing.assert_close(take(neg), w[neg] + 1)
        print("valid indices ok", flush=True)
        embed(torch.tensor([1, 10], device="cuda"))
        torch.cuda.synchronize()
        print("no error", flush=True)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "valid indices ok" in run.stdout, run.stderr[-3000:]
    assert "no error" not in run.stdout
    assert run.returncode != 0
    assert "device-side assert" in run.stderr, run.stderr[-3000:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_repeat(dtype, device):
    """New leading dims, repeats of 1 and of more; on a transposed input."""

    def f(x):
        return x.repeat(2, 1, 3), x.t().repeat(1, 2) * 2

    x = torch.arange(15, device=device).to(dtype).reshape(3, 5)
    check_model(f, (x,), options={"fallback": "error"})


def test_slice_and_select_scatter(device):
    """The backward ops of slicing and selecting, as they appear in training graphs, and directly."""

    def f(x, s, r):
        return (torch.slice_scatter(x, s, dim=1, start=1, end=None, step=3), torch.slice_scatter(x, r, 0, -3),
                torch.select_scatter(x, s[:, 0], 1, -2))

    x, s, r = torch.randn(5, 11, device=device), torch.randn(5, 4, device=device), torch.randn(3, 11, device=device)
    check_model(f, (x, s, r), options=NO_FALLBACK)
    check_model(lambda x: (x[:, 2:9:2] * 2, x[1] + 1), (torch.randn(4, 10, device=device),), grad=True,
                options=NO_FALLBACK)


def test_unfold_windows_as_views(device):
    """unfold is a view (windows of `size` every `step` along a dim): read by
    compute, returned as a view of its input, and differentiated."""

    def windows_sum(x):
        w = x.unfold(1, 3, 2)  # [4, 4, 5, 3]
        return (w * w).sum(-1), x.unfold(-1, 2, 3).amax(-1)  # [4, 9, 2]

    def as_view(x):
        return x.unfold(0, 2, 1)

    x = torch.randn(4, 9, 5, device=device)
    options = {"fallback": "error"}
    check_model(windows_sum, (x,), options=options)
    check_model(as_view, (x,))
    # Its backward scatters overlapping windows back (index_put with
    # accumulate), which runs through ATen.
    check_model(windows_sum, (x.clone().requires_grad_(),), grad=True)


def test_diagonal_scatter_and_writes_through_diagonal(device):
    """diagonal_scatter replaces one diagonal (offsets either side, any two
    dims); a write through x.diagonal() functionalizes into one, and so does
    diagonal's backward. Lowered, no fallback."""

    def scatter(x, s, s2):
        x3 = x.unsqueeze(0).expand(2, 5, 6).contiguous()  # dims 0 and 2, offset 1: 2 elements per dim-1 row
        return (torch.diagonal_scatter(x, s, offset=2), torch.diagonal_scatter(x, s, offset=-1),
                torch.diagonal_scatter(x3, s2, 1, 0, 2))

    def write_through(x):
        y = x * 2
        y.diagonal(1).add_(10)
        return y

    x = torch.randn(5, 6, device=device)
    s, s2 = torch.randn(4, device=device), torch.randn(5, 2, device=device)
    options = {"fallback": "error"}
    check_model(scatter, (x, s, s2), options=options)
    check_model(write_through, (x,), options=options)
    check_model(lambda x: x.diagonal(-1).exp(), (x.clone().requires_grad_(),), grad=True, options=options)


@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right, device):
    """bucketize decomposes into a binary search of fixed length (log2 of the
    boundaries): gathers and comparisons, lowered. Values on the boundaries
    check the side `right` picks."""
    boundaries = torch.linspace(-2, 2, 9, device=device)
    x = torch.randn(5, 40, device=device)
    x[0, :9] = boundaries
    check_model(lambda a: torch.bucketize(a, boundaries, right=right), (x,), options={"fallback": "error"})
    ints = torch.arange(-4, 5, 2, device=device)
    check_model(lambda a: torch.bucketize(a, ints, right=right, out_int32=True),
                (torch.randint(-6, 6, (50,), device=device),), options={"fallback": "error"})
