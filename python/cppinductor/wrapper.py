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

What a call does not do: make a view nothing but another view reads (a view
of views is one reinterpret_tensor of the first tensor that is not a view),
run a step without effects whose value nothing reads (the views and split
pieces that only fused kernels needed), or check an input's layout twice.

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
import logging
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from . import _C
from .export import TORCH_DTYPES

log = logging.getLogger("cppinductor.wrapper")

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
# ATen ops whose results are views of their first argument, in a tuple.
_SPLIT_OPS = frozenset({_aten.split_with_sizes.default, _aten.split.Tensor})
# Steps without effects: not printed when nothing reads their value.
_PURE_OPS = _VIEW_OPS | _SPLIT_OPS | {_aten.unbind.int, operator.getitem}
# Extern ops the wrapper calls through torch's own Python bindings, as
# Inductor's extern_kernels do (torch.convolution, torch.mm, ...): those parse
# their arguments in C++ directly, where an OpOverload's callable converts
# each through the op's schema first (a convolution's call 11 us against 5,
# an addmm's 3.2 against 2.2). Each binding resolves the arguments the
# wrapper prints (the schema's positional arguments, then its keywords by
# name) to the same overload; tests/python/test_wrapper.py checks that.
NATIVE_BINDINGS = {
    _aten.convolution.default: torch.convolution,
    _aten.mm.default: torch.mm,
    _aten.mm.out: torch.mm,
    _aten.addmm.default: torch.addmm,
    _aten.addmm.out: torch.addmm,
    _aten.bmm.default: torch.bmm,
    _aten.bmm.out: torch.bmm,
    _aten.baddbmm.default: torch.baddbmm,
    _aten._scaled_dot_product_flash_attention_for_cpu.default: torch._scaled_dot_product_flash_attention_for_cpu,
}
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


@dataclass(frozen=True)
class _View:
    """A view step with static shapes, printed as one reinterpret_tensor of
    its root: the first tensor up its chain of views (and split pieces) that
    is not one. `fallback` is the chain of ATen calls, for a root whose
    strides are not the traced ones."""

    root: torch.fx.Node
    root_strides: tuple
    sizes: tuple
    strides: tuple
    offset: int
    fallback: str


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

    def __init__(self, gm: torch.fx.GraphModule, compiled: Any, tuning: Any = None,
                 guarded_inputs: bool = False) -> None:
        self.gm = gm
        self.compiled = compiled
        self.tuning = tuning  # autotune.GraphTuning, or None
        # The graph's inputs have the traced strides whenever it runs (see generate_wrapper).
        self.guarded_inputs = guarded_inputs
        self.nodes = list(gm.graph.nodes)
        self.dynamic = bool(compiled.symbol_bindings)
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {}
        self._global_ids: dict[int, str] = {}
        self._taken = set(_RESERVED)
        self.slot_names = [self._fresh(self._slot_base(s)) for s in range(compiled.num_slots)]
        self._slot_of = {n: i for i, n in enumerate(self.nodes)}
        # (slot, strides) of the kernel-step layout checks printed so far.
        self._checked: set[tuple[int, str]] = set()
        self.views: dict[torch.fx.Node, _View] = {}
        self.skipped: set[int] = set()
        self.frees: list[list[int]] = []
        # max-autotune's GEMM epilogues (backend/gemm_choices.h), by the
        # kernel's step: (choice index, choice). Their matmul's step prints
        # inside the kernel's.
        self.gemm_choices: dict[int, tuple[int, dict]] = {}
        if tuning is not None:
            if compiled.gemm_problem:
                log.warning("%s", compiled.gemm_problem)
            self.gemm_choices = {c["kernel_step"]: (i, c) for i, c in enumerate(compiled.gemm_choices)}
        self._plan_steps()

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
            if step.kind != _C.StepKind.Aten:
                self.kernel_step(index, step)
            elif index not in self.skipped:  # only ATen steps are left out
                self.aten_step(index, step)
            self.emit_observation(False)  # before the frees: the step's inputs and outputs coexist
            if self.frees[index]:
                self.emit(" = ".join(self.slot_names[s] for s in self.frees[index]) + " = None")
        self.emit(f"return {self.literal(self.nodes[-1].args[0])}")

    def emit_observation(self, call_starts: bool) -> None:
        """A line of the observed variant only (_OBSERVED marks it)."""
        self.lines.append(_OBSERVED + f"    observe(locals(), {call_starts})")

    def aten_step(self, index: int, step: Any) -> None:
        """One ATen call: an extern kernel or a fallback."""
        node = self.nodes[step.node]
        out = self.slot_names[step.node]
        if node.op == "get_attr":
            self.emit(f"{out} = {self._global(getattr(self.gm, node.target), node.target)}")
            return
        view = self.views.get(node)
        if view is not None:
            # Inductor's reinterpret_tensor: the view without the dispatcher
            # (cheaper than the view op), when the root has the strides the
            # view was traced with.
            x = self.literal(view.root)
            self.emit(f"{out} = reinterpret_tensor({x}, {self.literal(view.sizes)}, {self.literal(view.strides)}, "
                      f"{view.offset}) if {x}.stride() == {self.literal(view.root_strides)} else {view.fallback}")
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
        if step.allocs:  # an extern matmul into the buffer planned for it
            for a, lay in zip(step.allocs, self._allocate(index, step)):
                if not self.dynamic:  # made here with these strides: kernels need not check them
                    self._checked.add((a.slot, lay.strides))
            self.emit(f"{out} = {self._call(node, overload=target.overloadpacket.out, out=out)}")
            return
        self.emit(f"{out} = {self._call(node)}")

    def _call(self, node: torch.fx.Node, first: str | None = None, overload: Any = None,
              out: str | None = None) -> str:
        """`node`'s call; `first` replaces the expression of its first argument,
        `overload` the op (an out= variant) and `out` names its out= buffer."""
        target = overload if overload is not None else node.target
        if target in NATIVE_BINDINGS:
            name = self._global(NATIVE_BINDINGS[target], "torch_" + target.__name__.split(".")[0])
        elif isinstance(target, torch._ops.OpOverload):
            # Its __call__ only forwards to the C++ callable `_op`: calling
            # that directly saves a Python frame per step.
            name = self._global(target._op, str(target).replace(".", "_"))
        else:
            name = self._global(target, getattr(target, "__name__", "fn"))
        args = [self.literal(a) for a in node.args]
        if first is not None:
            args[0] = first
        args += [f"{k}={self.literal(v)}" for k, v in node.kwargs.items()]
        if out is not None:
            args.append(f"out={out}")
        return f"{name}({', '.join(args)})"

    # -- which steps print, and what they read ------------------------------------

    def _plan_steps(self) -> None:
        """Fills views, skipped and frees. A view of a view (or of a split's
        piece) is printed from its root, so the views between need not exist;
        a step without effects whose value nothing reads is not printed (views
        only the fused kernels read, an in-place update the kernels stored).
        Frees stay where the plan puts them, except that a root lives on until
        the last view printed from it (a view shares its root's storage: no
        byte lives longer)."""
        steps = self.compiled.steps
        if not self.dynamic:
            for step in steps:
                if step.kind == _C.StepKind.Aten:
                    view = self._static_view(self.nodes[step.node])
                    if view is not None:
                        self.views[self.nodes[step.node]] = view
        live = {self._slot_of[n] for n in self.nodes[-1].all_input_nodes}
        last_read: dict[int, int] = {}
        for index in reversed(range(len(steps))):
            step = steps[index]
            if step.kind == _C.StepKind.Aten and step.node not in live and self._pure(step):
                self.skipped.add(index)
                continue
            for slot in self._reads(step):
                live.add(slot)
                last_read.setdefault(slot, index)
        unmade = {steps[i].node for i in self.skipped}
        self.skipped |= {c["aten_step"] for _, c in self.gemm_choices.values()}  # made by the kernel's step
        self.frees = [[] for _ in steps]
        for index, step in enumerate(steps):
            for slot in step.free_after:
                if slot not in unmade:
                    self.frees[max(index, last_read.get(slot, index))].append(slot)
            if index in self.skipped:  # the storage its out= buffer would have taken over
                self.frees[index] += [a.reuse for a in step.allocs if a.reuse >= 0 and a.reuse not in unmade]

    def _is_input(self, slot: int) -> bool:
        return slot < len(self.nodes) and self.nodes[slot].op == "placeholder"

    def _pure(self, step: Any) -> bool:
        node = self.nodes[step.node]
        return (node.op == "get_attr" or node.target in _PURE_OPS
                or (step.recomputes and node.target in _STORES_INTO_FIRST_ARG))

    def _reads(self, step: Any) -> set[int]:
        """The slots a step's printed lines read."""
        if step.kind != _C.StepKind.Aten:
            slots = set(step.buffers) | {e.slot for e in step.expected_layouts} | set(step.gemm_operands)
            return slots | {a.reuse for a in step.allocs if a.reuse >= 0}
        node = self.nodes[step.node]
        if node in self.views:
            return {self._slot_of[self.views[node].root]}
        if step.allocs:  # an extern matmul's out= buffer may take over a dead one
            return {self._slot_of[n] for n in node.all_input_nodes} | {a.reuse for a in step.allocs if a.reuse >= 0}
        if step.recomputes and node.target in _STORES_INTO_FIRST_ARG:
            return {self._slot_of[node.args[0]]}
        return {self._slot_of[n] for n in node.all_input_nodes}

    def _view_input(self, node: torch.fx.Node) -> torch.fx.Node | None:
        """The tensor `node` is a view of: a view op's first argument, or the
        input of the split whose piece it is; else None."""
        x = node.args[0] if node.args else None
        if node.target is operator.getitem and isinstance(x, torch.fx.Node) and x.target in _SPLIT_OPS:
            x = x.args[0]
        elif node.target not in _VIEW_OPS:
            return None
        return x if isinstance(x, torch.fx.Node) else None

    def _static_view(self, node: torch.fx.Node) -> _View | None:
        """`node` as a _View when it is a view with static shapes that keeps
        its input's dtype and device, else None. Views are planned in step
        order, so a view's input, if a view, is already planned."""
        x = self._view_input(node)
        if x is None:
            return None
        inner = self.views.get(x)
        root = inner.root if inner is not None else x
        xv, yv, rv = x.meta.get("val"), node.meta.get("val"), root.meta.get("val")
        if not all(isinstance(v, torch.Tensor) for v in (xv, yv, rv)):
            return None
        if xv.dtype != yv.dtype or xv.device != yv.device:
            return None
        try:
            layout = (tuple(rv.stride()), tuple(yv.shape), tuple(yv.stride()), yv.storage_offset() - rv.storage_offset())
        except RuntimeError:  # no strides (a sparse or nested meta value)
            return None
        if not all(type(v) is int for part in layout[:3] for v in part) or type(layout[3]) is not int:
            return None
        x_expr = inner.fallback if inner is not None else self.literal(x)
        if node.target is operator.getitem:
            fallback = f"{self._call(node.args[0], x_expr)}[{node.args[1]!r}]"
        else:
            fallback = self._call(node, x_expr)
        return _View(root, *layout, fallback)

    def kernel_step(self, index: int, step: Any) -> None:
        """Re-lay out outside tensors, allocate the outputs, run the kernel,
        write back mutated inputs that were re-laid out."""
        compiled = self.compiled
        kernel = step.kernel
        names = self.slot_names
        written_back = []
        gemm = self.gemm_choices.get(index)
        result = step.buffers[gemm[1]["result_arg"]] if gemm else -1
        # Inputs first: a buffer written in place takes over the re-laid-out
        # tensor, which is what the kernel reads.
        for i, (expected, written) in enumerate(zip(step.expected_layouts, step.expected_written)):
            lay = self.layout("expected_layout", index, i)
            x = names[expected.slot]
            if expected.slot == result:  # the matmul's result, made here in the layout the kernel reads
                self.emit(f"{x} = {self.empty(lay)}")
                continue
            check = (expected.slot, lay.strides)
            if check in self._checked and not written:
                continue  # checked (and re-laid out) by an earlier step: a slot is assigned once
            if self.guarded_inputs and not written and not self.dynamic and self._is_input(expected.slot):
                continue
            if written:
                original = self._fresh(f"{x}_original")
                written_back.append((x, original))
                self.emit(f"{original} = None")
            elif not self.dynamic:
                self._checked.add(check)
            self.emit(f"if {x}.stride() != {lay.strides} and {x}.numel() > 1:")
            if written:
                self.emit(f"{original} = {x}", 2)
            self.emit(f"{x} = {self.empty(lay)}.copy_({x})", 2)
        self._allocate(index, step)
        launcher = compiled.kernel_launcher(kernel, len(step.buffers))
        if self.tuning is not None and not gemm:  # with a GEMM choice, that choice is what is timed
            launcher = self.tuning.launcher(compiled, kernel, len(step.buffers), launcher)
        call = [names[b] for b in step.buffers]
        on_cuda = compiled.kernel_devices[kernel] == "cuda"
        if self.dynamic or on_cuda:
            call.append("symbols" if self.dynamic else "()")
        if on_cuda:
            call.append("stream")
        self.lines.append(_PROFILED + f"    profiler_range = range_enter({kernel_range_name(compiled, kernel)!r})")
        if gemm:
            self._gemm_call(gemm, step, launcher, call)
        else:
            name = self._global(launcher, compiled.kernel_names[kernel])
            if hasattr(launcher, "global_name"):  # an autotune.KernelTuner: it rebinds this name
                launcher.global_name = name
            self.emit(f"{name}({', '.join(call)})")
        self.lines.append(_PROFILED + "    range_exit(profiler_range)")
        for x, original in written_back:  # the kernel mutated a graph input
            self.emit(f"if {original} is not None:")
            self.emit(f"{original}.copy_({x})", 2)
            self.emit(f"{x} = {original}", 2)
            self.emit(f"{original} = None", 2)

    def _allocate(self, index: int, step: Any) -> list[Layout]:
        """The buffers step `index` writes: fresh, or over a dead buffer's
        storage. Returns their layouts."""
        names = self.slot_names
        layouts = []
        for i, a in enumerate(step.allocs):
            lay = self.layout("allocation", index, i)
            layouts.append(lay)
            out = names[a.slot]
            if a.reuse < 0:
                self.emit(f"{out} = {self.empty(lay)}")
            elif a.in_place:  # the kernel still reads the old buffer: freed after the step
                old = names[a.reuse]
                self.emit(f"{out} = in_place({old}, {lay.sizes}, {lay.strides}, {lay.dtype}, {lay.nbytes}, {lay.device})")
            else:
                old = names[a.reuse]
                self.emit(f"{out} = reuse({old}, {lay.sizes}, {lay.strides}, {lay.dtype}, {lay.nbytes}, {lay.device})")
                self.emit(f"{old} = None")
        return layouts

    def _gemm_call(self, gemm: tuple[int, dict], step: Any, launcher: Any, call: list[str]) -> None:
        """The kernel of a GEMM choice: the choice's launcher (a KernelTuner,
        or the cached winner) when the operands have the strides and 16-byte
        alignment its GEMM kernels were compiled for, else the matmul (into
        the result made above) and the kernel."""
        index, choice = gemm
        compiled, names = self.compiled, self.slot_names
        a, b = names[choice["a_slot"]], names[choice["b_slot"]]
        bias = names[choice["bias_slot"]] if choice["bias_slot"] >= 0 else None
        scales = [names[choice["scale_a_slot"]], names[choice["scale_b_slot"]]] if choice["scale_a_slot"] >= 0 else []
        x = names[step.buffers[choice["result_arg"]]]
        extern = gemm_extern(choice)
        kernel_name = compiled.kernel_names[step.kernel]
        plain = self._global(launcher, kernel_name)
        chosen = self.tuning.gemm_launcher(compiled, index, choice, kernel_name, launcher, len(step.buffers), extern)
        name = self._global(chosen, f"{kernel_name}_gemm")
        if hasattr(chosen, "global_name"):
            chosen.global_name = name
        operands = [a, b] + ([bias] if bias else []) + scales
        fused = [*call[:len(step.buffers)], *operands, *call[len(step.buffers):]]
        check = (f"{a}.stride() == {choice['a_strides']} and {b}.stride() == {choice['b_strides']} "
                 f"and {a}.data_ptr() % 16 == 0 and {b}.data_ptr() % 16 == 0")
        if bias:
            check += f" and {bias}.stride() == (1,)"
        if scales:
            check += (f" and {scales[0]}.stride() == {choice['scale_a_strides']}"
                      f" and {scales[1]}.stride() == {choice['scale_b_strides']}")
        self.emit(f"if {check}:")
        self.emit(f"{name}({', '.join(fused)})", 2)
        self.emit("else:")
        self.emit(f"{self._global(extern, f'{kernel_name}_extern')}({', '.join(operands)}, out={x})", 2)
        self.emit(f"{plain}({', '.join(call)})", 2)


def gemm_extern(choice: dict) -> Any:
    """The ATen call a GEMM choice's matmul is, taking the fused kernel's
    operands in its order (A, B, then the bias and the scales where the
    choice has them) and `out`."""
    aten = torch.ops.aten
    if choice["scale_a_slot"] >= 0:
        out_dtype, fast_accum = getattr(torch, choice["out_dtype"]), choice["fast_accum"]
        has_bias = choice["bias_slot"] >= 0

        def scaled_mm(a: torch.Tensor, b: torch.Tensor, *rest: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            bias, (scale_a, scale_b) = (rest[0] if has_bias else None), rest[-2:]
            return aten._scaled_mm.out(a, b, scale_a, scale_b, bias, None, out_dtype, fast_accum, out=out)

        return scaled_mm
    if choice["bias_slot"] >= 0:
        return lambda a, b, bias, out: aten.addmm.out(bias, a, b, out=out)
    return lambda a, b, out: aten.mm.out(a, b, out=out)


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


def generate_wrapper(gm: torch.fx.GraphModule, compiled: "_C.CompiledGraph", tuning: Any = None,
                     guarded_inputs: bool = False) -> WrapperCode:
    """The source of `call(args)` for `compiled` (the plan of `gm`), its
    observed and profiled variants, and the globals they need besides
    runtime.py's HELPERS. With `tuning` (an autotune.GraphTuning), the
    globals of kernels with candidates to time are KernelTuners.
    `guarded_inputs`: the graph's inputs always have their traced strides
    (Dynamo's guards check the strides of a static-shape graph's inputs), so
    the kernels' layout checks of inputs they do not write are left out, as
    Inductor leaves its input asserts out in reduce-overhead mode."""
    printer = _Printer(gm, compiled, tuning, guarded_inputs)
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
