"""Random-program fuzzer: small random torch programs, eager vs cppinductor.

    python -m cppinductor.tools.fuzz_programs --seed N --count K [--json FILE] [--cuda-dry-run]
        [--show] [--timeout S] [--verbose]

Single ops are covered by the OpInfo sweep; the bugs that hide in fusion,
scheduling and indexing need *combinations*: several ops with mixed layouts,
broadcasting, dtypes and reductions in one graph. Program `seed` (one seed,
one program, reproducible) is 3-12 ATen-level ops over 1-3 inputs of random
shapes (size-1 and odd sizes), dtypes and layouts (contiguous, transposed,
sliced with a step, expanded). It is generated as Python source while it
runs eagerly on its example inputs, so every op it keeps is one eager accepts,
and `--show` prints a repro that runs as it stands.

Each program runs eagerly and through torch.compile(backend="cppinductor")
(static or dynamic shapes, by the seed), forward and, when a float input
needs a gradient, backward (random cotangents, so softmax-like gradients are
not trivially zero). It is reported as

- correct: outputs and gradients match (float within the dtype's tolerance,
  or no further from a float64 reference than eager; integers and bools
  exactly). `fallbacks` lists the ops that ran through ATen, with reasons;
- wrong: a mismatch (the first one, with its max error);
- crash: the compiled call raised (eager did not) or timed out;
- eager_error: eager refused the backward (the program is skipped).

With --cuda-dry-run each compiled graph is also moved to cuda:0, printed as
CUDA and compiled with NVRTC (no GPU needed; CPPINDUCTOR_NVRTC_LIBRARY names
the library): `cuda_crash` when that raises. The exit code is 0 whatever the
results: the numbers are the output.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import re
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

from .opinfo_sweep import _fallbacks_of, _first_line, forgiven_by_float64, mismatch, quiet

FLOATS = (torch.float32, torch.float64, torch.bfloat16)
INTS = (torch.int32, torch.int64)
SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 129)
MAX_NUMEL = 40_000

# (rtol, atol) per output dtype; a float mismatch beyond them may still be
# forgiven by the float64 reference (reordered reductions).
TOLERANCE = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 1.5e-5),
    torch.bfloat16: (1.6e-2, 1e-2),
}


# --------------------------------------------------------------------------- inputs


def make_input(shape: tuple, dtype: torch.dtype, layout: str, seed: int) -> torch.Tensor:
    """A tensor of `shape` whose strides come from `layout`: contiguous,
    transposed (last two dims swapped in memory), sliced (every other element
    of a wider tensor, from offset 1) or expanded (size-1 dims broadcast)."""
    gen = torch.Generator().manual_seed(seed)

    def fill(size: tuple) -> torch.Tensor:
        if dtype.is_floating_point:
            return torch.randn(size, generator=gen).to(dtype)
        if dtype == torch.bool:
            return torch.randint(0, 2, size, generator=gen).bool()
        return torch.randint(-8, 9, size, generator=gen).to(dtype)

    if layout == "transposed" and len(shape) >= 2:
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return fill(swapped).transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        wider = (*shape[:-1], 2 * shape[-1] + 1)
        return fill(wider)[..., 1::2]
    if layout == "expanded" and len(shape) >= 1:
        small = tuple(1 if i % 2 == 0 else s for i, s in enumerate(shape))
        return fill(small).expand(shape)
    return fill(shape)


@dataclass
class InputSpec:
    shape: tuple
    dtype: torch.dtype
    layout: str
    seed: int

    def make(self) -> torch.Tensor:
        return make_input(self.shape, self.dtype, self.layout, self.seed)

    def source(self) -> str:
        return f"make_input({self.shape!r}, {self.dtype}, {self.layout!r}, {self.seed})"


# --------------------------------------------------------------------------- program generation


@dataclass
class Program:
    seed: int
    inputs: list[InputSpec]
    lines: list[str]  # body statements, `vN = ...`
    outputs: list[str]
    dynamic: bool
    grad: bool  # float inputs require grad and the backward is compared
    # the least precise float dtype of any value: every float result is
    # compared with its tolerance (rounding on the way carries downstream)
    lowest_float: torch.dtype = torch.float64

    def source(self) -> str:
        args = ", ".join(f"a{i}" for i in range(len(self.inputs)))
        body = "".join(f"    {line}\n" for line in self.lines)
        return f"def program({args}):\n{body}    return ({', '.join(self.outputs)},)\n"

    def repro(self) -> str:
        inputs = ", ".join(spec.source() for spec in self.inputs)
        return (
            "import torch\nfrom cppinductor.tools.fuzz_programs import make_input\n\n"
            f"{self.source()}\n"
            f"args = [{inputs}]\n"
            f"compiled = torch.compile(program, backend='cppinductor', dynamic={self.dynamic})\n"
            "expected, actual = program(*args), compiled(*args)\n"
            "torch.testing.assert_close(actual, expected, equal_nan=True)\n"
        )

    def function(self) -> Callable[..., Any]:
        namespace: dict[str, Any] = {"torch": torch}
        exec(compile(self.source(), f"<fuzz program {self.seed}>", "exec"), namespace)
        return namespace["program"]


def _dims(rng: random.Random, rank: int) -> list[int]:
    """One to all of a tensor's dims, possibly negative."""
    count = rng.randint(1, rank)
    dims = rng.sample(range(rank), count)
    return [d - rank if rng.random() < 0.3 else d for d in dims]


class _Generator:
    """Builds one program op by op, running each candidate eagerly on the
    example inputs so only ops eager accepts are kept."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.values: dict[str, torch.Tensor] = {}
        self.lines: list[str] = []
        self.read: set[str] = set()  # values some kept op reads
        self.count = 0

    # ---- inputs

    def _shape(self, base: tuple | None) -> tuple:
        rng = self.rng
        if base is not None and rng.random() < 0.7:  # broadcast-compatible with the first input
            shape = [1 if rng.random() < 0.25 else s for s in base]
            drop = rng.randint(0, len(shape)) if rng.random() < 0.3 else 0
            return tuple(shape[drop:])
        rank = rng.choice([0, 1, 2, 2, 3, 3, 3, 4])
        shape = [rng.choice(SIZES) for _ in range(rank)]
        while math.prod(shape) > MAX_NUMEL:
            shape[shape.index(max(shape))] = rng.choice(SIZES[:8])
        return tuple(shape)

    def _dtype(self) -> torch.dtype:
        return self.rng.choices(
            [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.bool],
            weights=[10, 2, 2, 2, 3, 1],
        )[0]

    def inputs(self) -> list[InputSpec]:
        rng = self.rng
        specs: list[InputSpec] = []
        first = self._dtype()
        for i in range(rng.choice([1, 2, 2, 3])):
            shape = self._shape(specs[0].shape if specs else None)
            dtype = first if (i > 0 and rng.random() < 0.6) else (self._dtype() if i else first)
            layout = rng.choices(["contiguous", "transposed", "sliced", "expanded"], weights=[5, 2, 2, 1])[0]
            spec = InputSpec(shape, dtype, layout, rng.randrange(1 << 16))
            specs.append(spec)
            self.values[f"a{i}"] = spec.make()
        return specs

    # ---- ops

    def pick(self, pred: Callable[[torch.Tensor], bool] = lambda t: True) -> str | None:
        names = [n for n, t in self.values.items() if pred(t)]
        if not names:
            return None
        # values nothing reads yet, and recent ones, more often: every op
        # should reach an output, or dead-code elimination makes it untested
        weights = [(1 + i) * (1 if n in self.read else 8) for i, n in enumerate(names)]
        return self.rng.choices(names, weights=weights)[0]

    def candidate(self) -> str | None:
        rng = self.rng
        kind = rng.choices(
            ["unary", "binary", "compare_where", "cast", "clamp", "reduce", "norm", "view", "cat",
             "index", "masked_fill", "int_math", "matmul", "linear", "spatial"],
            weights=[12, 14, 5, 4, 3, 10, 5, 10, 4, 5, 3, 4, 2, 2, 3],
        )[0]
        return getattr(self, "op_" + kind)()

    def op_unary(self) -> str | None:
        x = self.pick()
        t = self.values[x]
        if t.dtype.is_floating_point:
            fn = self.rng.choice([
                "torch.exp({})", "torch.log({}.abs() + 1)", "torch.sqrt({}.abs())", "torch.tanh({})",
                "torch.sigmoid({})", "torch.sin({})", "torch.cos({})", "torch.relu({})", "torch.neg({})",
                "torch.abs({})", "torch.floor({})", "torch.rsqrt({}.abs() + 0.5)", "torch.erf({})",
                "torch.nn.functional.gelu({})", "torch.nn.functional.silu({})", "torch.square({})",
                "torch.reciprocal({} + 3)", "torch.sign({})", "torch.round({})", "torch.expm1({})",
                "torch.angle({})",
            ])
        elif t.dtype == torch.bool:
            fn = self.rng.choice(["torch.logical_not({})", "torch.bitwise_not({})"])
        else:
            fn = self.rng.choice(["torch.neg({})", "torch.abs({})", "torch.bitwise_not({})", "torch.sign({})"])
        return fn.format(x)

    def op_binary(self) -> str | None:
        x, y = self.pick(), self.pick()
        fn = self.rng.choice([
            "torch.add({}, {})", "torch.sub({}, {})", "torch.mul({}, {})", "torch.div({}, {})",
            "torch.maximum({}, {})", "torch.minimum({}, {})", "torch.add({}, {}, alpha=2)",
            "torch.pow({}.abs() + 0.5, {})", "torch.atan2({}, {})", "torch.hypot({}, {})",
            "torch.fmax({}, {})", "torch.fmin({}, {})",
        ])
        if fn.startswith(("torch.sub", "torch.fmax", "torch.fmin")) and (
                self.values[x].dtype == torch.bool or self.values[y].dtype == torch.bool):
            return None
        if fn.startswith(("torch.fmax", "torch.fmin")):  # tensors only
            return fn.format(x, y)
        if fn.startswith(("torch.atan2", "torch.hypot", "torch.pow")):
            return fn.format(x, y) if self.values[x].dtype.is_floating_point else None
        if self.rng.random() < 0.2:  # a python scalar operand
            return fn.format(x, self.rng.choice(["2", "0.5", "-3", "1.5"]))
        return fn.format(x, y)

    def op_compare_where(self) -> str | None:
        x, y = self.pick(), self.pick()
        cmp = self.rng.choice(["lt", "gt", "le", "ge", "eq", "ne"])
        cond = f"torch.{cmp}({x}, {y})" if self.rng.random() < 0.6 else f"({x} > 0)"
        if self.rng.random() < 0.4:
            return cond
        a, b = self.pick(), self.pick()
        other = b if self.rng.random() < 0.7 else self.rng.choice(["0.0", "1", "-2.5"])
        return f"torch.where({cond}, {a}, {other})"

    def op_cast(self) -> str | None:
        x = self.pick()
        dtype = self.rng.choice([torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.bool])
        return f"{x}.to({dtype})"

    def op_clamp(self) -> str | None:
        x = self.pick(lambda t: t.dtype != torch.bool)
        if x is None:
            return None
        lo, hi = self.rng.choice([("-1", "1"), ("0", "None"), ("None", "2"), ("-0.5", "0.5")])
        return f"torch.clamp({x}, {lo}, {hi})"

    def op_reduce(self) -> str | None:
        x = self.pick(lambda t: t.dim() >= 1)
        if x is None:
            return None
        t = self.values[x]
        dims = _dims(self.rng, t.dim())
        keep = self.rng.random() < 0.4
        fn = self.rng.choice(["sum", "mean", "amax", "amin", "argmax", "argmin", "var", "prod", "any", "all", "std"])
        if fn in ("argmax", "argmin"):
            return f"torch.{fn}({x}, dim={dims[0]}, keepdim={keep})"
        if fn in ("mean", "var", "std") and not t.dtype.is_floating_point:
            return None
        if fn in ("var", "std"):
            correction = self.rng.choice([0, 1])
            return f"torch.{fn}({x}, dim={tuple(dims)}, correction={correction}, keepdim={keep})"
        if fn == "prod":
            return f"torch.prod({x}, dim={dims[0]}, keepdim={keep})"
        if fn in ("any", "all"):
            return f"torch.{fn}({x}, dim={dims[0]}, keepdim={keep})"
        return f"torch.{fn}({x}, dim={tuple(dims)}, keepdim={keep})"

    def op_norm(self) -> str | None:
        x = self.pick(lambda t: t.dim() >= 1 and t.dtype.is_floating_point)
        if x is None:
            return None
        t = self.values[x]
        dim = self.rng.randrange(-t.dim(), t.dim())
        fn = self.rng.choice(["softmax", "log_softmax", "logsumexp", "layer_norm", "cumsum"])
        if fn == "logsumexp":
            return f"torch.logsumexp({x}, dim={tuple(_dims(self.rng, t.dim()))}, keepdim={self.rng.random() < 0.5})"
        if fn == "layer_norm":
            return f"torch.nn.functional.layer_norm({x}, {tuple(t.shape[-1:])})"
        return f"torch.{fn}({x}, dim={dim})"

    def op_view(self) -> str | None:
        x = self.pick()
        t = self.values[x]
        rank = t.dim()
        rng = self.rng
        options = ["unsqueeze", "flip"]
        if rank >= 1:
            options += ["slice", "reshape", "select", "squeeze"]
        if rank >= 2:
            options += ["transpose", "permute", "t_contiguous", "diagonal"]
        if rank >= 1 and max(t.shape) >= 2:
            options.append("unfold")
        if any(s == 1 for s in t.shape):
            options.append("expand")
        fn = rng.choice(options)
        if fn == "unsqueeze":
            return f"{x}.unsqueeze({rng.randint(-rank - 1, rank)})"
        if fn == "flip":
            return f"torch.flip({x}, {tuple(_dims(rng, rank)) if rank else ()})"
        d = rng.randrange(rank)
        if fn == "slice":
            size = t.shape[d]
            start = rng.randint(0, max(0, size - 1))
            step = rng.choice([1, 2, 3])
            return f"{x}[{':, ' * d}{start}::{step}]"
        if fn == "select":
            return f"{x}.select({d}, {rng.randrange(-t.shape[d], t.shape[d]) if t.shape[d] else 0})"
        if fn == "squeeze":
            return f"{x}.squeeze({d})"
        if fn == "reshape":
            if rank >= 2 and rng.random() < 0.5:
                return f"{x}.flatten({d}, {min(rank - 1, d + 1)})"
            return f"{x}.reshape(-1)" if rng.random() < 0.5 else f"{x}.reshape({t.numel()}, 1)"
        if fn == "transpose":
            return f"{x}.transpose({d}, {rng.randrange(rank)})"
        if fn == "permute":
            perm = list(range(rank))
            rng.shuffle(perm)
            return f"{x}.permute({tuple(perm)})"
        if fn == "unfold":
            d = max(range(rank), key=lambda i: t.shape[i])
            size, step = rng.randint(1, t.shape[d]), rng.choice([1, 2, 3])
            # Overlapping windows share memory. Returned as they are, their
            # gradient is wrong under every torch.compile backend (aot_eager
            # included): AOTAutograd copies the incoming gradient into the
            # output's self-overlapping strides, one value per address. A
            # clone keeps the case testable.
            return f"{x}.unfold({d}, {size}, {step})" + (".clone()" if step < size else "")
        if fn == "diagonal":
            d2 = rng.choice([i for i in range(rank) if i != d])
            return f"{x}.diagonal({rng.randint(-2, 2)}, {d}, {d2})"
        if fn == "t_contiguous":
            return f"{x}.transpose(-1, -2).contiguous()"
        if fn == "expand":
            shape = [rng.choice([2, 3, 7]) if s == 1 else s for s in t.shape]
            return f"{x}.expand({tuple(shape)})"
        return None

    def op_cat(self) -> str | None:
        x = self.pick(lambda t: t.dim() >= 1)
        if x is None:
            return None
        t = self.values[x]
        d = self.rng.randrange(t.dim())
        same = [n for n, u in self.values.items() if n != x and u.shape == t.shape]
        partner = self.rng.choice(same) if same and self.rng.random() < 0.6 else f"{x}[{':, ' * d}:1] * 2"
        if self.rng.random() < 0.3 and same:
            return f"torch.stack([{x}, {partner}], dim={self.rng.randint(-t.dim() - 1, t.dim())})"
        return f"torch.cat([{x}, {partner}, {x}], dim={d})"

    def op_index(self) -> str | None:
        x = self.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
        if x is None:
            return None
        t = self.values[x]
        d = self.rng.randrange(t.dim())
        size = t.shape[d]
        fn = self.rng.choice(["index_select", "gather", "gather_computed", "advanced"])
        if fn == "index_select":
            k = self.rng.choice([1, 3, 5])
            return f"torch.index_select({x}, {d}, torch.arange({k}) * 7 % {size})"
        if fn == "advanced":
            return f"{x}[{':, ' * d}torch.tensor([{size - 1}, 0, {size // 2}, -1])]"
        src = self.pick(lambda u: u.shape == t.shape and u is not t)
        if fn == "gather_computed" and src is not None:
            # data-dependent indices, computed in the graph
            index = f"({src}.to(torch.float32).abs() * 5).to(torch.int64) % {size}"
        else:
            index = f"(torch.arange({t.numel()}).reshape({tuple(t.shape)}) * 3 % {size})"
        return f"torch.gather({x}, {d}, {index})"

    def op_spatial(self) -> str | None:
        """Upsampling, pooling and padding of the last two dims of a 3-d or 4-d float value."""
        x = self.pick(lambda t: t.dim() in (3, 4) and t.dtype.is_floating_point and min(t.shape[-2:]) >= 2)
        if x is None:
            return None
        rng = self.rng
        f = "torch.nn.functional"
        fn = rng.choice(["nearest", "bilinear", "avg_pool", "max_pool", "pad"])
        if fn == "nearest":
            scale = rng.choice(["2", "3", "(2, 1)", "1.5", "0.5"])
            return f"{f}.interpolate({x}, scale_factor={scale}, mode='nearest')"
        if fn == "bilinear":
            if self.values[x].dim() != 4:
                return None
            corners = rng.random() < 0.3
            return f"{f}.interpolate({x}, scale_factor={rng.choice(['2', '1.5'])}, mode='bilinear', " \
                   f"align_corners={corners})"
        if fn == "avg_pool":
            return f"{f}.avg_pool2d({x}, 2, {rng.choice([1, 2])}, {rng.choice([0, 1])})"
        if fn == "max_pool":
            return f"{f}.max_pool2d({x}, {rng.choice([2, 3])}, 2, 1)"
        return f"{f}.pad({x}, {rng.choice(['(1, 2)', '(3, 0, 1, 1)', '(0, 5)'])}, value={rng.choice(['0.0', '-1.5'])})"

    def op_masked_fill(self) -> str | None:
        x = self.pick()
        m = self.pick()
        value = self.rng.choice(["0.0", "-1", "float('-inf')", "3"])
        if value.startswith("float") and not self.values[x].dtype.is_floating_point:
            value = "0"
        return f"{x}.masked_fill({m} > 0, {value})"

    def op_int_math(self) -> str | None:
        x = self.pick(lambda t: t.dtype in INTS)
        if x is None:
            x = self.pick(lambda t: t.dtype.is_floating_point)
            return f"({x} * 4).to(torch.int64)" if x else None
        y = self.pick(lambda t: t.dtype in INTS) or "3"
        divisor = self.rng.choice([f"({y}.abs() + 1)", "3", "-2", f"({y} * 2 + 1)"])
        fn = self.rng.choice(["torch.floor_divide", "torch.remainder", "torch.fmod", "torch.div",
                              "torch.bitwise_and", "torch.bitwise_xor"])
        if fn == "torch.div":
            return f"torch.div({x}, {divisor}, rounding_mode={self.rng.choice(['floor', 'trunc'])!r})"
        if fn.startswith("torch.bitwise"):
            return f"{fn}({x}, {y})"
        return f"{fn}({x}, {divisor})"

    def op_matmul(self) -> str | None:
        x = self.pick(lambda t: t.dim() in (2, 3) and t.dtype in (torch.float32, torch.float64))
        if x is None:
            return None
        return f"torch.matmul({x}, {x}.transpose(-1, -2))"

    def op_linear(self) -> str | None:
        # addmm with a bias (unfused into mm + add when every use is pointwise)
        x = self.pick(lambda t: t.dim() >= 2 and t.dtype in (torch.float32, torch.float64))
        if x is None:
            return None
        t = self.values[x]
        features = t.shape[-1]
        out = min(self.rng.choice([1, 3, 8]), t.numel() // max(features, 1))
        if out < 1:
            return None
        weight = f"{x}.reshape(-1, {features})[:{out}] * 0.5"
        return f"torch.nn.functional.linear({x}, {weight}, {x}.reshape(-1)[:{out}] + 1)"

    # ---- one program

    def try_add(self, expr: str) -> bool:
        name = f"v{self.count}"
        try:
            with torch.no_grad():
                value = eval(expr, {"torch": torch}, dict(self.values))
        except Exception:
            return False
        if not isinstance(value, torch.Tensor) or value.numel() > MAX_NUMEL or value.is_complex():
            return False
        if value.numel() == 0 and self.rng.random() < 0.8:
            return False
        self.read.update(n for n in self.values if re.search(rf"\b{n}\b", expr))
        self.values[name] = value
        self.lines.append(f"{name} = {expr}")
        self.count += 1
        return True

    def program(self) -> Program:
        specs = self.inputs()
        steps = self.rng.randint(3, 12)
        attempts = 0
        while self.count < steps and attempts < 200:
            attempts += 1
            expr = self.candidate()
            if expr is not None:
                self.try_add(expr)
        made = [f"v{i}" for i in range(self.count)] or ["a0"]
        # every value nothing reads is an output (the last four: the rest is dead code)
        outputs = [n for n in made if n not in self.read][-4:] or [made[-1]]
        float_inputs = any(s.dtype.is_floating_point for s in specs)
        return Program(
            self.seed, specs, self.lines, outputs,
            dynamic=self.rng.random() < 0.25, grad=float_inputs and self.rng.random() < 0.6,
            lowest_float=_lowest_float(v.dtype for v in self.values.values()),
        )


def _lowest_float(dtypes: Any) -> torch.dtype:
    present = set(dtypes)
    return next((t for t in (torch.bfloat16, torch.float32) if t in present), torch.float64)


def generate(seed: int) -> Program:
    """Program number `seed`: the same seed always gives the same program."""
    return _Generator(seed).program()


# --------------------------------------------------------------------------- running one


@dataclass
class FuzzResult:
    seed: int
    status: str  # correct | wrong | crash | eager_error | cuda_crash | timeout
    reason: str = ""
    max_error: float | None = None
    fallbacks: list[dict] = field(default_factory=list)
    graphs: int = 0
    seconds: float = 0.0
    source: str = ""


class _Timeout(Exception):
    pass


def _run(fn: Callable, program: Program, widen: bool = False) -> tuple[Any, Any, list[torch.Tensor]]:
    """(outputs, input gradients or None, inputs): a fresh set of inputs each
    call; `widen`: float inputs with the same values in float64."""
    args = [spec.make() for spec in program.inputs]
    if widen:
        args = [a.to(torch.float64) if a.dtype.is_floating_point else a for a in args]
    leaves = []
    if program.grad:  # detach() keeps the strides: a leaf with the input's layout
        args = [a.detach().requires_grad_(a.dtype.is_floating_point) for a in args]
        leaves = [a for a in args if a.requires_grad]
    out = fn(*args)
    grads = None
    if leaves:
        diff = [o for o in out if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            gen = torch.Generator().manual_seed(program.seed)
            # bfloat16 values, so a float64 reference gets the same ones
            cotangents = [torch.randn(o.shape, generator=gen).to(torch.bfloat16).to(o.dtype) for o in diff]
            grads = torch.autograd.grad(diff, leaves, cotangents, allow_unused=True)
            grads = tuple(torch.zeros_like(a) if g is None else g for g, a in zip(grads, leaves))
    out = tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in out)
    return out, grads, args


def _tolerance(program: Program) -> tuple[float, float]:
    return TOLERANCE[program.lowest_float]


def _max_error(actual: Any, expected: Any) -> float:
    worst = 0.0
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and a.shape == e.shape:
            d = (a.double() - e.double()).abs()
            d = d[~(torch.isnan(a.double()) & torch.isnan(e.double()))]
            d = d[torch.isfinite(d)] if d.numel() else d
            if d.numel():
                worst = max(worst, d.max().item())
    return worst


def _compare(program: Program, actual: Any, expected: Any, what: str) -> tuple[str, float] | None:
    """None when `actual` matches `expected`, or differs only where rounding
    decides: float values no further from a float64 run than eager's, and
    integers or bools (argmax of a tie, a comparison or a cast of a float)
    where the float64 run disagrees with eager too."""
    problem = mismatch(actual, expected, _tolerance(program), what)
    if problem is None:
        return None
    reference = _float64_reference(program)
    ref = None if reference is None else (reference[0] if what == "output" else reference[1])
    if ref is not None and _forgiven(actual, expected, ref, _tolerance(program)):
        return None
    return problem[0], _max_error(actual, expected)


def _forgiven(actual: Any, expected: Any, reference: Any, tol: tuple[float, float]) -> bool:
    leaves = torch.utils._pytree.tree_leaves
    a_leaves, e_leaves, r_leaves = leaves(actual), leaves(expected), leaves(reference)
    if len(r_leaves) != len(e_leaves):
        return False
    floats = []
    for i, (a, e, r) in enumerate(zip(a_leaves, e_leaves, r_leaves)):
        if mismatch(a, e, tol, "") is None:
            continue
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(r, torch.Tensor)):
            return False
        if a.dtype != e.dtype or a.shape != e.shape or r.shape != e.shape:
            return False
        if e.is_floating_point():
            floats.append(i)
        elif torch.equal(r.to(e.dtype), e):
            return False  # eager's integers are the float64 run's: a real difference
    return not floats or forgiven_by_float64(actual, expected, reference, floats)


def _float64_reference(program: Program) -> tuple[Any, Any] | None:
    """The program with every float input and every cast to a float in float64."""
    lines = [re.sub(r"torch\.(bfloat16|float32)\b", "torch.float64", line) for line in program.lines]
    widened = Program(program.seed, program.inputs, lines, program.outputs, program.dynamic, program.grad)
    try:
        out, grads, _ = _run(widened.function(), widened, widen=True)
    except Exception:
        return None
    return out, grads


def _cuda_dry_run(records: list) -> str | None:
    """None when every graph prints as CUDA and NVRTC compiles it; else why not."""
    from .. import _C
    from ..export import export_graph

    def on_cuda(desc: Any) -> Any:
        if isinstance(desc, dict):
            return {k: ("cuda:0" if k == "device" and v == "cpu" else on_cuda(v)) for k, v in desc.items()}
        if isinstance(desc, list):
            return [on_cuda(v) for v in desc]
        return desc

    for record in records:
        try:
            src = _C.generate_cuda_source(on_cuda(export_graph(record.gm)))
        except Exception as e:
            return f"{record.kind}: generate_cuda_source raised {type(e).__name__}: {_first_line(e, 600)}"
        if _C.nvrtc_available() and "__global__" in src:
            try:
                _C.compile_cuda_source(src)
            except Exception as e:
                return f"{record.kind}: NVRTC: {_first_line(e, 600)}"
    return None


def run_program(
    program: Program, *, timeout_s: int = 120, cuda_dry_run: bool = False, options: dict | None = None
) -> FuzzResult:
    from ..utils import compiled_records

    result = FuzzResult(program.seed, "correct", source=program.source())
    start = time.perf_counter()

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"timed out after {timeout_s} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout_s)
    torch._dynamo.reset()
    try:
        fn = program.function()
        try:
            expected, expected_grads, _ = _run(fn, program)
        except _Timeout:
            raise
        except Exception as e:
            result.status, result.reason = "eager_error", f"{type(e).__name__}: {_first_line(e)}"
            return result
        compiled = torch.compile(fn, backend="cppinductor", dynamic=program.dynamic, options=options or {})
        try:
            (actual, actual_grads, _), records = compiled_records(_run, compiled, program)
        except _Timeout:
            raise
        except Exception as e:
            result.status = "crash"
            result.reason = f"{type(e).__name__}: {_first_line(e, 600)}"
            return result
        result.graphs = len(records)
        seen = set()
        for f in _fallbacks_of(records):
            if (f["op"], f["reason"]) not in seen:
                seen.add((f["op"], f["reason"]))
                result.fallbacks.append({"op": f["op"], "reason": _first_line(f["reason"], 200)})
        problem = _compare(program, actual, expected, "output")
        if problem is None and expected_grads is not None:
            if actual_grads is None:
                problem = ("compiled gave no gradients, eager did", 0.0)
            else:
                problem = _compare(program, actual_grads, expected_grads, "gradient")
        if problem is not None:
            result.status, result.reason, result.max_error = "wrong", problem[0], problem[1]
        elif cuda_dry_run:
            failure = _cuda_dry_run(records)
            if failure:
                result.status, result.reason = "cuda_crash", failure
    except _Timeout as e:
        result.status, result.reason = "timeout", str(e)
    except Exception as e:  # the harness itself: report, don't stop the run
        result.status, result.reason = "crash", f"harness: {type(e).__name__}: {_first_line(traceback.format_exc(), 600)}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        result.seconds = round(time.perf_counter() - start, 3)
        torch._dynamo.reset()
    return result


def fuzz(seeds: list[int], *, timeout_s: int = 120, cuda_dry_run: bool = False,
         on_result: Callable[[FuzzResult], None] | None = None) -> list[FuzzResult]:
    """Runs the programs of `seeds` in this process (what tests call)."""
    quiet()
    torch._dynamo.config.automatic_dynamic_shapes = False
    results = []
    for seed in seeds:
        res = run_program(generate(seed), timeout_s=timeout_s, cuda_dry_run=cuda_dry_run)
        results.append(res)
        if on_result:
            on_result(res)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cppinductor.tools.fuzz_programs", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="first program's seed")
    parser.add_argument("--count", type=int, default=20, help="how many programs (seeds seed .. seed+count-1)")
    parser.add_argument("--json", help="write one JSON object per program (appended as they finish)")
    parser.add_argument("--cuda-dry-run", action="store_true", help="also print each graph as CUDA and NVRTC it")
    parser.add_argument("--show", action="store_true", help="print each program's repro and stop")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per program")
    parser.add_argument("--verbose", action="store_true", help="one line per program, not only per failure")
    parser.add_argument("--minimise", action="store_true", help="shrink each failing program and print its repro")
    args = parser.parse_args(argv)
    seeds = list(range(args.seed, args.seed + args.count))
    if args.show:
        for seed in seeds:
            print(f"# seed {seed}\n{generate(seed).repro()}")
        return 0
    if args.cuda_dry_run:
        import os

        from .. import _C

        path = os.environ.get("CPPINDUCTOR_NVRTC_LIBRARY")
        if path and not _C.nvrtc_available():
            _C.set_nvrtc_library(path)
        if not _C.nvrtc_available():
            print("no NVRTC: CUDA sources are generated but not compiled", file=sys.stderr)
    out = open(args.json, "a") if args.json else None
    tally: collections.Counter = collections.Counter()
    fell_back = 0

    def report(res: FuzzResult) -> None:
        nonlocal fell_back
        tally[res.status] += 1
        fell_back += bool(res.fallbacks)
        if out:
            out.write(json.dumps(asdict(res)) + "\n")
            out.flush()
        if res.status not in ("correct", "eager_error") or args.verbose:
            error = f" (max error {res.max_error:.3g})" if res.max_error is not None else ""
            print(f"seed {res.seed}: {res.status}{error} {res.seconds:.1f}s {res.reason}", flush=True)
            if res.status not in ("correct", "eager_error"):
                print("    " + res.source.replace("\n", "\n    "), flush=True)
            if args.minimise and res.status not in ("correct", "eager_error"):
                from .fuzz_minimise import minimise

                small, why = minimise(generate(res.seed), timeout_s=args.timeout, cuda_dry_run=args.cuda_dry_run)
                print(f"  minimised ({why.status}: {why.reason[:200]}):\n" + small.repro(), flush=True)

    fuzz(seeds, timeout_s=args.timeout, cuda_dry_run=args.cuda_dry_run, on_result=report)
    total = sum(tally.values())
    print(f"{total} programs: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items()))
          + f"; {fell_back} with at least one fallback")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
