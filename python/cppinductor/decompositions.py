"""The decomposition table handed to AOTAutograd.

Core ATen plus the composite ops whose pieces fuse better than the whole
(softmax, layer norm, gelu, their backwards, ...). Matmuls and convolutions
are kept intact: they are extern calls into the vendor libraries.
"""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

# Composite ops that core ATen keeps but that we want as primitives, so the
# lowering sees reductions and pointwise ops it can fuse.
_EXTRA = [
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_group_norm,
    aten._native_batch_norm_legit_functional,
    aten.gelu,
    aten.gelu_backward,
    aten.silu,
    aten.silu_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.threshold_backward,
    aten.native_dropout,
    aten.embedding_dense_backward,
    aten.logsumexp,
    aten.softplus,
    aten.mish,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
]

# Kept whole: extern calls (see lowering/ops/externs.h). CPU flash attention
# must stay whole: its decomposition's logsumexp output does not match what
# the fused backward kernel expects, so gradients would be wrong (Inductor
# excludes it for the same reason).
_KEEP = {
    aten.addmm.default,
    aten.mm.default,
    aten.bmm.default,
    aten.convolution.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
}


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP:
        table.pop(op, None)
    return table
