"""graph_passes: unfuse_addmm_bias (an addmm whose uses are all pointwise runs
as mm + a bias add fused into its readers; anything else keeps addmm),
channels_last_convolutions, row_major_pointwise (a training graph's
transposed residual stream made row-major), reinplace_input_scatters (a graph input's
update stored straight into it) and dense_attention_masks (a broadcast
attention mask made dense so fused CUDA attention accepts it)."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from conftest import requires_cuda
from cppinductor.graph_passes import wants_unfused_addmm
from kernel_counts import Program, cppinductor_counts


def _linear_then(post, dtype=torch.float32, grad=False, options=None):
    def build():
        torch.manual_seed(0)
        lin = nn.Linear(48, 40).to(dtype)

        def fn(x):
            return post(lin(x))

        if grad:
            return fn, (torch.randn(16, 48, dtype=dtype, requires_grad=True),)
        return (lambda x: _no_grad(fn, x)), (torch.randn(16, 48, dtype=dtype),)

    kwargs = {"options": options} if options else {}
    if dtype != torch.float32:
        kwargs.update(atol=2e-2, rtol=2e-2)
    return Program(f"linear_{post.__name__}", build, grad=grad, check_kwargs=kwargs)


def _no_grad(fn, x):
    with torch.no_grad():
        return fn(x)


def _gelu_3d(y):
    return F.gelu(y.view(4, 4, 40)) * 2  # a view between the product and its pointwise reader


def _row_softmax(y):
    return torch.softmax(y, dim=-1)  # a reduction: not a pointwise use


def _relu(y):
    return torch.relu(y)


def _returned_too(y):
    return y, torch.relu(y)  # the product itself is an output


UNFUSE = {"unfuse_addmm_bias": True}  # these CPU graphs' default is off (auto: CUDA graphs only)


def test_pointwise_uses_run_mm_and_fuse_the_bias():
    counts = cppinductor_counts(_linear_then(_gelu_3d, options=UNFUSE))
    assert counts.externs == ["aten.mm.default"], counts.externs
    assert counts.kernels == 1, counts.describe()  # bias add, gelu and * 2 in one kernel


def test_a_reduction_use_keeps_addmm():
    assert cppinductor_counts(_linear_then(_row_softmax, options=UNFUSE)).externs == ["aten.addmm.default"]


def test_a_returned_product_keeps_addmm():
    assert cppinductor_counts(_linear_then(_returned_too, options=UNFUSE)).externs == ["aten.addmm.default"]


def test_half_precision_keeps_addmm():
    # addmm adds the bias to the float accumulator before its one rounding;
    # mm + add would round twice.
    counts = cppinductor_counts(_linear_then(_relu, dtype=torch.bfloat16, options=UNFUSE))
    assert counts.externs == ["aten.addmm.default"]


def test_cpu_graphs_keep_addmm_by_default():
    assert cppinductor_counts(_linear_then(_relu)).externs == ["aten.addmm.default"]
    counts = cppinductor_counts(_linear_then(_relu, options={"unfuse_addmm_bias": False}))
    assert counts.externs == ["aten.addmm.default"]


def test_auto_unfuses_cuda_graphs_only():
    gm = torch.fx.symbolic_trace(lambda b, x, w: torch.ops.aten.addmm.default(b, x, w))
    val = torch.empty(4, 4, device="meta")
    for node in gm.graph.nodes:
        if node.op == "call_function":
            node.meta["val"] = val
    assert not wants_unfused_addmm(gm, "auto")  # a meta (not CUDA) value
    assert wants_unfused_addmm(gm, "auto", cuda=True)
    assert not wants_unfused_addmm(gm, "auto", cuda=False)
    assert wants_unfused_addmm(gm, True, cuda=False) and not wants_unfused_addmm(gm, False, cuda=True)


def _gelu(y):
    return F.gelu(y)


def test_training_unfuses_only_what_the_backward_does_not_save():
    # relu's backward reads relu's output, so the product has one pointwise
    # use; gelu's backward reads the product itself, a forward output.
    # Gradients match eager either way (check_model).
    assert "aten.addmm.default" not in cppinductor_counts(_linear_then(_relu, grad=True, options=UNFUSE)).externs
    assert "aten.addmm.default" in cppinductor_counts(_linear_then(_gelu, grad=True, options=UNFUSE)).externs


# --- channels-last convolutions (layout_optimization) ------------------------------------------------


class _ConvNet(nn.Module):
    """Convolutions (one grouped, one 1x1) with batch norm, pooling, a
    residual add, a reduction and an activation returned as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1, groups=4), nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
        z = torch.relu(self.b2(self.c2(y)) + y)
        return self.c3(z).mean((2, 3)), z


def _compiled_conv_net(options, *, grad=False, dynamic=False, device="cpu"):
    from cppinductor import debug

    torch.manual_seed(0)
    model = _ConvNet().eval().to(device)
    x = torch.randn(2, 3, 16, 16, requires_grad=grad, device=device)
    with torch.set_grad_enabled(grad), debug.recording() as records:
        compiled = torch.compile(model, backend="cppinductor", dynamic=dynamic, options={"fallback": "error", **options})
        out, ref = compiled(x), model(x)
    # cuDNN runs float32 convolutions in TF32 by default: NCHW and NHWC pick
    # different algorithms.
    atol = 1e-5 if device == "cpu" else 1e-3
    for a, b in zip(out, ref):
        assert torch.allclose(a, b, atol=atol)
        assert a.stride() == b.stride()  # outputs keep the strides eager gives them
    return records


def _clones_to_channels_last(records) -> int:
    return sum(1 for r in records for n in r.gm.graph.nodes
               if n.target is torch.ops.aten.clone.default and n.kwargs.get("memory_format") == torch.channels_last)


def test_convolutions_run_channels_last_converting_only_the_input_and_weights():
    records = _compiled_conv_net({"layout_optimization": True})
    # The image and the 3x3 weights; a 1x1 weight is channels-last as it is, and so are the activations.
    assert _clones_to_channels_last(records) == 3
    (record,) = records
    pooled = next(n for n in record.gm.graph.nodes if n.name == "getitem")
    assert pooled.meta["val"].is_contiguous(memory_format=torch.channels_last)
    assert "(1024, 1, 128, 16)" in record.wrapper_source  # the pooled activation is allocated channels-last


def test_layout_is_left_alone_on_cpu_in_training_and_with_symbolic_shapes():
    # The default, "auto", leaves a CPU conv net traced all NCHW as it is.
    assert _clones_to_channels_last(_compiled_conv_net({})) == 0
    assert _clones_to_channels_last(_compiled_conv_net({"layout_optimization": True}, grad=True)) == 0
    assert _clones_to_channels_last(_compiled_conv_net({"layout_optimization": True}, dynamic=True)) == 0


class _NhwcBlockNet(nn.Module):
    """ConvNeXt's pattern: layer norms and linears over channels in NHWC
    (permuted there and back), so the depthwise and downsampling
    convolutions get channels-last inputs from the model itself."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.stem_norm = nn.Conv2d(3, 8, 2, stride=2), nn.LayerNorm(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.norm, self.fc = nn.LayerNorm(8), nn.Linear(8, 8)
        self.down = nn.Conv2d(8, 16, 2, stride=2)

    def forward(self, x):
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.fc(self.norm(self.dw(x).permute(0, 2, 3, 1))).permute(0, 3, 1, 2)
        return self.down(x + y)


def test_a_cpu_model_that_permutes_to_nhwc_itself_runs_its_convolutions_channels_last_by_default():
    from cppinductor import debug

    torch.manual_seed(0)
    model = _NhwcBlockNet().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad(), debug.recording() as records:
        out = torch.compile(model, backend="cppinductor", options={"fallback": "error"})(x)
        ref = model(x)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert out.stride() == ref.stride()
    # The image and the stem's and downsampling's weights (the depthwise one
    # is channels-last as it is).
    assert _clones_to_channels_last(records) == 3
    with torch.no_grad(), debug.recording() as records:
        torch.compile(model, backend="cppinductor", options={"layout_optimization": False})(x)
    assert _clones_to_channels_last(records) == 0


@requires_cuda
def test_cuda_convolutions_run_channels_last_by_default_and_not_when_turned_off():
    assert _clones_to_channels_last(_compiled_conv_net({}, device="cuda")) == 3
    assert _clones_to_channels_last(_compiled_conv_net({"layout_optimization": False}, device="cuda")) == 0


def _conv_relu_graph(device: str, dims: int = 2):
    """relu(convolution(x, w, b)) traced with fake tensors on `device` (no GPU needed for "cuda")."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w, b):
        ones, zeros = [1] * dims, [0] * dims
        return torch.relu(torch.ops.aten.convolution(x, w, b, ones, ones, ones, False, zeros, 1))

    with FakeTensorMode():
        spatial = [6] * dims
        args = (torch.empty(2, 3, *spatial, device=device), torch.empty(4, 3, *([3] * dims), device=device),
                torch.empty(4, device=device))
        return make_fx(f)(*args), f


def test_a_cuda_convolution_bias_becomes_an_add_that_fuses_into_its_reader():
    from cppinductor import _C
    from cppinductor.export import export_graph
    from cppinductor.graph_passes import peel_convolution_bias

    for dims in (1, 2, 3):
        gm, f = _conv_relu_graph("cuda", dims)
        assert peel_convolution_bias(gm) == 1
        (conv,) = gm.graph.find_nodes(op="call_function", target=torch.ops.aten.convolution.default)
        assert conv.args[2] is None
        # The rewritten graph computes what the original does (run here on CPU tensors).
        x, w, b = torch.randn(2, 3, *[6] * dims), torch.randn(4, 3, *[3] * dims), torch.randn(4)
        torch.testing.assert_close(gm(x, w, b), f(x, w, b))
    # On CUDA the bias add and the relu are one kernel after the convolution.
    src = _C.generate_cuda_source(export_graph(gm))
    assert src.count("__global__") == 1 and "relu" in src and "in_b_1" in src, src
    cpu, _ = _conv_relu_graph("cpu")
    assert peel_convolution_bias(cpu) == 0  # oneDNN adds the bias itself


def test_a_graph_fake_tensors_cannot_run_again_stays_as_traced(monkeypatch, caplog):
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def fail(self, *args):
        raise RuntimeError("no fake kernel")

    monkeypatch.setattr(FakeTensorProp, "propagate_dont_convert_inputs", fail)
    with caplog.at_level("WARNING", logger="cppinductor.graph_passes"):
        records = _compiled_conv_net({"layout_optimization": True})  # outputs and strides checked there
    assert _clones_to_channels_last(records) == 0
    assert "channels-last layout not applied: RuntimeError: no fake kernel" in caplog.text


# --- a training graph's transposed pointwise results made row-major (row_major_pointwise) -----------------


class _AudioEncoder(nn.Module):
    """Whisper's encoder in small: conv -> gelu -> (B, C, L) permuted to
    (B, L, C) plus positions, then residual blocks of layer norm and linear."""

    def __init__(self, permuted_positions: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 16, 3, padding=1)
        self.pos = nn.Parameter(torch.randn(16, 12) if permuted_positions else torch.randn(12, 16))
        self.permuted_positions = permuted_positions
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16)) for _ in range(2))

    def forward(self, x):
        pos = self.pos.t() if self.permuted_positions else self.pos
        h = F.gelu(self.conv(x)).permute(0, 2, 1) + pos
        for block in self.blocks:
            h = h + block(h)
        return h


def _train_step_records(model, x):
    """Compiles a training step (fallback="error"); checks the output, its
    strides and every gradient against eager; returns the graph records."""
    from cppinductor import debug

    ref = model(x)
    ref.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with debug.recording() as records, torch.compiler.config.patch(force_disable_caches=True):
        out = torch.compile(model, backend="cppinductor", options={"fallback": "error"})(x)
        out.square().sum().backward()
    assert torch.allclose(out, ref, atol=1e-5) and out.stride() == ref.stride()
    for p, g in zip(model.parameters(), grads):
        assert torch.allclose(p.grad, g, atol=1e-4)
    return records


def _residual_adds(record) -> list:
    return [n.meta["val"] for n in record.gm.graph.nodes
            if n.target is torch.ops.aten.add.Tensor and n.meta["val"].dim() == 3 and n.meta["val"].shape[-1] == 16]


def test_a_transposed_residual_stream_is_row_major_in_training():
    torch.manual_seed(0)
    records = _train_step_records(_AudioEncoder(), torch.randn(2, 4, 12))
    forward, backward = (next(r for r in records if r.kind == k) for k in ("forward", "backward"))
    adds = _residual_adds(forward)
    assert len(adds) >= 3 and all(a.stride() == (192, 16, 1) for a in adds)  # traced: (192, 1, 12)
    assert "clone_default" not in forward.wrapper_source  # the clone is fused into the add: no copy of its own
    # The backward reads the saved sums in the strides the forward now gives them.
    saved = [n.meta["val"] for n in backward.gm.graph.find_nodes(op="placeholder")
             if n.meta["val"].shape == (2, 12, 16) and not n.name.startswith("tangents")]
    assert saved and all(v.stride() == (192, 16, 1) for v in saved)


def test_transposed_operands_only_keep_their_layout_until_a_row_major_one_joins():
    torch.manual_seed(0)
    (forward,) = [r for r in _train_step_records(_AudioEncoder(permuted_positions=True), torch.randn(2, 4, 12))
                  if r.kind == "forward"]
    first, *rest = _residual_adds(forward)
    assert first.stride() == (192, 1, 12)  # permuted + positions transposed: nothing runs along the last dim
    assert rest and all(a.stride() == (192, 16, 1) for a in rest)  # the blocks' linear outputs do


def test_a_channels_last_training_graph_keeps_its_layout():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.mask = nn.Parameter(torch.randn(1, 1, 6, 6))  # contiguous, runs along the last dim

        def forward(self, x):
            return self.conv(torch.relu(self.conv(x[:, :3].contiguous(memory_format=torch.channels_last)) * self.mask)
                             [:, :3])

    torch.manual_seed(0)
    model = Net().to(memory_format=torch.channels_last)
    records = _train_step_records(model, torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last))
    (forward,) = [r for r in records if r.kind == "forward"]
    products = [n.meta["val"] for n in forward.gm.graph.find_nodes(op="call_function", target=torch.ops.aten.mul.Tensor)]
    assert products and all(p.is_contiguous(memory_format=torch.channels_last) for p in products)


def test_a_joint_graph_fake_tensors_cannot_run_again_stays_as_traced(monkeypatch, caplog):
    from cppinductor import graph_passes

    def fail(node, fake_mode):
        raise RuntimeError("no fake kernel")

    monkeypatch.setattr(graph_passes, "_run_again", fail)
    torch.manual_seed(0)
    with caplog.at_level("WARNING", logger="cppinductor.graph_passes"):
        records = _train_step_records(_AudioEncoder(), torch.randn(2, 4, 12))
    (forward,) = [r for r in records if r.kind == "forward"]
    assert any(a.stride() == (192, 1, 12) for a in _residual_adds(forward))  # the stream as traced
    assert "row-major pointwise results not applied: RuntimeError: no fake kernel" in caplog.text


# --- scatters into graph inputs stored in place (reinplace_input_scatters) -----------------------------------


class _Cache(nn.Module):
    """A key cache updated at one position per call, then read whole (a decoder step's)."""

    def __init__(self, update):
        super().__init__()
        self.register_buffer("keys", torch.zeros(2, 16, 8))
        self.update = update

    def forward(self, k, pos):
        self.update(self.keys, k, pos)
        return (self.keys * 2).sum(1) + k.sum()


def _run_cache(update, device="cpu", steps=4, fallback="error"):
    """Compiled and eager caches over `steps` calls: outputs and buffers must
    agree each call. Returns the compiled graphs' records."""
    from cppinductor import debug

    eager, model = _Cache(update).to(device), _Cache(update).to(device)
    with torch.no_grad(), debug.recording() as records:
        compiled = torch.compile(model, backend="cppinductor", options={"fallback": fallback})
        for step in range(steps):
            k, pos = torch.randn(2, 1, 8, device=device), torch.tensor([3 * step + 1], device=device)
            torch.testing.assert_close(compiled(k, pos), eager(k, pos))
            torch.testing.assert_close(model.keys, eager.keys)
    return records


def _targets(records):
    return [n.target for r in records for n in r.gm.graph.nodes if n.op == "call_function"]


def test_an_index_copy_into_a_buffer_stores_in_place_and_copies_nothing():
    records = _run_cache(lambda keys, k, pos: keys.index_copy_(1, pos, k))
    targets = _targets(records)
    assert torch.ops.aten.index_put_.default in targets and torch.ops.aten.copy_.default not in targets, targets
    # No buffer the cache's size but the copies made when a caller's cache has other strides.
    source = records[0].wrapper_source
    allocations = [line for line in source.splitlines() if "empty_strided_cpu((2, 16, 8)" in line]
    assert all(".copy_(arg" in line for line in allocations), source


def test_an_extern_reading_the_updated_input_takes_the_input_itself():
    """A matmul (ATen) reads the cache after the kernel's update: the
    wrapper hands it the input, with no ATen index_put_ run again."""
    from cppinductor import debug

    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("keys", torch.zeros(16, 8))

        def forward(self, k, pos, w):
            self.keys.index_copy_(0, pos, k)
            return self.keys @ w

    eager, model = Cache(), Cache()
    w = torch.randn(8, 4)
    with torch.no_grad(), debug.recording() as records:
        compiled = torch.compile(model, backend="cppinductor", options={"fallback": "error"})
        for step in range(3):
            k, pos = torch.randn(1, 8), torch.tensor([5 * step])
            torch.testing.assert_close(compiled(k, pos, w), eager(k, pos, w))
            torch.testing.assert_close(model.keys, eager.keys)
    source = records[0].wrapper_source
    assert re.search(r"^    index_put = arg\d+_1$", source, re.M) and "aten_index_put" not in source, source


def test_a_cache_whose_old_value_is_read_stays_functional():
    def update(keys, k, pos):
        old = keys.sum()
        keys.index_copy_(1, pos, k + old)

    records = _run_cache(update)
    targets = _targets(records)
    assert torch.ops.aten.index_put_.default not in targets and torch.ops.aten.copy_.default in targets, targets
    from cppinductor.report import perf_hints

    hints = [h for r in records for h in perf_hints(r) if "copies the whole input" in h]
    assert len(hints) == 1 and "also reads its old value" in hints[0], hints


def test_an_accumulating_index_put_stays_functional():
    def update(keys, k, pos):
        keys.index_put_((torch.arange(2, device=keys.device), pos), k[:, 0], accumulate=True)

    targets = _targets(_run_cache(update))
    assert torch.ops.aten.index_put_.default not in targets, targets


def test_an_in_place_scatter_aten_runs_whole_still_stores():
    """A boolean mask index has no lowering: ATen runs index_put_ itself (the
    wrapper must call it, not take the cache as already written)."""

    def update(keys, k, pos):
        keys[:, torch.arange(16, device=keys.device) == pos] = k * 3

    records = _run_cache(update, fallback="eager")
    assert torch.ops.aten.index_put_.default in _targets(records)


@requires_cuda
def test_an_index_copy_into_a_cuda_buffer_stores_in_place():
    targets = _targets(_run_cache(lambda keys, k, pos: keys.index_copy_(1, pos, k), device="cuda"))
    assert torch.ops.aten.index_put_.default in targets and torch.ops.aten.copy_.default not in targets, targets


def _broadcast_mask_attention(q, k, v):
    """Attention under the mask transformers builds for encoders under
    torch.compile: (S, 1) expanded to (B, 1, S, S), strides (0, S, 1, 0)."""
    keep = (torch.arange(q.shape[2], device=q.device) >= 0)[None, None, :, None]
    mask = keep.expand(q.shape[0], 1, q.shape[2], k.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_broadcast_attention_mask_becomes_dense():
    """dense_attention_masks (run for CUDA masks, here asked to on the CPU):
    the call reads the mask narrowed to (1, 1, S, S) and contiguous, and the
    results are eager's."""
    from cppinductor.graph_passes import dense_attention_masks

    seen = []

    def backend(gm, example_inputs):
        seen.append(dense_attention_masks(gm, devices=("cpu",)))
        seen.append(dense_attention_masks(gm, devices=("cpu",)))  # what it made is dense: nothing more to do
        seen.append([(n.target, n.args[1:]) for n in gm.graph.nodes if n.op == "call_method"])
        return gm.forward

    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    out = torch.compile(_broadcast_mask_attention, backend=backend, fullgraph=True)(q, k, v)
    assert seen[:2] == [1, 0]
    assert ("narrow", (0, 0, 1)) in seen[2] and ("contiguous", ()) in seen[2]
    torch.testing.assert_close(out, _broadcast_mask_attention(q, k, v))
    # Symbolic sizes: the broadcast last dim still goes; the batch dim, of a
    # symbolic size, is copied rather than narrowed.
    torch._dynamo.reset()
    seen.clear()
    q, k, v = (torch.randn(3, 4, 12, 8) for _ in range(3))
    out = torch.compile(_broadcast_mask_attention, backend=backend, fullgraph=True, dynamic=True)(q, k, v)
    assert seen[0] == 1 and ("contiguous", ()) in seen[2]
    torch.testing.assert_close(out, _broadcast_mask_attention(q, k, v))
    # Left alone: CPU masks by default (the CPU kernels take any strides), and dense masks.
    torch._dynamo.reset()
    counts = []
    torch.compile(_broadcast_mask_attention, fullgraph=True,
                  backend=lambda gm, ex: (counts.append(dense_attention_masks(gm)), gm.forward)[1])(q, k, v)
    assert counts == [0]


@requires_cuda
def test_a_broadcast_cuda_attention_mask_runs_a_fused_kernel():
    """On CUDA the rewritten mask lets a fused attention kernel run: no
    float32 math decomposition (_safe_softmax) reaches our graph."""
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    f = torch.compile(_broadcast_mask_attention, backend="cppinductor", options={"fallback": "error"})
    out = f(q, k, v)
    torch.testing.assert_close(out, _broadcast_mask_attention(q, k, v), atol=2e-2, rtol=2e-2)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        f(q, k, v)
    names = {e.key for e in prof.key_averages()}
    assert not any("safe_softmax" in n or n == "aten::bmm" for n in names), sorted(names)


def _host_constants_to_cuda(x):
    """Values made on the host and copied to the GPU, as SDPA's boolean-mask
    conversion for cuDNN does (-inf in a host scalar tensor)."""
    aten = torch.ops.aten
    ninf = aten._to_copy.default(aten.scalar_tensor.default(float("-inf"), dtype=torch.float32),
                                 dtype=x.dtype, device=x.device)
    uniform = torch.tensor([3.0, 3.0]).to(x.device)
    varying = torch.tensor([1.0, 2.0]).to(x.device)
    from_input = x.sum().cpu().to(x.device)
    too_large = torch.ones(1 << 17).to(x.device).sum()  # not computed at compile time
    return torch.where(x > 0, x, ninf) + uniform + varying + from_input + too_large


def test_a_uniform_host_constant_copied_to_the_gpu_is_made_there():
    """fold_constant_device_copies (no GPU needed: traced with fake CUDA
    tensors): -inf and [3, 3] become `full` on the GPU; a constant of several
    values, one too large to compute now and a value computed from an input
    are still copied."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from cppinductor.graph_passes import fold_constant_device_copies

    with FakeTensorMode():
        gm = make_fx(_host_constants_to_cuda)(torch.empty(2, device="cuda", dtype=torch.bfloat16))
    copies = lambda: gm.graph.find_nodes(op="call_function", target=torch.ops.aten._to_copy.default)  # noqa: E731
    assert len(copies()) == 6  # from_input is copied there and back
    assert fold_constant_device_copies(gm) == 2
    fulls = gm.graph.find_nodes(op="call_function", target=torch.ops.aten.full.default)
    assert [(f.args, str(f.kwargs["device"]), f.kwargs["dtype"]) for f in fulls] == [
        (([], float("-inf")), "cuda:0", torch.bfloat16), (([2], 3.0), "cuda:0", torch.float32)]
    assert len(copies()) == 4
    assert not gm.graph.find_nodes(op="call_function", target=torch.ops.aten.scalar_tensor.default)
    assert fold_constant_device_copies(gm) == 0


@requires_cuda
def test_a_boolean_attention_mask_runs_without_waiting_for_the_gpu():
    """SDPA's cuDNN path turns a boolean mask into -inf/0 with a host scalar
    copied to the GPU: folded, nothing of the graph is left to eager."""
    def attend(q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    keep = torch.rand(2, 1, 128, 128, device="cuda") > 0.2
    f = torch.compile(attend, backend="cppinductor", options={"fallback": "error"})
    torch.testing.assert_close(f(q, k, v, keep), attend(q, k, v, keep), atol=2e-2, rtol=2e-2)
