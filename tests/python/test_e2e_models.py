"""End to end, compiled vs eager: layers and small models, inference and training."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from check import assert_same_values, check_model, compile_fn


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class AttentionBlock(nn.Module):
    """Pre-norm attention + MLP, written out by hand (no fused SDPA)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_mlp_gelu(training, device):
    model = MLP().to(device)
    check_model(model, (torch.randn(4, 16, device=device),), grad=training, reduction=True)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_hand_written_attention_block(training, device):
    model = AttentionBlock().to(device)
    check_model(model, (torch.randn(2, 5, 16, device=device),), grad=training, reduction=True)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_scaled_dot_product_attention(training, device):

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(2, 2, 6, 8, device=device) for _ in range(3))
    check_model(f, (q, k, v), grad=training, reduction=True)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_transformer_encoder_layer(training, device):
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).to(device)
    layer.train(training)
    ctx = torch.enable_grad() if training else torch.no_grad()
    with ctx:
        check_model(layer, (torch.randn(2, 6, 16, device=device),), grad=training, reduction=True)


def test_mse_loss_gradient_over_many_elements(device):
    """Large enough that CUDA splits the loss across blocks, with the scaled
    difference the backward reads stored in the same pass."""
    target = torch.randn(256, 1024, device=device)

    def loss(x):
        return F.mse_loss(x * 2 + 1, target)

    check_model(loss, (torch.randn(256, 1024, device=device),), grad=True, reduction=True)


def test_mlp_training_step_sgd(device):
    """Two SGD steps: the compiled model's parameters end up equal to eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    eager_model = copy.deepcopy(model)
    trained = copy.deepcopy(model)
    compiled_model = compile_fn(trained)
    opt_e = torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    opt_c = torch.optim.SGD(trained.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(6, 8, device=device), torch.randn(6, 1, device=device)
    for _ in range(2):
        for m, opt in ((eager_model, opt_e), (compiled_model, opt_c)):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
    assert_same_values(
        dict(trained.named_parameters()), dict(eager_model.named_parameters()), rtol=1e-4, atol=1e-5,
        what="parameters after two steps",
    )


def test_compiled_sgd_update_mutates_parameters(device):
    """An in-place parameter update under no_grad, compiled, with gradients as inputs."""

    def sgd(params, grads, lr):
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.add_(g, alpha=-lr)

    params = [torch.randn(4, 3, device=device), torch.randn(3, device=device)]
    grads = [torch.randn(4, 3, device=device), torch.randn(3, device=device)]
    check_model(sgd, (params, grads, 0.05))


def test_dropout_eval_is_identity(device):
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.ReLU()).to(device).eval()
    check_model(model, (torch.randn(3, 8, device=device),))


def test_dropout_train_statistics(device):
    """Train-mode dropout: can't match eager's mask; zeros and scaling must be right."""

    def f(x):
        return F.dropout(x, p=0.5, training=True)

    out = compile_fn(f)(torch.ones(4000, device=device))
    kept = out != 0
    assert torch.all(out[kept] == 2.0)
    assert 0.4 < kept.float().mean().item() < 0.6


def test_embedding_and_index_ops(device):
    emb = nn.Embedding(20, 6).to(device)

    def f(idx, src, x):
        e = emb(idx)
        g = torch.gather(x, 1, idx % x.shape[1])
        s = torch.index_select(x, 0, torch.tensor([2, 0, 2], device=x.device))
        sa = torch.zeros(4, 5, device=x.device).scatter_add(1, idx[:, :5] % 5, src)
        return e, g, s, sa, x[idx[0] % 4], x[:, [1, 3]]

    idx = torch.randint(0, 20, (4, 7), device=device)
    check_model(f, (idx, torch.randn(4, 5, device=device), torch.randn(4, 9, device=device)))


def test_embedding_backward(device):
    emb = nn.Embedding(10, 4).to(device)
    check_model(emb, (torch.tensor([[1, 2, 1], [9, 0, 1]], device=device),), grad=True)


def test_cat_stack_split_chunk(device):
    def f(a, b):
        c = torch.cat([a, b, a * 2], dim=1)
        s = torch.stack([a, b], dim=0)
        p1, p2 = c.split([3, 9], dim=1)
        chunks = torch.chunk(b + 1, 3, dim=0)
        return c, s, p1 * 2, p2 + 1, chunks[0], chunks[2].sum(), torch.cat([p2, p1], 1).relu()

    check_model(f, (torch.randn(6, 4, device=device), torch.randn(6, 4, device=device)))


def test_matmul_bmm_addmm_linear(device):
    def f(a, b, c, bias):
        return a @ b, torch.bmm(c, c.transpose(1, 2)), torch.addmm(bias, a, b), F.linear(a, b.t(), bias) * 2

    a, b = torch.randn(5, 7, device=device), torch.randn(7, 9, device=device)
    c = torch.randn(3, 4, 6, device=device)
    check_model(f, (a, b, c, torch.randn(9, device=device)), grad=True, reduction=True)


def test_conv2d_relu_pool(device):
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 2, 1)).to(device)
    check_model(model, (torch.randn(2, 3, 8, 8, device=device),), grad=True, reduction=True)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_conv_training(dim, device):
    # wav2vec2's positional convolution: weight norm's backward is decomposed,
    # not left to ATen.
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 6, 3, padding=1), dim=dim).to(device)
    check_model(conv, (torch.randn(2, 4, 9, device=device),), grad=True, reduction=True,
                options={"fallback": "error"})


def test_cross_entropy_loss(device):
    def f(logits, target):
        return F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, -1), target, reduction="sum")

    check_model(
        f, (torch.randn(6, 5, device=device), torch.randint(0, 5, (6,), device=device)), grad=True, reduction=True
    )


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_inference_fast_path(norm_first, activation, device):
    # eval + no_grad: Dynamo records the module's fused fast-path op, which our
    # decomposition table turns into lowerable ops and extern calls.
    layer = torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, activation=activation,
        batch_first=True, norm_first=norm_first,
    ).to(device).eval()
    with torch.no_grad():
        check_model(layer, (torch.randn(2, 5, 32, device=device),), reduction=True)
