"""Generates the Python function that runs one compiled graph.

The C++ core hands back a straight-line plan over value slots (see
backend/compiled_graph.h). Like Inductor's wrapper codegen, we print that plan
once, at compile time, as the source of one function, one line per operation
and a local per slot, so that a call pays for the ATen calls, allocations and
kernel launches and almost nothing else:

    def call(args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        buffer_counts[0] += 1
        permute = aten_permute_default(arg0_1, [1, 0])
        arg0_1 = None
        addmm = aten_addmm_default(arg1_1, arg2_1, permute)
        arg1_1 = permute = None
        relu = in_place(addmm, (8, 8), (8, 1), float32, 'cpu')
        kernel0_relu(addmm, relu)
        addmm = None
        return (relu,)

What a call does, in order: bind the inputs (and drop the caller's list, so
freeing a local frees the tensor), draw the random seeds, follow
torch.get_num_threads(), compute the size symbols, count the call, run the
steps. A kernel step re-lays out tensors made outside our kernels whose
strides differ from what it was compiled for (writing back the ones it
mutates), allocates its outputs (fresh, over a dead buffer's storage, or in
place over an input it reads last), and calls the kernel. Slots are set to
None after their last use (`free_after`), at the same points as the plan, so
peak memory is the plan's.

Static shapes print every layout as constants. With size symbols, layouts are
evaluated per call by the core (`CompiledGraph.allocation`). The observed
variant (memory.track_live_bytes), printed in the same pass, also hands its
locals to an observer at the start and after every step.

The source names only locals and the globals in `WrapperCode.globals`:
helpers of runtime.py (`HELPERS`), the ATen ops, constants and the compiled
graph's kernels (one launcher each, backend/python/kernel_launcher.h) and
layout functions.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from . import _C
from .export import TORCH_DTYPES

# Names the generated source calls that runtime.py supplies (runtime.HELPERS).
HELPER_NAMES = (
    "empty_strided",  # torch.empty_strided
    "empty_strided_cpu",  # the same for CPU, without the dispatcher (Inductor's)
    "empty_strided_cuda",  # the same on the current CUDA device (Inductor's)
    "reinterpret_tensor",  # a view by sizes, strides and offset increment, without the dispatcher (Inductor's)
    "in_place",  # runtime._in_place
    "reuse",  # runtime._reuse
    "draw_seed",  # runtime._draw_seed
    "get_num_threads",  # torch.get_num_threads
    "threads_in_use",  # runtime._threads_in_use
    "sync_num_threads",
    "buffer_counts",  # runtime._buffer_counts
    "cuda_raw_stream",  # torch._C._cuda_getCurrentRawStream
    "cuda_device",  # torch._C._cuda_getDevice
    "observe",  # the observed variant's: memory.track_live_bytes's observer
    "range_enter",  # the profiled variant's: opens a torch.profiler range, returns its handle
    "range_exit",  # closes it
)
# In-place ops our kernels run (into a graph input) whose value is their first argument.
_STORES_INTO_FIRST_ARG = frozenset({torch.ops.aten.copy_.default, torch.ops.aten.index_put_.default})
# ATen ops whose result is a view of their first argument with its dtype, at
# an offset relative to the argument's: the static case builds it with
# reinterpret_tensor. Not reshape (it may copy), not as_strided (its offset
# is absolute).
_aten = torch.ops.aten
_VIEW_OPS = frozenset(
    {
        _aten.view.default,
        _aten._unsafe_view.default,
        _aten.permute.default,
        _aten.t.default,
        _aten.transpose.int,
        _aten.expand.default,
        _aten.slice.Tensor,
        _aten.select.int,
        _aten.unsqueeze.default,
        _aten.squeeze.dim,
        _aten.squeeze.dims,
        _aten.squeeze.default,
        _aten.alias.default,
        _aten.diagonal.default,
    }
)
# Marks the lines only the observed variant has.
_OBSERVED = "\0observed\0"
# Marks the lines only the profiled variant has (a range around each kernel step).
_PROFILED = "\0profiled\0"
# Per-graph globals.
_GRAPH_NAMES = ("allocation", "expected_layout", "layout")
_LOCAL_NAMES = ("args", "symbols", "stream", "lay", "profiler_range")
_RESERVED = frozenset(HELPER_NAMES + _GRAPH_NAMES + _LOCAL_NAMES) | frozenset(dir(builtins)) | frozenset(keyword.kwlist)


def storage_bytes(sizes, strides, dtype: torch.dtype) -> int:
    """What torch.empty_strided allocates for this layout."""
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides))) * dtype.itemsize


@dataclass(frozen=True)
class Layout:
    """A buffer's layout as Python expressions of the generated source."""

    sizes: str
    strides: str
    dtype: str
    device: str
    nbytes: str
    on_cpu: bool
    on_cuda: bool = False


def _dynamic_layout(layout: tuple) -> tuple:
    """CompiledGraph.allocation()'s (dtype name, sizes, strides, device) as
    the tuple the dynamic source indexes: (sizes, strides, dtype, device, nbytes)."""
    dtype_name, sizes, strides, device = layout
    dtype = TORCH_DTYPES[dtype_name]
    return tuple(sizes), tuple(strides), dtype, device, storage_bytes(sizes, strides, dtype)


@dataclass
class WrapperCode:
    """A generated `call(args)` function: its source, the source of its
    observed variant, and the globals both name besides runtime.HELPERS."""

    source: str
    observed_source: str
    profiled_source: str
    globals: dict[str, Any] = field(default_factory=dict)


class _Printer:
    """Prints one graph's call function; owns its names, lines and globals."""

    def __init__(self, gm: torch.fx.GraphModule, compiled: Any) -> None:
        self.gm = gm
        self.compiled = compiled
        self.nodes = list(gm.graph.nodes)
        self.dynamic = bool(compiled.symbol_bindings)
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self._global_ids: dict[int, str] = {}
        self._taken = set(_RESERVED)
        self.slot_names = [self._fresh(self._slot_base(s)) for s in range(compiled.num_slots)]
        self._slot_of = {n: i for i, n in enumerate(self.nodes)}

    def _slot_base(self, slot: int) -> str:
        return self.nodes[slot].name if slot < len(self.nodes) else f"buf{slot}"

    def _fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "_" + base
        name, k = base, 1
        while name in self._taken:
            name, k = f"{base}_{k}", k + 1
        self._taken.add(name)
        return name

    def _global(self, value: Any, base: str) -> str:
        """A name in the globals dict bound to `value` (one per object)."""
        key = id(value)
        if key not in self._global_ids:
            name = self._fresh(base)
            self.globals[name] = value
            self._global_ids[key] = name
        return self._global_ids[key]

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    # -- values --------------------------------------------------------------

    def literal(self, value: Any) -> str:
        """`value` (an FX argument) as an expression: nodes are their locals,
        plain constants are written out, anything else is a global."""
        if isinstance(value, torch.fx.Node):
            return self.slot_names[self._slot_of[value]]
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self._global(value, "inf" if value > 0 else "nan")
        # Containers become plain ones (FX's immutable_list, torch.Size).
        if isinstance(value, list):
            return "[" + ", ".join(self.literal(v) for v in value) + "]"
        if isinstance(value, tuple):
            items = [self.literal(v) for v in value]
            return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.literal(k)}: {self.literal(v)}" for k, v in value.items()) + "}"
        if isinstance(value, torch.dtype):
            return self._global(value, str(value).removeprefix("torch."))
        return self._global(value, type(value).__name__)

    def layout(self, kind: str, index: int, i: int) -> Layout:
        """Layout `i` of step `index` (kind: "allocation" or "expected_layout",
        the CompiledGraph method that evaluates it): constants when shapes are
        static, else the tuple a line `lay = ...` binds per call."""
        if not self.dynamic:
            dtype_name, sizes, strides, device = getattr(self.compiled, kind)(index, i, [])
            dtype = TORCH_DTYPES[dtype_name]
            return Layout(
                self.literal(tuple(sizes)),
                self.literal(tuple(strides)),
                self.literal(dtype),
                repr(device),
                repr(storage_bytes(sizes, strides, dtype)),
                device == "cpu",
                device.startswith("cuda"),
            )
        self.emit(f"lay = layout({kind}({index}, {i}, symbols))")
        return Layout("lay[0]", "lay[1]", "lay[2]", "lay[3]", "lay[4]", False)

    def empty(self, lay: Layout) -> str:
        if lay.on_cpu:
            return f"empty_strided_cpu({lay.sizes}, {lay.strides}, {lay.dtype})"
        if lay.on_cuda:  # kernels launch on the current device's stream: buffers live there too
            return f"empty_strided_cuda({lay.sizes}, {lay.strides}, {lay.dtype})"
        return f"empty_strided({lay.sizes}, {lay.strides}, dtype={lay.dtype}, device={lay.device})"

    # -- the function ----------------------------------------------------------

    def print_function(self) -> None:
        """Fills self.lines (observations marked)."""
        compiled = self.compiled
        placeholders = [i for i, n in enumerate(self.nodes) if n.op == "placeholder"]
        self.lines.append("def call(args):")
        if placeholders:
            names = ", ".join(self.slot_names[s] for s in placeholders)
            self.emit(f"{names}{',' if len(placeholders) == 1 else ''} = args")
        self.emit("args.clear()")
        for slot, device in compiled.seed_inputs:
            self.emit(f"{self.slot_names[slot]} = draw_seed({device!r})")
        devices = compiled.kernel_devices
        if "cpu" in devices:
            self.emit("if get_num_threads() != threads_in_use[0]:")
            self.emit("sync_num_threads()", 2)
        if self.dynamic:
            sources = []
            for _, p, dim in compiled.symbol_bindings:
                name = self.slot_names[placeholders[p]]
                sources.append(f"int({name})" if dim < 0 else f"{name}.size({dim})")
            self.emit(f"symbols = [{', '.join(sources)}]")
        if "cuda" in devices:
            self.emit("stream = cuda_raw_stream(cuda_device())")
        counts = compiled.allocation_counts
        self.emit("buffer_counts[0] += 1")
        for i, key in ((1, "fresh"), (2, "reused")):
            if counts[key]:
                self.emit(f"buffer_counts[{i}] += {counts[key]}")
        self.emit_observation(True)
        for index, step in enumerate(compiled.steps):
            if step.kind == _C.StepKind.Aten:
                self.aten_step(step)
            else:
                self.kernel_step(index, step)
            self.emit_observation(False)  # before the frees: the step's inputs and outputs coexist
            if step.free_after:
                self.emit(" = ".join(self.slot_names[s] for s in step.free_after) + " = None")
        self.emit(f"return {self.literal(self.nodes[-1].args[0])}")

    def emit_observation(self, call_starts: bool) -> None:
        """A line of the observed variant only (_OBSERVED marks it)."""
        self.lines.append(_OBSERVED + f"    observe(locals(), {call_starts})")

    def aten_step(self, step: Any) -> None:
        """One ATen call: an extern kernel or a fallback."""
        node = self.nodes[step.node]
        out = self.slot_names[step.node]
        if node.op == "get_attr":
            self.emit(f"{out} = {self._global(getattr(self.gm, node.target), node.target)}")
            return
        target = node.target
        if target is operator.getitem and not node.kwargs:  # a multi-output op's result
            self.emit(f"{out} = {self.literal(node.args[0])}[{self.literal(node.args[1])}]")
            return
        if target in _STORES_INTO_FIRST_ARG and step.recomputes:
            # A kernel already stored it (copy_ or index_put_ into a graph
            # input): the value is the input itself.
            self.emit(f"{out} = {self.literal(node.args[0])}")
            return
        call = self._call(node)
        view = self._static_view(node)
        if view is not None:
            # Inductor's reinterpret_tensor: the view without the dispatcher
            # (0.5 us instead of 1.2 us), when the input has the strides the
            # view was traced with.
            x, x_strides, sizes, strides, offset = view
            call = f"reinterpret_tensor({x}, {sizes}, {strides}, {offset}) if {x}.stride() == {x_strides} else {call}"
        self.emit(f"{out} = {call}")

    def _call(self, node: torch.fx.Node) -> str:
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            # Its __call__ only forwards to the C++ callable `_op`: calling
            # that directly saves a Python frame per step.
            name = self._global(target._op, str(target).replace(".", "_"))
        else:
            name = self._global(target, getattr(target, "__name__", "fn"))
        args = [self.literal(a) for a in node.args]
        args += [f"{k}={self.literal(v)}" for k, v in node.kwargs.items()]
        return f"{name}({', '.join(args)})"

    def _static_view(self, node: torch.fx.Node) -> tuple[str, str, str, str, str] | None:
        """(input, its traced strides, sizes, strides, storage offset increment)
        of a view op with static shapes that keeps its input's dtype, else None."""
        if self.dynamic or node.target not in _VIEW_OPS or not isinstance(node.args[0], torch.fx.Node):
            return None
        x, y = node.args[0].meta.get("val"), node.meta.get("val")
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            return None
        if x.dtype != y.dtype or x.device != y.device:
            return None
        try:
            layout = (tuple(x.stride()), tuple(y.shape), tuple(y.stride()), y.storage_offset() - x.storage_offset())
        except RuntimeError:  # no strides (a sparse or nested meta value)
            return None
        if not all(type(v) is int for part in layout[:3] for v in part) or type(layout[3]) is not int:
            return None
        return (self.literal(node.args[0]), *(self.literal(part) for part in layout))

    def kernel_step(self, index: int, step: Any) -> None:
        """Re-lay out outside tensors, allocate the outputs, run the kernel,
        write back mutated inputs that were re-laid out."""
        compiled = self.compiled
        kernel = step.kernel
        names = self.slot_names
        written_back = []
        # Inputs first: a buffer written in place takes over the re-laid-out
        # tensor, which is what the kernel reads.
        for i, (expected, written) in enumerate(zip(step.expected_layouts, step.expected_written)):
            lay = self.layout("expected_layout", index, i)
            x = names[expected.slot]
            if written:
                original = self._fresh(f"{x}_original")
                written_back.append((x, original))
                self.emit(f"{original} = None")
            self.emit(f"if {x}.stride() != {lay.strides} and {x}.numel() > 1:")
            if written:
                self.emit(f"{original} = {x}", 2)
            self.emit(f"{x} = {self.empty(lay)}.copy_({x})", 2)
        for i, a in enumerate(step.allocs):
            lay = self.layout("allocation", index, i)
            out = names[a.slot]
            if a.reuse < 0:
                self.emit(f"{out} = {self.empty(lay)}")
            elif a.in_place:  # the kernel still reads the old buffer: freed after the step
                old = names[a.reuse]
                self.emit(f"{out} = in_place({old}, {lay.sizes}, {lay.strides}, {lay.dtype}, {lay.device})")
            else:
                old = names[a.reuse]
                self.emit(f"{out} = reuse({old}, {lay.sizes}, {lay.strides}, {lay.dtype}, {lay.nbytes}, {lay.device})")
                self.emit(f"{old} = None")
        launcher = compiled.kernel_launcher(kernel, len(step.buffers))
        call = [names[b] for b in step.buffers]
        on_cuda = compiled.kernel_devices[kernel] == "cuda"
        if self.dynamic or on_cuda:
            call.append("symbols" if self.dynamic else "()")
        if on_cuda:
            call.append("stream")
        self.lines.append(_PROFILED + f"    profiler_range = range_enter({kernel_range_name(compiled, kernel)!r})")
        self.emit(f"{self._global(launcher, compiled.kernel_names[kernel])}({', '.join(call)})")
        self.lines.append(_PROFILED + "    range_exit(profiler_range)")
        for x, original in written_back:  # the kernel mutated a graph input
            self.emit(f"if {original} is not None:")
            self.emit(f"{original}.copy_({x})", 2)
            self.emit(f"{x} = {original}", 2)
            self.emit(f"{original} = None", 2)


def kernel_range_name(compiled: "_C.CompiledGraph", kernel: int, most: int = 5) -> str:
    """A kernel's name in profiles: its number and the ops fused into it, in
    order, each once ("kernel2_amax_sub_exp_sum_div")."""
    number = compiled.kernel_names[kernel].split("_")[0]
    ops: list[str] = []
    for node in compiled.kernel_infos[kernel]["nodes"]:
        op = re.sub(r"_\d+$", "", node)
        if op not in ops:
            ops.append(op)
    return "_".join([number, *ops[:most]] + (["etc"] if len(ops) > most else []))


def generate_wrapper(gm: torch.fx.GraphModule, compiled: "_C.CompiledGraph") -> WrapperCode:
    """The source of `call(args)` for `compiled` (the plan of `gm`), its
    observed and profiled variants, and the globals they need besides
    runtime.py's HELPERS."""
    printer = _Printer(gm, compiled)
    printer.print_function()
    plain = [line for line in printer.lines if not line.startswith((_OBSERVED, _PROFILED))]
    observed = [line.removeprefix(_OBSERVED) for line in printer.lines if not line.startswith(_PROFILED)]
    profiled = [line.removeprefix(_PROFILED) for line in printer.lines if not line.startswith(_OBSERVED)]
    per_graph = {
        "allocation": compiled.allocation,
        "expected_layout": compiled.expected_layout,
        "layout": _dynamic_layout,
    }
    return WrapperCode("\n".join(plain) + "\n", "\n".join(observed) + "\n", "\n".join(profiled) + "\n",
                       {**printer.globals, **per_graph})
