"""Random ops compiled with Philox: the right distribution (not eager's bits),
reproducible under torch.manual_seed, fresh on every call, independent
between nodes and threads, fused like pointwise ops, and dropout's gradient
consistent with its forward mask. Every compile here uses fallback="error",
so a random op that fell back to ATen would fail the test.

Statistical bounds are 5 to 6 standard errors of the estimate (a false
failure every few million runs)."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cppinductor
from check import check_model, compile_fn
from cppinductor.utils import run_and_get_code

N = 1 << 18  # elements per statistical test


def strict(fn):
    return compile_fn(fn, options={"fallback": "error"})


def assert_mean_var(x, mean, var, fourth_moment):
    """Sample mean and variance of x within ~6 standard errors of (mean, var)."""
    x = x.double().flatten().cpu()
    n = x.numel()
    assert abs(x.mean().item() - mean) < 6 * math.sqrt(var / n), x.mean().item()
    assert abs(x.var().item() - var) < 6 * math.sqrt((fourth_moment - var * var) / n), x.var().item()


def test_rand_is_uniform(device):
    u = strict(lambda x: torch.rand_like(x))(torch.empty(512, 512, device=device))
    assert u.dtype == torch.float32 and u.device.type == device
    assert 0 <= u.min().item() and u.max().item() < 1
    assert_mean_var(u, 0.5, 1 / 12, 1 / 80)
    # Every quarter of [0, 1) gets its share.
    counts = torch.histc(u.cpu(), bins=4, min=0, max=1) / N
    assert (counts - 0.25).abs().max().item() < 6 * math.sqrt(0.25 * 0.75 / N), counts


def test_randn_is_standard_normal(device):
    z = strict(lambda x: torch.randn(x.shape, device=x.device))(torch.empty(N, device=device))
    assert_mean_var(z, 0.0, 1.0, 3.0)
    below_one = (z < 1).double().mean().item()  # Phi(1)
    assert abs(below_one - 0.8413447) < 6 * math.sqrt(0.84 * 0.16 / N), below_one
    assert torch.isfinite(z).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_rand_in_other_dtypes_stays_below_one(dtype, device):
    u = strict(lambda x: torch.rand(x.shape, dtype=dtype, device=x.device))(torch.empty(N, device=device))
    assert u.dtype == dtype
    assert 0 <= u.min().item() and u.max().item() < 1  # reduced floats truncate, never round up to 1
    assert abs(u.double().mean().item() - 0.5) < 0.01


def test_uniform_normal_exponential_parameters(device):
    def f(x):
        a = x.clone().uniform_(-2.0, 6.0)
        b = torch.normal(3.0, 0.5, size=x.shape, device=x.device)
        c = x.clone().exponential_(4.0)
        return a, b, c

    a, b, c = strict(f)(torch.empty(N, device=device))
    assert -2 <= a.min().item() and a.max().item() < 6
    assert_mean_var(a, 2.0, 64 / 12, 8**4 / 80)
    assert_mean_var(b, 3.0, 0.25, 3 * 0.25**2)
    assert c.min().item() >= 0
    assert_mean_var(c, 0.25, 1 / 16, 9 / 4**4)


def test_normal_with_tensor_mean_and_std(device):
    mean = torch.tensor([-5.0, 0.0, 5.0], device=device).repeat(N // 4)
    std = torch.tensor([0.1, 1.0, 2.0], device=device).repeat(N // 4)
    z = strict(torch.normal)(mean, std).view(-1, 3)
    for k, (m, s) in enumerate([(-5.0, 0.1), (0.0, 1.0), (5.0, 2.0)]):
        assert_mean_var(z[:, k], m, s * s, 3 * s**4)


def test_bernoulli_keep_rates(device):
    def f(x, probs):
        return torch.bernoulli(x, 0.3), torch.bernoulli(probs)

    probs = torch.linspace(0, 1, N, device=device)
    fixed, per_element = strict(f)(torch.zeros(N, device=device), probs)
    assert set(fixed.unique().tolist()) <= {0.0, 1.0}
    assert abs(fixed.mean().item() - 0.3) < 6 * math.sqrt(0.21 / N)
    assert per_element[0].item() == 0 and per_element[-1].item() == 1
    low, high = per_element[: N // 4].mean().item(), per_element[-N // 4 :].mean().item()
    assert abs(low - 0.125) < 0.01 and abs(high - 0.875) < 0.01


def test_dropout_keep_rate_and_scale(device):
    x = torch.ones(N, device=device)
    y = strict(lambda x: F.dropout(x, 0.3, training=True))(x)
    kept = y != 0
    assert abs(kept.double().mean().item() - 0.7) < 6 * math.sqrt(0.21 / N)
    assert torch.equal(y[kept], torch.full_like(y[kept], 1 / 0.7))


def test_manual_seed_reproduces_and_calls_differ(device):
    f = strict(lambda x: torch.rand_like(x) + torch.randn_like(x))
    x = torch.empty(1000, device=device)
    torch.manual_seed(7)
    a = f(x)
    b = f(x)
    torch.manual_seed(7)
    assert torch.equal(f(x), a)
    assert torch.equal(f(x), b)
    assert not torch.equal(a, b)
    torch.manual_seed(8)
    assert not torch.equal(f(x), a)


def test_two_random_nodes_in_one_graph_are_independent(device):
    a, b = strict(lambda x: (torch.rand_like(x), torch.rand_like(x)))(torch.empty(N, device=device))
    assert not torch.equal(a, b)
    corr = torch.corrcoef(torch.stack([a, b]).double().cpu())[0, 1].item()
    assert abs(corr) < 6 / math.sqrt(N), corr


def test_values_do_not_depend_on_thread_count():
    f = strict(lambda x: F.dropout(x, 0.5, training=True) + torch.randn_like(x))
    x = torch.randn(256, 1000)
    threads = torch.get_num_threads()
    try:
        torch.manual_seed(3)
        torch.set_num_threads(1)
        one = f(x)
        torch.manual_seed(3)
        torch.set_num_threads(max(2, threads))
        many = f(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)


def test_dropout_fuses_into_its_consumer_without_fallback():
    def f(x, y):
        return F.dropout(x, 0.2, training=True) * 3 + y

    x, y = torch.randn(64, 100), torch.randn(64, 100)
    d = cppinductor.explain(f)(x, y).to_dict()
    (g,) = d["graphs"]
    assert g["fallbacks"] == []
    kernels = [k for k in g["kernels"] if k["kind"] == "pointwise"]
    assert len(kernels) == 1 and kernels[0]["vectorized"], g["kernels"]
    assert {"rand_like", "add"} <= set(kernels[0]["nodes"])
    torch._dynamo.reset()
    _, sources = run_and_get_code(strict(f), x, y)
    assert any("cppi_vrand<" in s for s in sources)


class DropoutMLP(nn.Module):
    def __init__(self, p=0.4):
        super().__init__()
        self.p = p
        self.fc1 = nn.Linear(16, 64)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x):
        hidden = self.drop(self.fc1(x).relu())
        return self.fc2(hidden), hidden


def test_dropout_gradient_matches_the_forward_mask(device):
    model = DropoutMLP().to(device).train()
    compiled = strict(model)
    x = torch.randn(32, 16, device=device)
    out, hidden = compiled(x)
    out.sum().backward()
    # d(sum out)/d(hidden) = ones @ W2; dropout passes it where it kept a unit
    # (scaled by 1 / (1 - p)) and relu where its input was positive: a kept,
    # nonzero hidden unit is exactly where both pass.
    with torch.no_grad():
        passed = (hidden != 0).float() / (1 - model.p)
        grad_pre = torch.ones(32, 8, device=device) @ model.fc2.weight * passed
        want_w1 = grad_pre.t() @ x
        want_b1 = grad_pre.sum(0)
    torch.testing.assert_close(model.fc1.weight.grad, want_w1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.fc1.bias.grad, want_b1, rtol=1e-5, atol=1e-5)
    zeros = (hidden == 0).double().mean().item()
    assert 0.4 < zeros < 0.9  # dropout (0.4) plus relu's zeros


def test_dropout_eval_is_the_identity(device):
    model = DropoutMLP().to(device).eval()
    check_model(model, (torch.randn(8, 16, device=device),), options={"fallback": "error"})


def test_dynamic_shapes_draw_without_recompiling(graph_count):
    f = compile_fn(lambda x: F.dropout(x, 0.5, training=True), dynamic=True, options={"fallback": "error"})
    for rows in (1000, 4001):
        y = f(torch.ones(rows, 16))
        n = y.numel()
        assert abs((y != 0).double().mean().item() - 0.5) < 6 * math.sqrt(0.25 / n)
        assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert graph_count() == 1
