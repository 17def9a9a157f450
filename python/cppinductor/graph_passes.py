"""Rewrites of the ATen graph before it is exported to the C++ core.

One pass so far, the one Inductor runs on GPUs as `unfuse_bias_add_to_pointwise`:
an `addmm(bias, a, b)` whose every use is pointwise becomes `mm(a, b) + bias`,
so the bias add fuses into the kernel that reads the product anyway.

Why it pays on both devices:
- CPU: ATen's addmm first copies the broadcast bias into the whole output and
  then runs the GEMM with beta=1, reading it back. For a transformer block's
  fc1 that is 8 MB written and read for a 2048-float bias.
- CUDA: cuBLAS's plain GEMM picks the tiles Inductor's does (its bias epilogue
  picked slower ones for two of the transformer's GEMMs).

Half-precision addmm stays whole: its bias is added to the float accumulator
before the one rounding, where mm + add would round twice.
"""

from __future__ import annotations

import operator

import torch
import torch.fx

aten = torch.ops.aten

# Exact in float32/float64: mm rounds the product once, and so does the bias add.
_UNFUSED_DTYPES = (torch.float32, torch.float64)


def _pointwise_use(node: torch.fx.Node) -> bool:
    """True when `node` is pointwise, or a view (or getitem) all of whose uses are."""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem or (isinstance(target, torch._ops.OpOverload) and target.is_view):
        return all(_pointwise_use(user) for user in node.users)
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags


def _worth_unfusing(node: torch.fx.Node) -> bool:
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return False
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype not in _UNFUSED_DTYPES:
        return False
    return bool(node.users) and all(_pointwise_use(user) for user in node.users)


def unfuse_addmm_bias(gm: torch.fx.GraphModule) -> int:
    """Rewrites each addmm whose uses are all pointwise as mm + bias add.

    Returns how many it rewrote. The new nodes carry the addmm's metadata (its
    value and stack trace), so provenance comments still name the user's line.
    """
    graph = gm.graph
    rewritten = 0
    for node in list(graph.find_nodes(op="call_function", target=aten.addmm.default)):
        if not _worth_unfusing(node):
            continue
        bias, a, b = node.args
        with graph.inserting_before(node):
            # Named after the addmm, so kernel names and plans still say where they came from.
            product = graph.create_node("call_function", aten.mm.default, (a, b), name=f"{node.name}_mm")
            total = graph.create_node("call_function", aten.add.Tensor, (product, bias), name=f"{node.name}_bias")
        for new in (product, total):
            new.meta.update(node.meta)
        node.replace_all_uses_with(total)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten
