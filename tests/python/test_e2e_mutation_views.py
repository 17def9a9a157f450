"""End to end: in-place updates of inputs, and outputs that are views of inputs.

check_model compares inputs after the call (mutations) and checks that an
output aliases the same input as eager's, with the same view geometry. The
tests here also assert the aliasing directly, as a user would see it.
"""

import pytest
import torch

from check import check_model, compile_fn


def add_one_(x):
    x.add_(1)


def add_one_return(x):
    x.add_(1)
    return x * 2


def setitem(x):
    x[0] = 5
    x[:, -1] = x[:, 0] * 3


def index_put_(x, idx, v):
    x.index_put_((idx,), v, accumulate=True)
    return x.sum()


def mutate_view_of_input(x):
    x[1:].mul_(2)
    x.t()[0].zero_()
    return x[0] + 1


def mutate_two_inputs_one_read(x, y, z):
    x.copy_(y + z)
    y.mul_(z)
    return z.exp()


def mutate_after_use(x):
    y = x.sin()
    x.relu_()
    return y, x.cos()


MUTATIONS = [
    pytest.param(add_one_, lambda d: (torch.randn(4, 5, device=d),), id="add_one_returns_none"),
    pytest.param(add_one_return, lambda d: (torch.randn(4, 5, device=d),), id="add_one_returns_tensor"),
    pytest.param(setitem, lambda d: (torch.randn(4, 5, device=d),), id="setitem"),
    pytest.param(
        index_put_,
        lambda d: (torch.zeros(6, 3, device=d), torch.tensor([0, 2, 2, 5], device=d), torch.ones(4, 3, device=d)),
        id="index_put_accumulate",
    ),
    pytest.param(mutate_view_of_input, lambda d: (torch.randn(5, 5, device=d),), id="mutate_views_of_input"),
    pytest.param(
        mutate_two_inputs_one_read,
        lambda d: tuple(torch.randn(3, 4, device=d) for _ in range(3)),
        id="two_inputs_mutated",
    ),
    pytest.param(mutate_after_use, lambda d: (torch.randn(7, device=d),), id="mutate_after_use"),
]


@pytest.mark.parametrize("fn, make_args", MUTATIONS)
def test_input_mutation(fn, make_args, device):
    check_model(fn, make_args(device))


def test_mutation_of_non_contiguous_input(device):
    def f(x):
        x.mul_(3).add_(1)
        return x.sum()

    base = torch.randn(6, 8, device=device)
    check_model(f, (base.t()[::2],), reduction=True)


def test_mutation_visible_through_user_alias(device):
    """The caller's other views of a mutated input see the update."""

    def f(x):
        x.add_(10)

    base = torch.zeros(4, 4, device=device)
    view = base[1]
    compile_fn(f)(base)
    assert torch.equal(view, torch.full((4,), 10.0, device=device))


def test_mutation_of_input_with_grad_graph(device):
    """Mutating a non-leaf that requires grad: values and gradients through the mutation."""

    def f(x):
        y = x * 2
        y.add_(1)
        return y.sin()

    check_model(f, (torch.randn(3, 3, device=device),), grad=True)


def test_unmutated_inputs_untouched(device):
    def f(x, y):
        return (x + y).relu_()  # in place on an intermediate only

    x, y = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    x0, y0 = x.clone(), y.clone()
    out = compile_fn(f)(x, y)
    assert torch.equal(x, x0) and torch.equal(y, y0)
    assert out.data_ptr() not in (x.data_ptr(), y.data_ptr())


VIEWS = [
    pytest.param(lambda x: x.t(), id="t"),
    pytest.param(lambda x: x[1:], id="slice"),
    pytest.param(lambda x: x[:, ::2], id="slice_step"),
    pytest.param(lambda x: x.view(2, 2, 6), id="view"),
    pytest.param(lambda x: x.transpose(0, 1)[2], id="transpose_select"),
    pytest.param(lambda x: x.unsqueeze(0).expand(3, 4, 6), id="expand"),
    pytest.param(lambda x: x.reshape(24), id="reshape_contiguous"),
    pytest.param(lambda x: x.diagonal(), id="diagonal"),
    pytest.param(lambda x: x.unflatten(1, (2, 3)).permute(2, 0, 1), id="unflatten_permute"),
]


@pytest.mark.parametrize("view", VIEWS)
def test_returned_view_aliases_input(view, device):
    x = torch.randn(4, 6, device=device)
    out, expected = check_model(view, (x,), check_strides=True)
    # Directly, as a user sees it: same memory as the input, a live view.
    x = torch.randn(4, 6, device=device)
    out = compile_fn(view)(x)
    eager = view(x)
    assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert (out.shape, out.stride(), out.storage_offset()) == (eager.shape, eager.stride(), eager.storage_offset())
    assert out._base is x
    x.fill_(7.0)
    assert torch.all(out == 7.0)


def test_view_and_computed_outputs(device):
    def f(x):
        return x.t(), x.relu(), x[0]

    out, _ = check_model(f, (torch.randn(3, 4, device=device),))


def test_view_of_mutated_input(device):
    def f(x):
        x.mul_(2)
        return x.view(-1), x[1:]

    check_model(f, (torch.randn(3, 4, device=device),))


def test_outputs_aliasing_each_other(device):
    """Two outputs that share memory in eager share it compiled (AOTAutograd regenerates the view)."""

    def f(x):
        y = x * 2
        return y, y.view(-1)[2:]

    (y, z), _ = check_model(f, (torch.randn(3, 4, device=device),))
    y.zero_()
    assert torch.all(z == 0)


def test_reshape_of_non_contiguous_copies(device):
    """reshape of a transposed tensor must copy (eager returns a fresh tensor)."""

    def f(x):
        return x.t().reshape(-1)

    check_model(f, (torch.randn(3, 4, device=device),))


def test_returns_input_unchanged(device):
    def f(x, y):
        return x, y

    x, y = torch.randn(2, device=device), torch.randn(3, device=device)
    check_model(f, (x, y))
    a, b = compile_fn(f)(x, y)
    assert a is x or a.data_ptr() == x.data_ptr()
    assert b is y or b.data_ptr() == y.data_ptr()
