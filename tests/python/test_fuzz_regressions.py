"""Programs the random-program fuzzer (cppinductor.tools.fuzz_programs) found
wrong, crashing or needlessly falling back, minimised. Each compiles with
fallback="error" where the fix made it lower, so a regression to a fallback
fails here too."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from check import check_model

LOWERED = {"fallback": "error"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_reduced_float_to_bool_mask_in_a_vector_loop(dtype):
    """A half or bfloat16 value cast to bool is compared with zero as float32,
    so its vector mask has 4-byte lanes; the printer declared it with 2-byte
    lanes and clang rejected the kernel (the whole graph fell back)."""

    def f(x):
        b = x.to(torch.bool)
        return torch.any(b, dim=1, keepdim=True), torch.logical_not(b)

    x = torch.randn(4, 33, 5).to(dtype)
    x[0, :, 1] = 0
    check_model(f, (x,), options=LOWERED)


def test_gather_with_a_wrapping_arange_index():
    """x[arange(n) * 3 % n] fuses into a loop reading in[(3 * i) % 64], which
    LLVM 16's loop vectoriser turned into a stride-3 load group ignoring the
    wrap (351 of 4096 elements were garbage); such loops now stay scalar."""

    def f(a):
        g = torch.gather(a.squeeze(1), 0, torch.arange(64) * 3 % 64)
        return torch.maximum(a, g), a[torch.arange(64) * 5 % 64] * 2

    check_model(f, (torch.randn(64, 1),), options=LOWERED)


@pytest.mark.parametrize("reduce", ["amin", "amax", "max"])
def test_min_max_backward_compares_the_saved_value_not_a_recomputation(reduce):
    """amin's backward counts `input == result`. The partitioner recomputed
    expm1(x) in the backward, in a kernel of another vector width whose
    libmvec expm1 differs by an ULP from the forward's, so nothing matched and
    the gradient was 0/0 = NaN everywhere. The compared value is now saved."""
    from cppinductor import debug

    def f(x):
        y = torch.expm1(torch.maximum(x, x))
        return getattr(torch, reduce)(y, dim=0, keepdim=True) if reduce != "max" else y.max()

    g = torch.Generator().manual_seed(21502)
    x = torch.randn(16, 1, generator=g)
    with debug.recording() as records:
        check_model(f, (x,), grad=True, options=LOWERED)
    backward = next(r for r in records if r.kind == "backward")
    assert not any(n.target == torch.ops.aten.expm1.default for n in backward.gm.graph.nodes), backward.gm.code


def test_layer_norm_of_constant_rows_is_exactly_zero():
    """mean = sum(x) / N rounds even when every x is equal; layer_norm's
    (x - mean) * rsqrt(var + eps) multiplied that ULP by up to 1/sqrt(eps)
    (3e-4 where eager gives exactly 0: rows of a broadcast input). The
    two-pass moments now correct the mean by the mean of the deviations."""
    row = torch.full((1, 129), 7.0133).expand(16, 129) + torch.arange(16.0).unsqueeze(1) / 7
    out, expected = check_model(lambda x: torch.nn.functional.layer_norm(x, (129,)), (row,), options=LOWERED)
    assert out.abs().max() == 0 and expected.abs().max() == 0


def test_compared_gather_with_a_wrapping_arange_index():
    """The same LLVM 16 bug through a bool store (x[(3 * i) % 64] > 0): lanes
    past the wrap compared the wrong elements. Refusing SCEV-predicated
    vectorisation did not cover it; no interleave groups does."""

    def f(a):
        return torch.gather(a, 1, (torch.arange(64).reshape(1, 64) * 3 % 64)) > 0

    x = torch.randn(64, 1).t()  # (1, 64) with strides (1, 1)
    check_model(f, (x,), options=LOWERED)


def test_a_value_compared_with_its_own_min_is_computed_once():
    """amin(gelu(x)) and its backward's gelu(x) == amin: fusion recomputed gelu
    in the reduction kernel and in the comparison's kernel, whose vector widths
    differ; libmvec's erf rounds the last bit differently at different widths,
    so some columns matched nothing and their gradient was 0/0 (fuzzer seed
    7554). A value an exact comparison reads is now stored once instead."""
    from cppinductor import debug
    from cppinductor.tools.fuzz_programs import make_input

    def f(x):
        return torch.gather(torch.amin(torch.nn.functional.gelu(x), dim=0), 1, torch.arange(256).reshape(16, 16) * 3 % 16)

    x = make_input((8, 16, 16), torch.float32, "contiguous", 7101)
    with debug.recording() as records:
        check_model(f, (x,), grad=True)  # gather's backward is a scatter_add
    remarks = [str(r) for rec in records for r in rec.remarks]
    assert any("exact comparison" in r for r in remarks), remarks


def test_a_symbolic_size_guarded_to_one_broadcasts():
    """Under dynamic shapes both inputs have length s, and a1[1::2] has length
    s // 2, which Dynamo guards to be 1 when it broadcasts against a0. The
    lowering treated only the constant 1 as broadcasting, so it read a1[2i + 1]
    for every i of s, past the slice's end (a wrong answer). A size neither 1
    nor the output's now makes the node run through ATen."""

    def f(a0, a1):
        return a0 * a1[1::2]

    a0 = torch.randint(-9, 9, (4,))[1::2]  # length 2, stride 2
    check_model(f, (a0, torch.randint(-9, 9, (2,))), dynamic=True)


def test_minus_inf_cast_to_int_is_the_most_negative_int_like_eager():
    """A float -> int cast of an out-of-range value is undefined in C, and
    clang folded masked_fill's -inf cast to int32 into an arbitrary number
    (here 1). Eager on x86 gives the most negative integer, the truncating
    conversion's answer for NaN, inf and out-of-range values; so do the
    kernels now, scalar and vector (fuzzer seed 60386, minimised)."""
    from cppinductor.tools.fuzz_programs import make_input

    def f(a0, a1):
        return (a0.masked_fill(a1 > 0, float("-inf")).to(torch.int32),)

    a0 = make_input((1, 5), torch.float32, "transposed", 61434)
    a1 = make_input((1, 5), torch.int32, "sliced", 50431)
    check_model(f, (a0, a1), options=LOWERED)

    def g(x, m):
        return (x * 1e10).to(torch.int32), torch.where(m > 0, float("nan"), x).to(torch.int64)

    check_model(g, (torch.randn(3, 40), torch.randint(-2, 3, (3, 40))), options=LOWERED)


def test_a_loop_less_reduction_after_tiled_column_statistics():
    """std over dim 0 of a (33, 5, 1, 1) input, then all() over a size-1 dim:
    the column statistics are tiled and the all() has no loops; the tiled
    printer took the first loop of every reduction and crashed the process
    (seed 96012). It now runs per column after the tiles."""

    def f(a):
        return torch.all(torch.std(a, dim=0), dim=2)

    a = torch.randn(33, 5, 1, 1)
    a[:, 2] = 1.5  # a zero deviation: all() of 0 is False
    check_model(f, (a,), options=LOWERED)


def test_a_reduction_result_read_under_a_mask_in_its_own_kernel():
    """layer_norm(x)[31::2].expand(3): the backward sums the expanded
    gradient (a one-element reduction) and slice_scatters it under the mask
    31 <= i, i odd, into the layer_norm backward in the same kernel. Fusion
    mapped that masked read (mask-narrowed point) but the kernel builder did
    not, so the stages read the sum's buffer before the kernel stored it:
    gradients of 6720 for 0 (seed 98123). Both now map it alike; a read the
    builder cannot map is an internal error (the graph falls back), never a
    stale load."""

    def f(x):
        return F.layer_norm(x, (33,))[31::2].expand(3) * 3

    check_model(f, (torch.randn(33),), grad=True, options=LOWERED)


def test_argmax_ties_of_a_math_function_in_the_vector_body_and_its_tail():
    """argmax over atan2(x, x) (pi/4 or -3pi/4 everywhere, ties) along rows of
    5: the vector body of 4 lanes used SLEEF, the scalar tail libm, one ulp
    higher, and the tail won ties eager gives to the first element (fuzzer
    seed 1790). Scalar math in a vectorised kernel now runs the vector form.
    Also checked: exp in a sum's tail and pow, with the same values in every
    position of the row, reduce to the bits of the vector lanes."""

    def f(x):
        a = torch.atan2(x, x)
        return torch.argmax(a, dim=1), torch.argmin(a, dim=1), torch.argmax(torch.exp(x.abs() * 0 + 0.3), dim=1)

    x = torch.randn(33, 5)
    check_model(f, (x,), options=LOWERED)
    y = torch.full((7, 37), 0.7)
    check_model(lambda y: (torch.exp(y) - torch.exp(y[:, :1])).abs().amax(1), (y,), options=LOWERED)


def test_a_loop_less_int64_reduction_after_a_wider_vectorised_one():
    """amin of int32 over rows, then prod of the int64 result over a dim of
    1: one kernel whose looped stage vectorises 16 int32 lanes and whose
    loop-less prod is scalar. The printer built a vector state for the prod
    anyway, and AVX-512 has no 16-lane int64, so the whole graph fell back
    with an internal error (fuzzer seed 2082)."""

    def f(a):
        v = torch.prod(torch.amin(a, dim=(-1, 1), keepdim=True), dim=2, keepdim=True)
        return v > 0, torch.clamp(v, 0, None)

    check_model(f, ((torch.randn(1, 40, 50) * 10).to(torch.int32),), options=LOWERED)
