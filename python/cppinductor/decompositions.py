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
    aten._native_batch_norm_legit_no_training,  # eval-mode batch norm: a pointwise affine map
    aten._native_batch_norm_legit,
    aten._batch_norm_with_update_functional,
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
    # Ops core ATen keeps whole whose decompositions are ops we lower (the
    # OpInfo sweep found them falling back). Not diagonal_scatter: its
    # decomposition mutates (prims.copy_to), which AOTAutograd rejects; it
    # has a lowering instead.
    aten.addmv,
    aten.ldexp,
    aten.narrow_copy,
    aten.permute_copy,
    aten.dist,
    aten.as_strided_copy,
    aten.unfold_copy,
    # Outside core ATen, decomposed into gathers and pointwise math: grid
    # sampling (bilinear and nearest, zeros/border/reflection padding) and
    # bucketize's binary search (a fixed number of steps: log2 of the
    # boundaries' length).
    aten.grid_sampler_2d,
    aten.bucketize,
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


def _transformer_encoder_layer_fwd(
    src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
    norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
    mask=None, mask_type=None,
):
    """nn.TransformerEncoderLayer's inference fast path (one fused ATen op that
    Dynamo records under eval + no_grad), as the ops it runs: attention, then
    the feed-forward block, each with its residual and layer norm. Masks and
    nested tensors keep the fused op."""
    if mask is not None or src.is_nested or src.dim() != 3:
        return NotImplemented
    F = torch.nn.functional
    batch, length, _ = src.shape
    head_dim = embed_dim // num_heads

    def attention(x):
        q, k, v = F.linear(x, qkv_weight, qkv_bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, length, num_heads, head_dim).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        return F.linear(out.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias)

    def feed_forward(x):
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
        return F.linear(hidden, ffn_weight_2, ffn_bias_2)

    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = src
    if norm_first:
        x = x + attention(norm(x, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(x + attention(x), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    """Weight norm's backward (wav2vec2's positional convolution), as the
    pointwise math and the sums its CPU and CUDA kernels compute. With
    w = v * g / n, n the norm of v over every axis but `dim`:
    grad_g = sum(grad_w * v) / n and grad_v = g / n * (grad_w - v * grad_g / n),
    in float32 at least (the kernels accumulate bf16 and fp16 in float)."""
    axes = [i for i in range(saved_v.dim()) if i != dim]
    compute = torch.promote_types(saved_v.dtype, torch.float32)
    v, g, norm, grad = (t.to(compute) for t in (saved_v, saved_g, saved_norms, grad_w))
    grad_g = (grad * v).sum(axes, keepdim=True) / norm
    grad_v = g / norm * (grad - v * (grad_g / norm))
    return grad_v.to(saved_v.dtype), grad_g.to(saved_g.dtype)


# --- foreach ops -------------------------------------------------------------------------
#
# Optimizers (Adam, AdamW, SGD with foreach=True, the default on CUDA) and
# clip_grad_norm_ run their math as _foreach_* ops over lists of tensors.
# Each is the per-tensor op applied item by item, so it decomposes into those
# ops, which the lowering fuses like any other: the chain of one parameter's
# update becomes one kernel. (Overloads with a tensor of scalars for
# addcmul/addcdiv stay whole: eager reads its values as Python numbers.)

_FOREACH_UNARY = (
    "abs", "acos", "asin", "atan", "ceil", "clone", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
    "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
    "sinh", "sqrt", "tan", "tanh", "trunc", "zero",
)

# name: (the op with a scalar, the op with a tensor); alpha only for add/sub.
_FOREACH_BINARY = {
    "add": (aten.add.Tensor, aten.add.Tensor),
    "sub": (aten.sub.Tensor, aten.sub.Tensor),
    "mul": (aten.mul.Tensor, aten.mul.Tensor),
    "div": (aten.div.Tensor, aten.div.Tensor),
    "pow": (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor),
    "clamp_min": (aten.clamp_min.default, aten.clamp_min.Tensor),
    "clamp_max": (aten.clamp_max.default, aten.clamp_max.Tensor),
    "maximum": (aten.clamp_min.default, aten.maximum.default),
    "minimum": (aten.clamp_max.default, aten.minimum.default),
}


def _foreach_decompositions() -> dict:
    table = {}

    def overload(name: str, kind: str):
        packet = getattr(aten, f"_foreach_{name}", None)
        return getattr(packet, kind, None) if packet is not None else None

    def add(name: str, kind: str, fn) -> None:
        op = overload(name, kind)
        if op is not None:
            table[op] = fn

    for name in _FOREACH_UNARY:
        op = getattr(aten, name).default
        add(name, "default", lambda self, op=op: [op(t) for t in self])

    for name, (with_scalar, with_tensor) in _FOREACH_BINARY.items():
        add(name, "Scalar", lambda self, scalar, op=with_scalar: [op(t, scalar) for t in self])
        add(name, "ScalarList", lambda self, scalars, op=with_scalar: [op(t, s) for t, s in zip(self, scalars)])
        if name in ("add", "sub"):
            add(name, "List", lambda self, other, *, alpha=1, op=with_tensor: [
                op(t, o, alpha=alpha) if alpha != 1 else op(t, o) for t, o in zip(self, other)])
            add(name, "Tensor", lambda self, other, *, alpha=1, op=with_tensor: [
                op(t, other, alpha=alpha) if alpha != 1 else op(t, other) for t in self])
        else:
            add(name, "List", lambda self, other, op=with_tensor: [op(t, o) for t, o in zip(self, other)])
            add(name, "Tensor", lambda self, other, op=with_tensor: [op(t, other) for t in self])
    add("pow", "ScalarAndTensor", lambda self, exponent: [aten.pow.Scalar(self, e) for e in exponent])

    for name in ("addcmul", "addcdiv"):
        op = getattr(aten, name).default
        add(name, "Scalar", lambda self, t1, t2, value=1, op=op: [
            op(s, a, b, value=value) for s, a, b in zip(self, t1, t2)])
        add(name, "ScalarList", lambda self, t1, t2, scalars, op=op: [
            op(s, a, b, value=v) for s, a, b, v in zip(self, t1, t2, scalars)])

    add("lerp", "Scalar", lambda self, ends, weight: [aten.lerp.Scalar(s, e, weight) for s, e in zip(self, ends)])
    add("lerp", "ScalarList", lambda self, ends, weights: [
        aten.lerp.Scalar(s, e, w) for s, e, w in zip(self, ends, weights)])
    add("lerp", "List", lambda self, ends, weights: [
        aten.lerp.Tensor(s, e, w) for s, e, w in zip(self, ends, weights)])
    add("copy", "default", lambda self, src, non_blocking=False: [
        aten.copy.default(t, s, non_blocking) for t, s in zip(self, src)])
    add("norm", "Scalar", lambda self, ord=2, dtype=None: [
        aten.linalg_vector_norm.default(t, ord, dtype=dtype) for t in self])
    add("max", "default", lambda self: [aten.max.default(t) for t in self])
    return table


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP:
        table.pop(op, None)
    table[aten._transformer_encoder_layer_fwd.default] = _transformer_encoder_layer_fwd
    table[aten._weight_norm_interface_backward.default] = _weight_norm_interface_backward
    table.update(_foreach_decompositions())
    return table
