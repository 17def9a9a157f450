"""check_model: run a program eagerly and through cppinductor, compare everything.

Modelled on Inductor's `check_model` (test/inductor/test_torchinductor.py):

- every run gets its own clones of the inputs (strides and storage offset
  preserved), so in-place ops in one run cannot leak into another;
- outputs are compared by type, structure, dtype, shape, device and value
  (tolerances per dtype, NaN == NaN);
- strides are compared where eager semantics fix them: an output that aliases
  an input must alias the same input, with the same sizes, strides and
  offset; an output that eager returns fresh must not alias an input; two
  outputs that share memory in eager must share it compiled. Fresh outputs may
  have any strides (Inductor's rule) unless `check_strides=True`;
- inputs (and module parameters/buffers) are compared after the call, which
  checks mutations and that nothing else was mutated;
- with `grad=True`, backward runs from seeded random output gradients and the
  gradients of floating inputs and module parameters are compared.

The compiled function runs `runs` times (fresh clones each time): the second
run takes the cached path behind Dynamo's guards.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

BACKEND = "cppinductor"
DEFAULT_OPTIONS = {"fallback": "eager"}

# dtype -> (rtol, atol). float32 is Inductor's; the low-precision ones allow
# for the compiled code computing in float32 and rounding once at the end,
# where eager rounds after every op.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 1.5e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.complex64: (1.3e-5, 1.5e-5),
}
# Reductions may sum in a different order (per-thread partials, vector lanes).
REDUCTION_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    **TOLERANCES,
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-2, 2e-2),
    torch.bfloat16: (3e-2, 3e-2),
}


def clone_preserve_strides(x: Any) -> Any:
    """A copy of x with its own storage, same sizes, strides and storage offset (and requires_grad)."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.numel() == 0 or x.untyped_storage().nbytes() == 0:
        out = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
    else:
        storage_numel = x.untyped_storage().nbytes() // x.element_size()
        base = torch.as_strided(x.detach(), (storage_numel,), (1,), 0).clone()
        out = torch.as_strided(base, x.size(), x.stride(), x.storage_offset())
    return out.requires_grad_(x.requires_grad)  # a leaf like the original


def clone_inputs(args: Any) -> Any:
    return pytree.tree_map(clone_preserve_strides, args)


def _storage_key(t: torch.Tensor) -> int | None:
    if t.numel() == 0 or t.untyped_storage().nbytes() == 0:
        return None
    return t.untyped_storage().data_ptr()


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _tolerance(dtype: torch.dtype, rtol: Any, atol: Any, reduction: bool) -> tuple[float, float]:
    table = REDUCTION_TOLERANCES if reduction else TOLERANCES
    base_rtol, base_atol = table.get(dtype, (0.0, 0.0))
    if isinstance(rtol, dict):
        rtol = rtol.get(dtype)
    if isinstance(atol, dict):
        atol = atol.get(dtype)
    return (base_rtol if rtol is None else rtol, base_atol if atol is None else atol)


def assert_same_values(
    actual: Any, expected: Any, *, rtol: Any = None, atol: Any = None, reduction: bool = False, what: str = "output"
) -> None:
    """Same structure, types, dtypes, shapes, devices; values within tolerance."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    assert a_spec == e_spec, f"{what}: structure differs: compiled {a_spec} vs eager {e_spec}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"{what}[{i}]"
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{where}: compiled gave {type(a).__name__}, eager a tensor"
            assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} vs eager {e.dtype}"
            assert a.shape == e.shape, f"{where}: shape {tuple(a.shape)} vs eager {tuple(e.shape)}"
            assert a.device == e.device, f"{where}: device {a.device} vs eager {e.device}"
            assert a.requires_grad == e.requires_grad, f"{where}: requires_grad {a.requires_grad} vs eager"
            r, t = _tolerance(e.dtype, rtol, atol, reduction)
            torch.testing.assert_close(
                a.detach(), e.detach(), rtol=r, atol=t, equal_nan=True, check_stride=False, msg=lambda m: f"{where}: {m}"
            )
        elif isinstance(e, float):
            assert isinstance(a, float), f"{where}: compiled gave {type(a).__name__}, eager float"
            r, t = _tolerance(torch.float64, rtol, atol, reduction)
            torch.testing.assert_close(a, e, rtol=r, atol=t, equal_nan=True, msg=lambda m: f"{where}: {m}")
        else:
            assert type(a) is type(e), f"{where}: type {type(a).__name__} vs eager {type(e).__name__}"
            assert a == e, f"{where}: {a!r} vs eager {e!r}"


def assert_same_aliasing(actual: Any, expected: Any, compiled_inputs: Any, eager_inputs: Any) -> None:
    """Outputs alias inputs (and each other) exactly where eager's do, as the same views."""
    a_outs, e_outs = _tensors(actual), _tensors(expected)
    a_ins = [_storage_key(t) for t in _tensors(compiled_inputs)]
    e_ins = [_storage_key(t) for t in _tensors(eager_inputs)]

    def alias_of(t: torch.Tensor, keys: list) -> int | None:
        k = _storage_key(t)
        return None if k is None else next((i for i, key in enumerate(keys) if key == k), None)

    for i, (a, e) in enumerate(zip(a_outs, e_outs)):
        ea, aa = alias_of(e, e_ins), alias_of(a, a_ins)
        if _storage_key(e) is None:
            continue
        assert aa == ea, (
            f"output {i}: eager's aliases input {ea}, compiled's aliases input {aa}"
            " (None: a fresh tensor)"
        )
        if ea is not None:
            assert (a.shape, a.stride(), a.storage_offset()) == (e.shape, e.stride(), e.storage_offset()), (
                f"output {i} is a view of input {ea}: compiled view is "
                f"{tuple(a.shape)}/{a.stride()}/+{a.storage_offset()}, eager's "
                f"{tuple(e.shape)}/{e.stride()}/+{e.storage_offset()}"
            )
    for i in range(len(e_outs)):
        for j in range(i + 1, len(e_outs)):
            ke, ka = _storage_key(e_outs[i]), _storage_key(a_outs[i])
            if ke is None or ka is None:
                continue
            e_shared = ke == _storage_key(e_outs[j])
            a_shared = ka == _storage_key(a_outs[j])
            assert e_shared == a_shared, f"outputs {i} and {j}: share memory in eager: {e_shared}, compiled: {a_shared}"


def assert_same_strides(actual: Any, expected: Any) -> None:
    for i, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected))):
        assert a.stride() == e.stride(), f"output {i}: strides {a.stride()} vs eager {e.stride()}"


def _requires_grad(args: Any) -> Any:
    def leaf(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            return x.detach().requires_grad_(True)
        return x

    return pytree.tree_map(leaf, args)


def _backward(outputs: Any, seed: int) -> None:
    outs = [t for t in _tensors(outputs) if t.requires_grad]
    assert outs, "grad=True but no output requires grad"
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.device, t.dtype) for t in outs]
    torch.autograd.backward(outs, grads)


def _module_state(m: torch.nn.Module | None) -> dict[str, Any]:
    if m is None:
        return {}
    return {k: v.detach() for k, v in m.state_dict(keep_vars=True).items()}


def _module_grads(m: torch.nn.Module | None) -> dict[str, Any]:
    if m is None:
        return {}
    return {k: p.grad for k, p in m.named_parameters()}


def compile_fn(
    fn: Callable,
    *,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    options: dict | None = None,
    backend: Any = BACKEND,
):
    """torch.compile with cppinductor and the suite's default options."""
    if backend != BACKEND:  # another backend (the harness's own tests): no options
        return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)
    opts = dict(DEFAULT_OPTIONS)
    opts.update(options or {})
    return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph, options=opts)


def check_model(
    fn: Callable,
    args: tuple | list,
    kwargs: dict | None = None,
    *,
    grad: bool = False,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    options: dict | None = None,
    rtol: Any = None,
    atol: Any = None,
    reduction: bool = False,
    check_strides: bool = False,
    check_aliasing: bool = True,
    runs: int = 2,
    seed: int = 1234,
    backend: Any = BACKEND,
) -> tuple[Any, Any]:
    """Runs fn eagerly and compiled; asserts equal results. Returns (compiled, eager) outputs of the last run.

    fn may be an nn.Module: eager and compiled each get a deep copy, whose
    parameters, buffers and gradients are compared too.
    """
    kwargs = kwargs or {}
    is_module = isinstance(fn, torch.nn.Module)
    eager_fn = copy.deepcopy(fn) if is_module else fn
    compiled_module = copy.deepcopy(fn) if is_module else None
    compiled = compile_fn(
        compiled_module if is_module else fn, dynamic=dynamic, fullgraph=fullgraph, options=options, backend=backend
    )

    def prepare(a: Any) -> Any:
        a = clone_inputs(a)
        return _requires_grad(a) if grad else a

    eager_args, eager_kwargs = prepare((tuple(args), kwargs))
    torch.manual_seed(seed)
    expected = eager_fn(*eager_args, **eager_kwargs)
    if grad:
        _backward(expected, seed)

    actual = None
    for _ in range(runs):
        if is_module:  # every run starts from the module as it was
            compiled_module.load_state_dict(fn.state_dict())
            compiled_module.zero_grad(set_to_none=True)
        comp_args, comp_kwargs = prepare((tuple(args), kwargs))
        torch.manual_seed(seed)
        actual = compiled(*comp_args, **comp_kwargs)
        assert_same_values(actual, expected, rtol=rtol, atol=atol, reduction=reduction)
        if check_aliasing:
            assert_same_aliasing(actual, expected, (comp_args, comp_kwargs), (eager_args, eager_kwargs))
        if check_strides:
            assert_same_strides(actual, expected)
        if grad:
            _backward(actual, seed)
        # Inputs after the call: in-place updates equal, nothing else touched.
        assert_same_values(
            (comp_args, comp_kwargs), (eager_args, eager_kwargs), rtol=rtol, atol=atol, reduction=reduction,
            what="input after the call",
        )
        assert_same_values(
            _module_state(compiled_module), _module_state(eager_fn if is_module else None),
            rtol=rtol, atol=atol, reduction=reduction, what="module state after the call",
        )
        if grad:
            grads_of = lambda a: [t.grad for t in _tensors(a) if t.requires_grad]  # noqa: E731
            assert_same_values(
                grads_of((comp_args, comp_kwargs)), grads_of((eager_args, eager_kwargs)),
                rtol=rtol, atol=atol, reduction=True, what="input gradient",
            )
            assert_same_values(
                _module_grads(compiled_module), _module_grads(eager_fn if is_module else None),
                rtol=rtol, atol=atol, reduction=True, what="parameter gradient",
            )
    return actual, expected
