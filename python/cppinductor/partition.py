"""Forward/backward partitioning for AOTAutograd.

The min-cut partitioner (Inductor's) saves what is expensive and recomputes
cheap pointwise values in the backward. Inductor relies on a recomputation
giving the forward's exact bits; ours may not: kernels of other vector widths
(or a scalar tail) call other implementations of expm1, tanh, erf, exp, ...,
which agree within a few ULP, not bit for bit. That matters only where the
backward compares values for exact equality: amax/amin/max/min backward
computes `input == result` with the saved result, and a recomputed input that
is one ULP off matches nowhere, so the gradient divides by a zero count (NaN).
Such compared values are saved instead (CheckpointPolicy.MUST_SAVE, the tag
the partitioner already honours for effectful ops), so both sides of the
comparison are the forward's own bits.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.utils.checkpoint import CheckpointPolicy

aten = torch.ops.aten

_EXACT_COMPARISONS = (aten.eq.Tensor, aten.ne.Tensor)


def _is_view(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.is_view


def from_tangents(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes of a joint graph that depend on a tangent (its backward's own values)."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if (node.op == "placeholder" and node.name.startswith("tangents")) or \
                any(arg in found for arg in node.all_input_nodes):
            found.add(node)
    return found


def save_exactly_compared_values(graph: torch.fx.Graph, num_fwd_outputs: int) -> list[torch.fx.Node]:
    """Tags MUST_SAVE the forward values a backward-only comparison reads
    (through views); returns them. Values derived from the tangents are the
    backward's own and are left alone, as are comparisons the forward's
    outputs need (the forward computes those once)."""
    backward = from_tangents(graph)

    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    forward_needs: set[torch.fx.Node] = set()
    stack = [a for a in output.args[0][:num_fwd_outputs] if isinstance(a, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node not in forward_needs:
            forward_needs.add(node)
            stack.extend(node.all_input_nodes)

    saved = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _EXACT_COMPARISONS:
            continue
        if node in backward or node in forward_needs:
            continue
        for operand in node.all_input_nodes:
            while _is_view(operand) and operand.all_input_nodes:
                operand = operand.all_input_nodes[0]
            if operand.op == "call_function" and operand not in backward:
                operand.meta["recompute"] = CheckpointPolicy.MUST_SAVE
                saved.append(operand)
    return saved


def partition(joint_module: torch.fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int, **kwargs: Any):
    """min_cut_rematerialization_partition, with exactly compared values
    saved, after the forward's pointwise results that would inherit a
    transposed layout are made row-major (graph_passes.row_major_pointwise)."""
    from functorch.compile import min_cut_rematerialization_partition

    from .graph_passes import row_major_pointwise

    row_major_pointwise(joint_module)
    save_exactly_compared_values(joint_module.graph, num_fwd_outputs)
    return min_cut_rematerialization_partition(
        joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs
    )
