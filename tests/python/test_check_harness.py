"""check_model catches wrong backends: a test suite that can't fail proves nothing.

Each test hands check_model a Dynamo backend that is wrong in one way and
expects the AssertionError; eager (a correct backend) must pass.
"""

import pytest
import torch
import torch.utils._pytree as pytree

from check import check_model


def _wrap(transform_outputs=None, transform_inputs=None):
    def backend(gm, example_inputs):
        def run(*args):
            if transform_inputs:
                args = transform_inputs(args)
            out = gm(*args)
            return transform_outputs(out) if transform_outputs else out

        return run

    return backend


def _map_tensors(f):
    return lambda tree: pytree.tree_map(lambda t: f(t) if isinstance(t, torch.Tensor) else t, tree)


off_by_a_little = _wrap(_map_tensors(lambda t: t + 1e-3 if t.is_floating_point() else t))
clones_outputs = _wrap(_map_tensors(lambda t: t.clone()))
drops_mutations = _wrap(transform_inputs=_map_tensors(lambda t: t.clone()))
wrong_strides = _wrap(_map_tensors(lambda t: t.t().contiguous().t() if t.dim() == 2 else t))


def test_eager_backend_passes():
    check_model(lambda x: (x.sin(), x.t()), (torch.randn(3, 4),), backend="eager")


def test_catches_wrong_values():
    with pytest.raises(AssertionError, match="not close"):
        check_model(lambda x: x.sin(), (torch.randn(3, 4),), backend=off_by_a_little)


def test_catches_lost_aliasing():
    with pytest.raises(AssertionError, match="aliases input"):
        check_model(lambda x: x[1:], (torch.randn(3, 4),), backend=clones_outputs)


def test_catches_lost_mutation():
    def f(x):
        x.add_(1)

    with pytest.raises(AssertionError, match="input after the call"):
        check_model(f, (torch.randn(3, 4),), backend=drops_mutations)


def test_catches_wrong_strides_when_asked():
    f = lambda x: x * 2  # noqa: E731
    check_model(f, (torch.randn(3, 4),), backend=wrong_strides)  # fresh outputs: any strides
    with pytest.raises(AssertionError, match="strides"):
        check_model(f, (torch.randn(3, 4),), backend=wrong_strides, check_strides=True)


def test_catches_wrong_dtype():
    with pytest.raises(AssertionError, match="dtype"):
        check_model(lambda x: x + 1, (torch.randn(3),), backend=_wrap(_map_tensors(lambda t: t.double())))


def test_catches_wrong_gradients():
    from torch._dynamo.backends.common import aot_autograd
    from functorch.compile import make_boxed_func

    def fw(gm, _):
        return make_boxed_func(gm.forward)

    def bad_bw(gm, _):
        def run(*args):
            return [g * 2 if isinstance(g, torch.Tensor) else g for g in gm(*args)]

        return make_boxed_func(run)

    backend = aot_autograd(fw_compiler=fw, bw_compiler=bad_bw)
    with pytest.raises(AssertionError, match="gradient"):
        check_model(lambda x: x.sin(), (torch.randn(3),), grad=True, backend=backend)


def test_catches_unmodelled_module_state():
    """A compiled BatchNorm that forgets to update running stats is caught."""

    def backend(gm, example_inputs):
        def run(*args):
            saved = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            out = gm(*args)
            with torch.no_grad():
                for a, s in zip(args, saved):
                    if isinstance(a, torch.Tensor) and not a.requires_grad:
                        a.copy_(s)
            return out

        return run

    bn = torch.nn.BatchNorm1d(3).train()
    with pytest.raises(AssertionError, match="module state"):
        check_model(bn, (torch.randn(4, 3),), backend=backend)


def test_catches_injected_codegen_bug():
    """cppinductor's hidden fault-injection option makes relu codegen wrong: the suite must notice."""
    f = lambda x: torch.relu(x) * 2 + 1  # noqa: E731
    check_model(f, (torch.randn(64),))
    torch._dynamo.reset()
    with pytest.raises(AssertionError, match="not close"):
        check_model(f, (torch.randn(64),), options={"inject_relu_bug_TESTING_ONLY": True})
