"""The minifier: a runnable, minimal repro when a compiled graph crashes or
differs from eager.

Switched on by Dynamo's own settings, as for Inductor:

    TORCHDYNAMO_REPRO_AFTER=aot                  after AOTAutograd: the ATen graphs we compile
    TORCHDYNAMO_REPRO_LEVEL=2 (default) | 4      2: compile or run errors; 4: results too,
                                                 each call checked against eager

Torch's own after-AOT repro scripts run Inductor only, so this is ours: on a
failure, each ATen graph's inputs (the real ones of the failing call; random
ones of the traced sizes when the compile itself failed) go through torch's
FX minifier (torch._functorch.fx_minifier: drops the graph's tail, replaces
halves of it by inputs) with "our compile raises or differs from eager" as
the test, and the smallest graph that still fails is written, with its
inputs, to <torch._dynamo.config.debug_dir_root>/cppinductor_repro/graph_<id>/:

    module/           the minified ATen graph (GraphModule.to_folder)
    inputs.pt         its inputs
    repro.py          `python repro.py` compiles it with the same options, compares with
                      eager and exits 1 while the failure reproduces

A result that differs raises torch._dynamo.debug_utils.AccuracyError after
the dump, as Inductor's accuracy minifier does.
"""

from __future__ import annotations

import copy
import itertools
import logging
import os
import textwrap
from typing import Any, Callable, Sequence

import torch
import torch.fx

log = logging.getLogger("cppinductor.repro")

# Compiles one ATen graph (the backend's compile_fx_graph with its options
# bound): (gm, example inputs) -> boxed callable.
CompileOne = Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[[list], Any]]


def enabled() -> bool:
    return torch._dynamo.config.repro_after == "aot"


def _level() -> int:
    return int(torch._dynamo.config.repro_level)


def _real(value: Any) -> Any:
    """A real tensor like a (fake) example input: random, of its size, dtype and device."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = [int(s) for s in value.shape]
    if value.dtype.is_floating_point or value.dtype.is_complex:
        return torch.randn(shape, dtype=value.dtype, device=value.device)
    if value.dtype == torch.bool:
        return torch.rand(shape, device=value.device) > 0.5
    return torch.randint(0, 8, shape, dtype=value.dtype, device=value.device)


def _clone(args: Sequence[Any]) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _outputs(value: Any) -> list[torch.Tensor]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, torch.Tensor)]


def mismatch(expected: Any, actual: Any) -> str | None:
    """Why two results differ beyond the tolerances the tests use, or None."""
    expected, actual = _outputs(expected), _outputs(actual)
    if len(expected) != len(actual):
        return f"{len(actual)} tensor outputs, eager has {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        try:
            torch.testing.assert_close(a, e, equal_nan=True, rtol=1e-4, atol=1e-4, check_stride=False)
        except AssertionError as error:
            return f"output {i}: {str(error).splitlines()[0]}"
    return None


def retrace(gm: torch.nn.Module, args: Sequence[Any]) -> torch.fx.GraphModule:
    """gm as an ATen graph with the tensor metadata our export reads (a
    minified or reloaded graph has none), decomposed as AOTAutograd does."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from .decompositions import decomposition_table

    return make_fx(gm, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)


def fails(gm: torch.fx.GraphModule, args: Sequence[Any], compile_one: CompileOne) -> str | None:
    """Why compiling `gm` with us fails on `args` (raises, or differs from
    running it eagerly), or None."""
    try:
        expected = gm(*_clone(args))
    except Exception:
        return None  # eager fails too: not ours
    try:
        compiled = compile_one(retrace(gm, args), _clone(args))
        actual = compiled(_clone(args))
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return mismatch(expected, actual)


def minify_and_dump(gm: torch.fx.GraphModule, args: Sequence[Any], compile_one: CompileOne, graph_id: int,
                    options: dict[str, Any], why: str) -> str:
    """Minifies a failing graph and writes its repro; returns the folder."""
    from torch._functorch.fx_minifier import minifier

    folder = os.path.join(torch._dynamo.config.debug_dir_root, "cppinductor_repro", f"graph_{graph_id:03d}")
    os.makedirs(folder, exist_ok=True)
    smallest, smallest_args = gm, list(args)
    try:
        smallest, smallest_args = minifier(
            copy.deepcopy(gm), list(args), lambda g, a: fails(g, a, compile_one) is not None,
            dump_state=lambda g, a: None, skip_offload=True)
    except Exception as e:  # keep the whole graph: it still reproduces
        log.warning("minifying graph %d failed (%s); writing the whole graph", graph_id, e)
    smallest.to_folder(os.path.join(folder, "module"), "Repro")
    torch.save(list(smallest_args), os.path.join(folder, "inputs.pt"))
    with open(os.path.join(folder, "repro.py"), "w") as f:
        f.write(_SCRIPT.format(why=why, options=repr(options)))
    log.warning("graph %d: %s; a minified repro is in %s (python %s)", graph_id, why, folder,
                os.path.join(folder, "repro.py"))
    return folder


_SCRIPT = textwrap.dedent('''\
    """A cppinductor repro, written by its minifier: {why}.
    Exits 1 while compiling this graph with cppinductor still fails."""
    import os
    import sys

    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from module import Repro  # noqa: E402

    from cppinductor.repro import check  # noqa: E402

    inputs = torch.load(os.path.join(here, "inputs.pt"), weights_only=False)
    sys.exit(check(Repro(), inputs, {options}))
''')


def check(module: torch.nn.Module, args: Sequence[Any], options: dict[str, Any]) -> int:
    """What a repro script runs: 1 (and why, on stdout) while compiling
    `module` with cppinductor and `options` fails on `args`, else 0."""
    from .backend import compile_fx_graph
    from .options import parse_options

    parsed = parse_options(None, options)
    gm = retrace(module, args)
    why = fails(gm, args, lambda g, a: compile_fx_graph(g, a, parsed, "inference"))
    print(f"reproduces: {why}" if why else "does not reproduce: cppinductor matches eager")
    return 1 if why else 0


_graph_ids = itertools.count()


def wrap(compile_one: CompileOne, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
         options: dict[str, Any]) -> Callable[[list], Any]:
    """compile_one(gm, example_inputs) under the minifier: a compile error,
    a run error or (level 4) a result that differs from eager writes a
    minified repro before it propagates."""
    graph_id = next(_graph_ids)
    original = copy.deepcopy(gm)  # our compile rewrites gm in place (graph_passes)
    try:
        compiled = compile_one(gm, example_inputs)
    except Exception as e:
        minify_and_dump(original, [_real(x) for x in example_inputs], compile_one, graph_id, options,
                        f"the compile raised {type(e).__name__}")
        raise

    def run(args: list) -> Any:
        real = list(args)
        if _level() < 4:
            try:
                return compiled(args)
            except Exception as e:
                minify_and_dump(original, _clone(real), compile_one, graph_id, options,
                                f"a call raised {type(e).__name__}")
                raise
        expected = original(*_clone(real))
        actual = compiled(args)
        why = mismatch(expected, actual)
        if why is not None:
            from torch._dynamo.debug_utils import AccuracyError

            minify_and_dump(original, real, compile_one, graph_id, options, f"differs from eager ({why})")
            raise AccuracyError(f"cppinductor graph {graph_id} differs from eager: {why}")
        return actual

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
