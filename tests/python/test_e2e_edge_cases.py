"""End to end: corners that generated kernels and the wrapper must keep right
(aliased inputs, metadata mutation, lifted constants, symbolic outputs, small
integer dtypes, 0-d tensors, data-dependent shapes)."""

import warnings

import pytest
import torch

from check import check_model


def test_inputs_sharing_storage_one_mutated(device):
    def f(x, y):
        x.add_(1)
        return y * 2

    base = torch.randn(6, device=device)
    check_model(f, (base, base[2:]))


def test_same_tensor_passed_twice_and_mutated(device):
    def f(x, y):
        x.mul_(2)
        return x + y

    base = torch.randn(6, device=device)
    check_model(f, (base, base))


def test_metadata_mutation_of_input(device):
    def f(x):
        x.t_()
        return x + 1

    check_model(f, (torch.randn(3, 4, device=device),))


def test_lifted_constant_tensor(device):
    def f(x):
        return x + torch.tensor([1.0, 2.0, 3.0], device=x.device), x * torch.arange(3, device=x.device)

    check_model(f, (torch.randn(2, 3, device=device),))


def test_symbolic_int_output(device):
    def f(x):
        return x.shape[0] * 2, x.sum(0)

    for n in (5, 7):
        check_model(f, (torch.randn(n, 3, device=device),), dynamic=True, reduction=True, runs=1)


def test_int8_uint8(device):
    def f(a, b):
        return a + b, a * 2, b >> 1, a.to(torch.float32) / 3, b.sum()

    a = torch.randint(-100, 100, (10,), dtype=torch.int8, device=device)
    b = torch.randint(0, 255, (10,), dtype=torch.uint8, device=device)
    check_model(f, (a, b))


def test_zero_dim_tensors(device):
    def f(x, y):
        return x * y, (x + 1).exp(), y.sum() * x

    check_model(f, (torch.tensor(3.0, device=device), torch.randn(4, device=device)), reduction=True)


def test_no_grad_region_inside_training_graph(device):
    def f(x):
        with torch.no_grad():
            y = x * 2
        return x.sin() + y, x.detach() * 3

    check_model(f, (torch.randn(4, device=device),), grad=True)


def test_buffer_mutated_and_returned(device):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(3))

        def forward(self, x):
            self.acc.add_(x)
            return self.acc

    check_model(M().to(device), (torch.randn(3, device=device),))


def test_input_mutation_next_to_gradient(device):
    def f(x, w):
        x.mul_(2)
        return (x * w).sum()

    w = torch.randn(4, device=device, requires_grad=True)
    out, _ = check_model(f, (torch.randn(4, device=device), w), reduction=True)
    assert out.requires_grad


def test_dynamic_shapes_with_mutation_and_view(device):
    def f(x):
        x.add_(x.shape[0])
        return x[1:]

    for n in (3, 5, 7):
        check_model(f, (torch.randn(n, 2, device=device),), dynamic=True, runs=1)


def test_dynamic_shapes_training(device):
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).to(device)
    for n in (2, 3, 6):
        check_model(m, (torch.randn(n, 4, device=device),), dynamic=True, grad=True, reduction=True, runs=1)


def test_unbind_returns_views(device):
    check_model(lambda x: x.unbind(0), (torch.randn(3, 2, device=device),))


def test_as_strided_output(device):
    check_model(lambda x: x.as_strided((2, 2), (1, 2), 1), (torch.randn(8, device=device),))


def test_fp16_slice_assignment_from_fp32(device):
    def f(x, y):
        x[:, 1:3] = y.to(x.dtype)
        return x.float().sum()

    check_model(f, (torch.randn(4, 5, dtype=torch.float16, device=device), torch.randn(4, 2, device=device)), reduction=True)


def test_data_dependent_output_shape(device):
    def f(x):
        return x[x > 0].sum(), torch.nonzero(x), x.masked_select(x < 0)

    check_model(f, (torch.randn(10, device=device),), reduction=True)


def test_item_driven_loop(device):
    def f(x):
        n = int(x.sum().item()) % 3 + 1
        for _ in range(n):
            x = x * 2
        return x

    check_model(f, (torch.ones(3, device=device),))


def test_inference_mode_input(device):
    with torch.inference_mode():
        x = torch.randn(4, device=device)
    check_model(lambda x: x * 2, (x,))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0, 1e-45])
def test_special_float_scalars(value, device):
    def f(x):
        return torch.maximum(x, torch.full_like(x, value)), x.clamp(min=value), torch.where(x > 0, x, value)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_model(f, (torch.randn(9, device=device),))


def test_float_to_int_casts_of_nan_inf_and_out_of_range_match_eager(device):
    """A C cast of such a float is undefined (clang folded -inf to 1); kernels
    convert as eager does on the device: the most negative integer on x86,
    saturated with NaN -> 0 on CUDA. 40 elements: vector lanes and a tail."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([2.9, -2.9, 3e9, -3e9, inf, -inf, nan, 1e20], device=device).repeat(5)
    mask = torch.arange(40, device=device) % 3 == 0

    def f(x, m):
        return x.to(torch.int32), x.to(torch.int64), x.to(torch.int16), x.masked_fill(m, -inf).to(torch.int32)

    check_model(f, (x, mask), options={"fallback": "error"})


def test_empty_permuted_is_lowered_with_its_permuted_strides(device):
    """empty_permuted (cosine_embedding_loss and hinge_embedding_loss make
    one) allocates like empty_strided, with the node's permuted layout: the
    graph compiles without falling back, with eager's strides and values."""

    def f(x):
        return torch.empty_permuted((4, 6, 5), (2, 0, 1), device=x.device).fill_(1.0) + x

    x1, x2 = torch.randn(8, 5, device=device), torch.randn(8, 5, device=device)
    target = torch.tensor([1.0, -1.0] * 4, device=device)
    options = {"fallback": "error"}
    check_model(f, (torch.randn(4, 6, 5, device=device),), options=options)
    check_model(torch.nn.functional.cosine_embedding_loss, (x1, x2, target), options=options)
