"""Correctness vs eager: same structure, same dtypes and shapes, values within tolerance."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map


def snapshot(result: Any) -> Any:
    """A copy of a step's result that later steps (in-place optimizer updates) cannot change."""
    return tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, result)


def mismatch(expected: Any, actual: Any, tol: Tuple[float, float]) -> Optional[str]:
    """None when actual matches expected, else a one-paragraph reason."""
    exp_leaves, exp_spec = tree_flatten(expected)
    act_leaves, act_spec = tree_flatten(actual)
    if exp_spec != act_spec:
        return f"output structure differs: expected {exp_spec}, got {act_spec}"
    rtol, atol = tol
    for i, (e, a) in enumerate(zip(exp_leaves, act_leaves)):
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
        except AssertionError as err:
            where = f"output {i}: " if len(exp_leaves) > 1 else ""
            return where + " ".join(str(err).split())
    return None


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def fp64_mismatch(eager: Any, actual: Any, reference: Any, atol: float) -> Optional[str]:
    """None when actual is as close to the float64 reference as eager is
    (its RMS error at most twice eager's, plus atol / 10: PyTorch's own
    benchmark rule), else why not."""
    exp_leaves, exp_spec = tree_flatten(eager)
    act_leaves, act_spec = tree_flatten(actual)
    ref_leaves, _ = tree_flatten(reference)
    if exp_spec != act_spec or len(ref_leaves) != len(exp_leaves):
        return f"output structure differs: expected {exp_spec}, got {act_spec}"
    for i, (e, a, r) in enumerate(zip(exp_leaves, act_leaves, ref_leaves)):
        if not isinstance(e, torch.Tensor):
            continue
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"output {i}: {a.dtype}{tuple(a.shape)} where eager has {e.dtype}{tuple(e.shape)}"
        if not torch.equal(a.isnan(), e.isnan()):
            return f"output {i}: NaN where eager has none, or the reverse"
        finite = ~e.isnan()
        ours, theirs = _rmse(a[finite], r[finite]), _rmse(e[finite], r[finite])
        if ours > 2.0 * theirs + atol / 10:
            return (f"output {i}: RMS error from float64 {ours:.3g}, eager's {theirs:.3g} "
                    f"(allowed {2.0 * theirs + atol / 10:.3g})")
    return None
