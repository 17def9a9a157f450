"""graph_passes.unfuse_addmm_bias: an addmm whose uses are all pointwise runs as
mm + a bias add fused into its readers; anything else keeps addmm."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kernel_counts import Program, cppinductor_counts


def _linear_then(post, dtype=torch.float32, grad=False, options=None):
    def build():
        torch.manual_seed(0)
        lin = nn.Linear(48, 40).to(dtype)

        def fn(x):
            return post(lin(x))

        if grad:
            return fn, (torch.randn(16, 48, dtype=dtype, requires_grad=True),)
        return (lambda x: _no_grad(fn, x)), (torch.randn(16, 48, dtype=dtype),)

    kwargs = {"options": options} if options else {}
    if dtype != torch.float32:
        kwargs.update(atol=2e-2, rtol=2e-2)
    return Program(f"linear_{post.__name__}", build, grad=grad, check_kwargs=kwargs)


def _no_grad(fn, x):
    with torch.no_grad():
        return fn(x)


def _gelu_3d(y):
    return F.gelu(y.view(4, 4, 40)) * 2  # a view between the product and its pointwise reader


def _row_softmax(y):
    return torch.softmax(y, dim=-1)  # a reduction: not a pointwise use


def _relu(y):
    return torch.relu(y)


def _returned_too(y):
    return y, torch.relu(y)  # the product itself is an output


def test_pointwise_uses_run_mm_and_fuse_the_bias():
    counts = cppinductor_counts(_linear_then(_gelu_3d))
    assert counts.externs == ["aten.mm.default"], counts.externs
    assert counts.kernels == 1, counts.describe()  # bias add, gelu and * 2 in one kernel


def test_a_reduction_use_keeps_addmm():
    assert cppinductor_counts(_linear_then(_row_softmax)).externs == ["aten.addmm.default"]


def test_a_returned_product_keeps_addmm():
    assert cppinductor_counts(_linear_then(_returned_too)).externs == ["aten.addmm.default"]


def test_half_precision_keeps_addmm():
    # addmm adds the bias to the float accumulator before its one rounding;
    # mm + add would round twice.
    assert cppinductor_counts(_linear_then(_relu, dtype=torch.bfloat16)).externs == ["aten.addmm.default"]


def test_the_option_turns_it_off():
    counts = cppinductor_counts(_linear_then(_relu, options={"unfuse_addmm_bias": False}))
    assert counts.externs == ["aten.addmm.default"]


def _gelu(y):
    return F.gelu(y)


def test_training_unfuses_only_what_the_backward_does_not_save():
    # relu's backward reads relu's output, so the product has one pointwise
    # use; gelu's backward reads the product itself, a forward output.
    # Gradients match eager either way (check_model).
    assert "aten.addmm.default" not in cppinductor_counts(_linear_then(_relu, grad=True)).externs
    assert "aten.addmm.default" in cppinductor_counts(_linear_then(_gelu, grad=True)).externs
