"""End to end, compiled vs eager: reductions, softmax, normalisations (forward and backward)."""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from check import check_model
from conftest import FLOAT_LANES, cpu_isa_param


@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2)], ids=lambda d: f"dim{d}")
@pytest.mark.parametrize("keepdim", [False, True], ids=["", "keepdim"])
def test_sum_mean_amax(dim, keepdim, device):
    def f(x):
        return x.sum(dim, keepdim=keepdim), x.mean(dim, keepdim=keepdim), x.amax(dim, keepdim=keepdim), x.amin(
            dim, keepdim=keepdim
        )

    check_model(f, (torch.randn(6, 17, 5, device=device),), reduction=True)


@pytest.mark.parametrize("dim", [0, 1], ids=lambda d: f"dim{d}")
def test_argmax_argmin_max_with_indices(dim, device):
    def f(x):
        values, indices = x.max(dim)
        return x.argmax(dim), x.argmin(dim, keepdim=True), values, indices, x.argmax()

    # Distinct values: ties would make the index implementation-defined.
    x = torch.randperm(9 * 13, device=device).float().reshape(9, 13)
    check_model(f, (x,))


def test_full_reductions_and_prod(device):
    def f(x, i):
        return x.sum(), x.mean(), x.prod(), i.sum(), i.prod(), x.std(), (x > 0).sum()

    x = torch.rand(31, device=device) + 0.5
    check_model(f, (x, torch.randint(1, 3, (10,), device=device)), reduction=True)


def test_large_reduction(device):
    """Long enough for per-thread partials and vector lanes."""

    def f(x):
        return x.sum(-1), x.sum(0), (x * x).mean()

    check_model(f, (torch.randn(64, 4099, device=device),), reduction=True)


def test_few_long_rows_split_across_threads_on_cpu():
    """3 rows on 2 threads do not divide: each row's reduction is split across
    the threads in turn (cppi_parallel_reduce per row). Values, NaN and the
    epilogue as eager."""
    x = torch.randn(3, 300001)
    x[1, 123456] = float("nan")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for f in (lambda x: x.mean(1) * 2, lambda x: x.amax(1)):
            kernels = _cpu_kernels(f, x, atol=1e-5, rtol=1e-5)
            assert "parallel_reduction=yes" in kernels and "cppi_parallel_reduce" in kernels, kernels
    finally:
        torch.set_num_threads(threads)


def test_one_long_row_of_several_reductions_split_across_threads_on_cpu():
    """softmax and layer_norm of one row of 300001: the statistics kernel has
    no outer loop, so each of its reductions (max, then the sum of exp; the
    mean, then the centred sums) is split across the threads in turn."""
    x = torch.randn(1, 300001) * 3
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for f in (lambda x: torch.softmax(x, -1), lambda x: F.layer_norm(x, (300001,))):
            kernels = _cpu_kernels(f, x, atol=1e-5, rtol=1e-4)
            assert "parallel_reduction=yes" in kernels, kernels
    finally:
        torch.set_num_threads(threads)


def test_reduction_with_pointwise_prologue_and_epilogue(device):
    def f(x, w):
        s = (torch.exp(x) * w).sum(1, keepdim=True)
        return torch.log(s) + 1, s.squeeze(1).sqrt()

    check_model(f, (torch.randn(7, 40, device=device), torch.rand(40, device=device)), reduction=True)


@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_log_softmax(dim, device):
    def f(x):
        return torch.softmax(x, dim), F.log_softmax(x, dim), torch.logsumexp(x, dim)

    check_model(f, (torch.randn(5, 23, device=device) * 4,), grad=True, reduction=True)


def test_softmax_extreme_values(device):
    def f(x):
        return torch.softmax(x, -1)

    x = torch.tensor([[1e4, 0.0, -1e4], [-float("inf"), 0.0, 1.0], [3.0, 3.0, 3.0]], device=device)
    check_model(f, (x,))


def _cpu_kernels(f, x, cpu_isa="native", **close):
    """The generated CPU kernels' source for f(x), compiled without fallback
    for `cpu_isa`, after checking the result against eager (NaN where eager
    has NaN)."""
    from cppinductor.utils import run_and_get_code

    compiled = torch.compile(f, backend="cppinductor", options={"fallback": "error", "cpu_isa": cpu_isa})
    out, sources = run_and_get_code(compiled, x)
    torch.testing.assert_close(out, f(x), equal_nan=True, **close)
    (cpp,) = [s for s in sources if "cppi_parallel_for" in s or "extern \"C\"" in s]
    return cpp[cpp.index("// kernel: "):]


@pytest.mark.parametrize("positions", [(8, 8), (7, 9)], ids=["64 positions", "63 positions"])
def test_a_norm_over_channels_written_channels_last_is_a_vector_loop_on_cpu(cpu_isa, positions):
    """ConvNeXt's layer norm over the channels of an NCHW tensor, permuted to
    NHWC: its loads move along the positions, its store by the channel count.
    The positions are the vector loop, each vector stored lane by lane
    (cppi_vstore_strided); it was a scalar kernel. 63 positions end in a
    partial vector."""
    weight, bias = torch.randn(24), torch.randn(24)

    def f(x):
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + 1e-6)
        return (weight[:, None, None] * y + bias[:, None, None]).permute(0, 2, 3, 1).contiguous()

    kernels = _cpu_kernels(f, torch.randn(3, 24, *positions) * 4 + 1, cpu_isa, atol=1e-5, rtol=1e-5)
    assert "vectorized=innermost_outer" in kernels and "cppi_vstore_strided(" in kernels, kernels


def test_an_expensive_permuted_producer_of_a_norm_is_computed_once_on_cpu(cpu_isa):
    """gelu(x) permuted to channels-last, then layer-normed (wav2vec2's
    feature projection). Recomputed in each of the norm's passes, it gathered
    x across rows every time: a scalar kernel (8 x 512 x 511: 45 ms, Inductor
    10). Stored once, the norm's passes load it contiguously: one erf, every
    stage a vector loop."""
    weight, bias = torch.randn(64), torch.randn(64)

    def f(x):
        return F.layer_norm(F.gelu(x).transpose(1, 2), (64,), weight, bias)

    kernels = _cpu_kernels(f, torch.randn(2, 64, 37), cpu_isa, atol=1e-5, rtol=1e-5)
    assert "vectorized=innermost_of_each_stage" in kernels, kernels
    assert kernels.count("cppi_erf(") == 1, kernels


def test_layer_norm_sums_both_centred_moments_in_one_pass_on_cpu(cpu_isa):
    """layer_norm's variance sums x - mean and its square: two independent
    reductions over the row, folded into one loop that loads each element
    once, each sum with four vector accumulators. 1000 columns: groups of 4
    vectors, whole vectors after them (62 vectors of 16 floats: 2; 125 of
    8: 1) and the tail (16 lanes: 8 elements; 8 lanes: none); NaN and inf
    rows give eager's results."""
    x = torch.randn(37, 1000) * 3 + 2
    x[3, 999] = float("nan")
    x[5, 0] = float("inf")
    w, b = torch.randn(1000), torch.randn(1000)
    kernels = _cpu_kernels(lambda x: torch.nn.functional.layer_norm(x, (1000,), w, b), x, cpu_isa,
                           atol=1e-5, rtol=1e-5)
    assert "fold in one pass over their loops" in kernels, kernels
    one_pass = kernels[kernels.index("fold in one pass"):]
    one_pass = one_pass[:one_pass.index("// stage", 1)]
    # Each element of the row is loaded once per position in the one pass:
    # 4 in a group, 1 after the groups, 1 in the tail (if any).
    lanes = FLOAT_LANES[cpu_isa]
    loads = 4 + 1 + (1000 % lanes != 0)
    assert len(re.findall(r"\w+\[r0 \+ 1000\*x0\]", one_pass)) == loads, one_pass
    assert len(re.findall(r"cppi_f32x\d+ \w+_vacc_3 = ", one_pass)) == 2, one_pass


def test_softmax_rows_compute_exp_once_on_cpu():
    """The CPU kernel stores exp(x - max) into the output and rescales it there
    (stash_reduction_bodies): one exp in the vector loop and one in its tail,
    where the unrewritten kernel had two of each. Results stay eager's, NaN
    and inf rows included."""
    x = torch.randn(9, 100) * 4
    x[2, 7] = float("nan")
    x[4, 3] = float("inf")
    x[5] = -float("inf")
    kernels = _cpu_kernels(lambda x: torch.softmax(x, -1), x)
    assert kernels.count("cppi_exp(") == 2, kernels


def _rows_with_specials(rows, cols):
    """randn rows with a NaN ending row 3, inf starting row 5, row 6 all -inf
    and inf ending row 7."""
    x = torch.randn(rows, cols) * 3
    x[3, cols - 1] = float("nan")
    x[5, 0] = float("inf")
    x[6] = -float("inf")
    x[7, cols - 1] = float("inf")
    return x


@pytest.mark.parametrize("cols", [23, 33])
def test_the_last_partial_vector_of_a_row_is_one_masked_vector_on_cpu(cols):
    """A row's stages end in one vector whose lanes past the row are off
    (rows of 23: a vector of 16 and a second; of 33: two and a third): exp and log
    run once per vector, not once per element of a scalar tail, and the lanes
    that are off reach no max, sum or store. Eager's results on rows holding
    NaN and infinities."""
    x = _rows_with_specials(300, cols)
    for f in (lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1), lambda x: torch.logsumexp(x, -1)):
        kernels = _cpu_kernels(f, x)
        assert "tail=masked" in kernels, kernels
        assert "cppi_vload_partial<" in kernels and "++r0" not in kernels and "++x1" not in kernels, kernels
    # Eager's Welford mean of a row holding inf is inf or NaN by where the inf
    # sits (inf - inf once it is the running mean); the moments take NaN only.
    with_nan = torch.where(x.isinf(), 0.5, x)
    _cpu_kernels(lambda x: torch.nn.functional.layer_norm(x, (cols,)), with_nan, atol=1e-5, rtol=1e-5)
    _cpu_kernels(lambda x: torch.var_mean(x, -1), with_nan, atol=1e-5, rtol=1e-5)
    _cpu_kernels(lambda x: (x.amax(-1), x.amin(-1), (x > 0).all(-1), (x > 2).any(-1), (x / 8).prod(-1)), x)


@pytest.mark.parametrize("cpu_isa, cols", [cpu_isa_param("avx2", 3), cpu_isa_param("avx2", 7),
                                           cpu_isa_param("avx512", 7), cpu_isa_param("avx512", 12)])
def test_rows_shorter_than_a_vector_go_in_lanes_on_cpu(cpu_isa, cols):
    """Rows shorter than a vector of floats: a vector of 16 (AVX-512) or 8
    (AVX2) rows is read as `cols` vectors turned in registers, lane l holding
    row x0 + l, so every reduction is a vertical one and no row has a
    horizontal step. 301 rows end in a partial vector of rows. Eager's
    results on rows holding NaN and infinities, for every reduction kind."""
    x = _rows_with_specials(301, cols)
    for f in (lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1), lambda x: torch.logsumexp(x, -1)):
        kernels = _cpu_kernels(f, x, cpu_isa)
        assert "row_blocks=yes" in kernels and "cppi_vload_rows<" in kernels, kernels
        assert "cppi_vreduce" not in kernels, kernels
    with_nan = torch.where(x.isinf(), 0.5, x)
    _cpu_kernels(lambda x: torch.nn.functional.layer_norm(x, (cols,)), with_nan, cpu_isa, atol=1e-5, rtol=1e-5)
    _cpu_kernels(lambda x: torch.var_mean(x, -1), with_nan, cpu_isa, atol=1e-5, rtol=1e-5)
    _cpu_kernels(lambda x: (x.amax(-1), x.amin(-1), x.argmax(-1), (x > 0).all(-1), (x > 2).any(-1), (x / 8).prod(-1)),
                 x, cpu_isa)
    _cpu_kernels(lambda x: x.double().sum(-1), x, cpu_isa)
    _cpu_kernels(lambda x: x.long().sum(-1), x.nan_to_num(0.0, 1000.0, -1000.0), cpu_isa)
    _cpu_kernels(lambda x: x - x.mean(-1, keepdim=True), x, cpu_isa)


@pytest.mark.parametrize("cols", [16, 33])
def test_the_math_after_row_reductions_runs_a_vector_of_rows_at_a_time_on_cpu(cols):
    """logsumexp over rows of a vector or more: the log after the sum runs
    once per block of 16 (AVX-512) or 8 rows, a row per lane, with one whole
    store of the block's results (a libm logf per row took as long as the
    row's own loops); the rows' max and sum reduce a row at a time or, rows
    this short, in one tree per block. 301 rows end in a partial block.
    Eager's results on rows holding NaN and infinities."""
    x = _rows_with_specials(301, cols)
    for f in (lambda x: torch.logsumexp(x, -1), lambda x: torch.logsumexp(x, -1) + x.amax(-1).sqrt().exp()):
        kernels = _cpu_kernels(f, x)
        assert "epilogue_in_lanes=yes" in kernels, kernels
        assert "_rows[x0 - x0_block] = " in kernels or "_vaccs[x0 - x0_block] = " in kernels, kernels
        assert "cppi_vstore_partial(&out_" in kernels, kernels
    _cpu_kernels(lambda x: torch.logsumexp(x.view(7, 43, cols), -1), x)
    _cpu_kernels(lambda x: torch.logsumexp(x.double(), -1), x)


@pytest.mark.parametrize("cols", [16, 24, 33, 64])
def test_reductions_of_short_rows_combine_a_block_of_rows_in_one_tree_on_cpu(cols):
    """Row statistics over rows of a vector to 256 elements: each reduction
    runs over a block of 16 rows (8 on AVX2) in turn, the rows' vector
    accumulators reduce in one transposing tree to a vector of the rows'
    results, and the epilogue (var's division, logsumexp's log) runs a row
    per lane. 301 rows end in a partial block; eager's results on rows
    holding NaN and infinities, float64 too."""
    x = _rows_with_specials(301, cols)
    # var_mean's mean of a row holding inf: eager's Welford gives NaN unless
    # the inf ends the row, the two-pass moments inf (a known difference).
    with_nan = torch.where(x.isinf(), 0.5, x)
    cases = [(lambda x: torch.var_mean(x, -1), with_nan), (lambda x: x.std(-1), x), (lambda x: x.mean(-1), x),
             (lambda x: x.amax(-1), x), (lambda x: x.amin(-1), x), (lambda x: torch.logsumexp(x, -1), x),
             (lambda x: torch.linalg.vector_norm(x, 2, -1), x)]
    for f, inputs in cases:
        kernels = _cpu_kernels(f, inputs)
        if cols % 16 == 0 or "tail=masked" in kernels:
            assert "reduction_trees=yes" in kernels and "cppi_vtree_" in kernels, kernels
            assert "cppi_vreduce" not in kernels, kernels
    _cpu_kernels(lambda x: torch.var_mean(x, -1), with_nan.double())
    _cpu_kernels(lambda x: torch.var_mean(x.view(7, 43, cols), -1), with_nan)
    # Eager's own variance: the tree's pairwise sums stay within its tolerance.
    y = torch.randn(301, cols) * 1e3 + 1e4
    _cpu_kernels(lambda x: torch.var_mean(x, -1), y)


def test_statistics_of_few_columns_split_their_rows_among_threads_on_cpu(cpu_isa):
    """Column statistics of 7 columns over many rows: each thread sums a
    share of the rows into vectors of partials, combined in order (10^6 x 7
    floats ran on one thread). AVX-512: one 8-lane vector whose last lane is
    off; AVX2: a 4-lane vector and a second overlapping it (8-lane masked
    moves are slower there). Eager's results with NaN and infinities, for
    every reduction kind."""
    x = torch.randn(200000, 7) * 3
    x[3, 6] = float("nan")
    x[150000, 2] = float("inf")
    x[:, 4] = -float("inf")
    finite = torch.where(x.isfinite(), x, 0.5)
    for f, inp in (
        (lambda x: x.sum(0), x),
        (lambda x: x.mean(0), finite),
        (lambda x: (x.amax(0), x.amin(0), x.argmax(0), x.argmin(0)), x),
        (lambda x: torch.var_mean(x, 0), finite),
        (lambda x: ((x > 0).all(0), (x > 8).any(0), (1 + x / 10000).prod(0)), x),
    ):
        kernels = _cpu_kernels(f, inp, cpu_isa, atol=1e-4, rtol=1e-4)
        if cpu_isa == "avx512":
            assert "tail=masked" in kernels and "cppi_vload_partial<cppi_f32x8>" in kernels, kernels
        else:
            assert "width=4 tail=overlapped" in kernels, kernels
        if torch.get_num_threads() > 1:
            assert "parallel_reduction=yes" in kernels and "cppi_parallel_reduce<" in kernels, kernels


def test_softmax_over_columns_tiles_both_reductions_on_cpu():
    """Softmax over dim 0 reduces down the columns twice (max, then the sum of
    exp(x - max)): both reductions run over blocks of columns a few rows at a
    time (two tiles of vector accumulators), not one vector per row down the
    whole column. 1030 columns: a block, then the last 16 columns again as
    one vector overlapping it; NaN and inf columns give eager's results."""
    x = torch.randn(40, 1030) * 4
    x[3, 5] = float("nan")
    x[7, 100] = float("inf")
    x[:, 200] = -float("inf")
    kernels = _cpu_kernels(lambda x: torch.softmax(x, 0), x)
    assert "tail=overlapped" in kernels, kernels
    # Two tiles in the block loop, two in the overlapping last vector.
    assert len(re.findall(r"cppi_f32x\d+ \w+_tile\[\d+\];", kernels)) == 2 * 2, kernels


def test_log_softmax_over_columns_takes_each_log_once_on_cpu():
    """log_softmax over dim 0 subtracts log(sum) of each column from every row:
    the log is stored by the column kernel (one per column, in its vector loop,
    whose last vector overlaps the one before in the same pass), not recomputed
    for every element by the row pass."""
    x = torch.randn(40, 1030) * 4
    x[3, 5] = float("nan")
    x[:, 200] = -float("inf")
    kernels = _cpu_kernels(lambda x: torch.log_softmax(x, 0), x)
    assert kernels.count("cppi_log(") == 1, kernels


def test_softmax_over_columns_is_one_kernel_computing_exp_once_on_cpu():
    """softmax over dim 0: the normalising step joins the column kernel with
    its loops reordered (rows as a stage loop), exp(x - max) is stored into
    the output and scaled there, so exp runs once per element: in the column
    block loop and in the overlapping last vector, nowhere else. NaN and -inf
    columns keep eager's values."""
    x = torch.randn(40, 1030) * 4
    x[3, 5] = float("nan")
    x[:, 200] = -float("inf")
    kernels = _cpu_kernels(lambda x: torch.softmax(x, 0), x)
    assert kernels.count("// kernel: ") == 1, kernels
    assert kernels.count("cppi_exp(") == 2, kernels
    assert "tail=overlapped" in kernels, kernels


@pytest.mark.parametrize("shape,dim", [((1000, 33), 0), ((7, 5, 19), 0), ((6, 40, 17), 1), ((3, 1), 0)])
def test_softmax_over_a_leading_dim(shape, dim, device):
    """Column softmax / log_softmax and a column normalisation, forward and
    backward, at shapes with and without a vector tail."""

    def f(x):
        return torch.softmax(x, dim), F.log_softmax(x, dim), x / x.sum(dim, keepdim=True)

    check_model(f, (torch.randn(*shape, device=device) * 3,), grad=True, reduction=True)


def test_long_columns_keep_two_kernels_on_cpu():
    """Over more than 1024 rows a column block's later passes would not find
    its rows in cache: the normalising step keeps its own kernel, with a
    remark saying why."""
    from cppinductor import debug

    x = torch.randn(1100, 40)
    with debug.recording() as records:
        kernels = _cpu_kernels(lambda x: torch.softmax(x, 0), x)
    assert kernels.count("// kernel: ") == 2, kernels
    reasons = [r["reason"] for r in records[-1].remarks if r["kind"] == "fusion_refusal"]
    assert any("a stage of 1100 elements per outer iteration (more than 1024)" in r for r in reasons), reasons


def test_column_normalisation_sums_x_once_on_cpu():
    """(x - x.mean(0)) / x.std(0): the mean and the variance both reduce sum(x)
    over the columns; the fused kernel keeps one of the two passes
    (merge_duplicate_reductions): three column tiles (sum, shifted sum,
    shifted sum of squares), not four, in the block loop and again in the
    overlapping last vector."""
    x = torch.randn(40, 1030) * 3 + 1
    x[5, 9] = float("nan")
    kernels = _cpu_kernels(lambda x: (x - x.mean(0)) / x.std(0), x, atol=1e-5, rtol=1e-4)
    assert len(re.findall(r"cppi_f32x\d+ \w+_tile\[\d+\];", kernels)) == 3 * 2, kernels


def test_var_mean(device):
    def f(x):
        var, mean = torch.var_mean(x, dim=1, correction=1)
        var0, mean0 = torch.var_mean(x, dim=(0, 2), keepdim=True, correction=0)
        return var, mean, var0, mean0, x.var(), x.std(2)

    check_model(f, (torch.randn(4, 19, 6, device=device) + 3,), reduction=True)


def test_the_mean_of_a_row_holding_inf_is_inf_on_cpu():
    """The two-pass moments (rows of up to 1024 on the CPU) correct the mean
    by the deviations' sum, which is NaN once the row's sum is infinite (inf
    - inf): the mean is then the sum over N, inf as eager's where the inf
    ends the row, not NaN. The variance stays NaN."""
    x = torch.randn(4, 9)
    x[1, 8] = float("inf")
    x[2, 8] = -float("inf")
    var, mean = torch.compile(lambda x: torch.var_mean(x, -1), backend="cppinductor", options={"fallback": "error"})(x)
    ref_var, ref_mean = torch.var_mean(x, -1)
    assert mean[1] == float("inf") and mean[2] == -float("inf"), mean
    torch.testing.assert_close(mean, ref_mean)
    torch.testing.assert_close(var, ref_var, equal_nan=True)


def test_layer_norm_functional(device):
    def f(x, w, b):
        return F.layer_norm(x, (16,), w, b, eps=1e-5), F.layer_norm(x, (8, 16))

    x = torch.randn(3, 8, 16, device=device)
    w, b = torch.randn(16, device=device), torch.randn(16, device=device)
    check_model(f, (x, w, b), grad=True, reduction=True)


def test_layer_norm_module(device):
    ln = torch.nn.LayerNorm(24).to(device)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    check_model(ln, (torch.randn(5, 24, device=device),), grad=True, reduction=True)


def test_layer_norms_of_a_residual_stream(device):
    """GPT-2's blocks in bfloat16: each layer norm reads the residual stream,
    a sum of earlier outputs rounded at every add, and the last sum is also
    returned. On CUDA the sum is computed once per element into the row's
    registers, and what a kernel stores of it is not read back; values as
    eager's, each add rounded as eager rounds it."""
    def f(h, a, b, c, w, bias):
        x = h + a
        y = F.layer_norm(x, (768,), w, bias)
        x = x + b
        z = F.layer_norm(x, (768,), w, bias)
        x = x + c
        return y, z, F.layer_norm(x, (768,), w, bias), x * 2

    args = [torch.randn(300, 768, device=device, dtype=torch.bfloat16) for _ in range(4)]
    args += [torch.randn(768, device=device, dtype=torch.bfloat16) for _ in range(2)]
    check_model(f, args, reduction=True, options={"fallback": "error"})


def test_layer_norm_of_an_embedding_chain(device):
    """GPT-2's first norms in bfloat16: token rows gathered from a table plus
    positions, then residual adds. On CUDA the gathered rows are read as
    16-byte vectors (a token's row starts at id x 768); a table that is a
    view one element in, so no row is aligned, runs the scalar kernel. Both
    as eager's, every add rounded as eager rounds it."""
    def f(table, pos, ids, a, b, w, bias):
        h = F.embedding(ids, table) + pos
        y = F.layer_norm(h, (768,), w, bias)
        h = h + a
        z = F.layer_norm(h, (768,), w, bias)
        return y, z, F.layer_norm(h + b, (768,), w, bias)

    bf16 = dict(device=device, dtype=torch.bfloat16)
    ids = torch.randint(0, 50, (4, 33), device=device)
    rest = [torch.randn(33, 768, **bf16), ids, torch.randn(4, 33, 768, **bf16), torch.randn(4, 33, 768, **bf16),
            torch.randn(768, **bf16), torch.randn(768, **bf16)]
    check_model(f, [torch.randn(50, 768, **bf16)] + rest, reduction=True, options={"fallback": "error"})
    torch._dynamo.reset()
    shifted = torch.randn(50 * 768 + 1, **bf16)[1:].view(50, 768)
    check_model(f, [shifted] + rest, reduction=True, options={"fallback": "error"})


def test_layer_norm_gradients_over_many_rows(device):
    """Weight and bias gradients sum over 4096 rows of 256 columns: on CUDA
    the two column sums fold in one pass, split across blocks. A float32 sum
    of 4096 terms is only so exact: against a float64 run, eager's weight
    gradient is up to 2.2e-4 off and ours 4.2e-4 (RMS 5.2e-5 and 7.8e-5), so
    the comparison with eager allows 5e-4, not the 1e-4 of short reductions."""
    ln = torch.nn.LayerNorm(256).to(device)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    check_model(ln, (torch.randn(4096, 256, device=device),), grad=True, reduction=True, atol=5e-4)


def test_a_long_column_sum_is_about_as_close_to_float64_as_eager():
    """A bias gradient is a column sum over the batch's rows. Summed in one
    float per column, 4096 rows of randn + 1 landed 14x further from float64
    than eager's cascaded sum; cascading every 64 rows brings it to 1.6x."""
    torch.manual_seed(0)
    x = torch.randn(4096, 256) + 1
    exact = x.double().sum(0)
    eager_error = (x.sum(0) - exact).abs().max().item()
    compiled = torch.compile(lambda t: t.sum(0), backend="cppinductor")
    ours_error = (compiled(x) - exact).abs().max().item()
    assert ours_error < 3 * eager_error, (ours_error, eager_error)


def test_batch_norm_train_updates_running_stats(device):
    bn = torch.nn.BatchNorm2d(3).to(device).train()
    check_model(bn, (torch.randn(4, 3, 5, 5, device=device),), grad=True, reduction=True)


def test_batch_norm_eval(device):
    bn = torch.nn.BatchNorm1d(6).to(device)
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2)
    bn.eval()
    check_model(bn, (torch.randn(4, 6, device=device),), reduction=True)


def test_group_norm(device):
    gn = torch.nn.GroupNorm(2, 4).to(device)
    check_model(gn, (torch.randn(2, 4, 3, 3, device=device),), grad=True, reduction=True)


def test_cumsum_and_sort(device):
    def f(x):
        return x.cumsum(1), torch.sort(x, dim=1).values, torch.topk(x, 3).values

    check_model(f, (torch.randn(4, 10, device=device),), reduction=True)


@pytest.mark.parametrize("shape, dim", [((0,), None), ((0, 3), 0)])
def test_moments_of_an_empty_reduction_are_nan(shape, dim, device):
    # eager: 0/0 for the mean as well as the variance (found by the OpInfo sweep)
    def f(x):
        return torch.var_mean(x, dim=dim), torch.std_mean(x, dim=dim, correction=0), (x.var(), x.mean())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_model(f, (torch.randn(*shape, device=device),), reduction=True)


NORM_ORDS = [2, 1, float("inf"), -float("inf"), 0, 3, 0.5, -1]


@pytest.mark.parametrize("ord", NORM_ORDS, ids=str)
def test_vector_norm(ord, device):
    def f(x):
        return (torch.linalg.vector_norm(x, ord), torch.linalg.vector_norm(x, ord, dim=1),
                torch.linalg.vector_norm(x, ord, dim=(0, 2), keepdim=True))

    x = torch.randn(5, 7, 3, device=device)
    x[1, 2, 0] = 0
    check_model(f, (x,), options={"fallback": "error"}, reduction=True)


def test_vector_norm_dtypes_and_grad(device):
    def f(x, h):
        return (torch.linalg.vector_norm(x, dim=-1), torch.linalg.vector_norm(h, 2, dim=0),
                torch.linalg.vector_norm(h, 1, dtype=torch.float64), torch.linalg.vector_norm(x.t(), 3, dim=0))

    x = torch.randn(6, 33, dtype=torch.float64, device=device)
    h = torch.randn(9, 4, dtype=torch.bfloat16, device=device)
    check_model(f, (x, h), options={"fallback": "error"}, reduction=True)
    check_model(lambda x: torch.linalg.vector_norm(x, dim=1), (torch.randn(4, 9, device=device),), grad=True,
                reduction=True)


@pytest.mark.parametrize("p", [2, 0.5, 1], ids=str)
def test_normalize_reads_the_norm_it_rewrites(p, device):
    """The root of a p-norm is an epilogue; the consumer (the division) must see the rooted value."""
    check_model(lambda x: F.normalize(x, p=p, dim=0), (torch.randn(1, 2, 4, 5, device=device),),
                options={"fallback": "error"}, reduction=True)


@pytest.mark.parametrize("size", [(8, 16, 7, 9), (4, 3, 32, 32)], ids=["63", "1024"])
def test_variance_of_data_far_from_zero_keeps_its_precision(size, device):
    """Mean 1e4, std 1: a float32 Welford state lost the spread (1.7e-4 relative
    error in std on CPU); short reductions now take two passes (mean, then the
    squared deviations), within float32 tolerance of the float64 answer."""
    x = (torch.randn(*size, dtype=torch.float64) + 1e4).float().to(device)
    f = torch.compile(lambda x: (x.std((2, 3)), torch.var_mean(x, (2, 3), correction=0)), backend="cppinductor",
                      options={"fallback": "error"})
    std, (var, mean) = f(x)
    x64 = x.double()
    torch.testing.assert_close(std.double(), x64.std((2, 3)), rtol=1.3e-5, atol=0)
    torch.testing.assert_close(var.double(), x64.var((2, 3), correction=0), rtol=2.6e-5, atol=0)
    torch.testing.assert_close(mean.double(), x64.mean((2, 3)), rtol=1.3e-6, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rows_up_to_16384_keep_the_variance_precision():
    """On CUDA a row of up to 16384 elements stays in registers, so variance
    takes two passes there too (layer_norm's 16384-wide rows included)."""
    x = (torch.randn(6, 16384, dtype=torch.float64) + 1e4).float().cuda()
    f = torch.compile(lambda x: (torch.var_mean(x, -1), F.layer_norm(x, (16384,))), backend="cppinductor",
                      options={"fallback": "error"})
    (var, mean), ln = f(x)
    x64 = x.double()
    torch.testing.assert_close(var.double(), x64.var(-1), rtol=2.6e-5, atol=0)
    torch.testing.assert_close(mean.double(), x64.mean(-1), rtol=1.3e-6, atol=0)
    # The float32 mean itself is within half an ulp of 1e4 (4.9e-4) of the exact one.
    torch.testing.assert_close(ln, F.layer_norm(x64, (16384,)).float(), rtol=0, atol=2e-3)


@pytest.mark.parametrize("shape", [(4, 3, 7, 9), (2, 5, 16, 16)], ids=str)
def test_per_channel_statistics_reduce_the_spatial_dims_as_one_loop(shape, device):
    """var_mean over (N, H, W) of NCHW and a training batch_norm: H and W are
    one contiguous run per channel and reduce as one loop (no per-row tail);
    values, gradients included, as eager's."""
    from cppinductor.utils import run_and_get_code

    def stats(x):
        return torch.var_mean(x, (0, 2, 3))

    x = torch.randn(*shape, device=device)
    check_model(stats, (x,), options={"fallback": "error"})
    weight = torch.randn(shape[1], device=device, requires_grad=True)
    bias = torch.randn(shape[1], device=device, requires_grad=True)

    def bn(x):
        return F.batch_norm(x, None, None, weight, bias, training=True)

    check_model(bn, (x.clone().requires_grad_(),), grad=True)
    if device == "cpu":  # the CUDA row mappings flatten a stage's loops anyway
        torch._dynamo.reset()
        _, sources = run_and_get_code(torch.compile(stats, backend="cppinductor"), x)
        hw = shape[2] * shape[3]  # one loop to H * W: its end, or where a masked last vector stops
        assert any(f"< {hw};" in s or f"its lanes from {hw} on" in s for s in sources), sources
