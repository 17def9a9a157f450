"""Runs a CompiledGraph with real tensors (boxed calling convention).

The C++ core hands back a straight-line plan over value slots (see
backend/compiled_graph.h). Here we turn each step into a closure once, at
compile time, so a call is a loop over closures: ATen steps call the FX node's
op (extern calls and fallbacks), kernel steps call compiled code.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Callable

import torch
import torch.fx

from . import _C


def _loaded_libgomp() -> str | None:
    """The libgomp this process already runs torch's parallel regions on."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libgomp" in path and path.startswith("/"):
                    return path
    except OSError:
        pass
    return None


_threads_in_use: list[int] = [0]
# Process-wide: compiled calls, and the kernel buffers they allocated fresh or
# took over from a dead buffer (buffer_counters()).
_buffer_counts: list[int] = [0, 0, 0]
# memory.track_live_bytes() installs a function (env, call_starts) -> None
# that sees the slots before a call's first step and after every step.
_step_observer: list = [None]
_cuda_configured: list[bool] = [False]
_libmvec_loaded: list[bool] = [False]


def _torch_nvrtc() -> str | None:
    """The libnvrtc shipped with torch's CUDA wheel (nvidia-cuda-nvrtc), if any."""
    import glob
    import site
    import sys

    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for root in roots:
        for pattern in ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"):
            found = sorted(p for p in glob.glob(os.path.join(root, pattern)) if "builtins" not in p)
            if found:
                return found[-1]
    return None


def configure_cuda_runtime() -> None:
    """Before the first CUDA compile: point NVRTC at torch's copy when the
    system has none (CUDA kernels then run on torch's streams)."""
    if _cuda_configured[0] or not torch.cuda.is_available():
        return
    _cuda_configured[0] = True
    if not _C.nvrtc_available():
        path = _torch_nvrtc()
        if path:
            try:
                _C.set_nvrtc_library(path)
            except _C.CompilerError:
                pass  # CUDA nodes fall back with the reason


def _load_libmvec() -> None:
    """glibc's vector math into the global scope, where the JIT resolves the
    prelude's weak references to it (float erf: ~3x faster than SLEEF's,
    within 4 ULP); without it kernels keep SLEEF."""
    if _libmvec_loaded[0]:
        return
    _libmvec_loaded[0] = True
    try:
        ctypes.CDLL("libmvec.so.1", mode=os.RTLD_GLOBAL)
    except OSError:
        pass


def configure_cpu_runtime() -> None:
    """Before the first CPU kernel: share torch's OpenMP pool and thread count."""
    _load_libmvec()
    path = _loaded_libgomp()
    if path and _C.openmp_library() != path:
        try:
            _C.set_openmp_library(path)
        except _C.CompilerError:
            pass  # a loop already ran on another libgomp: keep it
    sync_num_threads()


def sync_num_threads() -> None:
    n = torch.get_num_threads()
    if n != _threads_in_use[0]:
        _C.set_num_threads(n)
        _threads_in_use[0] = n


def buffer_counters() -> dict[str, int]:
    """Cumulative for the process: compiled calls, and kernel buffers allocated
    fresh or reused (a dead buffer's storage) by them."""
    calls, fresh, reused = _buffer_counts
    return {"calls": calls, "fresh": fresh, "reused": reused}


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _template(a: Any, slot_of: dict[torch.fx.Node, int]) -> Any:
    """FX args with nodes replaced by slots, lists made plain."""
    if isinstance(a, torch.fx.Node):
        return _Slot(slot_of[a])
    if isinstance(a, (list, tuple)):
        items = [_template(x, slot_of) for x in a]
        return tuple(items) if isinstance(a, tuple) else items
    if isinstance(a, dict):
        return {k: _template(v, slot_of) for k, v in a.items()}
    return a


def _has_slot(t: Any) -> bool:
    if isinstance(t, _Slot):
        return True
    if isinstance(t, (list, tuple)):
        return any(_has_slot(x) for x in t)
    if isinstance(t, dict):
        return any(_has_slot(x) for x in t.values())
    return False


def _resolver(t: Any) -> Callable[[list], Any]:
    """A function env -> value for an argument template."""
    if isinstance(t, _Slot):
        i = t.index
        return lambda env: env[i]
    if not _has_slot(t):
        return lambda env: t
    if isinstance(t, (list, tuple)):
        if all(isinstance(x, _Slot) for x in t):  # the common case: a flat list of values
            idx = [x.index for x in t]
            if isinstance(t, tuple):
                return lambda env: tuple([env[i] for i in idx])
            return lambda env: [env[i] for i in idx]
        parts = [_resolver(x) for x in t]
        if isinstance(t, tuple):
            return lambda env: tuple([p(env) for p in parts])
        return lambda env: [p(env) for p in parts]
    if isinstance(t, dict):
        parts_d = {k: _resolver(v) for k, v in t.items()}
        return lambda env: {k: p(env) for k, p in parts_d.items()}
    return lambda env: t


def _aten_step(node: torch.fx.Node, gm: torch.fx.GraphModule, slot_of: dict) -> Callable[[list, list], None]:
    """A closure (env, symbols) -> None running one ATen node (extern calls, fallbacks)."""
    out = slot_of[node]
    if node.op == "get_attr":
        value = getattr(gm, node.target)

        def run_get_attr(env: list, symbols: list) -> None:
            env[out] = value

        return run_get_attr
    # An OpOverload's __call__ only forwards to its C++ callable `_op`: calling
    # that directly saves a Python frame per step (small graphs pay per step).
    target = node.target._op if isinstance(node.target, torch._ops.OpOverload) else node.target
    get_args = _resolver(_template(tuple(node.args), slot_of))
    if not node.kwargs:

        def run_positional(env: list, symbols: list) -> None:
            env[out] = target(*get_args(env))

        return run_positional
    get_kwargs = _resolver(_template(dict(node.kwargs), slot_of))

    def run(env: list, symbols: list) -> None:
        env[out] = target(*get_args(env), **get_kwargs(env))

    return run


_TORCH_DTYPES = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def _layout_fn(layout_of, index: int, dynamic: bool):
    """symbols -> (dtype, sizes, strides, device), evaluated once when static."""
    if dynamic:
        return lambda symbols: layout_of(index, symbols)
    fixed = layout_of(index, [])
    return lambda symbols: fixed


def _empty(layout) -> torch.Tensor:
    dtype, sizes, strides, device = layout
    return torch.empty_strided(sizes, strides, dtype=_TORCH_DTYPES[dtype], device=device)


def _storage_bytes(sizes, strides, dtype: torch.dtype) -> int:
    """What torch.empty_strided allocates for this layout."""
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides))) * dtype.itemsize


def _reuse(old: torch.Tensor, sizes, strides, dtype: torch.dtype, nbytes: int, device) -> torch.Tensor:
    """A dead buffer's storage as a new buffer (backend/buffer_reuse.h: the
    plan matched devices and sizes). Same dtype: a strided view of its first
    bytes; another dtype: a tensor set onto the untyped storage. A storage
    smaller than the plan assumed (an ATen result laid out otherwise than
    its FX meta said) is left alone: the buffer is allocated fresh."""
    storage = old.untyped_storage()
    if storage.nbytes() < nbytes:
        return torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    if old.dtype == dtype:
        return torch.as_strided(old, sizes, strides, 0)
    return torch.empty(0, dtype=dtype, device=old.device).set_(storage, 0, sizes, strides)


def _in_place(old: torch.Tensor, sizes: tuple, strides: tuple, dtype: torch.dtype, device) -> torch.Tensor:
    """The tensor a kernel writes over an input it reads for the last time
    (backend/buffer_reuse.h, in place): the kernel stores each element where
    it loaded it, through `old`'s data pointer, so the new buffer must start
    there. By then `old` has the strides the kernel reads it with (the
    step's layout checks ran first). That very tensor when the layouts
    agree, else a view of its storage (a [B*T, C] matmul result written as
    [B, T, C]); a fresh tensor if `old` does not start at its storage."""
    if old.dtype == dtype and old.storage_offset() == 0:
        if old.stride() == strides and old.shape == sizes:
            return old
        if old.untyped_storage().nbytes() >= _storage_bytes(sizes, strides, dtype):
            return torch.as_strided(old, sizes, strides, 0)
    return torch.empty_strided(sizes, strides, dtype=dtype, device=device)


def _allocate(env: list, slot: int, reuse: int, in_place: bool, layout) -> None:
    if reuse < 0:
        env[slot] = _empty(layout)
        return
    dtype_name, sizes, strides, device = layout
    dtype = _TORCH_DTYPES[dtype_name]
    if in_place:  # the kernel still reads env[reuse]: it is freed after the step
        env[slot] = _in_place(env[reuse], tuple(sizes), tuple(strides), dtype, device)
        return
    env[slot] = _reuse(env[reuse], sizes, strides, dtype, _storage_bytes(sizes, strides, dtype), device)
    env[reuse] = None


def _kernel_step(compiled: "_C.CompiledGraph", index: int, step: "_C.Step", dynamic: bool):
    """A closure running one compiled kernel: allocate its outputs, make sure
    tensors from outside our kernels have the strides it was compiled for,
    call it. Static shapes (the common case) resolve every layout here, once:
    a call then costs one torch.empty_strided per output, a stride check per
    outside tensor and the kernel call (small graphs are dominated by this)."""
    kernel, buffers = step.kernel, tuple(step.buffers)
    device = compiled.kernel_devices[kernel]
    allocs = [
        (a.slot, a.reuse, a.in_place, _layout_fn(lambda i, s: compiled.allocation(index, i, s), i, dynamic))
        for i, a in enumerate(step.allocs)
    ]
    checks = [
        (e.slot, written, _layout_fn(lambda i, s: compiled.expected_layout(index, i, s), i, dynamic))
        for i, (e, written) in enumerate(zip(step.expected_layouts, step.expected_written))
    ]
    run_kernel = compiled.run_kernel
    on_cuda = device == "cuda"

    def relayout(env: list, slot: int, written: bool, expected, write_back: list) -> None:
        t = env[slot]
        relaid = _empty(expected).copy_(t)
        if written:
            write_back.append((slot, t, relaid))
        env[slot] = relaid

    def finish(env: list, write_back: list) -> None:
        for slot, original, relaid in write_back:  # the kernel mutated a graph input
            original.copy_(relaid)
            env[slot] = original

    if not dynamic and not on_cuda:
        empty_strided = torch.empty_strided
        static_allocs = []
        for slot, reuse, in_place, layout in allocs:
            dtype_name, sizes, strides, dev = layout([])
            dtype = _TORCH_DTYPES[dtype_name]
            nbytes = _storage_bytes(sizes, strides, dtype)
            static_allocs.append((slot, reuse, in_place, tuple(sizes), tuple(strides), dtype, dev, nbytes))
        static_checks = [(slot, written, tuple(layout([])[2]), layout([])) for slot, written, layout in checks]

        def run_static(env: list, symbols: list) -> None:
            # Inputs first: a buffer written in place takes over the
            # re-laid-out tensor, which is what the kernel reads.
            write_back: list = []
            for slot, written, strides, expected in static_checks:
                t = env[slot]
                if t.stride() != strides and t.numel() > 1:
                    relayout(env, slot, written, expected, write_back)
            for slot, reuse, in_place, sizes, strides, dtype, dev, nbytes in static_allocs:
                if reuse < 0:
                    env[slot] = empty_strided(sizes, strides, dtype=dtype, device=dev)
                elif in_place:
                    env[slot] = _in_place(env[reuse], sizes, strides, dtype, dev)
                else:
                    env[slot] = _reuse(env[reuse], sizes, strides, dtype, nbytes, dev)
                    env[reuse] = None
            run_kernel(kernel, [env[b].data_ptr() for b in buffers], symbols, 0)
            if write_back:
                finish(env, write_back)

        return run_static

    def run(env: list, symbols: list) -> None:
        write_back: list = []
        for slot, written, layout in checks:  # before the allocations: see run_static
            t = env[slot]
            expected = layout(symbols)
            if list(t.stride()) != expected[2] and t.numel() > 1:
                relayout(env, slot, written, expected, write_back)
        for slot, reuse, in_place, layout in allocs:
            _allocate(env, slot, reuse, in_place, layout(symbols))
        ptrs = [env[b].data_ptr() for b in buffers]
        stream = torch.cuda.current_stream().cuda_stream if on_cuda else 0
        run_kernel(kernel, ptrs, symbols, stream)
        if write_back:
            finish(env, write_back)

    return run


_SEED_HIGH = 2**63 - 1


def _draw_seed(device: str) -> torch.Tensor:
    """A fresh Philox key for one call's random nodes on `device`, from torch's
    generator of that device (as Inductor's inductor_seeds): manual_seed makes
    runs reproducible, successive calls differ. On CUDA the draw is a kernel
    on the current stream, so the seed never visits the host."""
    return torch.randint(_SEED_HIGH, (1,), dtype=torch.int64, device=device)


class CompiledFunction:
    """The callable AOTAutograd gets back for one graph."""

    def __init__(self, gm: torch.fx.GraphModule, compiled: "_C.CompiledGraph") -> None:
        # An instance attribute: Dynamo's disable() wrapper copies __dict__,
        # not class attributes, and AOTAutograd checks the wrapper.
        self._boxed_call = True
        self.compiled = compiled
        nodes = list(gm.graph.nodes)
        slot_of = {n: i for i, n in enumerate(nodes)}
        self._placeholders = [i for i, n in enumerate(nodes) if n.op == "placeholder"]
        self._num_slots = compiled.num_slots
        # Where each size symbol's value comes from: (placeholder, dim or -1).
        self._symbol_sources = [(self._placeholders[p], d) for _, p, d in compiled.symbol_bindings]
        dynamic = bool(self._symbol_sources)
        program = []
        for index, step in enumerate(compiled.steps):
            if step.kind == _C.StepKind.Aten:
                run = _aten_step(nodes[step.node], gm, slot_of)
            else:
                run = _kernel_step(compiled, index, step, dynamic)
            program.append((run, tuple(step.free_after)))
        self._program = program
        self._has_cpu_kernels = "cpu" in compiled.kernel_devices
        self._output = _resolver(_template(nodes[-1].args[0], slot_of))
        counts = compiled.allocation_counts
        self._fresh, self._reused = counts["fresh"], counts["reused"]
        self._seeds = [(slot, device) for slot, device in compiled.seed_inputs]

    def __call__(self, args: list) -> Any:
        env: list = [None] * self._num_slots
        for slot, value in zip(self._placeholders, args):
            env[slot] = value
        args.clear()
        for slot, device in self._seeds:
            env[slot] = _draw_seed(device)
        if self._has_cpu_kernels and torch.get_num_threads() != _threads_in_use[0]:
            sync_num_threads()
        symbols = [
            int(env[slot]) if dim < 0 else env[slot].size(dim) for slot, dim in self._symbol_sources
        ]
        counts = _buffer_counts
        counts[0] += 1
        counts[1] += self._fresh
        counts[2] += self._reused
        observe = _step_observer[0]
        if observe is not None:
            return self._call_observed(env, symbols, observe)
        for run, frees in self._program:
            run(env, symbols)
            for s in frees:
                env[s] = None
        return self._output(env)

    def _call_observed(self, env: list, symbols: list, observe: Callable[[list, bool], None]) -> Any:
        observe(env, True)
        for run, frees in self._program:
            run(env, symbols)
            observe(env, False)  # before the frees: the step's inputs and outputs coexist
            for s in frees:
                env[s] = None
        return self._output(env)
