"""Warm start: a second process skips AOTAutograd's tracing.

Dynamo still traces the model (its bytecode analysis is per process), but
AOTAutograd's cache (torch._functorch, "bundled" mode) stores what it built
around our compilers: the forward/backward/inference ATen graphs' runtime
wrappers and, for each graph, a `GraphCode` of ours. A `GraphCode` pickles
the ATen graph as plain data (`GraphRecipe`: nodes, targets by name, every
value's dtype/shape/strides/device); a later process rebuilds the graph and
runs our pipeline on it, whose kernels come from the kernel disk cache.

Option `warm_start`: "auto" (default) stores training graphs only. Computing
AOTAutograd's key costs ~1.3 s once per process (it imports Inductor's
codegen and hashes torch's sources): more than tracing an inference graph
saves, less than a training graph's joint trace and partition (T5's
training step, small config: 8.6 -> 6.0 s for the second process).

The same GraphCodes let torch's precompile save a whole compiled function:
`torch.compile(fn, fullgraph=True, backend="cppinductor").aot_compile(...)`,
`.save_compiled_function(path)`, then `torch.compiler.load_compiled_function`
in another process skips Dynamo too.

What is not cached, and why (each is a bypass AOTAutograd logs, then the
graph compiles as usual):
- graphs with symbolic shapes (their guards would have to be replayed);
- graphs holding values the recipe cannot name (higher-order ops, opaque
  objects);
- under the minifier (TORCHDYNAMO_REPRO_AFTER), which wraps the compilers.

The entries live in Inductor's cache directory (TORCHINDUCTOR_CACHE_DIR,
written atomically by torch), keyed by AOTAutograd on the Dynamo graph, the
inputs' metadata, torch's version and configs, plus our tag: a hash of this
package's Python sources (decompositions and partitioner shape the ATen
graphs) and of the options. A directory owned by another user or writable by
others turns warm start off with a log line; an entry that fails to load is
skipped by AOTAutograd (log line) and the graph compiles from scratch.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
from torch._inductor.output_code import OutputCode
from torch._prims_common import compute_required_storage_length

log = logging.getLogger("cppinductor.warm_start")

_PACKAGE = Path(__file__).resolve().parent


class NotCacheable(Exception):
    """Why a graph's compiled form is not stored (AOTAutograd logs it as a bypass)."""


@functools.lru_cache(maxsize=None)
def source_hash() -> str:
    """Hash of this package's Python sources (not the bench's)."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        if "bench" in path.relative_to(_PACKAGE).parts:
            continue
        h.update(str(path.relative_to(_PACKAGE)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def cache_tag(mode: str, values: dict[str, Any]) -> str:
    """What besides AOTAutograd's own key decides the ATen graphs we get."""
    settings = repr((mode, sorted(values.items()), torch.are_deterministic_algorithms_enabled()))
    return f"cppinductor:{source_hash()}:{hashlib.sha256(settings.encode()).hexdigest()[:16]}"


def cache_dir_problem() -> str | None:
    """Why AOTAutograd's cache directory must not be trusted, or None."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    path = cache_dir()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None  # torch creates it, private to us
    except OSError as e:
        return f"cannot inspect {path}: {e}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users"
    return None


# --- the ATen graph as plain data ---------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    """A node named in an argument."""

    name: str


@dataclass(frozen=True)
class _Op:
    """An OpOverload by name (OpOverloads do not pickle)."""

    namespace: str
    name: str
    overload: str

    def resolve(self) -> Any:
        return getattr(getattr(getattr(torch.ops, self.namespace), self.name), self.overload)


@dataclass(frozen=True)
class _TensorVal:
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    device: torch.device
    requires_grad: bool


_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _plain_target(target: Any) -> Any:
    if isinstance(target, torch._ops.OpOverload):
        namespace, _, rest = target.name().partition("::")
        name, _, overload = rest.partition(".")
        return _Op(namespace, name, overload or "default")
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return target
    raise NotCacheable(f"call target {target!r} cannot be stored")


def _map_leaves(a: Any, leaf: Callable[[Any], Any]) -> Any:
    """`a` with `leaf` applied inside lists, tuples, dicts and slices."""
    if isinstance(a, (list, tuple)):
        return type(a)(_map_leaves(x, leaf) for x in a)
    if isinstance(a, dict):
        return {k: _map_leaves(v, leaf) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_map_leaves(a.start, leaf), _map_leaves(a.stop, leaf), _map_leaves(a.step, leaf))
    return leaf(a)


def _plain_arg(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        return _Ref(a.name)
    if isinstance(a, _PLAIN):
        return a
    raise NotCacheable(f"argument of type {type(a).__name__} cannot be stored")


def _plain_val(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided:
            raise NotCacheable(f"a {v.layout} value cannot be stored")
        shape, stride, offset = tuple(v.shape), tuple(v.stride()), v.storage_offset()
        if not all(type(s) is int for s in (*shape, *stride, offset)):
            raise NotCacheable("symbolic shapes are not stored")
        return _TensorVal(v.dtype, shape, stride, offset, v.device, v.requires_grad)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise NotCacheable("symbolic shapes are not stored")
    if isinstance(v, _PLAIN):
        return v
    raise NotCacheable(f"value of type {type(v).__name__} cannot be stored")


def _fake_val(v: Any, mode: Any) -> Any:
    if not isinstance(v, _TensorVal):
        return v
    with mode:
        length = max(v.offset, compute_required_storage_length(v.shape, v.stride, v.offset))
        t = torch.empty(length, dtype=v.dtype, device=v.device).as_strided(v.shape, v.stride, v.offset)
    return t.requires_grad_() if v.requires_grad and t.is_floating_point() else t


@dataclass
class GraphRecipe:
    """An ATen graph with its nodes' values, as picklable data."""

    nodes: list[tuple[str, str, Any, Any, Any, Any, str | None]]  # name, op, target, args, kwargs, val, trace
    attributes: dict[str, Any]  # get_attr targets -> tensors

    @staticmethod
    def of(gm: torch.fx.GraphModule) -> "GraphRecipe":
        nodes, attributes = [], {}
        for node in gm.graph.nodes:
            if node.op == "call_function":
                target = _plain_target(node.target)
            elif node.op == "get_attr":
                target = node.target
                value = getattr(gm, node.target)
                if type(value) is not torch.Tensor or "." in node.target:
                    raise NotCacheable(f"attribute {node.target} ({type(value).__name__}) cannot be stored")
                attributes[node.target] = value
            elif node.op in ("placeholder", "output"):
                target = node.target
            else:
                raise NotCacheable(f"{node.op} nodes are not stored")
            nodes.append((node.name, node.op, target, _map_leaves(node.args, _plain_arg),
                          _map_leaves(node.kwargs, _plain_arg), _map_leaves(node.meta.get("val"), _plain_val),
                          node.meta.get("stack_trace")))
        return GraphRecipe(nodes, attributes)

    def build(self) -> torch.fx.GraphModule:
        """The graph again, its values FakeTensors of a fresh FakeTensorMode."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode()
        graph = torch.fx.Graph()
        made: dict[str, torch.fx.Node] = {}

        def real(a: Any) -> Any:
            return _map_leaves(a, lambda x: made[x.name] if isinstance(x, _Ref) else x)

        root = torch.nn.Module()
        for name, tensor in self.attributes.items():
            root.register_buffer(name, tensor)
        for name, op, target, args, kwargs, val, trace in self.nodes:
            if isinstance(target, _Op):
                target = target.resolve()
            node = graph.create_node(op, target, real(args), real(kwargs), name=name)
            if node.name != name:
                raise NotCacheable(f"node {name} came back as {node.name}")
            if val is not None:
                node.meta["val"] = _map_leaves(val, lambda v: _fake_val(v, mode))
            if trace is not None:
                node.meta["stack_trace"] = trace
            made[name] = node
        return torch.fx.GraphModule(root, graph)


# --- the compiled graph AOTAutograd stores --------------------------------------------------------


def recipe_of(gm: torch.fx.GraphModule) -> tuple[bytes | None, str | None]:
    """The pickled recipe of `gm`, or None and why it cannot be stored."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    try:
        with unset_fake_temporarily():
            return pickle.dumps(GraphRecipe.of(gm)), None
    except NotCacheable as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - storing is optional: the compile goes on uncached
        return None, f"the graph cannot be stored: {type(e).__name__}: {e}"


class GraphCode(OutputCode):
    """One compiled ATen graph as AOTAutograd's cache holds it: it runs the
    graph, pickles as the graph's recipe, and compiles the recipe again
    after loading (`compile_graph(gm, example_inputs, mode, values, kind,
    aot_facts)`; aot_facts: what AOTAutograd knew of the graph when it was
    first compiled, which a cache hit does not tell)."""

    def __init__(self, runs: Callable[[list], Any], recipe: bytes | None, not_cacheable: str | None, mode: str,
                 values: dict[str, Any], kind: str, compile_graph: Callable[..., Callable[[list], Any]],
                 aot_facts: Any) -> None:
        super().__init__()
        self._boxed_call = True
        self._runs: Callable[[list], Any] | None = runs
        self.recipe = recipe
        self.not_cacheable = not_cacheable
        self.mode, self.values, self.kind = mode, values, kind
        self.compile_graph = compile_graph  # a module-level function: pickles by name
        self.aot_facts = aot_facts

    def __call__(self, args: list) -> Any:
        return self._runs(args)

    def prepare_for_serialization(self) -> None:
        """On the copy AOTAutograd pickles."""
        if self.recipe is None:
            raise BypassAOTAutogradCache(f"cppinductor: {self.not_cacheable}")
        self._runs = None

    def post_compile(self, example_inputs: Sequence[Any], constants: Any, graph_kwargs: Any) -> None:
        """After loading: the graph goes through our pipeline again."""
        if self._runs is None:
            gm = pickle.loads(self.recipe).build()
            self._runs = self.compile_graph(gm, example_inputs, self.mode, self.values, self.kind, self.aot_facts)
            log.debug("warm start: a %s graph rebuilt from AOTAutograd's cache", self.kind)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass
