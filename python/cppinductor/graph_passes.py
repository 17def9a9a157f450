"""Rewrites of the ATen graph before it is exported to the C++ core.

`unfuse_addmm_bias`, the pass Inductor runs on GPUs as
`unfuse_bias_add_to_pointwise`: an `addmm(bias, a, b)` whose every use is
pointwise becomes `mm(a, b) + bias`, so the bias add fuses into the kernel
that reads the product anyway. On CUDA cuBLAS's plain GEMM picks the tiles
Inductor's does (its bias epilogue picked slower ones for two of the
transformer's GEMMs). On the CPU it is off by default, as in Inductor: MKL's
addmm there (the bias copied into the output, then the GEMM with beta=1) ran
as fast or faster than mm followed by our kernel's add in every model and
workload measured (docs/benchmark-notes.md, stop 60).

Half-precision addmm stays whole: its bias is added to the float accumulator
before the one rounding, where mm + add would round twice.

`peel_convolution_bias` makes a CUDA convolution's bias an add that fuses
into the next kernel (Inductor's convolution lowering does so on GPUs).

`channels_last_convolutions` runs a conv net's activations in
the channels-last layout cuDNN's convolutions are fastest in. On the CPU it
does so where the model already hands a convolution a channels-last input
(ConvNeXt permutes to NHWC around its layer norms and linears): there oneDNN
would otherwise reorder each such convolution's weight on every call, and
the NCHW convolutions between read the model's NHWC values through
transposes. A conv net traced all NCHW (ResNet) stays so: channels-last
measured slower there (docs/benchmark-notes.md, stops 50 and 65).

`dense_attention_masks` runs on Dynamo's graph, before AOTAutograd: an
attention mask whose last dim is broadcast (stride 0) rules out every fused
CUDA attention kernel (their checks want stride 1 there), so
`scaled_dot_product_attention` would decompose to float32 math. Under
torch.compile on torch 2.11, transformers builds such a mask for encoders
where eager passes none (Dynamo reads `torch.compiler.is_exporting()` as
True there), so BERT and ViT ran slower compiled than in eager
(docs/benchmark-notes.md, stop 53). The mask becomes the smallest dense
tensor that broadcasts to it.

`fold_constant_device_copies` makes a value computed from no input and moved
to another device (SDPA's boolean-mask conversion for cuDNN wraps -inf in a
host scalar tensor and copies it to the GPU, once per attention) a `full` on
that device, as Inductor's `constant_fold_uniform_value` does: ATen's copy
from pageable host memory synchronises the stream, so each such copy left to
eager made the host wait for the GPU (Mistral: six waits per call).

`row_major_pointwise` runs on a training step's joint graph, before it is
partitioned: a forward pointwise op that would inherit a transposed operand's
layout while another operand runs along the last dim reads that operand
through a contiguous clone, so the values after it (a residual stream the
backward reads too) are row-major.

`reinplace_input_scatters` writes an update of a graph input straight into
it: AOTAutograd hands an in-place `cache.index_copy_(...)` over as a
functional `index_put(cache, ...)` into a new tensor plus a `copy_` of it back
into the input, two copies of the whole input per call for a few stored
elements (Inductor's `reinplace_inplaceable_ops`).
"""

from __future__ import annotations

import logging
import operator
from typing import Any, Callable

import torch
import torch.fx

from .partition import from_tangents

log = logging.getLogger("cppinductor.graph_passes")

aten = torch.ops.aten

# Exact in float32/float64: mm rounds the product once, and so does the bias add.
_UNFUSED_DTYPES = (torch.float32, torch.float64)


def _pointwise_use(node: torch.fx.Node) -> bool:
    """True when `node` is pointwise, or a view (or getitem) all of whose uses are."""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem or (isinstance(target, torch._ops.OpOverload) and target.is_view):
        return all(_pointwise_use(user) for user in node.users)
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags


def _worth_unfusing(node: torch.fx.Node) -> bool:
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return False
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype not in _UNFUSED_DTYPES:
        return False
    return bool(node.users) and all(_pointwise_use(user) for user in node.users)


def _rewrite_each(gm: torch.fx.GraphModule, target: Any,
                  rewrite: Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None]) -> int:
    """Replaces each call of `target` by what `rewrite` builds before it (None:
    left as it is); returns how many it replaced."""
    graph = gm.graph
    rewritten = 0
    for node in list(graph.find_nodes(op="call_function", target=target)):
        with graph.inserting_before(node):
            replacement = rewrite(graph, node)
        if replacement is None:
            continue
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def wants_unfused_addmm(gm: torch.fx.GraphModule, choice: bool | str, cuda: bool | None = None) -> bool:
    """Option unfuse_addmm_bias for a graph: True, False, or "auto" (graphs
    whose addmms run on CUDA; `cuda` None: as their values say)."""
    if choice == "auto":
        return any(n.meta["val"].is_cuda if cuda is None else cuda
                   for n in gm.graph.find_nodes(op="call_function", target=aten.addmm.default)
                   if isinstance(n.meta.get("val"), torch.Tensor))
    return choice is True


def unfuse_addmm_bias(gm: torch.fx.GraphModule) -> int:
    """Rewrites each addmm whose uses are all pointwise as mm + bias add.

    Returns how many it rewrote. The new nodes carry the addmm's metadata (its
    value and stack trace), so provenance comments still name the user's line.
    """

    def rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
        if not _worth_unfusing(node):
            return None
        bias, a, b = node.args
        # Named after the addmm, so kernel names and plans still say where they came from.
        product = graph.create_node("call_function", aten.mm.default, (a, b), name=f"{node.name}_mm")
        total = graph.create_node("call_function", aten.add.Tensor, (product, bias), name=f"{node.name}_bias")
        for new in (product, total):
            new.meta.update(node.meta)
        return total

    return _rewrite_each(gm, aten.addmm.default, rewrite)


def peel_convolution_bias(gm: torch.fx.GraphModule) -> int:
    """Rewrites each CUDA convolution with a bias as one without it plus an
    add of the bias, broadcast over the spatial dims (Inductor does the same).

    cuDNN has no fused bias for most of its kernels: ATen adds it in a second
    pass over the output (an elementwise kernel per convolution, a noticeable
    part of ConvNeXt-base's time), where the add fuses into the kernel that
    reads the convolution anyway (ConvNeXt's layer norm). The result is the one
    ATen computes there: the output rounded, then the bias added. Returns how
    many it rewrote.
    """

    def rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
        value = node.meta.get("val")
        bias = node.args[2]
        if bias is None or not isinstance(value, torch.Tensor) or value.device.type != "cuda" or value.shape[1] == 0:
            return None
        args = list(node.args)
        args[2] = None
        conv = graph.create_node("call_function", aten.convolution.default, tuple(args), name=f"{node.name}_nobias")
        broadcast = [-1] + [1] * (value.dim() - 2)
        shaped = graph.create_node("call_function", aten.view.default, (bias, broadcast), name=f"{node.name}_bias_view")
        total = graph.create_node("call_function", aten.add.Tensor, (conv, shaped), name=f"{node.name}_bias")
        conv.meta.update(node.meta)
        total.meta.update(node.meta)
        shaped.meta.update({k: v for k, v in node.meta.items() if k != "val"})
        bias_value = bias.meta.get("val") if isinstance(bias, torch.fx.Node) else None
        if isinstance(bias_value, torch.Tensor):
            shaped.meta["val"] = bias_value.view(broadcast)
        return total

    return _rewrite_each(gm, aten.convolution.default, rewrite)


# --- channels-last convolutions ---------------------------------------------------------------------
#
# cuDNN runs 2-d convolutions in NHWC. Given NCHW tensors it transposes the
# input and weight to NHWC and the output back, around every convolution
# (ResNet-50 on the H200: docs/benchmark-notes.md, Models). Inductor's layout
# optimisation avoids it by running the net channels-last;
# so do we: the first convolution's input (and each weight) is converted
# once, every value computed from a channels-last value then comes out
# channels-last as eager's ops would make it (values are re-propagated
# through the graph), and graph outputs keep the strides they were traced
# with.


def _conv2d(node: torch.fx.Node) -> bool:
    if node.target is not aten.convolution.default or node.args[6]:  # transposed
        return False
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return isinstance(x, torch.Tensor) and x.dim() == 4


def _channels_last(t: torch.Tensor) -> bool:
    return t.is_contiguous(memory_format=torch.channels_last)


def _static(values: list) -> bool:
    return all(isinstance(v, torch.Tensor) and all(type(s) is int for s in (*v.shape, *v.stride()))
               or type(v) in (int, float, bool) for v in values)


def _conv2ds(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.find_nodes(op="call_function", target=aten.convolution.default) if _conv2d(n)]


def _traced_channels_last(conv: torch.fx.Node) -> bool:
    """Whether the model itself hands `conv` a channels-last input (one that
    is not also NCHW-contiguous): it permutes its activations to NHWC."""
    x = conv.args[0].meta["val"]
    return _channels_last(x) and not x.is_contiguous()


def wants_channels_last(gm: torch.fx.GraphModule, choice: bool | str, cuda: bool | None = None) -> bool:
    """Option layout_optimization for an inference graph: True, False, or
    "auto": graphs with CUDA 2-d convolutions (`cuda` None: as the
    convolutions' inputs say), and CPU graphs where the model already hands
    one of its convolutions a channels-last input."""
    if choice == "auto":
        convs = _conv2ds(gm)
        if any(n.args[0].meta["val"].is_cuda if cuda is None else cuda for n in convs):
            return True
        return any(_traced_channels_last(n) for n in convs)
    return choice is True


def channels_last_convolutions(gm: torch.fx.GraphModule) -> int:
    """Runs the graph's 2-d convolutions on channels-last tensors.

    Returns how many convolutions it changed (0: the graph is unchanged).
    Graphs with symbolic shapes, and graphs fake tensors cannot run again,
    are left as traced."""
    graph = gm.graph
    convs = _conv2ds(gm)
    inputs = [n.meta.get("val") for n in graph.find_nodes(op="placeholder")]
    if not convs or not _static(inputs):
        return 0
    fake_mode = next((v.fake_mode for v in inputs if hasattr(v, "fake_mode")), None)
    if fake_mode is None:
        return 0
    output = graph.output_node()
    traced = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in output.args[0]]
    values = {n: n.meta.get("val") for n in graph.nodes}
    inserted = []
    for conv in convs:
        for operand in conv.args[:2]:
            with graph.inserting_before(conv):
                clone = graph.call_function(aten.clone.default, (operand,), {"memory_format": torch.channels_last})
            clone.meta["stack_trace"] = conv.meta.get("stack_trace")
            conv.replace_input_with(operand, clone)
            inserted.append(clone)
    if not _propagate_or_undo(gm, inserted, values, inputs, fake_mode, "channels-last layout"):
        return 0
    for clone in inserted:  # already channels-last: no copy
        if _channels_last(clone.args[0].meta["val"]):
            clone.replace_all_uses_with(clone.args[0])
            graph.erase_node(clone)
    _outputs_as_traced(graph, traced)
    graph.lint()
    gm.recompile()
    return len(convs)


def _propagate_or_undo(gm: torch.fx.GraphModule, inserted: list[torch.fx.Node], values: dict, inputs: list,
                       fake_mode: Any, what: str) -> bool:
    """Runs the graph's fake tensors again after `inserted` (layout clones)
    went in, so every value carries the strides it now has. If an op cannot
    run on fake tensors, the graph is undone (`_undo`) and this returns False."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    try:
        FakeTensorProp(gm, fake_mode).propagate_dont_convert_inputs(*inputs)
    except Exception as e:  # noqa: BLE001 - an op fake tensors cannot run: the graph stays as it was
        _undo(gm.graph, inserted, values)
        log.warning("%s not applied: %s: %s", what, type(e).__name__, e)
        return False
    return True


def _undo(graph: torch.fx.Graph, inserted: list[torch.fx.Node], values: dict) -> None:
    """Takes the clones `inserted` out again and gives each value its traced `values`."""
    for clone in inserted:
        clone.replace_all_uses_with(clone.args[0])
        graph.erase_node(clone)
    for node, value in values.items():
        node.meta["val"] = value


def _outputs_as_traced(graph: torch.fx.Graph, traced: list) -> None:
    """Copies each output whose strides changed back into the strides it was
    traced with (`traced`: the output values before the pass)."""
    output = graph.output_node()
    outs = list(output.args[0])
    for i, (value, before) in enumerate(zip(outs, traced)):
        if not isinstance(value, torch.fx.Node) or not isinstance(before, torch.Tensor):
            continue
        now = value.meta["val"]
        if now.stride() == before.stride():
            continue
        with graph.inserting_before(output):
            empty = graph.call_function(aten.new_empty_strided.default, (value, list(before.shape),
                                                                           list(before.stride())))
            copy = graph.call_function(aten.copy.default, (empty, value))
        empty.meta["val"] = copy.meta["val"] = before
        outs[i] = copy
    output.args = (type(output.args[0])(outs),) + tuple(output.args[1:])


# --- pointwise results row-major in training graphs ---------------------------------------------

def _last_varying_stride(t: torch.Tensor) -> int | None:
    """The stride of `t`'s last dim of more than one element (None: none)."""
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        if size != 1:
            return stride
    return None


def _transposed(t: torch.Tensor) -> bool:
    """A dense tensor (its elements a permutation of one contiguous block),
    whose last dim is not innermost. Not a channels-last one: a user's
    channels-last conv net keeps the layout its convolutions run fastest in."""
    if t.dim() < 2 or _last_varying_stride(t) in (None, 1) or (t.dim() == 4 and _channels_last(t)) \
            or (t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d)):
        return False
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _varies_along_last(t: Any, last: int) -> bool:
    """Whether operand `t` runs contiguously along the result's last dim (of `last` elements)."""
    return isinstance(t, torch.Tensor) and t.dim() >= 1 and last > 1 and t.shape[-1] == last and t.stride(-1) == 1


def _layouts(value: Any) -> list:
    """Shapes and strides of the tensors in a node's value."""
    leaves = value if isinstance(value, (tuple, list)) else [value]
    return [(tuple(t.shape), t.stride()) for t in leaves if isinstance(t, torch.Tensor)]


def _run_again(node: torch.fx.Node, fake_mode: Any) -> bool:
    """Recomputes a call's fake value from its operands'; whether a layout changed."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta["val"])
    with fake_mode:
        value = node.target(*args, **kwargs)
    changed = _layouts(value) != _layouts(node.meta.get("val"))
    node.meta["val"] = value
    return changed


def _transposed_operands(node: torch.fx.Node, backward: set[torch.fx.Node]) -> list[torch.fx.Node]:
    """A forward pointwise op's operands to read through contiguous clones
    (see row_major_pointwise); empty for any other node."""
    out = node.meta.get("val")
    if node in backward or not isinstance(node.target, torch._ops.OpOverload) \
            or torch.Tag.pointwise not in node.target.tags or not isinstance(out, torch.Tensor) \
            or not _transposed(out):
        return []
    operands = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    if not any(_varies_along_last(a.meta["val"], out.shape[-1]) for a in operands):
        return []
    return [a for a in operands if a.meta["val"].shape == out.shape and _transposed(a.meta["val"])]


def row_major_pointwise(gm: torch.fx.GraphModule) -> int:
    """In a joint forward-backward graph: a forward pointwise op whose result
    would inherit a transposed operand's layout while another operand runs
    along the last dim (Whisper's `conv(x).permute(0, 2, 1) + positions`:
    aten's add keeps the first operand's strides, and so does every residual
    add after it) reads that operand through a contiguous clone, so it and
    the values after it are row-major.

    Inference graphs get this from lowering (row_major_results in
    lowering/ops/context.cpp chooses intermediates' layouts); a training
    graph saves those values for its backward, outputs whose strides the
    forward cannot choose alone. Here, before partitioning, each value the
    change reaches gets its fake tensor computed again in graph order, so
    forward and backward both see the new strides. Fusion puts the clone
    into the op that reads it, so no copy is added. Outputs keep their
    traced strides. Returns how many operands it clones (0: the graph is
    unchanged, also when an op cannot run on fake tensors)."""
    graph = gm.graph
    inputs = [n.meta.get("val") for n in graph.find_nodes(op="placeholder")]
    fake_mode = next((v.fake_mode for v in inputs if hasattr(v, "fake_mode")), None)
    if not _static(inputs) or fake_mode is None:
        return 0
    backward = from_tangents(graph)
    traced = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in graph.output_node().args[0]]
    values = {n: n.meta.get("val") for n in graph.nodes}
    inserted: list[torch.fx.Node] = []
    changed: set[torch.fx.Node] = set()
    try:
        for node in list(graph.nodes):
            if node.op != "call_function":
                continue
            if any(a in changed for a in node.all_input_nodes) and _run_again(node, fake_mode):
                changed.add(node)
            operands = _transposed_operands(node, backward)
            for operand in operands:
                with graph.inserting_before(node):
                    clone = graph.call_function(aten.clone.default, (operand,),
                                                {"memory_format": torch.contiguous_format})
                clone.meta["stack_trace"] = node.meta.get("stack_trace")
                _run_again(clone, fake_mode)
                node.replace_input_with(operand, clone)
                inserted.append(clone)
            if operands and _run_again(node, fake_mode):
                changed.add(node)
    except Exception as e:  # noqa: BLE001 - an op fake tensors cannot run: the graph stays as it was
        _undo(graph, inserted, values)
        log.warning("row-major pointwise results not applied: %s: %s", type(e).__name__, e)
        return 0
    if not inserted:
        return 0
    _outputs_as_traced(graph, traced)
    graph.lint()
    gm.recompile()
    log.debug("%d transposed operands of pointwise ops read through contiguous clones", len(inserted))
    return len(inserted)


# --- scatters into graph inputs, stored in place ------------------------------------------------------

# Functional scatters into a copy of their first argument, and the in-place
# op that stores into it. Not accumulating ones: the value of the in-place
# node may be recomputed by ATen (an alias), which must not add twice.
_INPLACE_SCATTERS = {aten.index_put.default: aten.index_put_.default,
                     aten._unsafe_index_put.default: aten.index_put_.default}


def _accumulates(node: torch.fx.Node) -> bool:
    return bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False))


def _why_not_in_place(x: torch.fx.Node, update: torch.fx.Node, copy: torch.fx.Node) -> str | None:
    """Why `copy_(x, update)` with update = index_put(x, ...) cannot become
    index_put_(x, ...), or None."""
    if _accumulates(update):
        return "the scatter accumulates (its in-place value may be recomputed, which would add twice)"
    others = [u.name for u in x.users if u is not update and u is not copy]
    if others:
        return f"{', '.join(sorted(others))} also read{'s' if len(others) == 1 else ''} its old value"
    before, after = x.meta.get("val"), update.meta.get("val")
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return "its values are not known"
    if (before.shape, before.stride(), before.dtype, before.storage_offset()) != \
            (after.shape, after.stride(), after.dtype, after.storage_offset()):
        return "the update's layout is not the input's"
    return None


def reinplace_input_scatters(gm: torch.fx.GraphModule, refused: list[str] | None = None) -> int:
    """`copy_(x, index_put(x, ...))` on a graph input x read by nothing else
    becomes `index_put_(x, ...)`, its value taking the copy_'s uses.

    Nothing else may read x: a reader of its old value could run after the
    in-place store. The scatter's result must have x's layout, so the readers
    of the result see x as they saw the copy. Returns how many it rewrote;
    appends to `refused` why each other such update stays a copy."""
    changed = 0
    for copy in list(gm.graph.find_nodes(op="call_function", target=aten.copy_.default)):
        x, update = copy.args[0], copy.args[1]
        if not isinstance(x, torch.fx.Node) or x.op != "placeholder" or not isinstance(update, torch.fx.Node) \
                or copy.kwargs:
            continue
        if update.target not in _INPLACE_SCATTERS or update.args[0] is not x:
            continue
        why = _why_not_in_place(x, update, copy)
        if why is not None:
            if refused is not None:
                refused.append(f"{update.name} into input {x.name} copies the whole input and back: {why}")
            continue
        update.target = _INPLACE_SCATTERS[update.target]
        copy.replace_all_uses_with(update)
        gm.graph.erase_node(copy)
        changed += 1
    if changed:
        gm.graph.lint()
        gm.recompile()
        log.debug("%d scatters into graph inputs now store in place", changed)
    return changed


_ATTENTION = (torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)


def _known(x: Any, value: int) -> bool:
    """Whether `x` is the plain int `value` (a symbolic size is not)."""
    return isinstance(x, int) and x == value


def dense_attention_masks(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",)) -> int:
    """In a Dynamo graph: each attention mask on `devices` whose last dim is
    broadcast (stride 0) becomes, before the call, the mask narrowed to one
    element along every other broadcast dim and made contiguous: the same
    values for every (batch, head, query, key), as a tensor the fused kernels
    accept. Returns how many masks it rewrote."""
    graph = gm.graph
    rewritten = 0
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target in _ATTENTION]:
        in_kwargs = "attn_mask" in node.kwargs
        mask = node.kwargs["attn_mask"] if in_kwargs else node.args[3] if len(node.args) > 3 else None
        value = mask.meta.get("example_value") if isinstance(mask, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.device.type not in devices or value.dim() == 0:
            continue
        # Only what is known without a guard (comparing symbolic sizes or
        # strides now would add guards after tracing): a broadcast last dim
        # has the plain stride 0; a dim narrows where its size is a plain int.
        if not _known(value.stride(-1), 0):
            continue
        with graph.inserting_before(node):
            dense = mask
            for dim in range(value.dim() - 1):
                size = value.size(dim)
                if _known(value.stride(dim), 0) and isinstance(size, int) and size > 1:
                    dense = graph.call_method("narrow", (dense, dim, 0, 1))
            dense = graph.call_method("contiguous", (dense,))
        if in_kwargs:
            node.kwargs = {**node.kwargs, "attn_mask": dense}
        else:
            node.args = node.args[:3] + (dense,) + node.args[4:]
        log.info("attention %s: its mask (strides %s) made dense", node.name, tuple(value.stride()))
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


# Device copies folded only for values of at most this many elements (the
# value is computed on the host at compile time to see that it is uniform).
_FOLD_MAX_ELEMENTS = 1 << 16


def _constant_ancestry(value: torch.fx.Node) -> list[torch.fx.Node] | None:
    """`value` and the nodes it is computed from, in graph order, where none
    is an input or a random op (None otherwise)."""
    seen: set[torch.fx.Node] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        if node.op not in ("call_function", "get_attr"):
            return None
        target = node.target
        if node.op == "call_function" and (not isinstance(target, torch._ops.OpOverload)
                                           or torch.Tag.nondeterministic_seeded in target.tags):
            return None
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return [n for n in value.graph.nodes if n in seen]


def _evaluate(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node]) -> Any:
    """The last of `nodes` computed on real tensors (they depend on nothing else)."""
    env: dict[torch.fx.Node, Any] = {}
    for node in nodes:
        if node.op == "get_attr":
            env[node] = operator.attrgetter(node.target)(gm)
            continue
        args = torch.fx.node.map_arg(node.args, env.__getitem__)
        kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
        env[node] = node.target(*args, **kwargs)
    return env[nodes[-1]]


def _small(value: Any) -> bool:
    """A tensor of a known size of at most _FOLD_MAX_ELEMENTS (cheap to compute now)."""
    return isinstance(value, torch.Tensor) and type(value.numel()) is int and value.numel() <= _FOLD_MAX_ELEMENTS


def _uniform_value(t: Any) -> torch.Tensor | None:
    """The one value (a 0-d tensor) every element of tensor `t` holds (None:
    not uniform)."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.numel() > _FOLD_MAX_ELEMENTS:
        return None
    flat = t.reshape(-1)
    first = flat[0]
    same = flat == first
    if t.is_floating_point():
        same |= flat.isnan() & first.isnan()
    return first if bool(same.all()) else None


def fold_constant_device_copies(gm: torch.fx.GraphModule) -> int:
    """Each `_to_copy` to another device of a uniform value computed from no
    input becomes `full` on that device. Returns how many it replaced."""
    def fold(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
        source, out = node.args[0], node.meta.get("val")
        before = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not isinstance(out, torch.Tensor) or not isinstance(before, torch.Tensor) or before.device == out.device:
            return None
        if out.numel() > 1 and not out.is_contiguous():
            return None
        nodes = _constant_ancestry(source)
        if nodes is None or not all(_small(n.meta.get("val")) for n in nodes if n.op == "call_function"):
            return None
        try:
            value = _uniform_value(_evaluate(gm, nodes))
        except Exception as e:  # noqa: BLE001 - an op that cannot run here: the copy stays
            log.debug("%s not folded: %s: %s", node.name, type(e).__name__, e)
            return None
        if value is None:
            return None
        value = value.to(out.dtype).item()
        full = graph.call_function(aten.full.default, (list(out.shape), value),
                                   {"dtype": out.dtype, "layout": torch.strided, "device": out.device,
                                    "pin_memory": False})
        full.meta = {**node.meta, "val": out}
        log.info("%s: a constant %s copied to %s is now made there", node.name, value, out.device)
        unused.extend(reversed(nodes))
        return full

    unused: list[torch.fx.Node] = []
    folded = _rewrite_each(gm, aten._to_copy.default, fold)
    erased: set[torch.fx.Node] = set()
    for node in unused:  # what computed the host values, where nothing else reads it
        if node not in erased and not node.users:
            gm.graph.erase_node(node)
            erased.add(node)
    if folded:
        gm.recompile()
    return folded

