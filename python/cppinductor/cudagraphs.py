"""CUDA graphs for mode="reduce-overhead" and "max-autotune": when a graph
records, replays or runs uncaptured, and why (what a recording is and whose
memory is whose: cudagraph_pool.py).

A compiled CUDA graph's launches (our kernels and the ATen externs: cuBLAS,
cuDNN, capturable fallbacks) are captured once into a torch.cuda.CUDAGraph
and replayed, so a call costs one replay instead of a launch per step.

What a call does, as Inductor's cudagraph trees do for users:
- The first call runs uncaptured on the capture stream (warm-up: modules
  loaded, library handles made, as Inductor's warm-up runs on its capture
  stream). The second records: the graph is captured on that stream, with
  buffers in the pool for the inputs that are not static (freed inside the
  graph after their last read, as the default mode frees them) and the
  libraries' workspaces made inside the capture, and replays for this
  call's results. Every later call copies the non-static inputs into those
  buffers and replays.
- Static inputs are passed by address: parameters and buffers (AOTAutograd's
  static input indices, kept in the warm-start cache's entries too) and a
  backward's saved tensors (the forward's outputs, at fixed addresses when
  the forward replays). One that moves makes the call run uncaptured; after
  three calls in a row with new addresses the graph is recorded again, at
  most eight times. A recording replaced so (or dropped when its function
  stops using CUDA graphs) keeps its memory while tensors its replays
  returned are still held.
- Outputs live in the graph's memory pool. Each call returns tensors over
  that memory: the previous call's own where nobody holds them any more (as
  Inductor's cached outputs: no tensor made per output per call), new ones
  otherwise; a replay that rewrites it makes the previous call's outputs
  that are still held raise a clear error when read (never a silently
  changed value). A replay rewrites its own outputs and the memory of every
  graph recorded after it on the device (their buffers may sit where its
  temporaries were during its capture): a forward's replay so retires the
  last backward's gradients, as Inductor's does.
- A backward's outputs are lent: AccumulateGrad takes a gradient into .grad
  as it is, not copied out of the pool (as with Inductor). Memory a replay
  would rewrite that is reachable through what cannot be retired (a view of
  an output, a gradient still in .grad) makes that call run uncaptured;
  after three such calls in a row the graph records again over new memory
  (the old recording keeps its own while anything reaches it).
- One pool per device holds every graph, so a training step's forward and
  backward share memory. The backward's capture borrows the forward's saved
  tensors: it is handed the tensors that own their memory (the forward's
  capture made them), frees each after its last read and lays its own
  buffers over it, as the default mode frees saved tensors during a
  backward. That memory is then free in the allocator's view while the
  forward's replays fill it, so a recording captured later may not replay
  (nor a new one record) while those saved tensors await their backward; a
  backward that must record again after borrowing makes its forward record
  again first.
- A training forward whose previous call's saved tensors still await their
  backward (two forwards, then two backwards) runs that call uncaptured: a
  replay would overwrite what the pending backward reads.
- Dynamic shapes record one graph per distinct set of input sizes, up to
  eight; past that the function runs uncaptured. A non-tensor argument (a
  size, a float from .item()) is baked into the captured launches: its
  values select recordings the same way.

What is never captured, with the reason in explain() and one log line under
`cppinductor.perf_hints`: CPU tensors (inputs, outputs or kernels: a CPU
scalar's value would be frozen into the graph), tensors on several devices,
an input the graph mutates that is not static (the copy would take the
write), and a capture that fails (a sync point, an uncapturable op).
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import Any, Callable, Sequence

import torch
import torch.autograd.profiler as _profiler
import torch.fx

from .cudagraph_pool import MustNotRecord, Recording, pool_for

log = logging.getLogger("cppinductor.cudagraphs")
perf_hints = logging.getLogger("cppinductor.perf_hints")

MODES = ("reduce-overhead", "max-autotune")
MAX_SHAPES = 8  # graphs recorded per function for distinct input sizes
MAX_RERECORDS = 8  # recordings after static inputs moved
RERECORD_AFTER = 3  # calls in a row with moved static inputs before recording again

OVERWRITTEN = (
    "cppinductor: this tensor is an output of a CUDA graph (mode='reduce-overhead') that a later call "
    "overwrote: outputs live in the graph's memory and each replay rewrites it. Clone what you keep across "
    "calls (`out.clone()`), or compile with mode='default'."
)
GRAD_OVERWRITTEN = (
    "cppinductor: this gradient is an output of a backward CUDA graph (mode='reduce-overhead') that the next "
    "forward overwrote. Consume gradients before the next forward (optimizer.step(), then zero_grad() with "
    "set_to_none=True), clone them, or compile with mode='default'."
)


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def graph_devices(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> set[torch.device]:
    """Every device a value of the graph lives on."""
    devices = {t.device for t in _tensors(example_inputs)}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        for t in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(t, torch.Tensor):
                devices.add(t.device)
    return devices


def mutated_inputs(gm: torch.fx.GraphModule) -> dict[int, str]:
    """The inputs the graph writes (AOTAutograd's copy_ into an input, an
    in-place op on one): index -> placeholder name."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        target = node.args[0] if node.args else None
        if node.target._schema.is_mutable and isinstance(target, torch.fx.Node) and target in placeholders:
            out[placeholders.index(target)] = target.name
    return out


_aten = torch.ops.aten
# Ops that wait for the device or read its values on the host: a capture
# fails at them (besides any op tagged cudagraph_unsafe).
_SYNC_OPS = frozenset({_aten._local_scalar_dense.default, _aten.nonzero.default, _aten.masked_select.default,
                       _aten.unique_consecutive.default, _aten._unique2.default, _aten.equal.default,
                       _aten.is_nonzero.default, _aten._assert_async.msg})


_UNSAFE_TAG = getattr(torch.Tag, "cudagraph_unsafe", None)


def unsafe_op(gm: torch.fx.GraphModule) -> str | None:
    """The first op of the graph a CUDA graph cannot capture, or None."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            if target in _SYNC_OPS or (_UNSAFE_TAG is not None and _UNSAFE_TAG in target.tags):
                return f"{node.name} ({target})"
    return None


def static_reason(devices: set[torch.device], kernel_devices: Sequence[str], static_indices: Sequence[int],
                  mutated: dict[int, str], unsafe: str | None = None) -> str | None:
    """Why this graph can never be captured, or None. Decided at compile time
    from the graph's values and kernels."""
    cuda = {d for d in devices if d.type == "cuda"}
    if not cuda:
        return "the graph runs on the CPU (CUDA graphs replay CUDA work only)"
    if "cpu" in kernel_devices or any(d.type == "cpu" for d in devices):
        return "the graph has CPU tensors: a CPU value would be frozen into the graph at capture"
    if len(devices) > 1:
        return f"the graph uses several devices ({', '.join(sorted(str(d) for d in devices))})"
    for i, name in sorted(mutated.items()):
        if i not in static_indices:
            return (f"the graph mutates input {i} ({name}), which is not a parameter or buffer: "
                    "the copy captured in its place would take the write")
    if unsafe is not None:
        return f"the graph has an op a capture cannot hold (a sync point): {unsafe}"
    return None


@dataclasses.dataclass(frozen=True)
class AotFacts:
    """What AOTAutograd knows of a graph that CUDA graphs need: the inputs
    passed by address, and where a training forward's saved tensors start
    among its outputs. Read while AOTAutograd compiles the graph; a graph
    rebuilt from AOTAutograd's cache has no such context, so its cache entry
    keeps them (warm_start.GraphCode), as Inductor's entries keep theirs."""

    static_indices: tuple[int, ...]
    saved_start: int | None

    @staticmethod
    def of(kind: str, gm: torch.fx.GraphModule) -> "AotFacts":
        """Parameters and buffers of a forward or inference graph
        (AOTAutograd's static input indices); a backward's saved tensors
        (every input that is not a tangent or a seed)."""
        context = torch._guards.TracingContext.try_get()
        metadata = getattr(context, "fw_metadata", None) if context is not None else None
        if kind == "backward":
            placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
            tangent_like = ("tangents", "bwd_seed", "bwd_base_offset", "bwd_rng_state")
            static = [i for i, n in enumerate(placeholders) if not any(t in n.name for t in tangent_like)]
        else:
            static = list(getattr(metadata, "static_input_indices", None) or [])
        saved_start = getattr(metadata, "num_forward", None) if kind == "forward" else None
        return AotFacts(tuple(static), saved_start)


class CudaGraphFunction:
    """The callable AOTAutograd gets for one graph in a CUDA-graph mode: it
    records and replays `function` (a runtime.CompiledFunction), or runs it
    uncaptured where it cannot (see the module docstring)."""

    def __init__(self, function: Callable[[list], Any], *, kind: str, static_indices: Sequence[int],
                 scalar_args: Sequence[int], saved_start: int | None, dynamic: bool,
                 device: torch.device, record: Any, input_names: Sequence[str]) -> None:
        self._boxed_call = True
        self._input_names = list(input_names)
        self._function = function
        self._kind = kind
        self._static = set(static_indices)
        self._scalar_args = list(scalar_args)
        self._saved_start = saved_start
        self._dynamic = dynamic
        self._device = device
        self._message = GRAD_OVERWRITTEN if kind == "backward" else OVERWRITTEN
        self._name = getattr(function, "range_name", f"a cppinductor {kind} graph")
        self._recordings: dict[Any, Recording] = {}
        # Each key's place in call order (Recording.slot), kept across
        # recordings again, also when one cannot be made at once.
        self._slots: dict[Any, int] = {}
        self._warmed: set[Any] = set()
        self._rerecords = 0
        self._moved = 0  # calls in a row whose static inputs moved
        # A forward's saved tensors from its last replay: the recording's
        # cached outputs, and weak references to the others.
        self._saved_by: Recording | None = None
        self._saved: list[weakref.ref] = []
        # Recordings dropped (recorded again, or disabled) while outputs of
        # their replays were alive: kept so their memory stays theirs.
        self._kept: list[Recording] = []
        self._disabled: str | None = None
        self._state = _state(record)

    def disable(self, reason: str) -> None:
        self._disabled = reason
        for recording in self._recordings.values():
            self._drop(recording)
        self._recordings.clear()
        self._state.reason = reason
        perf_hints.warning("CUDA graph not used for a %s graph: %s", self._kind, reason)

    def _key(self, args: list) -> Any:
        """What selects a recording: the values of non-tensor arguments (a
        size, a scalar: baked into the captured launches), and with dynamic
        shapes the input sizes too."""
        if self._dynamic:
            return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        if self._scalar_args:
            return tuple(args[i] for i in self._scalar_args)
        return None

    def _uncaptured(self, args: list) -> Any:
        self._state.uncaptured += 1
        return self._function(args)

    def _warm_up(self, args: list) -> Any:
        """A key's first call, uncaptured on the capture stream: what must not
        happen inside a capture (the libraries' handles and plans, lazily
        loaded modules) happens now, so the recording needs no warm-up run of
        its own. Such a run would hold a backward's saved tensors to its end
        (they are needed for the capture), where the default mode frees each
        after its last read: the step that records would peak well above the
        default mode."""
        pool = pool_for(self._device)
        current = torch.cuda.current_stream(self._device)
        pool.stream.wait_stream(current)
        with torch.cuda.stream(pool.stream):
            outputs = self._uncaptured(args)
        current.wait_stream(pool.stream)
        for t in _tensors(outputs if isinstance(outputs, (list, tuple)) else [outputs]):
            if t.device == self._device:
                t.record_stream(current)  # made on the capture stream, used on the caller's
        return outputs

    def __call__(self, args: list) -> Any:
        if self._disabled is not None:
            return self._function(args)
        pool_for(self._device).epoch += 1  # what held the pool's outputs may have changed since its last call
        key = self._key(args)
        recording = self._recordings.get(key)
        if recording is None:
            if key not in self._warmed:
                self._warmed.add(key)
                return self._warm_up(args)
            if len(self._recordings) >= MAX_SHAPES:
                self.disable(f"more than {MAX_SHAPES} distinct input sizes or scalar arguments")
                return self._function(args)
            return self._record_and_replay(key, args)
        recording.scan(with_changed=True)  # the one scan of its outputs this call's checks and replay read
        if not recording.matches(args):
            for i in recording.moved_inputs(args):
                name = self._input_names[i]
                self._state.moved[name] = self._state.moved.get(name, 0) + 1
            return self._record_again_later(key, args, f"parameters or saved tensors moved to new addresses more "
                                                       f"than {MAX_RERECORDS} times")
        if self._saved_pending():
            perf_hints.info("a %s call ran outside its CUDA graph: the saved tensors of its previous call still "
                            "await their backward", self._kind)
            return self._uncaptured(args)
        if recording.stale:  # a backward needs memory it lent, or an earlier recording recorded again
            return self._record_again_later(key, args, f"recorded again more than {MAX_RERECORDS} times",
                                            now=True)
        if not recording.pool.clear_for(recording):
            self._state.blocked += 1
            perf_hints.info("a %s call ran outside its CUDA graph: memory its replay rewrites is still reachable "
                            "through a view of an earlier output or a gradient kept in .grad", self._kind)
            return self._record_again_later(key, args, f"views of outputs or gradients in .grad kept the graph's "
                                                       f"memory more than {MAX_RERECORDS} times")
        self._moved = 0
        return self._replay(recording, args)

    def _record_again_later(self, key: Any, args: list, give_up: str, now: bool = False) -> Any:
        """A call its recording cannot replay (static inputs moved, or memory
        it rewrites still reachable): uncaptured, and after RERECORD_AFTER
        such calls in a row recorded again (new memory for its outputs: the
        old recording keeps its own while anything reaches it), at most
        MAX_RERECORDS times."""
        self._moved += 1
        if self._moved < RERECORD_AFTER and not now:
            return self._uncaptured(args)
        if self._rerecords >= MAX_RERECORDS:
            self.disable(give_up)
            return self._function(args)
        self._rerecords += 1
        old = self._recordings.pop(key)
        old.pool.record_again_after(old)
        self._drop(old)
        return self._record_and_replay(key, args)

    def _drop(self, recording: Recording) -> None:
        """Forgets a recording. Freed, its outputs' memory would go back to the
        pool, and the next capture could write over tensors its replays
        returned that are still held (a forward's saved tensors awaiting their
        backward: FSDP2 moves parameters every step, so its graphs record
        again mid-step); so it is kept until those are gone."""
        self._kept = [r for r in self._kept if r.outputs_alive()]
        if recording.outputs_alive():
            self._kept.append(recording)

    def _saved_pending(self) -> bool:
        recording = self._saved_by
        return (any(ref() is not None for ref in self._saved)
                or (recording is not None and recording.held_outputs()))

    def _replay(self, recording: Recording, args: list) -> Any:
        self._state.replays += 1
        if _profiler._is_profiler_enabled:  # one range for the replay, named like the graph's
            with torch.profiler.record_function(f"{self._name} (CUDA graph replay)"):
                outputs = recording.replay(args)
        else:
            outputs = recording.replay(args)
        if self._saved_start is not None:  # the saved tensors in the graph's memory (not parameters)
            self._saved_by = recording
            self._saved = [weakref.ref(outputs[i]) for i in recording.uncached if i >= self._saved_start]
        return outputs

    def _record_and_replay(self, key: Any, args: list) -> Any:
        pool = pool_for(self._device)
        lender = pool.lent_memory_pending(pool.captures + 1)
        if lender is not None:  # a new capture may lay buffers over them: record when they are consumed
            lender.stale = True  # and that forward records again, so its memory is its own again
            perf_hints.info("a %s call ran outside its CUDA graph: saved tensors in memory a forward lent still "
                            "await their backward", self._kind)
            return self._uncaptured(args)
        try:
            recording = Recording(self._function, args, self._static, pool, self._message, self._kind,
                                  self._saved_start, self._name, self._slots.get(key))
        except MustNotRecord as e:
            perf_hints.info("a %s call ran outside its CUDA graph: %s", self._kind, e)
            return self._uncaptured(args)
        except Exception as e:  # a sync point or an uncapturable op: the capture itself failed
            self.disable(f"capture failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return self._function(args)
        self._recordings[key] = recording
        self._slots[key] = recording.slot
        self._state.recorded += 1
        self._state.copied = [self._input_names[i] for i in sorted(recording.copies)]
        self._state.borrowed = recording.borrowed
        log.debug("recorded a CUDA graph for a %s graph (key %s)", self._kind, key)
        return self._replay(recording, args)


class CudaGraphState:
    """What explain() reports about CUDA graphs for one compiled graph: used
    (graphs recorded, calls replayed, calls run uncaptured: warm-ups, moved
    static inputs, pending saved tensors) or why not."""

    def __init__(self) -> None:
        self.reason: str | None = None  # set: not used, and why
        self.recorded = self.replays = self.uncaptured = 0
        self.blocked = 0  # calls uncaptured: a view of an output or a .grad reached memory a replay rewrites
        self.moved: dict[str, int] = {}  # static input name -> calls its new address ran uncaptured
        self.copied: list[str] = []  # the inputs the last recording copies in at each replay
        self.borrowed = 0  # saved tensors whose memory the last recording's capture took over

    def __str__(self) -> str:
        if self.reason is not None:
            return f"not used: {self.reason}{self._moved_text()}"
        if not self.recorded:
            return f"pending: records on the second call ({self.uncaptured} uncaptured so far)"
        blocked = f" ({self.blocked} kept from replaying by views of outputs or .grad)" if self.blocked else ""
        return (f"used: {self.recorded} graph(s) recorded, {self.replays} replays, "
                f"{self.uncaptured} calls uncaptured{blocked}{self._moved_text()}; {self._copied_text()}")

    def _copied_text(self) -> str:
        """The inputs copied per call: a parameter among them is a lost static input."""
        names = self.copied[:3] + (["..."] if len(self.copied) > 3 else [])
        borrowed = f"; the memory of {self.borrowed} saved tensor(s) reused after their last read" \
            if self.borrowed else ""
        return f"{len(self.copied)} input(s) copied in per call" + (f" ({', '.join(names)})" if names else "") + \
            borrowed

    def _moved_text(self) -> str:
        """The static inputs that moved most often: what to keep in place."""
        worst = sorted(self.moved.items(), key=lambda item: -item[1])[:3]
        return f" (static inputs that moved: {', '.join(f'{n} x{c}' for n, c in worst)})" if worst else ""


def _state(record: Any) -> CudaGraphState:
    """The record's CudaGraphState (made on first use); a stand-in without a record."""
    if record is None:
        return CudaGraphState()
    if not isinstance(record.cudagraphs, CudaGraphState):
        record.cudagraphs = CudaGraphState()
    return record.cudagraphs


def wrap(function: Callable[[list], Any], *, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str,
         kernel_devices: Sequence[str], dynamic: bool, record: Any, facts: AotFacts) -> Callable[[list], Any]:
    """`function` with CUDA graphs where the graph allows them, else itself
    (the reason in the record and under cppinductor.perf_hints; a graph
    wholly on the CPU has nothing to capture and says so at info level)."""
    devices = graph_devices(gm, example_inputs)
    static = list(facts.static_indices)
    mutated = mutated_inputs(gm)
    reason = static_reason(devices, kernel_devices, static, mutated, unsafe_op(gm))
    if reason is not None:
        _state(record).reason = reason
        on_cpu_only = all(d.type == "cpu" for d in devices)
        perf_hints.log(logging.INFO if on_cpu_only else logging.WARNING, "CUDA graph not used for a %s graph: %s",
                       kind, reason)
        return function
    (device,) = devices
    scalar_args = [i for i, a in enumerate(example_inputs) if not isinstance(a, torch.Tensor)]
    return CudaGraphFunction(function, kind=kind, static_indices=static,
                             scalar_args=scalar_args, saved_start=facts.saved_start, dynamic=dynamic,
                             device=device, record=record,
                             input_names=[n.name for n in gm.graph.nodes if n.op == "placeholder"])
