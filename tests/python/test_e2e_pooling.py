"""End to end, compiled vs eager: 2-d pooling forward and backward (max with indices, avg, adaptive avg and max).
fallback="error" makes any op that is not lowered fail the test."""

import re

import pytest
import torch
import torch.nn.functional as F

from check import check_model

LOWERED = {"fallback": "error"}


def _input(*shape, dtype=torch.float32, device="cpu"):
    # Distinct values: ties would make max pooling's index implementation-defined.
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n, device=device).to(dtype) / n - 0.5).reshape(shape)


MAX_POOL_CASES = {
    "k2": dict(kernel_size=2),
    "k3s2p1_ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "k3s1p1": dict(kernel_size=3, stride=1, padding=1),
    "rect_dilated": dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1)),
    "k2s3_ceil": dict(kernel_size=2, stride=3, ceil_mode=True),
}


@pytest.mark.parametrize("case", MAX_POOL_CASES.values(), ids=MAX_POOL_CASES.keys())
def test_max_pool2d_with_indices_forward_backward(case, device):
    def f(x):
        return F.max_pool2d(x, return_indices=True, **case)

    check_model(f, (_input(2, 3, 11, 9, device=device),), grad=True, options=LOWERED)


def test_max_pool2d_3d_input_float64_and_strided(device):
    def f(x, y):
        return F.max_pool2d(x, 3, 2, 1, return_indices=True), F.max_pool2d(y.transpose(-1, -2), 2)

    x = _input(4, 10, 7, dtype=torch.float64, device=device)
    y = _input(2, 3, 9, 8, device=device)
    check_model(f, (x, y), grad=True, options=LOWERED)


def test_max_pool2d_bfloat16(device):
    check_model(lambda x: F.max_pool2d(x, 3, 2, 1), (_input(2, 4, 9, 9, dtype=torch.bfloat16, device=device),),
                grad=True, options=LOWERED)


def test_max_pool2d_infinities_and_nan(device):
    """A window that is all -inf reports its first in-bounds position (eager's rule), even next to padding; NaN
    wins."""
    x = _input(1, 1, 6, 7, device=device)
    x[0, 0, :2, :3] = -float("inf")
    x[0, 0, 4, 5] = float("nan")

    def f(x):
        return F.max_pool2d(x, 3, 2, 1, return_indices=True), F.max_pool2d(x, 2, 2, 1, dilation=2,
                                                                           return_indices=True)

    check_model(f, (x,), options=LOWERED)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", MAX_POOL_CASES.values(), ids=MAX_POOL_CASES.keys())
def test_channels_last_max_pool2d_values_are_a_pointwise_max(case, dtype, device, tmp_path, monkeypatch):
    """Inference on a channels-last input (how CUDA conv nets run): the values
    alone are a pointwise max over the unrolled window, not a reduction, with
    eager's results where windows hold -inf and NaN."""
    x = _input(2, 16, 11, 9, dtype=dtype, device=device).to(memory_format=torch.channels_last)
    x[0, :, :2, :3] = -float("inf")
    x[1, 3, 4, 5] = float("nan")
    monkeypatch.setenv("CPPINDUCTOR_DEBUG_DIR", str(tmp_path))
    with torch.no_grad():
        check_model(lambda x: F.max_pool2d(x, **case), (x,), options=LOWERED, check_strides=True)
    ir = next(tmp_path.rglob("loop_ir_pre_fusion.txt")).read_text()
    assert "origins=[max_pool2d_with_indices]" in ir and "reduction" not in ir, ir


def test_a_cuda_channels_last_max_pool_loads_each_window_position_as_vectors():
    """The CUDA module of a channels-last bf16 max pool (traced with fake CUDA
    tensors, no GPU needed): a pointwise kernel whose 9 window positions each
    load 8 channels as one 16-byte vector; with its indices read, a reduction."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from cppinductor import _C
    from cppinductor.export import export_graph

    def source(f):
        with FakeTensorMode():
            x = torch.empty(2, 64, 16, 16, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
            gm = make_fx(f)(x)
        gm.graph.eliminate_dead_code()  # the unread indices' getitem, as AOTAutograd leaves none
        gm.recompile()
        return _C.generate_cuda_source(export_graph(gm))

    values = source(lambda x: F.max_pool2d(x, 3, 2, 1))
    assert "mapping=grid_stride_pointwise" in values and "elements_per_thread=8" in values, values
    assert len(re.findall(r"\*\(const cppi_vec<cppi_bf16, 8>\*\)\(in_x_1 ", values)) == 9, values
    with_indices = source(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True))
    assert "reduce max" in with_indices and "cppi_vec<" not in with_indices, with_indices


AVG_POOL_CASES = {
    "k2": dict(kernel_size=2),
    "k3s2p1_ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "k3s2p1_ceil_nopad": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    "rect_divisor": dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), divisor_override=5),
    "k2s3_ceil": dict(kernel_size=2, stride=3, ceil_mode=True),
}


@pytest.mark.parametrize("case", AVG_POOL_CASES.values(), ids=AVG_POOL_CASES.keys())
def test_avg_pool2d_forward_backward(case, device):
    check_model(lambda x: F.avg_pool2d(x, **case), (torch.randn(2, 3, 11, 9, device=device),), grad=True,
                options=LOWERED, reduction=True)


@pytest.mark.parametrize("count_include_pad", [True, False], ids=["include_pad", "exclude_pad"])
def test_avg_pool2d_ceil_window_past_the_padded_input(count_include_pad, device):
    """The last window of ceil_mode runs past the input: its divisor counts only what lies inside the padded
    (or, excluding padding, the plain) input, as eager."""

    def f(x):
        return (F.avg_pool2d(x, 3, 2, ceil_mode=True, count_include_pad=count_include_pad),
                F.avg_pool2d(x, 4, 3, 1, ceil_mode=True, count_include_pad=count_include_pad),
                F.max_pool2d(x, 3, 2, ceil_mode=True, return_indices=True))

    check_model(f, (torch.randn(2, 3, 10, 8, device=device),), grad=True, options=LOWERED, reduction=True)


def test_avg_pool2d_3d_float64(device):
    check_model(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                (torch.randn(3, 8, 7, dtype=torch.float64, device=device),), grad=True, options=LOWERED)


@pytest.mark.parametrize("out", [(3, 3), (4, 2), (5, 9), 1], ids=str)
def test_adaptive_avg_pool2d_forward_backward(out, device):
    check_model(lambda x: F.adaptive_avg_pool2d(x, out), (torch.randn(2, 3, 10, 7, device=device),), grad=True,
                options=LOWERED, reduction=True)


def test_adaptive_avg_pool2d_bfloat16(device):
    check_model(lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
                (torch.randn(2, 3, 10, 7, dtype=torch.bfloat16, device=device),), grad=True, options=LOWERED)


@pytest.mark.parametrize("out", [(3, 3), (4, 2), (12, 8), 1], ids=str)
def test_adaptive_max_pool2d_forward_backward(out, device):
    check_model(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), (_input(2, 3, 10, 7, device=device),),
                grad=True, options=LOWERED)


def test_adaptive_max_pool2d_minus_inf_and_float64(device):
    x = _input(3, 10, 7, dtype=torch.float64, device=device)
    x[:, :4, :3] = -float("inf")
    check_model(lambda x: F.adaptive_max_pool2d(x, (3, 3), return_indices=True), (x,), options=LOWERED)


def test_pooling_dynamic_shapes(device, graph_count):
    """Symbolic H and W reach the window arithmetic as kernel arguments: one graph for every size."""

    def f(x):
        return (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.avg_pool2d(x, 2, count_include_pad=False),
                F.adaptive_avg_pool2d(x, (3, 2)), F.adaptive_max_pool2d(x, (2, 3)))

    for h, w in [(9, 8), (12, 11), (7, 13)]:
        check_model(f, (torch.randn(2, 3, h, w, device=device),), grad=True, dynamic=True, options=LOWERED,
                    reduction=True)
    if device == "cpu":
        # On CUDA (torch 2.11, H200) Dynamo guards the pooling sizes and
        # recompiles per shape; each graph still lowers fully and matches eager.
        assert graph_count() == 1


UPSAMPLE_CASES = {
    "nearest_2x": dict(scale_factor=2, mode="nearest"),
    "nearest_4x_3": dict(scale_factor=(4, 3), mode="nearest"),
    "nearest_1_5x": dict(scale_factor=1.5, mode="nearest"),
    "nearest_down": dict(scale_factor=0.5, mode="nearest"),
    "nearest_exact_2x": dict(scale_factor=2, mode="nearest-exact"),
    "bilinear_2x": dict(scale_factor=2, mode="bilinear", align_corners=False),
    "bilinear_corners": dict(size=(9, 13), mode="bilinear", align_corners=True),
}


@pytest.mark.parametrize("case", UPSAMPLE_CASES.values(), ids=UPSAMPLE_CASES.keys())
def test_upsample(case, device):
    """Upsampling's source positions are computed from the output's loop
    variable (computed_positions.h): the compiled code must pick exactly the
    elements eager picks, for scales whose float rounding is inexact too."""
    def f(x):
        return F.interpolate(x, **case) * 2

    check_model(f, (_input(2, 3, 8, 10, device=device),), options=LOWERED)


def test_upsample_gradients(device):
    """The backward scatters with index_put(accumulate=True): each input
    element gathers the gradients of the 4 (nearest) or up to 16 (bilinear)
    outputs it fed, every add landing."""
    def f(x):
        return F.interpolate(x, scale_factor=2, mode="nearest") + F.interpolate(x, scale_factor=2, mode="bilinear")

    check_model(f, (_input(2, 3, 8, 10, device=device),), grad=True, options=LOWERED)


# (mode, padding_mode, align_corners): every mode and padding once, both corner conventions.
GRID_SAMPLE_CASES = [
    ("bilinear", "zeros", False), ("bilinear", "reflection", True), ("nearest", "border", True),
    ("nearest", "reflection", False), ("bicubic", "zeros", True), ("bicubic", "border", False),
]


@pytest.mark.parametrize("case", GRID_SAMPLE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_grid_sample(case, device):
    """grid_sampler_2d decomposes into gathers and weights (torch._decomp's
    decomposition, as Inductor's): lowered, not an ATen call. Its backward
    is the op AOTAutograd differentiates it into, grid_sampler_2d_backward,
    which runs in ATen (as in Inductor). The grid reaches past [-1, 1] so
    padding matters."""
    mode, padding_mode, align_corners = case
    x = torch.randn(2, 3, 9, 11, device=device)
    grid = torch.rand(2, 5, 7, 2, device=device) * 2.4 - 1.2

    def f(a, g):
        return F.grid_sample(a, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    check_model(f, (x, grid), options={"fallback": "error"})
    if mode == "bilinear":
        check_model(f, (x.clone().requires_grad_(), grid.clone().requires_grad_()), grad=True)


def test_bilinear_backward_reads_the_gradient_once():
    """Bilinear's backward adds the gradient into four buffers (one per
    corner): its four scatters share one kernel, the only one that reads
    the gradient."""
    from cppinductor import debug

    with debug.recording() as records:
        check_model(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (_input(2, 3, 8, 10),), grad=True,
                    options=LOWERED)
    backward = next(r for r in records if r.kind == "backward")
    kernels = dict(backward.sources)["kernels.cpp"].split("// kernel: ")[1:]
    readers = [k for k in kernels if "in_tangents_1[" in k]
    assert len(readers) == 1, kernels
    assert len(set(re.findall(r"float\* (out_\w+) =", readers[0]))) == 4, readers[0]
