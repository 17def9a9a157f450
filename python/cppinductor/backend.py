"""The torch.compile backend "cppinductor".

Registered through the `torch_dynamo_backends` entry point, so
`torch.compile(model, backend="cppinductor")` works without importing us.
Dynamo hands us a torch-level FX graph; AOTAutograd traces forward, backward
and inference graphs in ATen, and each goes through `compile_fx_graph`:
export to plain data -> the C++ pipeline -> a CompiledFunction.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.fx

from . import _C, debug
from .decompositions import decomposition_table
from .export import export_graph
from .options import Options, parse_options
from .runtime import CompiledFunction, configure_cpu_runtime, configure_cuda_runtime

log = logging.getLogger("cppinductor.backend")


def _eager(gm: torch.fx.GraphModule) -> Callable[[list], Any]:
    def run(args: list) -> Any:
        values = list(args)
        args.clear()
        return gm(*values)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def compile_fx_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Options, kind: str
) -> Callable[[list], Any]:
    """Compiles one ATen graph (kind: forward, backward or inference)."""
    record = debug.GraphRecord(kind=kind, gm=gm)
    dump_dir = debug.graph_dump_dir(options, record)
    try:
        start = time.perf_counter()
        desc = export_graph(gm)
        record.python_times["export"] = time.perf_counter() - start
        configure_cpu_runtime()
        configure_cuda_runtime()
        compiled = _C.compile_graph(desc, options.for_core(dump_dir))
    except (_C.UnsupportedError, _C.CompilerError) as e:
        if options.fallback_error:
            raise
        reason = str(e)
        warnings.warn(f"cppinductor: a {kind} graph runs in eager PyTorch: {reason}", stacklevel=2)
        log.warning("graph falls back to eager: %s", reason)
        record.graph_fallback = reason
        debug.finish(record, None, dump_dir)
        return _eager(gm)
    debug.finish(record, compiled, dump_dir)
    return CompiledFunction(gm, compiled)


def cppinductor(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """The Dynamo backend entry point."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    opts = parse_options(mode, options)
    compilers = {
        f"{kind}_compiler": functools.partial(_compile_kind, options=opts, kind=kind)
        for kind in ("fw", "bw", "inference")
    }
    return aot_autograd(
        **compilers,
        decompositions=decomposition_table(),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


_KIND_NAMES = {"fw": "forward", "bw": "backward", "inference": "inference"}


def _compile_kind(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, options: Options, kind: str):
    return compile_fx_graph(gm, example_inputs, options, _KIND_NAMES[kind])
