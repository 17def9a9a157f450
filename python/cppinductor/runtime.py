"""Runs a CompiledGraph with real tensors (boxed calling convention).

The C++ core hands back a straight-line plan over value slots (see
backend/compiled_graph.h); wrapper.py prints it once, at compile time, as the
source of one Python function, and CompiledFunction runs that. This module
holds what those functions share: the process's CPU and CUDA runtime set-up,
the thread count they follow, the buffer counters, and the helpers the
generated source calls (HELPERS).
"""

from __future__ import annotations

import ctypes
import linecache
import os
import weakref
from typing import Any, Callable

import torch
import torch.autograd.profiler as _profiler
import torch.fx

from . import _C
from .debug import new_graph_id
from .autotune import GraphTuning, KernelTuner
from .wrapper import HELPER_NAMES, generate_wrapper


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
# memory.track_live_bytes() installs a function (values, call_starts) -> None
# that sees the live slots' values before a call's first step and after every
# step (compiled calls then run their observed variant).
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
        return _reinterpret(old, sizes, strides, -old.storage_offset())
    return torch.empty(0, dtype=dtype, device=old.device).set_(storage, 0, sizes, strides)


def _in_place(old: torch.Tensor, sizes: tuple, strides: tuple, dtype: torch.dtype, nbytes: int, device) -> torch.Tensor:
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
        if old.untyped_storage().nbytes() >= nbytes:
            return _reinterpret(old, sizes, strides, 0)
    return torch.empty_strided(sizes, strides, dtype=dtype, device=device)


_SEED_HIGH = 2**63 - 1


def _draw_seed(device: str) -> torch.Tensor:
    """A fresh Philox key for one call's random nodes on `device`, from torch's
    generator of that device (as Inductor's inductor_seeds): manual_seed makes
    runs reproducible, successive calls differ. On CUDA the draw is a kernel
    on the current stream, so the seed never visits the host."""
    return torch.randint(_SEED_HIGH, (1,), dtype=torch.int64, device=device)


def _dynamo_guard_helper(name: str) -> Any:
    """One of the C helpers torch ships for Inductor's generated code
    (torch._C._dynamo.guards), or None when this torch has no such helper."""
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    return getattr(guards, name, None)


def _empty_strided_cpu() -> Any:
    """Inductor's empty_strided for CPU: the same tensor as torch.empty_strided
    without the dispatcher (cheaper per buffer than through it); torch's
    when this torch has none."""
    fast = _dynamo_guard_helper("_empty_strided_cpu")
    if fast is not None:
        return fast
    return lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype, device="cpu")


def _empty_strided_cuda() -> Any:
    """Inductor's empty_strided for the current CUDA device, without the
    dispatcher; torch's when this torch has none."""
    fast = _dynamo_guard_helper("_empty_strided_cuda")
    if fast is not None and torch.cuda.is_available():
        return fast
    return lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype, device="cuda")


def _reinterpret_tensor() -> Any:
    """Inductor's reinterpret_tensor(t, sizes, strides, offset_increment): t's
    storage viewed with that layout, without the dispatcher; as_strided when
    this torch has none."""
    fast = _dynamo_guard_helper("_reinterpret_tensor")
    if fast is not None:
        return fast
    return lambda t, sizes, strides, increment: torch.as_strided(t, sizes, strides, t.storage_offset() + increment)


_reinterpret = _reinterpret_tensor()


def _share_tensor_data_ptr() -> None:
    """Kernel launchers read tensors' data pointers through torch's own C
    function, as Inductor's CPU kernels do (no data_ptr() call per buffer);
    without it they call data_ptr()."""
    address = _dynamo_guard_helper("_torchinductor_pyobject_tensor_data_ptr")
    if isinstance(address, int) and address:
        _C.set_tensor_data_ptr_function(address, torch.Tensor)


_share_tensor_data_ptr()

# A fork copies no thread: a child would wait forever on a compile thread
# that exists only in its parent. Compiles finish before the fork (_C's
# atexit hook does the same at exit).
os.register_at_fork(before=_C.wait_for_background_compiles)


def _observe(frame_locals: dict[str, Any], call_starts: bool) -> None:
    """The observed variant's hook: the values of its locals (slots and the
    layouts and originals a step holds) to memory.track_live_bytes."""
    _step_observer[0](tuple(frame_locals.values()), call_starts)


def _no_cuda(*_args: Any) -> Any:
    raise RuntimeError("cppinductor: a CUDA kernel was called, but this torch build has no CUDA")


# The current device's current stream as an int: two cheap C calls where
# torch.cuda.current_stream().cuda_stream builds a Stream object, many times
# the cost, on every call of every CUDA graph.
_cuda_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _no_cuda)
_cuda_device = getattr(torch._C, "_cuda_getDevice", _no_cuda)

# Profiler ranges, as torch.profiler.record_function opens and closes them.
_range_enter = torch.ops.profiler._record_function_enter_new
_range_exit = torch.ops.profiler._record_function_exit._RecordFunction


def _open_range(name: str) -> Any:
    return _range_enter(name, None)


HELPERS = {
    "empty_strided": torch.empty_strided,
    "empty_strided_cpu": _empty_strided_cpu(),
    "empty_strided_cuda": _empty_strided_cuda(),
    "reinterpret_tensor": _reinterpret,
    "in_place": _in_place,
    "reuse": _reuse,
    "draw_seed": _draw_seed,
    "get_num_threads": torch.get_num_threads,
    "threads_in_use": _threads_in_use,
    "sync_num_threads": sync_num_threads,
    "buffer_counts": _buffer_counts,
    "cuda_raw_stream": _cuda_raw_stream,
    "cuda_device": _cuda_device,
    "observe": _observe,
    "range_enter": _open_range,
    "range_exit": _range_exit,
}
assert set(HELPERS) == set(HELPER_NAMES)


def _load(source: str, scope: dict[str, Any], filename: str, owner: object) -> Any:
    """The `call` function of generated source. Its lines go to linecache, so
    tracebacks through it show them, for as long as `owner` lives."""
    scope = dict(scope)
    exec(compile(source, filename, "exec"), scope)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(owner, linecache.cache.pop, filename, None)
    return scope["call"]


# What a CompiledFunction calls once its background compile is over, with
# the compile's exception (None when it succeeded); it returns a function to
# run instead (the eager fallback), or None to run the kernels.
CompileFinished = Callable[[Exception | None], Callable[[list], Any] | None]


class CompiledFunction:
    """The callable AOTAutograd gets back for one graph: the function
    wrapper.py generated for it (`source`).

    Its CPU kernels may still be compiling on a background thread
    (`compiled.compiling`): the first call waits for them and tells
    `finished`, which may hand back a function to run instead (the eager
    fallback when the compile failed)."""

    def __init__(self, gm: torch.fx.GraphModule, compiled: "_C.CompiledGraph", graph_id: int | None = None,
                 finished: CompileFinished | None = None, kind: str = "inference",
                 tuning: "GraphTuning | None" = None, guarded_inputs: bool = False) -> None:
        # An instance attribute: Dynamo's disable() wrapper copies __dict__,
        # not class attributes, and AOTAutograd checks the wrapper.
        self._boxed_call = True
        self.compiled = compiled
        self._name = f"<cppinductor graph {new_graph_id() if graph_id is None else graph_id}>"
        self._code = generate_wrapper(gm, compiled, tuning, guarded_inputs)
        self._scope = {**HELPERS, **self._code.globals}
        # Kernels timed at their first call rebind their global in every
        # function made from the source (autotune.KernelTuner).
        self._tuners = [v for v in self._code.globals.values() if isinstance(v, KernelTuner)]
        for tuner in self._tuners:
            tuner.scopes.append(self._scope)
        self._run = self._load(self._code.source, self._name)
        self._run_observed = None  # compiled when first needed
        self._run_profiled = None  # likewise
        # The graph's range in torch.profiler: "cppinductor graph 3 (forward)".
        self.range_name = f"cppinductor graph {self._name.split()[-1].rstrip('>')} ({kind})"
        self._finished = finished
        self._instead: Callable[[list], Any] | None = None  # what runs when the compile failed
        self._compiling = compiled.compiling
        if self._compiling:
            # Until the first call: a cycle through the bound method, which
            # that call breaks.
            self._run_compiled, self._run = self._run, self._first_run

    @property
    def source(self) -> str:
        return self._code.source

    def _load(self, source: str, filename: str) -> Any:
        run = _load(source, self._scope, filename, self)
        for tuner in self._tuners:
            tuner.scopes.append(run.__globals__)
        return run

    def __call__(self, args: list) -> Any:
        if _step_observer[0] is None:
            # Under an active torch.profiler, one range for the call and one
            # per kernel step; otherwise this flag is the whole cost.
            if not _profiler._is_profiler_enabled:
                return self._run(args)
            return self._run_under_profiler(args)
        self._finish_compile()
        if self._instead is not None:
            return self._instead(args)
        if self._run_observed is None:
            self._run_observed = self._load(self._code.observed_source, self._name[:-1] + " observed>")
        return self._run_observed(args)

    def _run_under_profiler(self, args: list) -> Any:
        self._finish_compile()
        if self._instead is not None:
            return self._instead(args)
        if self._run_profiled is None:
            self._run_profiled = self._load(self._code.profiled_source, self._name[:-1] + " profiled>")
        handle = _range_enter(self.range_name, None)
        try:
            return self._run_profiled(args)
        finally:
            _range_exit(handle)

    def _first_run(self, args: list) -> Any:
        self._finish_compile()
        return self._run(args)

    def _finish_compile(self) -> None:
        """Waits for the background compile (once) and settles what runs."""
        if not self._compiling:
            return
        error: Exception | None = None
        try:
            self.compiled.finish_compile()
        except (_C.UnsupportedError, _C.CompilerError) as e:
            error = e
        instead = self._finished(error) if self._finished is not None else None
        if instead is None and error is not None:
            raise error
        self._instead = instead
        self._run = instead if instead is not None else self._run_compiled
        self._compiling = False
