"""The memory side of CUDA graphs (cudagraphs.py decides when to record and
replay; this module owns what a recording is and whose memory is whose).

One pool per device holds every recording, in capture order. A Recording
captures one call, plans how its outputs come back after each replay
(handed out again while nobody holds them, rebuilt otherwise), and retires
what a replay would overwrite. The pool tracks the forward's saved tensors
that a backward's capture borrowed (memory the allocator sees as free while
the forward's replays fill it) and says when a replay or a capture must not
happen because of them. Liveness is read from use counts: a tensor's
(Python and C++ holders) and its storage's (views, a .grad over the same
memory).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

from . import _C


class DevicePool:
    """One device's memory pool, capture stream and recordings, in capture order."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.handle = torch.cuda.graph_pool_handle()
        with torch.cuda.device(device):
            self.stream = torch.cuda.Stream()
        self.recordings: list[weakref.ref] = []
        # The recordings whose outputs were handed out since they were last
        # retired, by capture number: the only ones a replay must check.
        self.handed_out: dict[int, weakref.ref] = {}
        # Counts calls and replays: a recording's scan of its cached outputs
        # is read again only in a later epoch (Recording.scan).
        self.epoch = 0
        self.captures = 0  # captures begun in this pool: a recording's place in time
        # A forward's saved tensors, by storage address: its capture's outputs
        # own their memory until the backward's capture borrows them.
        self.owners: dict[int, tuple[weakref.ref, int]] = {}
        # Addresses of saved tensors a backward's capture borrowed: memory the
        # allocator sees as free, that the forward's replays fill.
        self.lent: dict[int, weakref.ref] = {}
        # Forwards that lent memory and whose saved tensors may still await
        # their backward (added at each replay, dropped once seen released).
        self.pending_lenders: weakref.WeakSet = weakref.WeakSet()

    def add(self, recording: "Recording") -> None:
        self.recordings = [r for r in self.recordings if r() is not None]
        self.recordings.append(weakref.ref(recording))
        self.handed_out = {at: r for at, r in self.handed_out.items() if r() is not None}

    def borrow(self, args: list, static: set[int]) -> dict[int, torch.Tensor]:
        """For a backward's capture: the owning tensors of the saved inputs
        its forward's capture made, taken from that recording, so that the
        capture frees each after its last use and lays its own buffers out
        over it, as the default mode frees saved tensors during a backward
        (Inductor's pool checkpoints do the same). Raises MustNotRecord
        when a saved input lies in memory already lent: a capture could put
        a buffer there before the saved tensor's last read."""
        taken: dict[int, torch.Tensor] = {}
        for i in sorted(static):
            a = args[i]
            if not isinstance(a, torch.Tensor) or a.device != self.device:
                continue
            ptr = a.untyped_storage().data_ptr()
            lender = self.lent[ptr]() if ptr in self.lent else None
            if lender is not None:
                lender.stale = True  # its next call records again, over memory it owns
                raise MustNotRecord("its saved tensors' memory is lent to an earlier recording of it; "
                                     "the forward records again first")
            entry = self.owners.get(ptr)
            lender = entry[0]() if entry is not None else None
            if lender is None:
                continue
            owning = lender.static_outputs[entry[1]]
            if owning is None or (owning.data_ptr(), owning.shape, owning.stride()) != (a.data_ptr(), a.shape,
                                                                                       a.stride()):
                continue
            del self.owners[ptr]
            lender.static_outputs[entry[1]] = None
            lender.lent_at = self.captures + 1  # the borrowing capture's number
            self.lent[ptr] = weakref.ref(lender)
            self.pending_lenders.add(lender)
            taken[i] = owning
        return taken

    def clear_for(self, recording: "Recording") -> bool:
        """Before a replay of `recording`: retires the outputs it rewrites
        (its own and those of every recording made after it), or returns
        False, retiring nothing, when one of them is reachable through a
        tensor that cannot be retired (a view of an output, a gradient
        AccumulateGrad took into .grad): the replay must not run."""
        at = recording.captured_at
        later = [r for when, ref in self.handed_out.items() if when >= at and (r := ref()) is not None]
        if not all(r.only_retirable_holders() for r in later):
            return False
        if self.lent_memory_pending(recording.captured_at) is not None:
            return False
        for r in later:
            r.retire_outputs(recording)
        return True

    def record_again_after(self, recording: "Recording") -> None:
        """`recording` is recorded again, so its new capture comes last, while
        the recordings that ran after it will run after it again: each would
        rewrite the new capture's outputs (they may lie in its buffers)
        before they are read, as DDP's next piece rewrote its own input.
        Those record again too, each at its next call, so that capture order
        is call order again (Inductor's cudagraph trees start a new branch
        for the same reason). A recording keeps the place in that order of
        the one it replaced (its slot): the earlier pieces of a step,
        recorded again already, keep theirs."""
        for ref in self.recordings:
            r = ref()
            if r is not None and r.slot > recording.slot:
                r.stale = True

    def lent_memory_pending(self, captured_at: int) -> "Recording | None":
        """Why a recording captured at `captured_at` may not replay now: a
        forward that lent its saved tensors' memory before (the recording's
        buffers may lie there), whose saved tensors still await their
        backward. None when there is none."""
        if not self.pending_lenders:
            return None
        for lender in list(self.pending_lenders):
            if lender.lent_at < captured_at:
                if lender.held_outputs():
                    return lender
                self.pending_lenders.discard(lender)  # released: nothing can hold them before its next replay
        return None


class MustNotRecord(Exception):
    """A capture that must not happen now (the call runs uncaptured)."""


_pools: dict[torch.device, DevicePool] = {}


def pool_for(device: torch.device) -> DevicePool:
    """The pool of `device` (made on first use)."""
    if device not in _pools:
        _pools[device] = DevicePool(device)
    return _pools[device]


def _set_access_error(t: torch.Tensor, message: str) -> None:
    setter = getattr(torch._C, "_set_storage_access_error_msg", None)
    if setter is not None:
        setter(t, message)


class Recording:
    """One captured graph: its static inputs and outputs, and how to rebuild
    fresh output tensors over the pool's memory after each replay."""

    def __init__(self, run: Callable[[list], Any], args: list, static: set[int],
                 pool: DevicePool, message: str, kind: str, saved_start: int | None, name: str,
                 slot: int | None = None) -> None:
        self.pool = pool
        self.message = message
        self.name = name  # the graph's, for the error a retired output raises
        borrowed = pool.borrow(args, static) if kind == "backward" else {}
        pool.captures += 1
        self.captured_at = pool.captures
        self.saved_start = saved_start
        self.lent_at: int | None = None  # when a backward's capture borrowed this forward's saved tensors
        # Its place in call order: the first capture's number, kept by the
        # recordings that replace it (record_again_after).
        self.slot = self.captured_at if slot is None else slot
        # To be recorded again: its lent memory is needed by a new capture, or
        # a recording made before it was recorded again (record_again_after).
        self.stale = False
        # One C call checks every static input's address (parameters: dozens).
        self.addresses = {i: a.data_ptr() for i, a in enumerate(args) if i in static and isinstance(a, torch.Tensor)}
        self.matches = _C.make_pointer_check(list(self.addresses.items()))
        self.borrowed = len(borrowed)
        # Static inputs that keep their memory through the capture: an output
        # at one of their addresses aliases them. A borrowed saved tensor's
        # memory is the capture's to reuse: an output laid there is pool memory.
        kept = {i for i in static if i not in borrowed}
        copied = [i for i, a in enumerate(args) if i not in static and isinstance(a, torch.Tensor)]
        torch.cuda.synchronize(pool.device)
        pool.stream.wait_stream(torch.cuda.current_stream(pool.device))
        self.graph = torch.cuda.CUDAGraph()
        generator = torch.cuda.default_generators[pool.device.index or 0]
        before = generator.clone_state()
        try:
            # The libraries' workspaces are made inside the capture, in the
            # pool, and let go after it: one made outside (by the key's
            # warm-up, on this stream) would stay allocated for the process.
            _clear_library_workspaces()
            with torch.cuda.graph(self.graph, pool=pool.handle, stream=pool.stream,
                                  capture_error_mode="thread_local"):
                # The buffers non-static inputs are copied into, made in the
                # pool (allocating launches nothing): the capture frees each
                # after its last read and lays later buffers over it, as the
                # default mode frees an input it no longer needs.
                buffers = {i: _buffer_like(args[i]) for i in copied}
                layouts = {i: _layout(b) for i, b in buffers.items()}
                inputs = [borrowed.get(i, buffers.get(i, a)) for i, a in enumerate(args)]
                del borrowed, buffers  # the input list holds them now: each is freed at its last use
                outputs = run(inputs)
            _clear_library_workspaces()
        except Exception:
            # A capture that fails skips the end of torch's bookkeeping: the
            # generator would stay in capture mode (every later random draw
            # fails), and the allocator keeps the pool registered for the
            # capture (a later capture into it fails): later captures take a
            # pool of their own.
            generator.graphsafe_set_state(before)
            pool.handle = torch.cuda.graph_pool_handle()
            raise
        del inputs
        torch.cuda.current_stream(pool.device).wait_stream(pool.stream)
        # Each replay copies the inputs in at the buffers' addresses, in one
        # foreach copy: input i's part `index` (None: all of it) into the
        # buffer's. Static inputs are only addresses too (holding them would
        # keep a call's tensors, a backward's saved ones, alive for the
        # graph's life).
        self.copies = {i: _written_part(_tensor_over(layout, _storage_over(layout)))
                       for i, layout in layouts.items()}
        self.static_outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        self.tuple_output = isinstance(outputs, tuple)
        # How each output comes back: ("pool", spec) rebuilt over the graph's
        # memory after each replay, ("same", value) returned as captured
        # (non-tensors, and aliases of static inputs, which keep their
        # addresses). A saved input (a backward reads x) aliases the buffer x
        # is copied into: it is rewritten by the next replay like any output
        # (outputs the user sees never alias inputs: AOTAutograd makes those
        # views outside the graph).
        self.plan: list[tuple[str, Any]] = []
        static_storages = {a.untyped_storage().data_ptr() for i, a in enumerate(args)
                           if i in kept and isinstance(a, torch.Tensor)}
        for out in self.static_outputs:
            if not isinstance(out, torch.Tensor):
                self.plan.append(("same", out))
                continue
            storage = out.untyped_storage()
            if storage.data_ptr() in static_storages:
                self.plan.append(("same", out))
                continue
            self.plan.append(("pool", _layout(out)))
        # Outputs handed out again while nobody else holds them (Inductor's
        # cached tensor outputs): a replay then makes no tensor. Not a
        # training forward's user outputs (autograd hangs the step's graph,
        # and with it the saved tensors, on them), nor an output sharing its
        # storage with another (rebuilt together, as views of one storage).
        shared = {}
        for how, what in self.plan:
            if how == "pool":
                shared[what["data_ptr"]] = shared.get(what["data_ptr"], 0) + 1
        cache_from = saved_start or 0
        self.cacheable = [how == "pool" and i >= cache_from and shared[what["data_ptr"]] == 1
                          for i, (how, what) in enumerate(self.plan)]
        if saved_start is not None:  # a training forward: its saved tensors can be lent
            for i, (how, what) in enumerate(self.plan):
                if i >= saved_start and self.cacheable[i]:
                    pool.owners[what["data_ptr"]] = (weakref.ref(self), i)
                    pool.lent.pop(what["data_ptr"], None)  # owned again, by this capture's output
        # The cached outputs (None: not cached, or not yet made) and what
        # _C.scan_cached reads of each: its storage object's id (the object
        # kept beside it), its version and data pointer as the replay made them.
        self.cached: list[torch.Tensor | None] = [None] * len(self.plan)
        self.cached_storages: list[Any] = [None] * len(self.plan)
        self.cached_ids = [0] * len(self.plan)
        self.cached_versions = [0] * len(self.plan)
        self.cached_ptrs = [what["tensor_ptr"] if how == "pool" else 0 for how, what in self.plan]
        self.missing = [i for i, c in enumerate(self.cacheable) if c]  # cacheable, to be made at the next replay
        self.same = [(i, what) for i, (how, what) in enumerate(self.plan) if how == "same"]
        self.uncached = [i for i, (how, _) in enumerate(self.plan) if how == "pool" and not self.cacheable[i]]
        self._scanned_at = -1  # the pool epoch of self._scanned
        self._scanned_changed = False  # whether self._scanned has `changed`
        self._scanned: tuple[bool, list[int], list[int]] = (False, [], [])
        # A backward's cached outputs are lent: registered as torch's cached
        # tensors, so AccumulateGrad takes a gradient into .grad as it is
        # (Inductor's outputs are), instead of copying it out of the pool.
        self.lend = kind == "backward"
        weakref.finalize(self, _unregister, self.cached)
        # The other outputs returned by the last replay: each storage made
        # for them, with the tensors over it.
        self.live: list[tuple[Any, list[weakref.ref]]] = []
        self.ref = weakref.ref(self)
        pool.add(self)

    @property
    def handed_out(self) -> bool:
        """Whether outputs were returned since retire_outputs last ran (the
        pool keeps such recordings, by capture number)."""
        return self.captured_at in self.pool.handed_out

    def scan(self, with_changed: bool = False) -> tuple[bool, list[int], list[int]]:
        """(reached, held, changed) of the cached outputs (_C.scan_cached;
        `changed` only `with_changed`, for a recording about to replay):
        read once per pool epoch, since between a call's start and its
        replay only the pool's own checks run."""
        if self._scanned_at != self.pool.epoch or (with_changed and not self._scanned_changed):
            self._scanned = _C.scan_cached(self.cached, self.cached_ids, self.cached_versions, self.cached_ptrs,
                                           _storage_use_count_of_cdata, with_changed)
            self._scanned_at, self._scanned_changed = self.pool.epoch, with_changed
        return self._scanned

    def outputs_alive(self) -> bool:
        """Whether memory a replay returned is still reachable (through an
        output, a view of one, or a .grad)."""
        reached, held, _ = self.scan()
        return reached or bool(held) or not self._live_unreached(views_only=False)

    def held_outputs(self) -> bool:
        """Whether a cached output is reachable through anything but the
        cache. A training forward caches only its saved tensors (its user
        outputs carry the step's autograd graph), so for one this says
        whether they still await their backward."""
        reached, held, _ = self.scan()
        return reached or bool(held)

    def only_retirable_holders(self) -> bool:
        """Whether everything that reaches this recording's outputs can be
        retired: the output tensors themselves, not views of them or .grad
        tensors sharing their storage."""
        return not self.handed_out or (not self.scan()[0] and self._live_unreached(views_only=True))

    def _live_unreached(self, views_only: bool) -> bool:
        """Whether no tensor reaches the uncached outputs of the last replay;
        with views_only, whether none but the output tensors themselves do.
        A storage's use count counts the tensors over it and its Python
        object (ours)."""
        for storage, refs in self.live:
            alive = sum(ref() is not None for ref in refs)
            if _storage_use_count(storage) > 1 + (alive if views_only else 0):
                return False
        return True

    def moved_inputs(self, args: list) -> list[int]:
        """The static inputs not where this recording reads them."""
        return [i for i, ptr in self.addresses.items() if args[i].data_ptr() != ptr]

    def retire_outputs(self, cause: "Recording") -> None:
        """Makes every output still held raise when read: the replay of
        `cause` (this recording, or one made before it) rewrites its memory
        (clear_for checked that nothing else reaches it). A cached output
        nobody holds stays cached, to be handed out again; a held one leaves
        the cache with its error. Once checked, nothing can
        take hold of them before the next replay hands them out: the check
        runs once per replay, not once per replay of any recording made
        before this one."""
        if self.pool.handed_out.pop(self.captured_at, None) is None:
            return
        message = f"{self.message} (An output of {self.name}, rewritten by a replay of {cause.name}.)"
        for _, refs in self.live:
            for ref in refs:
                t = ref()
                if t is not None:
                    _set_access_error(t, message)
        self.live = []
        for i in self.scan()[1]:
            _set_access_error(self.cached[i], message)
            _unregister([self.cached[i]])
            self.cached[i] = None
            self.missing.append(i)

    def replay(self, args: list) -> Any:
        """Copies the inputs in and replays; the pool's clear_for(self) said yes."""
        # A cached output nobody holds (retire_outputs dropped the held ones)
        # is handed out again unless a holder now gone changed it in place
        # (values, sizes or strides: its version), swapped its data, or asked
        # it for gradients.
        remake = self.scan(with_changed=True)[2] + self.missing
        self.missing = []
        if self.copies:
            torch._foreach_copy_([buffer for buffer, _ in self.copies.values()],
                                 [args[i] if index is None else args[i][index]
                                  for i, (_, index) in self.copies.items()])
        args.clear()
        self.graph.replay()
        self.pool.handed_out[self.captured_at] = self.ref
        self.pool.epoch += 1
        if self.lent_at is not None:
            self.pool.pending_lenders.add(self)
        for i in remake:
            if self.lend and self.cached[i] is not None:
                _unregister([self.cached[i]])  # changed by a former holder: replaced
            what = self.plan[i][1]
            storage = _storage_over(what)
            t = _tensor_over(what, storage)
            self.cached[i], self.cached_storages[i], self.cached_ids[i] = t, storage, storage._cdata
            self.cached_versions[i] = t._version
            if self.lend:
                _register(t)
        outputs = self.cached.copy()
        for i, value in self.same:
            outputs[i] = value
        storages: dict[int, Any] = {}
        for i in self.uncached:  # new tensors at each replay, views of one storage where they share it
            what = self.plan[i][1]
            ptr = what["data_ptr"]
            if ptr not in storages:
                storages[ptr] = (_storage_over(what), [])
                self.live.append(storages[ptr])
            t = _tensor_over(what, storages[ptr][0])
            storages[ptr][1].append(weakref.ref(t))
            outputs[i] = t
        return tuple(outputs) if self.tuple_output else outputs


def _storage_over(layout: dict[str, Any]) -> Any:
    """A storage over a graph output's memory (the pool owns it)."""
    return torch._C._construct_storage_from_data_pointer(layout["data_ptr"], layout["device"], layout["nbytes"])


_storage_use_count_of_cdata = torch._C._storage_Use_Count


def _storage_use_count(storage: Any) -> int:
    return _storage_use_count_of_cdata(storage._cdata)


def _register(t: torch.Tensor) -> None:
    """Makes `t` one of torch's cached tensors (AccumulateGrad then discounts
    the cache's reference and takes it into .grad). torch._dynamo.reset()
    switches the registry off: on again at each use."""
    torch._C._set_cached_tensors_enabled(True)
    torch._C._add_cached_tensor(t)


def _unregister(tensors: list) -> None:
    """Takes lent tensors out of torch's registry (which holds them)."""
    torch._C._set_cached_tensors_enabled(True)
    for t in tensors:
        if t is not None and torch._C._is_cached_tensor(t):
            torch._C._remove_cached_tensor(t)


# A tensor over a storage with a layout, in one C call (CUDA builds of torch).
_construct_cuda_tensor = getattr(torch._C, "_construct_CUDA_Tensor_From_Storage_And_Metadata", None)


def _tensor_over(layout: dict[str, Any], storage: Any) -> torch.Tensor:
    """A new tensor over `storage` (a graph output's memory) with `layout`."""
    if _construct_cuda_tensor is not None:
        return _construct_cuda_tensor(layout, storage)
    return torch.empty(0, dtype=layout["dtype"], device=layout["device"]).set_(
        storage, layout["storage_offset"], layout["size"], layout["stride"])


def _layout(t: torch.Tensor) -> dict[str, Any]:
    """Where `t` lies in the pool and how to make a tensor over it again."""
    storage = t.untyped_storage()
    return {"data_ptr": storage.data_ptr(), "nbytes": storage.nbytes(), "size": t.shape, "stride": t.stride(),
            "dtype": t.dtype, "device": t.device, "storage_offset": t.storage_offset(), "tensor_ptr": t.data_ptr()}


def _buffer_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised buffer with t's layout (an expanded dim kept expanded)."""
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)


def _clear_library_workspaces() -> None:
    """Lets go of cuBLAS's and cuBLASLt's per-stream workspaces; the next
    matmul on a stream makes its own again (Inductor does this around its
    warm-ups and captures too)."""
    torch._C._cuda_clearCublasWorkspaces()


def _written_part(buffer: torch.Tensor) -> tuple[torch.Tensor, tuple[slice, ...] | None]:
    """The part of an input buffer a copy writes, and its index (None: the
    whole buffer): an expanded dim's single element once."""
    expanded = [d for d in range(buffer.dim()) if buffer.stride(d) == 0 and buffer.size(d) > 1]
    if not expanded:
        return buffer, None
    index = tuple(slice(0, 1) if d in expanded else slice(None) for d in range(buffer.dim()))
    return buffer[index], index
