"""Compiled optimizer steps and gradient clipping against eager, step after step.

Optimizers with foreach=True (the default on CUDA) run _foreach_* ops over lists of tensors; the
for-loop ones get addcmul_/addcdiv_ with a value from Dynamo as prims.fma. Both must lower: no
fallback, parameters and state equal to eager's after every step.
"""

from __future__ import annotations

import pytest
import torch

from check import check_model, compile_fn
from cppinductor import debug
from cppinductor.report import graph_report

SHAPES = [(8, 5), (5,), (3, 8), (3,)]

OPTIMIZERS = {
    "adam_foreach": lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True),
    "adamw_foreach_amsgrad": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True, foreach=True),
    "adamw_for_loop": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=False),
    "sgd_nesterov_foreach": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2,
                                                       foreach=True),
    "rmsprop_centered_foreach": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, centered=True,
                                                               foreach=True),
    "adagrad_foreach": lambda ps: torch.optim.Adagrad(ps, lr=0.1, foreach=True),
}


def _params(device: str) -> list[torch.Tensor]:
    return [torch.randn(s, device=device, requires_grad=True) for s in SHAPES]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_compiled_optimizer_step_matches_eager(device, name):
    make = OPTIMIZERS[name]
    params = _params(device)
    ref_params = [p.detach().clone().requires_grad_() for p in params]
    opt, ref_opt = make(params), make(ref_params)
    step = compile_fn(opt.step, options={"fallback": "error"})
    for _ in range(3):
        for p, r in zip(params, ref_params):
            g = torch.randn_like(p)
            p.grad, r.grad = g.clone(), g.clone()
        step()
        ref_opt.step()
        for p, r in zip(params, ref_params):
            torch.testing.assert_close(p, r)
        for p, r in zip(params, ref_params):
            for key, value in ref_opt.state[r].items():
                # Compiled on CUDA, Dynamo makes the optimizer capturable: its step counts live on the GPU.
                torch.testing.assert_close(opt.state[p][key], value, check_device=False,
                                           msg=lambda m, key=key: f"state {key}: {m}")


def test_each_parameters_update_is_one_kernel(device):
    """The foreach ops' per-tensor pieces fuse: AdamW's whole update of one parameter (weight decay, both
    moments, the bias-corrected step) is one kernel, plus one for the step counters."""
    params = _params(device)
    for p in params:
        p.grad = torch.randn_like(p)
    opt = OPTIMIZERS["adam_foreach"](params)
    step = compile_fn(opt.step, options={"fallback": "error"})
    with debug.recording() as records:
        for _ in range(2):  # the first call also creates the state
            step()
    report = graph_report(records[-1])
    kernels = [k for k in report.kernels if k["kind"] in ("pointwise", "reduction")]
    assert len(kernels) == len(set(SHAPES)) + 1, [k["origins"] for k in kernels]


@pytest.mark.parametrize("foreach", [True, False])
def test_compiled_gradient_clipping_matches_eager(device, foreach):
    params = _params(device)
    ref_params = [p.detach().clone().requires_grad_() for p in params]
    for p, r in zip(params, ref_params):
        g = torch.randn_like(p) * 3
        p.grad, r.grad = g.clone(), g.clone()

    def clip(ps):
        return torch.nn.utils.clip_grad_norm_(ps, max_norm=1.0, foreach=foreach)

    total = compile_fn(clip, options={"fallback": "error"})(params)
    ref_total = clip(ref_params)
    torch.testing.assert_close(total, ref_total)
    for p, r in zip(params, ref_params):
        torch.testing.assert_close(p.grad, r.grad)


def test_foreach_overloads_beyond_the_optimizers(device):
    """Overloads the optimizers above do not reach, each checked against eager in one compiled graph."""
    xs = [torch.randn(s, device=device) for s in SHAPES]
    ys = [torch.randn(s, device=device) for s in SHAPES]

    def f(xs, ys):
        scalars = [0.5, -1.0, 2.0, 3.0]
        return (
            torch._foreach_add(xs, ys, alpha=0.25),
            torch._foreach_mul(xs, scalars),
            torch._foreach_pow(2.0, [y.abs() for y in ys]),
            torch._foreach_clamp_min(xs, ys),
            torch._foreach_maximum(xs, 0.1),
            torch._foreach_lerp(xs, ys, [0.1, 0.9, 0.5, 0.3]),
            torch._foreach_addcdiv(xs, xs, [y.abs() + 1 for y in ys], scalars),
            torch._foreach_norm(xs, 3),
            torch._foreach_exp(torch._foreach_sigmoid(xs)),
        )

    check_model(f, (xs, ys), options={"fallback": "error"})
