"""Programs nobody wrote the compiler for: numerics at the edges, compiled vs eager.

NaN and inf through clamp/where/min/max/softmax/logsumexp, ties and NaN in
argmax, integer division and remainder of negative numbers, shifts, wrap-around,
integer and bool reductions, conversions at the limits of each dtype, and
reductions long enough that naive float accumulation goes wrong.
"""

import pytest
import torch
import torch.nn.functional as F

from check import check_model

NAN, INF = float("nan"), float("inf")
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5, 3.0, 1e-40, -1e38])


def test_clamp_where_and_activations_with_nan_and_inf():
    def f(x):
        return (
            x.clamp(-1, 2), x.clamp(min=0), x.clamp(2, 1), x.clamp(NAN, 1.0),
            torch.where(x > 0, x, 0.0), torch.nan_to_num(x), torch.nan_to_num(x, 1.0, 2.0, -3.0),
            F.relu(x), F.hardtanh(x), F.elu(x), F.softplus(x), F.silu(x), torch.sigmoid(x), torch.tanh(x),
        )  # fmt: skip

    check_model(f, (SPECIAL,))
    check_model(lambda x, lo, hi: torch.clamp(x, lo, hi), (SPECIAL, torch.full((10,), NAN), SPECIAL.flip(0)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_min_max_propagate_nan(dtype):
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y), x.max(), x.min(), x.amax(0), x.argmax(), x.argmin()

    x = SPECIAL.to(dtype)
    check_model(f, (x, x.roll(1)))


def test_reductions_over_rows_with_nan_and_inf():
    rows = torch.tensor([[1.0, NAN, 3.0], [NAN, NAN, 0.0], [2.0, 2.0, 1.0], [-INF, -INF, -INF], [INF, 1.0, -INF]])

    def f(x):
        return x.max(1), x.min(1), x.argmax(1), x.argmin(0), torch.logsumexp(x, 1), x.softmax(1), x.sum(1)

    check_model(f, (rows,))
    # NaN in different vector lanes and threads of a long row.
    long = torch.randn(6, 300)
    long[0, 250], long[0, 70], long[3, 299], long[5, 0] = NAN, NAN, NAN, NAN
    check_model(lambda x: (x.argmax(1), x.argmin(1), x.amax(1), x.amin(0), x.max(0)), (long,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_argmax_ties_pick_the_first_index(dtype):
    x = torch.randint(0, 3, (5, 300)).to(dtype)
    check_model(lambda x: (x.argmax(1), x.argmin(1), x.argmax(0), x.argmax(), x.max(1).indices), (x,))


def test_integer_division_and_remainder_of_negative_numbers():
    a = torch.tensor([-7, -6, -5, -1, 0, 1, 5, 6, 7, -3])
    b = torch.tensor([2, -2, 3, -3, 5, -1, 4, -4, 3, 7])

    def f(a, b):
        return (
            a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc"),
            a // 4, a % -4, torch.remainder(a, 3), a // -3,
        )  # fmt: skip

    for dtype in (torch.int64, torch.int32, torch.int8):
        check_model(f, (a.to(dtype), b.to(dtype)))


def test_float_floor_division_and_remainder():
    x = torch.tensor([6.0, -6.0, 0.3, -0.3, 1.0, -1.0, 5.0, 0.0, -0.0, INF] * 4)
    y = torch.tensor([3.0, 3.0, 0.1, 0.1, 0.1, -0.1, -2.5, 2.0, -2.0, 2.0] * 4)
    check_model(lambda x, y: (x // y, x % y, torch.fmod(x, y), x / y), (x, y))


def test_integer_wrap_shifts_and_bitwise():
    big = torch.tensor([-(2**63), 2**63 - 1, -3, 0, 5, 2**40])

    def wrap(a):
        return a + 1, a * 3, a - 2, -a, a.abs(), a.sum(), a.prod()

    check_model(wrap, (big,))
    check_model(lambda a: (a + 2**30, a * 70000, a.abs()), (torch.tensor([2**31 - 1, -(2**31), 123456, -5], dtype=torch.int32),))
    check_model(lambda a: (a + 200, a * 3, a - 250, a // 3, a % 7), (torch.tensor([0, 1, 100, 255, 128], dtype=torch.uint8),))

    def shifts(a, s):
        return a << s, a >> s, a << 3, a >> 1, a & 0xF0, a | 7, a ^ -1, ~a

    check_model(shifts, (torch.tensor([1, -8, 255, -1, 2**40, 3]), torch.tensor([0, 1, 2, 63, 64, -1])))
    check_model(lambda a, s: (a << s, a >> s), (torch.tensor([1, -8, 255, -1], dtype=torch.int32),
                                                 torch.tensor([31, 32, 40, 3], dtype=torch.int32)))


def test_integer_and_bool_reductions_promote():
    def f(a, c):
        return (
            a.sum(), a.sum(0), a.sum(1, dtype=torch.int32), a.prod(1), a.amax(1), a.argmin(0), a.float().mean(1),
            c.any(), c.all(), c.any(1), c.all(0), c.sum(1), c.float().mean(), (~c).all(1),
        )  # fmt: skip

    a = torch.randint(-(2**30), 2**30, (4, 37), dtype=torch.int32)
    check_model(f, (a, torch.rand(4, 37) > 0.3))
    check_model(lambda a: (a.sum(), a.sum(1)), (torch.full((3, 100), 2**30, dtype=torch.int32),))
    check_model(lambda c: (c.any(), c.all(), c.any(1), c.all(1), c.sum()), (torch.zeros(3, 0, dtype=torch.bool),))


def test_conversions_at_the_limits():
    vals = torch.cat([
        torch.randn(50) * 1000,
        torch.tensor([65504.0, 65520.0, 65519.0, 1e-8, 6e-8, -1e-10, NAN, INF, -INF, 1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 1e-39]),
    ])  # fmt: skip
    check_model(lambda x: (x.half(), x.bfloat16(), x.double().half(), x.bfloat16().float() * 2), (vals,))
    ints = torch.tensor([2**53 + 1, 2**24 + 1, -(2**63), 2**62 + 2**38 + 1, 65521] * 4)
    check_model(lambda a: (a.float(), a.double(), a.half(), a.bfloat16()), (ints,))
    halves = torch.arange(-40, 40).float() / 2
    check_model(lambda x: (x.round(), (x * 3).round() / 3, x.round().long(), x.floor(), x.ceil()), (halves,))


def test_float_to_narrow_ints_wraps_like_eager():
    # Eager truncates to a wide int, then wraps (c10::convert defines uint8 so);
    # a direct C++ cast is undefined and the vector forms saturated (-1.0 -> uint8 gave 0).
    vals = torch.tensor([-3.7, -1.0, -0.5, 255.9, 300.2, -200.5, 40000.5, -40000.5] * 5)  # vector lanes and a tail
    check_model(lambda x: (x.to(torch.uint8), x.to(torch.int8), x.to(torch.int16), x.double().to(torch.uint8),
                           x.half().to(torch.uint8), x.bfloat16().to(torch.int8)), (vals,))


def test_mixed_dtype_promotion_in_one_kernel():
    def f(a, x, h, b, c):
        return a + x, a * 2.5, h + x, b * x, torch.where(c, a, 2.5), torch.cat([a, x]), h.float() + b.float()

    check_model(f, (torch.tensor([2**53 + 1, 3, -4]), torch.tensor([0.5, 1.5, -1.0]), torch.randn(3).half(),
                    torch.randn(3).bfloat16(), torch.tensor([True, False, True])))


@pytest.mark.parametrize("n", [7, 13], ids=lambda n: f"n{n}")
def test_integer_ops_dynamic(n):
    def f(a, b):
        return a // b, a % b, a >> 2, (a * b).sum(), torch.maximum(a, b)

    check_model(f, (torch.randint(-20, 20, (n,)), torch.randint(1, 5, (n,))), dynamic=True)


# --- long reductions ---------------------------------------------------------------------------
# A float accumulator stops growing once the running total is 2^24 times the
# terms (adding 1.0 to 2^24 gives 2^24). Each vector lane holds one
# accumulator, so one or two threads x 16 lanes need 2^29 - 2^30 terms before
# eager's cascade sum and a naive loop differ. The inputs are stride-0
# broadcasts (no memory) of exactly representable values, so the expected
# results are exact.


def test_sum_of_two_to_the_30_ones_is_exact():
    x = torch.ones(1, 4096).expand(2**18, 4096)
    out = torch.compile(lambda x: (x.sum(), x.mean()), backend="cppinductor")(x)
    assert out[0].item() == 2.0**30 and out[1].item() == 1.0


def test_tall_column_sum_and_var_mean_are_exact():
    # 2^25 rows of a 4-column input (a point cloud's centroid): each column is
    # one vector lane; rows alternate (1, 3).
    x = torch.as_strided(torch.tensor([1.0] * 4 + [3.0] * 4), (2**24, 2, 4), (0, 4, 1))

    def f(x):
        var, mean = torch.var_mean(x, (0, 1), correction=0)
        return x.sum((0, 1)), x.mean((0, 1)), var, mean

    s, m, var, mean = torch.compile(f, backend="cppinductor")(x)
    assert torch.equal(s, torch.full((4,), 2.0**26)) and torch.equal(m, torch.full((4,), 2.0))
    torch.testing.assert_close(var, torch.ones(4))
    torch.testing.assert_close(mean, torch.full((4,), 2.0))


def test_long_dynamic_row_sum_is_exact():
    # A stride-0 row is not vectorised: one scalar accumulator per row.
    f = torch.compile(lambda x: x.sum(1), backend="cppinductor", dynamic=True)
    for cols in (2**25, 1000):
        x = torch.ones(1, 1).expand(2, cols)
        assert torch.equal(f(x), torch.full((2,), float(cols)))
