"""End to end, compiled vs eager: pointwise programs, dtypes, layouts, broadcasting."""

import re

import pytest
import torch
import torch.nn.functional as F

from check import check_model
from conftest import FLOAT_LANES


def relu_add_mul(x, b):
    return torch.relu(x + b) * 2


def sin_plus_cos(x):
    return torch.sin(x) + torch.cos(x)


def transcendental_mix(x):
    return torch.exp(torch.tanh(x)) + torch.log(torch.sigmoid(x) + 1) - torch.sqrt(x.abs() + 0.5)


def where_clamp(x, y):
    return torch.where(x > 0, x.clamp(max=0.5), y.clamp(-0.25, 0.25)), torch.clamp_min(x * y, 0.1)


def erf_gelu_pow(x):
    return torch.erf(x) * x.pow(2) + torch.nn.functional.gelu(x, approximate="tanh") / (1 + x.abs())


def nan_inf_propagation(x):
    return torch.log(x), 1.0 / x, torch.maximum(x, torch.zeros_like(x)), x.isnan()


POINTWISE = [
    pytest.param(relu_add_mul, lambda d: (torch.randn(8, 16, device=d), torch.randn(16, device=d)), id="relu_add_mul"),
    pytest.param(sin_plus_cos, lambda d: (torch.randn(37, device=d),), id="sin_cos"),
    pytest.param(transcendental_mix, lambda d: (torch.randn(4, 33, device=d),), id="exp_log_tanh_sigmoid"),
    pytest.param(where_clamp, lambda d: (torch.randn(5, 7, device=d), torch.randn(5, 7, device=d)), id="where_clamp"),
    pytest.param(erf_gelu_pow, lambda d: (torch.randn(3, 65, device=d),), id="erf_gelu_pow"),
    pytest.param(
        nan_inf_propagation,
        lambda d: (torch.tensor([-1.0, 0.0, 1.0, float("nan"), float("inf"), -float("inf")], device=d),),
        id="nan_inf",
    ),
]


@pytest.mark.parametrize("fn, make_args", POINTWISE)
def test_pointwise(fn, make_args, device):
    check_model(fn, make_args(device))


def test_broadcast_three_way(device):
    def f(a, b, c):
        return a * b + c, (a - c) / (b.abs() + 1)

    check_model(f, (torch.randn(4, 1, 6, device=device), torch.randn(3, 1, device=device), torch.randn(6, device=device)))


def test_broadcast_scalar_tensor(device):
    def f(x, s):
        return x * s + s

    check_model(f, (torch.randn(3, 4, device=device), torch.tensor(2.5, device=device)))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda d: torch.randn(6, 5, device=d).t(), id="transposed"),
        pytest.param(lambda d: torch.randn(8, 12, device=d)[::2, 1::3], id="sliced_step"),
        pytest.param(lambda d: torch.randn(5, 1, device=d).expand(5, 7), id="expanded"),
        pytest.param(lambda d: torch.randn(2, 3, 4, device=d).permute(2, 0, 1), id="permuted"),
        pytest.param(lambda d: torch.randn(20, device=d)[3:15], id="storage_offset"),
        pytest.param(lambda d: torch.randn(2, 3, 4, 5, device=d).to(memory_format=torch.channels_last), id="channels_last"),
    ],
)
def test_non_contiguous_inputs(make, device):
    def f(x):
        return torch.tanh(x) * 3 + x.sum(-1, keepdim=True)

    x = make(device)
    check_model(f, (x,), reduction=True)


def _permuted_residual_chain(x, pos):
    """Whisper's encoder stem: a (B, C, L) value permuted to (B, L, C), then a
    residual chain and a layer norm over C."""
    h = F.gelu(x).permute(0, 2, 1) + pos
    h2 = h * 2.0 + 1.0
    return F.layer_norm(h2 + h, (x.shape[1],)), h2 - h


def _stores(debug_dir, name):
    text = next(debug_dir.rglob("loop_ir_pre_fusion.txt")).read_text()
    return re.findall(rf"store {name}\[([^\]]*)\]", text)


def test_a_permuted_intermediate_that_only_kernels_read_is_stored_row_major(device, tmp_path, monkeypatch):
    """The permuted sums are stored (B, L, C) row-major, not in the traced
    (B, C, L) strides, so the chain's readers read along rows; what the graph
    returns keeps eager's strides."""
    monkeypatch.setenv("CPPINDUCTOR_DEBUG_DIR", str(tmp_path))
    x, pos = torch.randn(2, 16, 24, device=device), torch.randn(24, 16, device=device)
    check_model(_permuted_residual_chain, (x, pos), reduction=True, check_strides=True)
    assert _stores(tmp_path, "add_1") == ["384*x0 + 16*x1 + x2"]
    assert _stores(tmp_path, "mul_3") == ["384*x0 + 16*x1 + x2"]


def test_a_value_whose_operands_are_all_permuted_stays_as_traced(device, tmp_path, monkeypatch):
    """No operand is row-major (a channels-last chain): the traced strides."""
    def f(x):
        h = x.permute(0, 2, 1)
        return (torch.relu(h) + h).sum(-1)

    monkeypatch.setenv("CPPINDUCTOR_DEBUG_DIR", str(tmp_path))
    check_model(f, (torch.randn(2, 16, 24, device=device),), reduction=True)
    assert _stores(tmp_path, "relu") == ["384*x0 + x1 + 24*x2"]


def test_int64_arithmetic(device):
    def f(a, b):
        return a * b + 7, a // 3, a % 5, torch.bitwise_and(a, b), a - b.max(), (a << 2) | 1

    a = torch.randint(-100, 100, (4, 9), device=device)
    b = torch.randint(1, 50, (4, 9), device=device)
    check_model(f, (a, b))


def test_integer_division_by_zero_raises_like_eager_on_cpu():
    """CPU eager raises ZeroDivisionError for an integer divisor of 0 (floor,
    trunc, remainder, fmod); so does the compiled call, from a parallel loop
    too, and the next call with valid divisors runs normally. (CUDA eager
    does not raise: there the quotient is unspecified, and so is ours.)"""
    from check import compile_fn

    def f(a, b):
        return a // b, torch.div(a, b, rounding_mode="trunc"), a % b, torch.fmod(a, b)

    compiled = compile_fn(f, options={"fallback": "error"})
    a = torch.arange(-50000, 50000)
    ok = torch.randint(1, 9, (100000,)) * torch.where(torch.rand(100000) < 0.5, 1, -1)
    for x, y in zip(compiled(a, ok), f(a, ok)):
        torch.testing.assert_close(x, y)
    bad = ok.clone()
    bad[77777] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a, bad)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, bad)
    for x, y in zip(compiled(a, ok), f(a, ok)):
        torch.testing.assert_close(x, y)


def test_int_true_division_promotes_to_float(device):
    def f(a, b):
        return a / b, a.float().mean()

    check_model(f, (torch.arange(1, 13, device=device), torch.full((12,), 7, device=device)), reduction=True)


def test_true_divide_of_symbolic_sizes(device):
    """Nearest interpolation over symbolic sizes divides with
    aten.true_divide.Tensor (div without a rounding mode). The scale is a
    0-d tensor Dynamo computes from the sizes on the CPU: a CUDA kernel
    cannot read it, so there the op reading it runs in ATen (no fallback is
    asserted on the CPU only)."""
    def f(x):
        return torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest") * 2

    options = {"fallback": "error"} if device == "cpu" else {}
    check_model(f, (torch.randn(8, 3, 5, device=device),), dynamic=True, options=options)


def test_bool_arithmetic(device):
    def f(x, y):
        m = x > 0
        return m & (y < 0), m | ~m.logical_xor(y > 1), m.sum(), torch.where(m, y, 0.0), m.any(), m.all()

    check_model(f, (torch.randn(6, 8, device=device), torch.randn(6, 8, device=device)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_low_and_high_precision(dtype, device):
    def f(x, y):
        return torch.sigmoid(x) * y + torch.exp(-x.abs()), (x * y).sum(-1), x.to(torch.float32) + 1

    x = torch.randn(8, 32, device=device, dtype=dtype)
    y = torch.randn(8, 32, device=device, dtype=dtype)
    check_model(f, (x, y), reduction=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_sums_differences_and_products_round_as_eager(dtype, device):
    """Every 16-bit value (subnormals, infinities and NaN among them) added
    to, subtracted from and multiplied by others and by constants the type
    holds exactly: on CUDA two lanes at a time in one packed instruction
    (cppi_bf16x2_op), which must round as eager's float math and its
    rounding do, bit for bit; a constant the type does not hold (0.1) stays
    float. NaN compares as NaN (its payload may differ)."""
    from check import compile_fn

    def f(a, b):
        return a + b, a - b, a * b, (a * 0.5 - 2.0) * b, a * 0.1 + b

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    g = torch.Generator().manual_seed(0)
    a = every.repeat(16)
    b = torch.cat([every[torch.randperm(65536, generator=g)] for _ in range(15)] + [every.flip(0)])
    compiled = compile_fn(f, options={"fallback": "error"})
    for ours, eager in zip(compiled(a.to(device), b.to(device)), f(a, b)):
        ours = ours.cpu()
        assert torch.equal(ours.isnan(), eager.isnan())
        same = ours.view(torch.int16) == eager.view(torch.int16)
        assert bool((same | eager.isnan()).all()), (a[~same][:5], b[~same][:5], ours[~same][:5], eager[~same][:5])


def test_mixed_dtype_promotion(device):
    def f(h, f32, i):
        return h + f32, h * i, i + 1.5

    check_model(
        f,
        (
            torch.randn(5, device=device, dtype=torch.float16),
            torch.randn(5, device=device),
            torch.arange(5, device=device, dtype=torch.int32),
        ),
    )


def test_zero_size_tensors(device):
    def f(x, y):
        return (x + 1).relu(), x.sum(0), y * 2, torch.cat([x, x], 0)

    check_model(f, (torch.randn(0, 4, device=device), torch.randn(3, 0, device=device)))


def test_python_float_argument(device):
    def f(x, scale):
        return x * scale + scale

    check_model(f, (torch.randn(4, 4, device=device), 0.5))
    check_model(f, (torch.randn(4, 4, device=device), 1.75))


def test_python_int_and_size_arithmetic(device):
    def f(x, n):
        return x.reshape(x.shape[0] * n, -1) + x.shape[1], x.new_full((n, 2), float(n))

    check_model(f, (torch.randn(4, 6, device=device), 2), dynamic=True)


def test_scalar_outputs(device):
    def f(x):
        return x.sum(), x.max(), x[0, 0], x.numel() * 2

    check_model(f, (torch.randn(3, 5, device=device),), reduction=True)


def test_random_ops_shape_and_range(device):
    """Random values can't match eager bit for bit; check what can be checked."""
    from check import compile_fn

    def f(x):
        return torch.rand_like(x), torch.randn(3, 4, device=x.device) * 0 + x[:3, :4]

    r, y = compile_fn(f)(torch.ones(5, 6, device=device))
    assert r.shape == (5, 6) and r.dtype == torch.float32 and bool(((r >= 0) & (r < 1)).all())
    assert torch.equal(y, torch.ones(3, 4, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_round_decimals(dtype, device):
    """Half to even at a power of ten, positive and negative decimals, as eager computes it."""

    def f(x):
        return torch.round(x, decimals=2), torch.round(x, decimals=-2), torch.round(x, decimals=0)

    x = torch.cat([torch.randn(64, dtype=dtype, device=device) * 1000,
                   torch.tensor([0.125, 0.135, 250.0, 350.0, -0.5, 2.5], dtype=dtype, device=device)])
    check_model(f, (x,), options={"fallback": "error"})


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_cat_of_computed_inputs_is_one_vectorised_kernel(dtype):
    """A cat reads each input under a mask that is uniform over most vectors:
    whole-vector loads there, lane by lane only at the seams (widths 5, 13
    and 30 put seams inside vectors), never a read outside an input."""
    import cppinductor

    def f(a, b, c):
        return torch.cat([a @ a.t(), b.abs() * 2, c.sin()], dim=-1).to(dtype)

    args = (torch.randn(9, 5), torch.randn(9, 13), torch.randn(9, 30))
    check_model(f, args)
    kernels = [k for k in cppinductor.explain(f)(*args).to_dict()["graphs"][0]["kernels"] if k["kind"] == "pointwise"]
    assert len(kernels) == 1 and kernels[0]["vectorized"], kernels


@pytest.mark.parametrize("compiler", ["default", "gxx"])
def test_sin_and_cos_of_one_value_share_a_sincos(compiler, tmp_path):
    """sin(x) and cos(x) of the same x go through one cppi_sincos call in the
    vector loop (one argument reduction); NaN, inf, -0, huge arguments and the
    last columns (a vector overlapping the one before) still agree with eager.
    sin of another value keeps cppi_sin."""

    def f(x):
        return torch.sin(x) + torch.cos(x), torch.sin(x * 2)

    x = torch.randn(2, 999) * 10
    x[0, :12] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e30, -1e30, 3.4e38,
                              1e-40, 125.0, 39000.0, 1e7])
    x[1, -3:] = torch.tensor([float("nan"), -0.0, 1e20])  # in the overlapping last vector
    check_model(f, (x,), options={"cpu_compiler": compiler, "debug_dir": str(tmp_path)})
    source = "".join(p.read_text() for p in tmp_path.glob("*/kernels.cpp"))
    vector_body = source[source.index("// kernel: "):]
    # The vector loop and the last vector, each with one sincos; no scalar tail.
    assert "tail=overlapped" in vector_body, vector_body
    assert vector_body.count("cppi_sincos(") == 2, vector_body
    assert "cppi_sin(tmp" in vector_body and "cppi_cos(" not in vector_body, vector_body


def test_last_columns_run_as_a_vector_overlapping_the_one_before(tmp_path):
    """A constant-size vectorised loop that is not a whole number of vectors
    ends with one vector over its last columns, overlapping the one before
    (CpuSchedule::tail): on two threads each parallel chunk is whole vectors
    and the last one takes the rest, so no column is computed by two
    threads. An in-place update keeps the scalar tail: computing an element
    twice would read what the first time stored."""

    def f(x, y):
        return torch.sigmoid(x) * 2 + 1, y * 3 - x[: y.shape[0]]

    def in_place(x):
        x.mul_(3).add_(1)
        return x

    x = torch.randn(200003)
    x[-5:] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e30])
    y = torch.randn(1000)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        check_model(f, (x, y), options={"debug_dir": str(tmp_path / "a")})
        check_model(in_place, (torch.randn(70001),), options={"debug_dir": str(tmp_path / "b")})
    finally:
        torch.set_num_threads(threads)
    parallel = "".join(p.read_text() for p in (tmp_path / "a").glob("*/kernels.cpp"))
    assert "tail=overlapped" in parallel and "end == " in parallel, parallel
    assert "// the rest: one vector ending at the loop's end" in parallel, parallel
    updated = "".join(p.read_text() for p in (tmp_path / "b").glob("*/kernels.cpp"))
    assert "tail=scalar_loop" in updated and "tail=overlapped" not in updated, updated


@pytest.mark.parametrize("compiler", ["default", "gxx"])
def test_large_dense_outputs_are_prefaulted_per_chunk(compiler, tmp_path):
    """Kernels writing large outputs densely fault each parallel chunk's range
    in one batch first (fresh pages only; CpuSchedule::prefault_outputs):
    results, NaN and inf included, stay eager's, for fresh outputs and for a
    large input updated in place (resident pages: left alone)."""

    def f(x, b):
        return torch.nn.functional.gelu(x + b), torch.sin(x) * 2

    def in_place(x):
        x.mul_(3)
        return x + 1

    x = torch.randn(1024, 1100)
    x[0, :2] = torch.tensor([float("nan"), -float("inf")])  # (eager's gelu(+inf) is NaN, Inductor's and ours inf)
    x[-1, -2:] = torch.tensor([float("nan"), -0.0])
    options = {"cpu_compiler": compiler, "debug_dir": str(tmp_path)}
    check_model(f, (x, torch.randn(1100)), options=options)
    check_model(in_place, (x,), options=options)
    check_model(lambda x: torch.softmax(x, dim=-1), (x,), options=options, reduction=True)  # a row kernel
    sources = [p.read_text() for p in sorted(tmp_path.glob("*/kernels.cpp"))]
    assert sources and all("cppi_prefault_for_write(" in s for s in sources), sources


@pytest.mark.parametrize("case", ["transpose", "channels_last"])
def test_outputs_laid_out_like_a_permuted_input_are_written_in_memory_order(case):
    """Eager keeps a permuted input's memory order in a pointwise result
    (`x.t() + 1` has strides (1, n)); the kernel walks its loops in that order,
    so its innermost loop is contiguous and vectorised instead of striding."""
    import cppinductor

    if case == "transpose":
        f, x = (lambda x: x.t() + 1), torch.randn(67, 129)
    else:
        f, x = (lambda x: torch.relu(x) * 2), torch.randn(2, 16, 9, 11).to(memory_format=torch.channels_last)
    check_model(f, (x,), options={"fallback": "error"})
    out = torch.compile(f, backend="cppinductor")(x)
    assert out.stride() == f(x).stride()
    kernels = cppinductor.explain(f)(x).to_dict()["graphs"][0]["kernels"]
    assert len(kernels) == 1 and kernels[0]["vectorized"], kernels


def test_fmax_fmin_ignore_a_nan_operand(device):
    """fmax / fmin give the other operand where one is NaN (NaN only where both
    are) and self where the two are equal, signed zeros included, as eager;
    integer and broadcast operands too."""

    def f(a, b, i, j):
        return torch.fmax(a, b), torch.fmin(a, b), torch.fmax(i, j), torch.fmin(a, b[:1])

    nan = float("nan")
    a = torch.tensor([[-0.0, 0.0, nan, 1.0, nan, -2.0, float("inf"), 3.0]] * 3, device=device)
    b = torch.tensor([[0.0, -0.0, 2.0, nan, nan, -3.0, 1.0, float("-inf")]] * 3, device=device)
    i = torch.randint(-5, 5, (3, 8), device=device)
    check_model(f, (a, b, i, i.flip(-1)), options={"fallback": "error"})
    # assert_close takes -0 for +0: the signs of the zeros, checked apart.
    compiled = torch.compile(f, backend="cppinductor")
    for got, want in zip(compiled(a, b, i, i.flip(-1))[:2], f(a, b, i, i.flip(-1))[:2]):
        assert torch.equal(got[:, :2].signbit(), want[:, :2].signbit()), (got, want)


def test_zero_signs_of_relu_and_clamp(device):
    """A zero of the other sign than the bound: eager keeps x on CPU and
    orders the zeros (-0 < +0) on CUDA. assert_close takes -0 for +0, so the
    signs are compared on their own, at a length with a vector tail."""

    def f(x, lo):
        return torch.relu(x), x.clamp_min(0.0), x.clamp_max(-0.0), x.clamp(lo, lo), torch.maximum(x, lo)

    x = torch.tensor([-0.0, 0.0] * 9, device=device)
    lo = torch.zeros_like(x)
    # On CPU, eager's tie for tensor bounds (clamp, maximum) depends on the lane.
    outs = f(x, lo) if device == "cuda" else f(x, lo)[:3]
    got = torch.compile(f, backend="cppinductor")(x, lo)
    for k, want in enumerate(outs):
        assert torch.equal(got[k].signbit(), want.signbit()), (k, got[k], want)


def test_bounds_that_are_constants_cost_one_compare_per_vector_on_cpu():
    """relu and clamps by constants: only x can be NaN, so each vector takes
    one compare and a select (cppi_max_bound_first: relu's max(0, x) is one
    maxps), not cppi_max's NaN checks of both operands. NaN, infinities and
    both zeros give eager's values and signs, in the vector loop and its
    tail, float32 and float64."""

    def f(x):
        return (torch.relu(x), x.clamp(-0.5, 0.5), x.clamp_min(-0.0), x.clamp_max(0.0),
                torch.maximum(x, x.new_tensor(0.25)))

    specials = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 0.25]
    for dtype in (torch.float32, torch.float64):
        torch._dynamo.reset()
        x = torch.cat([torch.randn(93, dtype=dtype), torch.tensor(specials * 4, dtype=dtype)])
        src = _cpu_source(f, x)
        assert "cppi_max_bound_first(" in src and "cppi_min_bound_first(" in src, src
        got = torch.compile(f, backend="cppinductor")(x)
        for k, want in enumerate(f(x)):
            torch.testing.assert_close(got[k], want, equal_nan=True, rtol=0, atol=0)
            assert torch.equal(got[k].signbit() | got[k].isnan(), want.signbit() | want.isnan()), (k, got[k], want)


def test_angle_of_real_tensors(device):
    """angle of a real value: pi below zero, 0 otherwise (-0 and +inf
    included), NaN stays NaN; integers give float32, float64 stays float64."""

    def f(x, i, d):
        return torch.angle(x), torch.angle(i), torch.angle(d)

    x = torch.tensor([-1.5, -0.0, 0.0, 2.0, float("nan"), float("inf"), -float("inf"), -1e-45], device=device)
    i = torch.tensor([-3, 0, 4], device=device)
    check_model(f, (x, i, x.double()), options={"fallback": "error"})


# --- transposed reads ----------------------------------------------------------------

def _cpu_source(f, *args, cpu_isa="native"):
    from cppinductor.utils import run_and_get_code

    compiled = torch.compile(f, backend="cppinductor", options={"fallback": "error", "cpu_isa": cpu_isa})
    _, sources = run_and_get_code(compiled, *args)
    return "\n".join(s[s.index("// kernel: "):] for s in sources if "// kernel: " in s)


TRANSPOSED = [
    # (program, inputs): one input read across the rows of the output.
    ("x.t() + y", lambda x, y: x.t() + y, lambda: (torch.randn(64, 48), torch.randn(48, 64))),
    ("odd sizes: partial tiles and a scalar column tail", lambda x, y: x.t() * y,
     lambda: (torch.randn(53, 37), torch.randn(37, 53))),
    ("two transposed inputs and a broadcast", lambda x, y, b: x.t() - y.t() * b,
     lambda: (torch.randn(40, 96), torch.randn(40, 96), torch.randn(40))),
    ("last two dims swapped in a batch", lambda x: x.transpose(1, 2).contiguous() * 2,
     lambda: (torch.randn(3, 50, 70),)),
    ("NCHW to NHWC", lambda x: x.permute(0, 2, 3, 1).contiguous() + 1,
     lambda: (torch.randn(2, 24, 9, 11),)),
    ("NHWC to NCHW", lambda x: x.contiguous() * 3,
     lambda: (torch.randn(2, 24, 9, 11).to(memory_format=torch.channels_last),)),
    ("a slice of a transpose", lambda x, y: x.t()[3:40, 1:33] + y,
     lambda: (torch.randn(50, 45), torch.randn(37, 32))),
    ("bfloat16", lambda x, y: x.t() + y, lambda: (torch.randn(40, 70).bfloat16(), torch.randn(70, 40).bfloat16())),
    ("float64", lambda x, y: x.t() + y, lambda: (torch.randn(40, 70).double(), torch.randn(70, 40).double())),
    ("int64", lambda x, y: x.t() * y, lambda: (torch.randint(-9, 9, (33, 70)), torch.randint(-9, 9, (70, 33)))),
    ("bool", lambda x, y: x.t() & y, lambda: (torch.randn(33, 70) > 0, torch.randn(70, 33) > 0)),
    ("uint8 to float", lambda x: x.t().float() / 255, lambda: (torch.randint(0, 255, (40, 70), dtype=torch.uint8),)),
]


@pytest.mark.parametrize("name, fn, make_args", TRANSPOSED, ids=[t[0] for t in TRANSPOSED])
def test_transposed_reads(name, fn, make_args, device):
    check_model(fn, make_args())


def test_transposed_reads_with_dynamic_shapes(device):
    """Symbolic rows and columns: whole tiles where they fit, the plain vector
    loop for the last rows, a scalar tail for the last columns."""
    f = lambda x, y: x.t() + y  # noqa: E731
    for rows, cols in [(40, 70), (53, 37), (16, 16), (5, 3)]:
        check_model(f, (torch.randn(cols, rows, device=device), torch.randn(rows, cols, device=device)), dynamic=True)


def test_transposed_read_is_turned_in_registers_on_cpu():
    """x.t() + y: y is read along its rows and x across them. The vector loop
    loads both whole, x from a tile transposed in registers (a scalar loop
    with one element per cache line of x before: 2048^2 floats, two threads,
    9.6 ms, Inductor 1.3, now 1.3). The tiles cover the rows that fit; the
    rest runs the plain loop, its x lanes gathered."""
    x, y = torch.randn(53, 64), torch.randn(64, 53)
    src = _cpu_source(lambda x, y: x.t() + y, x, y)
    assert "transpose_tile=yes" in src, src
    assert src.count("cppi_transpose_tile<") == 1, src
    assert "the last rows, fewer than a tile" in src, src


def test_copying_a_tensor_s_own_transpose_into_it():
    """x.copy_(x.t() * 2) reads the buffer it overwrites; the result is eager's
    (a temporary holds the transpose). A kernel that itself rewrites what it
    reads transposed is never tiled: CpuSchedule's
    AKernelThatRewritesWhatItReadsTransposedIsNotTiled."""
    def f(x):
        x.copy_(x.t() * 2)
        return x

    check_model(f, (torch.randn(48, 48),))


# --- cat and padding: the vector loop in pieces ----------------------------------------

PIECES = [
    ("cat of two along the last dim", lambda x, y: torch.cat([x, y], 1).relu(),
     lambda: (torch.randn(9, 37), torch.randn(9, 53))),
    ("cat of three in a batch", lambda x, y, z: torch.cat([x, y, z], -1) * 2,
     lambda: (torch.randn(2, 5, 16), torch.randn(2, 5, 3), torch.randn(2, 5, 21))),
    ("pad with a value", lambda x: F.pad(x, (3, 5), value=2.5) + 1, lambda: (torch.randn(7, 40),)),
    ("negative pad crops", lambda x: F.pad(x, (-2, 4)).exp(), lambda: (torch.randn(6, 30),)),
    ("int64 cat", lambda x, y: torch.cat([x, y], 1) * 3, lambda: (torch.randint(-5, 5, (4, 19)), torch.randint(-5, 5, (4, 20)))),
    ("bool cat", lambda x, y: torch.cat([x, y], 1) | True, lambda: (torch.randn(4, 19) > 0, torch.randn(4, 20) > 0)),
    ("cat of a broadcast and a slice", lambda x, b: torch.cat([b.expand(6, 11), x[:, 2:]], 1) - 1,
     lambda: (torch.randn(6, 40), torch.randn(1, 11))),
    # Computed inputs are computed where the cat or pad reads them (one kernel).
    ("cat of computed halves", lambda x, c, s: torch.cat([x[:, :19] * c - x[:, 19:] * s, x[:, :19] * s + x[:, 19:] * c], 1),
     lambda: (torch.randn(7, 38), torch.randn(19), torch.randn(19))),
    ("pad of a computed value", lambda x: F.pad(x.exp() - 1, (3, 5), value=-2.0) * 2, lambda: (torch.randn(6, 41),)),
    ("cat of computed int64", lambda x, y: torch.cat([x * 3, y // 2], 1), lambda: (torch.randint(-9, 9, (4, 21)), torch.randint(-9, 9, (4, 6)))),
]


@pytest.mark.parametrize("name, fn, make_args", PIECES, ids=[t[0] for t in PIECES])
def test_cat_and_pad_along_the_vector_loop(name, fn, make_args, device):
    check_model(fn, make_args())


def test_cat_and_pad_with_dynamic_shapes(device):
    f = lambda x, y: F.pad(torch.cat([x, y], 1), (1, 2)).relu()  # noqa: E731
    for cols in (37, 50):
        check_model(f, (torch.randn(5, cols, device=device), torch.randn(5, 9, device=device)), dynamic=True)
    g = lambda x, y: torch.cat([x.exp(), y * 2], 1)  # noqa: E731
    for cols in (37, 50):
        check_model(g, (torch.randn(5, cols, device=device), torch.randn(5, 9, device=device)), dynamic=True)


def test_cat_runs_one_plain_loop_per_input_on_cpu(cpu_isa):
    """torch.cat([x, y], 1).relu(): the vector loop splits where the inputs
    meet; in each piece the index comparisons are constants, so both inputs
    are plain full-width loads (were masked loads behind int64 lane indices,
    eight floats wide: 2048 x (1024 + 1024), two threads, 1.34 -> 0.86 ms,
    relu alone 0.77, Inductor 0.83)."""
    x, y = torch.randn(8, 37), torch.randn(8, 53)
    src = _cpu_source(lambda x, y: torch.cat([x, y], 1).relu(), x, y, cpu_isa=cpu_isa)
    assert "vector_loop_splits=37" in src, src
    assert f"width={FLOAT_LANES[cpu_isa]}" in src, src
    assert "masked" not in src and "cppi_viota" not in src, src


# --- strided reads: whole vectors picked apart in registers ---------------------------------

STRIDED = [
    ("even plus odd elements", lambda x: x[:, ::2] + x[:, 1::2], lambda: (torch.randn(7, 74),)),
    ("interleaved rotary pairs", lambda x, c, s: torch.stack([x[..., ::2] * c - x[..., 1::2] * s,
                                                                 x[..., ::2] * s + x[..., 1::2] * c], -1).flatten(-2),
     lambda: (torch.randn(2, 5, 64), torch.randn(32), torch.randn(32))),
    ("every third, odd length", lambda x: x[:, 1::3].exp(), lambda: (torch.randn(5, 100),)),
    ("every fourth, reduced", lambda x: x[:, ::4].sum(-1), lambda: (torch.randn(6, 400),)),
    ("float64 stride 2", lambda x: x[..., ::2] * 3, lambda: (torch.randn(3, 4, 50, dtype=torch.float64),)),
    ("bfloat16 stride 2", lambda x: (x[:, ::2] + 1).relu(), lambda: (torch.randn(5, 66).to(torch.bfloat16),)),
    ("int64 stride 3", lambda x: x[:, ::3] * 2, lambda: (torch.randint(-9, 9, (4, 61)),)),
    ("uint8 stride 2", lambda x: x[:, ::2] + 1, lambda: (torch.randint(0, 200, (4, 90), dtype=torch.uint8),)),
    ("bool stride 4", lambda x: x[:, ::4] | x[:, 1::4], lambda: (torch.randn(3, 128) > 0,)),
    ("stride 5 stays lane by lane", lambda x: x[:, ::5] - 1, lambda: (torch.randn(4, 90),)),
    ("sums of groups of four", lambda x: x.unfold(-1, 4, 4).sum(-1), lambda: (torch.randn(6, 100),)),
    ("max of pairs", lambda x: x.view(5, -1, 2).amax(-1), lambda: (torch.randn(5, 74),)),
    ("mean of triples", lambda x: x.view(5, -1, 3).mean(-1), lambda: (torch.randn(5, 111),)),
    ("avg_pool2d 2x2", lambda x: F.avg_pool2d(x, 2), lambda: (torch.randn(2, 3, 20, 34),)),
    ("avg_pool2d 3x3 stride 3 odd width", lambda x: F.avg_pool2d(x, 3), lambda: (torch.randn(2, 3, 21, 61),)),
    ("max_pool2d 3x3 stride 2 padded", lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (torch.randn(2, 3, 40, 70),)),
    # Over 65536 outputs: on a GPU, one thread per window.
    ("avg_pool2d over many windows", lambda x: F.avg_pool2d(x, 2), lambda: (torch.randn(4, 16, 64, 66),)),
    ("sums of four over many groups", lambda x: x.unfold(-1, 4, 4).sum(-1).relu(), lambda: (torch.randn(300, 1000),)),
]


@pytest.mark.parametrize("name, fn, make_args", STRIDED, ids=[t[0] for t in STRIDED])
def test_strided_reads(name, fn, make_args, device):
    check_model(fn, make_args())


def test_strided_reads_with_dynamic_shapes(device):
    f = lambda x: x[:, ::2] * x[:, 1::2]  # noqa: E731
    for cols in (74, 40, 10):
        check_model(f, (torch.randn(5, cols, device=device),), dynamic=True)


def test_pooling_windows_are_vector_loads_on_cpu(cpu_isa):
    """avg_pool2d(x, 2): every window is inside the input, so the lowering's
    bounds checks fold away (fold_range_conditions) and each window column
    is one strided vector load; the loop over the output columns is the
    vector loop (was scalar with four bounds checks per element: 32 x 64 x
    56 x 56, two threads, 1.02-1.16 ms, Inductor 0.80-0.98, now 0.77-0.83).
    A padded max pool keeps its lower bound check and reads whole vectors
    where it holds for every lane."""
    src = _cpu_source(lambda x: F.avg_pool2d(x, 2), torch.randn(2, 4, 40, 40), cpu_isa=cpu_isa)
    assert "vectorized=innermost_outer" in src, src
    assert f"cppi_vload_strided<cppi_f32x{FLOAT_LANES[cpu_isa]}, 2>" in src, src
    assert "masked" not in src and ">=" not in src, src
    src = _cpu_source(lambda x: F.max_pool2d(x, 3, 2, 1), torch.randn(2, 4, 40, 40), cpu_isa=cpu_isa)
    assert "cppi_vload_masked<" in src and "cppi_vload_strided<" in src, src


def test_nearest_upsampling_positions_are_index_arithmetic_and_vector_loads_on_cpu():
    """Nearest 2x reads x[..., int64((float)i * 0.5)]: the position, computed
    from arange, resolves to i // 2 (computed_positions.h), so no position is
    checked at run time, and the vector loop spreads half a vector of x over
    its lanes (cppi_vload_repeat; it was a scalar loop)."""
    src = _cpu_source(lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), torch.randn(2, 3, 16, 16))
    assert "vectorized=innermost_outer" in src, src
    assert "cppi_vload_repeat<" in src, src
    assert "cppi_check_index" not in src, src


def test_debug_dump_shows_each_cpu_kernels_loop_nest_after_each_pass(tmp_path):
    """loop_ir_scheduled.txt: the kernel's loop nest as lower_loop_nest built
    it (the vector loop with its tail still in it), then after the pass that
    splits the tail off."""

    def f(x):
        return torch.relu(x + 1) * 2

    check_model(f, (torch.randn(3, 37),), options={"debug_dir": str(tmp_path)})
    (dump,) = [p.read_text() for p in tmp_path.glob("*/loop_ir_scheduled.txt")]
    assert " after lower_loop_nest\n" in dump and " after split_vector_tails\n" in dump, dump
    lowered = dump[dump.index(" after lower_loop_nest\n"):dump.index(" after split_vector_tails\n")]
    assert "vector for " in lowered and " tail" in lowered and "stages" in lowered, dump
    split = dump[dump.index(" after split_vector_tails\n"):]
    assert " tail\n" not in split, dump
