"""The benchmark's workloads: what each computes, at which sizes, how many bytes it must move.

A workload builds a :class:`Case` from a :class:`Sizes` and a device. The case
knows how to run one iteration given a ``compile`` function (identity for
eager, ``torch.compile(..., backend=...)`` otherwise), so the same code runs
every backend and the training step can compile its forward+loss while the
optimizer stays outside.

Memory-bound workloads declare the minimal bytes they must move (every input
read once, every output written once); GB/s and "% of copy" come from that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0

Compile = Callable[[Callable], Callable]


@dataclass(frozen=True)
class Sizes:
    """Problem sizes for one device and one size class (full, quick, tiny)."""

    rows: int  # 2-D memory-bound inputs are rows x cols
    cols: int
    softmax: Tuple[int, int]
    matmul: int  # n for an n x n @ n x n matmul
    mlp: Tuple[int, int, int]  # batch, d_model, d_hidden
    transformer: Tuple[int, int, int, int]  # batch, seq, d_model, heads
    alternating: Tuple[int, int, int]  # rows, inner, cols of the eager matmul feeding the compiled step
    model_batch: str = "large"  # the model suite's inputs: small (latency) or large (throughput)
    # The GEMM suite: the large M, a model's hidden width and its MLP's width;
    # attention scores' batch, heads, head dim and sequence.
    gemm: Tuple[int, int, int] = (512, 1024, 2816)
    attention: Tuple[int, int, int, int] = (4, 8, 64, 256)


# CPU: tens of MB per input (4096 x 4096 float32 = 64 MiB), the size the CPU
# bandwidth target names. CUDA: >= 1 GiB per memory-bound input (16384^2 float32),
# softmax at the 16384 x 4096 the CUDA target names. --quick keeps the
# memory-bound sizes (the targets are stated at them; on CUDA they run in
# milliseconds) and shrinks the compute-bound models.
_SIZES: Dict[Tuple[str, str], Sizes] = {
    ("cpu", "full"): Sizes(4096, 4096, (4096, 4096), 1024, (256, 1024, 2048), (4, 256, 512, 8), (256, 128, 1024)),
    ("cpu", "quick"): Sizes(4096, 4096, (4096, 4096), 512, (128, 512, 1024), (2, 128, 256, 4), (256, 128, 1024)),
    ("cuda", "full"): Sizes(16384, 16384, (16384, 4096), 8192, (8192, 2048, 8192), (16, 1024, 1024, 16),
                            (4096, 1024, 4096), gemm=(8192, 4096, 11008), attention=(32, 32, 128, 1024)),
    ("cuda", "quick"): Sizes(16384, 16384, (16384, 4096), 4096, (4096, 1024, 4096), (8, 512, 1024, 16),
                             (4096, 1024, 4096), gemm=(8192, 4096, 11008), attention=(32, 32, 128, 1024)),
}
_TINY = Sizes(64, 48, (32, 40), 32, (16, 32, 64), (2, 8, 16, 2), (16, 8, 24), gemm=(128, 64, 96),
              attention=(2, 2, 16, 32))


def sizes_for(device: str, size: str) -> Sizes:
    if size == "tiny":
        return _TINY
    return _SIZES[(torch.device(device).type, size)]


Step = Callable[[], Any]


@dataclass
class Case:
    """One built instance of a workload: inputs allocated, parameters seeded.

    An alternating case (``parts``) has a step made of two halves, an eager
    part and a compiled part, which the runner also times each in a loop of
    its own: the row then says how much slower alternating them is than
    running them separately (two OpenMP pools fighting show up here).
    """

    shape: str
    make_step: Callable[[Compile], Step]
    bytes_moved: Optional[int] = None  # None: not memory-bound, no GB/s
    largest_input: Optional[torch.Tensor] = None  # the copy reference copies this
    parts: Optional[Callable[[Compile], Tuple[Step, Step]]] = None  # (eager part, compiled part)
    # The step's result in float64 (the models): backends are judged by their
    # error from it against eager's, not against eager's result.
    reference: Optional[Callable[[], Any]] = None
    flops: Optional[int] = None  # floating-point operations per step (the GEMM suite: TFLOP/s)


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "memory" (GB/s reported), "compute", "train", "launch", "model", "gemm" (TFLOP/s)
    description: str
    build: Callable[[Sizes, str, torch.dtype], Case]
    quick: bool  # part of --quick
    tol: Tuple[float, float] = (1.3e-5, 1.5e-5)  # float32 (rtol, atol) vs eager
    suite: str = "kernels"  # SUITES
    # The devices it runs on (None: every device); --suite leaves the others out.
    devices: Optional[Tuple[str, ...]] = None

    def runs_on(self, device: str) -> bool:
        return self.devices is None or torch.device(device).type in self.devices


def tolerance(workload: Workload, dtype: torch.dtype) -> Tuple[float, float]:
    """float32 tolerances are the workload's own; half types get torch.testing's at least."""
    rtol, atol = workload.tol
    if dtype == torch.bfloat16:
        return max(rtol, 1.6e-2), max(atol, 1e-2)
    if dtype == torch.float16:
        return max(rtol, 1e-3), max(atol, 1e-3)
    return rtol, atol


def _generator(device: str) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(SEED)


def _randn(gen: torch.Generator, shape: Sequence[int], device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, device=device, dtype=dtype)


def _shape(*dims: int) -> str:
    return "x".join(str(d) for d in dims)


def _inference(fn: Callable, args: Tuple) -> Callable[[Compile], Callable[[], Any]]:
    """An inference step: compile fn once, call it on args without autograd."""

    def make_step(compile: Compile) -> Callable[[], Any]:
        compiled = compile(fn)

        def step() -> Any:
            with torch.no_grad():
                return compiled(*args)

        return step

    return make_step


def _nbytes(*tensors_or_counts: Any, dtype: torch.dtype) -> int:
    total = 0
    for t in tensors_or_counts:
        total += t.numel() * t.element_size() if isinstance(t, torch.Tensor) else t * dtype.itemsize
    return total


# --- memory-bound ------------------------------------------------------------


def _pointwise_unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Sizes, str, torch.dtype], Case]:
    def build(s: Sizes, device: str, dtype: torch.dtype) -> Case:
        x = _randn(_generator(device), (s.rows, s.cols), device, dtype)
        return Case(_shape(s.rows, s.cols), _inference(fn, (x,)), _nbytes(x, x.numel(), dtype=dtype), x)

    return build


def _pointwise_bias(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[[Sizes, str, torch.dtype], Case]:
    def build(s: Sizes, device: str, dtype: torch.dtype) -> Case:
        gen = _generator(device)
        x = _randn(gen, (s.rows, s.cols), device, dtype)
        b = _randn(gen, (s.cols,), device, dtype)
        moved = _nbytes(x, b, x.numel(), dtype=dtype)
        return Case(_shape(s.rows, s.cols), _inference(fn, (x, b)), moved, x)

    return build


def copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def relu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x + b) * 2


def sin_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) + torch.cos(x)


def gelu_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + b)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _build_softmax(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    r, c = s.softmax
    x = _randn(_generator(device), (r, c), device, dtype)
    return Case(_shape(r, c), _inference(softmax, (x,)), _nbytes(x, x.numel(), dtype=dtype), x)


def _build_layer_norm(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    gen = _generator(device)
    x = _randn(gen, (s.rows, s.cols), device, dtype)
    w = _randn(gen, (s.cols,), device, dtype)
    b = _randn(gen, (s.cols,), device, dtype)

    def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), w, b)

    moved = _nbytes(x, w, b, x.numel(), dtype=dtype)
    return Case(_shape(s.rows, s.cols), _inference(layer_norm, (x, w, b)), moved, x)


def var_mean(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.var_mean(x, dim=-1)


def row_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=-1)


def col_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=0)


def _reduction(fn: Callable, outputs_per_row: int, axis: int) -> Callable[[Sizes, str, torch.dtype], Case]:
    def build(s: Sizes, device: str, dtype: torch.dtype) -> Case:
        x = _randn(_generator(device), (s.rows, s.cols), device, dtype)
        out_elems = outputs_per_row * (s.rows if axis == -1 else s.cols)
        return Case(_shape(s.rows, s.cols), _inference(fn, (x,)), _nbytes(x, out_elems, dtype=dtype), x)

    return build


# --- eager and compiled code alternating ---------------------------------------


def _build_alternating(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    """Eager tanh(x @ w) (ATen's and BLAS's parallel regions), then the compiled
    relu(y + b) * 2 on its result, over and over: each half is short (~0.1-1 ms
    on CPU), so a thread pool that is slow to hand over shows in every step."""
    rows, inner, cols = s.alternating
    gen = _generator(device)
    x = _randn(gen, (rows, inner), device, dtype)
    w = _randn(gen, (inner, cols), device, dtype) / inner**0.5
    b = _randn(gen, (cols,), device, dtype)

    def parts(compile: Compile) -> Tuple[Step, Step]:
        compiled = compile(relu_bias)
        held = [torch.tanh(x @ w)]

        def eager_part() -> torch.Tensor:
            with torch.no_grad():
                held[0] = torch.tanh(x @ w)
            return held[0]

        def compiled_part() -> torch.Tensor:
            with torch.no_grad():
                return compiled(held[0], b)

        return eager_part, compiled_part

    def make_step(compile: Compile) -> Step:
        eager_part, compiled_part = parts(compile)

        def step() -> torch.Tensor:
            eager_part()
            return compiled_part()

        return step

    return Case(_shape(rows, inner, cols), make_step, parts=parts)


# --- compute-bound -----------------------------------------------------------


def matmul_relu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ b)


def _build_matmul(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    gen = _generator(device)
    n = s.matmul
    a = _randn(gen, (n, n), device, dtype)
    b = _randn(gen, (n, n), device, dtype)
    return Case(_shape(n, n, n), _inference(matmul_relu, (a, b)))


class MLP(nn.Module):
    def __init__(self, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x)))))


class TransformerBlock(nn.Module):
    """Pre-norm block: causal self-attention then a GELU MLP, both residual."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _seeded(module_factory: Callable[[], nn.Module], device: str, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(SEED)
    return module_factory().to(device=device, dtype=dtype)


def _build_mlp(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    batch, d, h = s.mlp
    model = _seeded(lambda: MLP(d, h), device, dtype)
    x = _randn(_generator(device), (batch, d), device, dtype)
    return Case(f"{batch}x{d} h{h}", _inference(model, (x,)))


def _build_transformer(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    batch, seq, d, heads = s.transformer
    model = _seeded(lambda: TransformerBlock(d, heads), device, dtype)
    x = _randn(_generator(device), (batch, seq, d), device, dtype)
    return Case(f"{batch}x{seq}x{d} h{heads}", _inference(model, (x,)))


def _training(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> Callable[[Compile], Callable[[], Any]]:
    """Forward + loss compiled (AOTAutograd compiles the backward); SGD steps eagerly.

    One step returns the parameters, so comparing a step's result against eager
    compares the parameters after one optimizer step.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def loss_fn(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(model(x), target)

    def make_step(compile: Compile) -> Callable[[], Any]:
        compiled = compile(loss_fn)

        def step() -> List[torch.Tensor]:
            optimizer.zero_grad(set_to_none=True)
            compiled(x, target).backward()
            optimizer.step()
            return [p.detach() for p in model.parameters()]

        return step

    return make_step


def _build_mlp_train(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    batch, d, h = s.mlp
    model = _seeded(lambda: MLP(d, h), device, dtype)
    gen = _generator(device)
    x = _randn(gen, (batch, d), device, dtype)
    target = _randn(gen, (batch, d), device, dtype)
    return Case(f"{batch}x{d} h{h}", _training(model, x, target))


def _build_transformer_train(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    batch, seq, d, heads = s.transformer
    model = _seeded(lambda: TransformerBlock(d, heads), device, dtype)
    gen = _generator(device)
    x = _randn(gen, (batch, seq, d), device, dtype)
    target = _randn(gen, (batch, seq, d), device, dtype)
    return Case(f"{batch}x{seq}x{d} h{heads}", _training(model, x, target))


def _build_adamw_step(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    """torch.compile(optimizer.step) of AdamW (foreach, the default on CUDA) over the MLP's parameters.

    Each backend starts from the same seeded parameters and gradients; one
    step returns the parameters, so the check compares them after a step.
    """
    batch, d, h = s.mlp
    model = _seeded(lambda: MLP(d, h), device, dtype)
    gen = _generator(device)
    for p in model.parameters():
        p.grad = _randn(gen, p.shape, device, dtype)
    params = list(model.parameters())
    moved = sum(p.numel() for p in params) * 7  # reads param, grad and both moments; writes param and moments
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, foreach=True)

    def make_step(compile: Compile) -> Callable[[], Any]:
        compiled = compile(optimizer.step)

        def step() -> List[torch.Tensor]:
            compiled()
            return [p.detach() for p in params]

        return step

    return Case(f"{len(params)} tensors {sum(p.numel() for p in params) / 1e6:.1f}M", make_step,
                bytes_moved=moved * params[0].element_size(), largest_input=max(params, key=lambda p: p.numel()))


# --- the launch-bound suite: tiny tensors, many small kernels per call ------------------------


class LayerStack(nn.Module):
    """`depth` x (Linear -> LayerNorm -> GELU): a few tiny kernels and an extern per layer."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU())
                                    for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class DecoderStep(nn.Module):
    """One token through `depth` pre-norm decoder layers with a key/value cache
    of fixed size (buffers, updated in place at `pos`), attending to the
    positions up to `pos`: a generation loop's step, shapes fixed."""

    def __init__(self, d: int, heads: int, depth: int, cache: int) -> None:
        super().__init__()
        self.heads, self.depth = heads, depth
        self.norms1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(depth))
        self.proj = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))
        self.norms2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(depth))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(depth))
        for i in range(depth):
            self.register_buffer(f"k{i}", torch.zeros(1, heads, cache, d // heads))
            self.register_buffer(f"v{i}", torch.zeros(1, heads, cache, d // heads))
        self.register_buffer("positions", torch.arange(cache))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        mask = (self.positions <= pos).view(1, 1, 1, -1)
        for i in range(self.depth):
            q, k, v = self.qkv[i](self.norms1[i](x)).split(d, dim=-1)
            q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
            keys, values = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            keys.index_copy_(2, pos.view(1), k)
            values.index_copy_(2, pos.view(1), v)
            attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            x = x + self.proj[i](attn.transpose(1, 2).reshape(b, t, d))
            x = x + self.fc2[i](F.gelu(self.fc1[i](self.norms2[i](x))))
        return x


def _build_layer_stack(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    model = _seeded(lambda: LayerStack(64, 8), device, dtype)
    x = _randn(_generator(device), (8, 64), device, dtype)
    return Case("8x64, 8 layers", _inference(model, (x,)))


def _build_small_mlp(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    model = _seeded(lambda: MLP(256, 1024), device, dtype)
    x = _randn(_generator(device), (4, 256), device, dtype)
    return Case("4x256 h1024", _inference(model, (x,)))


def _build_decoder_step(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    model = _seeded(lambda: DecoderStep(256, 4, 2, 128), device, dtype)
    x = _randn(_generator(device), (1, 1, 256), device, dtype)
    pos = torch.tensor(17, device=device)
    return Case("1 token, d256, 2 layers, cache 128", _inference(model, (x, pos)))


def _build_layer_stack_train(s: Sizes, device: str, dtype: torch.dtype) -> Case:
    model = _seeded(lambda: LayerStack(64, 8), device, dtype)
    gen = _generator(device)
    x = _randn(gen, (8, 64), device, dtype)
    target = _randn(gen, (8, 64), device, dtype)
    return Case("8x64, 8 layers", _training(model, x, target))


_REDUCTION_TOL = (1e-4, 1e-4)  # reductions may reorder (docs/design.md: Rules)
# A float32 sum of 16384 randn values moves by ~7e-5 between summation orders
# (measured against float64), and sums near zero get no help from rtol.
_SUM_TOL = (1e-4, 1e-3)

WORKLOADS: List[Workload] = [
    Workload("copy", "memory", "x.clone() (the bandwidth reference)", _pointwise_unary(copy), True),
    Workload("relu_bias", "memory", "relu(x + b) * 2", _pointwise_bias(relu_bias), True),
    Workload("sin_cos", "memory", "sin(x) + cos(x)", _pointwise_unary(sin_cos), True),
    Workload("gelu_bias", "memory", "gelu(x + b)", _pointwise_bias(gelu_bias), True),
    Workload("softmax", "memory", "softmax over rows", _build_softmax, True, _REDUCTION_TOL),
    Workload("layer_norm", "memory", "layer_norm over rows, affine", _build_layer_norm, False, _REDUCTION_TOL),
    Workload("var_mean", "memory", "var_mean over rows", _reduction(var_mean, 2, -1), False, _REDUCTION_TOL),
    Workload("row_sum", "memory", "x.sum(dim=-1)", _reduction(row_sum, 1, -1), False, _SUM_TOL),
    Workload("col_sum", "memory", "x.sum(dim=0)", _reduction(col_sum, 1, 0), False, _SUM_TOL),
    Workload("alternating", "interop", "eager tanh(x @ w), compiled relu(y + b) * 2, alternating",
             _build_alternating, True),
    Workload("matmul_relu", "compute", "relu(a @ b)", _build_matmul, False, _REDUCTION_TOL),
    Workload("mlp", "compute", "3-layer MLP forward", _build_mlp, True, _REDUCTION_TOL),
    Workload("transformer", "compute", "pre-norm transformer block forward", _build_transformer, False, (1e-4, 2e-4)),
    Workload("mlp_train", "train", "MLP forward + backward + SGD step", _build_mlp_train, False, _REDUCTION_TOL),
    Workload("transformer_train", "train", "transformer block forward + backward + SGD step",
             _build_transformer_train, False, (1e-4, 2e-4)),
    Workload("adamw_step", "memory", "compiled AdamW step (foreach) over the MLP's parameters", _build_adamw_step,
             False, _REDUCTION_TOL),
    Workload("layer_stack", "launch", "8 x (Linear(64, 64) -> LayerNorm -> GELU) on 8 x 64", _build_layer_stack,
             True, _REDUCTION_TOL, suite="launch"),
    Workload("small_mlp", "launch", "3-layer MLP at batch 4", _build_small_mlp, True, _REDUCTION_TOL,
             suite="launch"),
    Workload("decoder_step", "launch", "one token through 2 decoder layers with a fixed-size KV cache",
             _build_decoder_step, True, (1e-4, 2e-4), suite="launch"),
    Workload("layer_stack_train", "launch", "the layer stack's forward + backward + SGD step",
             _build_layer_stack_train, True, _REDUCTION_TOL, suite="launch"),
]

SUITES = ("kernels", "launch", "models", "gemm")

from .gemm import workloads as _gemm_workloads  # noqa: E402 (gemm and models build on Case and Workload above)
from .models import workloads as _model_workloads  # noqa: E402

WORKLOADS += _model_workloads() + _gemm_workloads()
BY_NAME: Dict[str, Workload] = {w.name: w for w in WORKLOADS}


def select(only: Optional[Sequence[str]], quick: bool, suite: str = "kernels", train: bool = False,
           device: str = "cpu") -> List[Workload]:
    """Workloads in table order: the named ones (--only, any suite), else the
    suite's that run on `device`, all of them or its quick subset; for the
    models, their training steps (--train) or their forwards."""
    if only:
        unknown = [n for n in only if n not in BY_NAME]
        if unknown:
            raise ValueError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        return [w for w in WORKLOADS if w.name in set(only)]
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    chosen = [w for w in WORKLOADS if w.suite == suite and w.runs_on(device)]
    if suite == "models":
        return [w for w in chosen if (w.kind == "train") == train]
    return [w for w in chosen if w.quick or not quick]
