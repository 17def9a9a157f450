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
