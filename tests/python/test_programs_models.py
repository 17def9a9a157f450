"""Programs nobody wrote the compiler for: model pieces, compiled vs eager on CPU.

Small shapes; several dtypes, non-contiguous inputs and sizes (dynamic=True)
per program. The nn-level pieces (RMSNorm, SwiGLU, rotary embeddings, causal
attention, recurrent cells, norms, losses) as people write them by hand.
"""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from check import check_model

FLOATS = [torch.float32, torch.float64, torch.bfloat16]
LOW_AND_SINGLE = [torch.float32, torch.bfloat16]


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


@pytest.mark.parametrize("dtype", FLOATS + [torch.float16], ids=str)
def test_rmsnorm(dtype):
    x, w = torch.randn(4, 7, 32).to(dtype), torch.randn(32).to(dtype)
    check_model(rmsnorm, (x, w), grad=dtype != torch.float16, reduction=True)


def test_rmsnorm_transposed_zero_size_and_dynamic():
    check_model(rmsnorm, (torch.randn(16, 6).t(), torch.randn(16)), grad=True, reduction=True)
    check_model(rmsnorm, (torch.randn(0, 16), torch.randn(16)), reduction=True)
    check_model(rmsnorm, (torch.randn(9, 24), torch.randn(24)), grad=True, reduction=True, dynamic=True)


class SwiGLU(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.w1, self.w3, self.w2 = nn.Linear(d, h, bias=False), nn.Linear(d, h, bias=False), nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


@pytest.mark.parametrize("dtype", LOW_AND_SINGLE, ids=str)
def test_swiglu_mlp(dtype):
    check_model(SwiGLU(16, 40).to(dtype), (torch.randn(3, 5, 16).to(dtype),), grad=True, reduction=True)


def test_geglu_chunk_dynamic():
    def geglu(x, w):
        a, b = (x @ w).chunk(2, dim=-1)
        return a * F.gelu(b, approximate="tanh") + F.gelu(a)

    check_model(geglu, (torch.randn(7, 8), torch.randn(8, 20)), grad=True, reduction=True, dynamic=True)


def rope(q, cos, sin):
    half = q.shape[-1] // 2
    return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


def rope_tables(t, d, dtype=torch.float32):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(torch.arange(t).float(), inv)
    emb = torch.cat((freqs, freqs), -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", LOW_AND_SINGLE, ids=str)
def test_rotary_embedding(dtype):
    cos, sin = rope_tables(5, 8, dtype)
    check_model(rope, (torch.randn(2, 3, 5, 8).to(dtype), cos, sin), grad=True)


def test_rotary_embedding_transposed_and_interleaved():
    cos, sin = rope_tables(5, 8)
    check_model(rope, (torch.randn(2, 5, 3, 8).transpose(1, 2), cos, sin), grad=True)

    def interleaved(x, freqs):
        a, b = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        c, s = freqs.cos(), freqs.sin()
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)

    check_model(interleaved, (torch.randn(2, 5, 8), torch.randn(5, 4)), grad=True)


def causal_attention(q, k, v):
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    att = att.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
    return torch.softmax(att, -1) @ v


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_causal_attention(dtype):
    check_model(causal_attention, tuple(torch.randn(2, 2, 6, 8).to(dtype) for _ in range(3)), grad=True, reduction=True)


def test_softmax_of_fully_masked_rows_is_nan_like_eager():
    mask = torch.tensor([[True] * 5, [False, True, True, True, True], [False] * 5])

    def f(x, m):
        y = x.masked_fill(m, float("-inf"))
        return torch.softmax(y, -1), F.log_softmax(y, -1), torch.softmax(y, -1).nan_to_num(0.0)

    check_model(f, (torch.randn(3, 5), mask), grad=True)


class PaddedBlock(nn.Module):
    """Pre-norm transformer block with a causal and a key-padding mask."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = SwiGLU(d, 4 * d)

    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.n1(x)).split(d, -1))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        att = att.masked_fill(pad[:, None, None, :], float("-inf")).softmax(-1).nan_to_num(0.0)
        x = x + self.out((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


def test_transformer_block_with_padding_mask():
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1, 3:] = True
    pad[0, 0] = True  # row 0 of batch 0 attends to nothing: NaN -> 0
    check_model(PaddedBlock(), (torch.randn(2, 5, 16), pad), grad=True, reduction=True)


def test_hand_written_gru_and_lstm_cells():
    def gru(x, h, wi, wh, bi, bh):
        ir, iz, in_ = (x @ wi.t() + bi).chunk(3, 1)
        hr, hz, hn = (h @ wh.t() + bh).chunk(3, 1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        return (1 - z) * torch.tanh(in_ + r * hn) + z * h

    def lstm(xs, h, c, wi, wh, b):
        outs = []
        for t in range(xs.shape[0]):
            i, f, g, o = (xs[t] @ wi.t() + h @ wh.t() + b).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs), h, c

    n, hid = 5, 6
    r = torch.randn
    check_model(gru, (r(3, n), r(3, hid), r(3 * hid, n), r(3 * hid, hid), r(3 * hid), r(3 * hid)), grad=True, reduction=True)
    check_model(lstm, (r(4, 3, n), r(3, hid), r(3, hid), r(4 * hid, n), r(4 * hid, hid), r(4 * hid)), grad=True, reduction=True)


def test_group_and_instance_norm():
    def f(x, w, b):
        return F.group_norm(x, 3, w, b), F.instance_norm(x)

    check_model(f, (torch.randn(2, 6, 4, 5), torch.randn(6), torch.randn(6)), grad=True, reduction=True)
    cl = torch.randn(2, 4, 3, 5).to(memory_format=torch.channels_last)
    check_model(lambda x: F.group_norm(x, 2), (cl,), grad=True, reduction=True)
    check_model(lambda x: F.group_norm(x, 2), (torch.randn(2, 4, 7).bfloat16(),), grad=True, reduction=True)


def test_cross_entropy_ignore_index_and_label_smoothing():
    target = torch.tensor([1, -100, 3, 0, 4, -100])

    def f(x, t):
        return (
            F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.2),
            F.cross_entropy(x, t.clamp(min=0), label_smoothing=0.1, reduction="none"),
            F.nll_loss(F.log_softmax(x, -1), t, ignore_index=-100, reduction="sum"),
        )

    check_model(f, (torch.randn(6, 5), target), grad=True, reduction=True)
    # Every target ignored: 0/0 in eager.
    check_model(lambda x, t: F.cross_entropy(x, t), (torch.randn(3, 5), torch.full((3,), -100)), grad=True)
    check_model(lambda x, t: F.cross_entropy(x, t), (torch.randn(6, 5).bfloat16(), torch.randint(0, 5, (6,))), grad=True,
                reduction=True)


def test_cross_entropy_dynamic_batch():
    def f(x, t):
        return F.cross_entropy(x, t, ignore_index=2)

    check_model(f, (torch.randn(7, 5).double(), torch.randint(0, 5, (7,))), grad=True, reduction=True, dynamic=True)


def test_regression_and_divergence_losses():
    def f(a, b):
        p = torch.sigmoid(b)
        return (
            F.mse_loss(a, b),
            F.smooth_l1_loss(a, b, beta=0.5),
            F.smooth_l1_loss(a, b, beta=0.0),
            F.huber_loss(a, b, delta=0.7),
            F.l1_loss(a, b, reduction="none"),
            F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean"),
            F.kl_div(a, b, reduction="sum", log_target=True),
            F.binary_cross_entropy_with_logits(a * 30, p),
            F.binary_cross_entropy(torch.sigmoid(a), p),
            F.poisson_nll_loss(a, p * 3),
            F.gaussian_nll_loss(a, b, p + 0.1),
        )

    check_model(f, (torch.randn(4, 6), torch.randn(4, 6)), grad=True, reduction=True)


def test_kl_div_with_zero_targets_and_bce_at_the_edges():
    check_model(lambda a, b: F.kl_div(a, b, reduction="sum"), (torch.randn(2, 4), torch.tensor([[0.0, 0.5, 0.5, 0.0]] * 2)),
                grad=True, reduction=True)
    check_model(lambda p, t: F.binary_cross_entropy(p, t),
                (torch.tensor([0.0, 1.0, 0.5, 1e-9]), torch.tensor([0.0, 1.0, 1.0, 1.0])), reduction=True)


def test_module_called_with_many_batch_sizes():
    # Recompiling or going dynamic are both fine (other tests count graphs);
    # every size must give eager's answer.
    model = nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.GELU(), nn.Linear(12, 3))
    compiled = torch.compile(model, backend="cppinductor")
    with torch.no_grad():
        for batch in [2, 5, 9, 1, 17]:
            x = torch.randn(batch, 6)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
