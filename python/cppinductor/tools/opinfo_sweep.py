"""OpInfo sweep: every OpInfo that supports float32 on CPU, eager vs cppinductor.

    python -m cppinductor.tools.opinfo_sweep [--ops a,b] [--max-samples N] [--json FILE]
        [--limit N] [--timeout S] [--jobs N] [--no-isolate] [--inject-relu-bug] [--check-error-mode]

For each op of torch's `op_db` (name or name.variant, as in `--ops`), the first
few sample inputs run eagerly and through `torch.compile(fn,
backend="cppinductor")`, and the op is reported

- correct: every sample's outputs match eager (structure, dtype, shape; float
  values within Inductor's tolerances, NaN == NaN; integers and bools exactly;
  non-tensor outputs equal) and inputs are mutated alike. A float mismatch is
  forgiven when a float64 run shows the compiled result no further from the
  truth than eager's (torch._dynamo.utils.same's rule): that is reordering, not
  a bug. A sample whose eager call raises is skipped;
- lowered: no graph fell back to eager and no node ran through ATen as a
  fallback (what `options={"fallback": "error"}` checks; externs such as
  matmul and convolution count as lowered). The first fallback's reason comes
  from the explain report (cppinductor.report.graph_report).

Random ops (and ops returning uninitialised memory) are listed, not compared.

By default each op runs in a worker process (spawned, several with --jobs)
that a watchdog replaces when an op hangs or crashes it; inside the worker a
per-op alarm bounds the time spent. `sweep()` is the same run in-process.
The exit code is 0 whatever the results: the numbers are the output.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import itertools
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.utils._pytree as pytree

# Ops whose outputs are random (or uninitialised memory): compared neither
# exactly nor statistically, reported as "random".
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "normal",
        "normal.in_place",
        "normal.number_mean",
        "uniform",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "nn.functional.alpha_dropout",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.fractional_max_pool2d",
        "nn.functional.fractional_max_pool3d",
        "nn.functional.rrelu",
        "pca_lowrank",
        "svd_lowrank",
        # uninitialised memory
        "empty",
        "empty_like",
        "empty_permuted",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
    }
)

# float32 (rtol, atol): Inductor's test tolerance, and the looser one for ops
# that accumulate (a different summation order changes the last bits).
STRICT_TOLERANCE = (1.3e-5, 1.5e-5)
REDUCTION_TOLERANCE = (1e-4, 1e-4)
REDUCTION_LIKE = frozenset(
    {
        "cumsum", "cumprod", "logcumsumexp", "cumulative_trapezoid", "trapz", "trapezoid",
        "softmax", "softmax.with_dtype", "log_softmax", "log_softmax.with_dtype",
        "nn.functional.softmin", "nn.functional.softmin.with_dtype", "_softmax_backward_data",
        "logsumexp", "var_mean", "var_mean.unbiased", "std_mean", "std_mean.unbiased",
        "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
        "_batch_norm_with_update", "nn.functional.layer_norm", "nn.functional.group_norm",
        "nn.functional.batch_norm", "nn.functional.instance_norm", "nn.functional.rms_norm",
        "nn.functional.local_response_norm", "nn.functional.normalize", "nn.functional.cosine_similarity",
        "nn.functional.pairwise_distance", "nn.functional.pdist", "cdist", "dist", "renorm", "corrcoef", "cov",
        "trace", "einsum", "tensordot", "inner", "kron", "matmul", "mm", "bmm", "mv", "dot", "vdot", "addmm",
        "addmm.decomposed", "addmv", "addbmm", "baddbmm", "addr", "linalg.multi_dot", "linalg.vecdot",
        "nn.functional.linear", "nn.functional.bilinear", "nn.functional.scaled_dot_product_attention",
        "nn.functional.multi_head_attention_forward", "nn.functional.adaptive_avg_pool1d",
        "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d", "nn.functional.avg_pool1d",
        "nn.functional.avg_pool2d", "nn.functional.avg_pool3d", "nn.functional.interpolate.area",
        "nn.functional.embedding_bag", "index_add", "index_reduce.mean", "scatter_add", "scatter_reduce.sum",
        "scatter_reduce.mean", "_segment_reduce.lengths", "_segment_reduce.offsets", "masked.cumsum",
        "masked.cumprod", "masked.softmax", "masked.log_softmax", "masked.softmin", "masked.normalize",
        "masked.logsumexp", "masked.logaddexp", "masked.norm", "masked.var", "masked.std", "masked.mean",
    }
)

log = logging.getLogger("cppinductor.tools.opinfo_sweep")


class OpTimeout(Exception):
    pass


@dataclass
class OpResult:
    name: str
    status: str  # correct | incorrect | random | no_samples | timeout | crashed | harness_error
    lowered: bool | None = None  # None: no graph reached the backend (random op, Dynamo ran it all)
    reason: str = ""  # first mismatch or error (incorrect), or first fallback (not lowered)
    fallbacks: list[dict] = field(default_factory=list)  # {op, reason}, one per distinct pair
    samples_run: int = 0
    samples_skipped: int = 0
    graphs: int = 0
    graph_breaks: int = 0
    fp64_forgiven: bool = False  # a float mismatch was accepted against a float64 reference
    error_mode_lowered: bool | None = None  # --check-error-mode: fallback="error" compiled
    seconds: float = 0.0


# --------------------------------------------------------------------------- op list


def op_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _plain_seed_wrapper(op: Callable, *args: Any, **kwargs: Any) -> Any:
    return op(*args, **kwargs)


def _traceable_op_db() -> None:
    """OpInfos of ops that may draw random numbers (dropout, attention) call
    `wrapper_set_seed`, whose freeze_rng_state() Dynamo cannot trace: the whole
    call would run in Python and test nothing. The sweep seeds before every
    run itself, so it calls the op directly."""
    for name, module in list(sys.modules.items()):
        if name.startswith("torch.testing._internal") and hasattr(module, "wrapper_set_seed"):
            module.wrapper_set_seed = _plain_seed_wrapper


def float32_cpu_ops() -> dict[str, Any]:
    """name -> OpInfo for every op_db entry that supports float32 on CPU."""
    from torch.testing._internal.common_methods_invocations import op_db

    _traceable_op_db()

    ops: dict[str, Any] = {}
    for op in op_db:
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        name = op_name(op)
        if name in ops:  # no duplicates today; keep both if one appears
            name = f"{name}#{sum(n.split('#')[0] == name for n in ops)}"
        ops[name] = op
    return ops


# --------------------------------------------------------------------------- comparison


def _clone(x: Any) -> Any:
    """A copy with its own storage, keeping sizes, strides and offset where it can."""
    if not isinstance(x, torch.Tensor):
        return x
    try:
        if x.layout != torch.strided or x.numel() == 0:
            return x.clone()
        n = x.untyped_storage().nbytes() // x.element_size()
        base = torch.as_strided(x, (n,), (1,), 0).clone()
        return torch.as_strided(base, x.size(), x.stride(), x.storage_offset())
    except Exception:
        return x.clone()


def _clone_tree(tree: Any) -> Any:
    return pytree.tree_map(_clone, tree)


def _to_float64(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.layout == torch.strided:
        if x.dtype == torch.float32:
            return x.detach().to(torch.float64)
        if x.dtype == torch.complex64:
            return x.detach().to(torch.complex128)
    return x


def _first_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _leaf_mismatch(a: Any, e: Any, tol: tuple[float, float], where: str) -> tuple[str, bool] | None:
    """None when a matches e, else (reason, values_only): values_only means
    same type/dtype/shape and only float values differ (a float64 reference may forgive it)."""
    if isinstance(e, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return f"{where}: compiled gave {type(a).__name__}, eager a tensor", False
        if (a.dtype, a.shape, a.layout) != (e.dtype, e.shape, e.layout):
            return (
                f"{where}: compiled {a.dtype} {tuple(a.shape)} {a.layout}, eager {e.dtype} {tuple(e.shape)} {e.layout}",
                False,
            )
        a, e = a.detach(), e.detach()
        if e.layout != torch.strided or not _is_float(e):
            try:
                torch.testing.assert_close(a, e, rtol=0, atol=0, equal_nan=True, check_stride=False)
            except AssertionError as err:
                return f"{where}: {_first_line(err)}", False
            return None
        try:
            torch.testing.assert_close(a, e, rtol=tol[0], atol=tol[1], equal_nan=True, check_stride=False)
        except AssertionError as err:
            return f"{where}: {_first_line(err)}", True
        return None
    if isinstance(e, float) and isinstance(a, float):
        if (math.isnan(a) and math.isnan(e)) or math.isclose(a, e, rel_tol=tol[0], abs_tol=tol[1]):
            return None
        return f"{where}: compiled {a!r}, eager {e!r}", False
    if type(a) is not type(e) or a != e:
        return f"{where}: compiled {type(a).__name__} {a!r}, eager {type(e).__name__} {e!r}", False
    return None


def mismatch(actual: Any, expected: Any, tol: tuple[float, float], what: str) -> tuple[str, list[int]] | None:
    """None when the trees match; else (first reason, indices of leaves where only float values differ
    — empty when some other difference makes a float64 reference pointless)."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if a_spec != e_spec:
        return _first_line(f"{what}: structure differs: compiled {a_spec}, eager {e_spec}"), []
    first, value_leaves, other = None, [], False
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"{what}[{i}]" if len(e_leaves) > 1 else what
        found = _leaf_mismatch(a, e, tol, where)
        if found is None:
            continue
        first = first or found[0]
        if found[1]:
            value_leaves.append(i)
        else:
            other = True
    if first is None:
        return None
    return first, ([] if other else value_leaves)


def _rmse(x: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor) -> float:
    if not mask.any():
        return 0.0
    d = (x.to(ref.dtype) - ref)[mask]
    return torch.sqrt(torch.mean(torch.abs(d) ** 2)).item()


def forgiven_by_float64(actual: Any, expected: Any, reference: Any, leaves: list[int]) -> bool:
    """torch._dynamo.utils.same's rule: the compiled result's RMS error against
    the float64 reference is at most twice eager's (+1e-5), and NaN/inf sit
    where eager's do."""
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    r_leaves = pytree.tree_leaves(reference)
    if not leaves or len(r_leaves) != len(e_leaves):
        return False
    for i in leaves:
        a, e, r = a_leaves[i].detach(), e_leaves[i].detach(), r_leaves[i]
        if not isinstance(r, torch.Tensor) or r.shape != e.shape:
            return False
        r = r.detach().to(torch.complex128 if e.is_complex() else torch.float64)
        a64, e64 = a.to(r.dtype), e.to(r.dtype)
        if not torch.equal(torch.isnan(a64), torch.isnan(e64)):
            return False
        inf = torch.isinf(e64) | torch.isinf(a64)
        if not torch.equal(a64[inf], e64[inf]):
            return False
        mask = torch.isfinite(r) & torch.isfinite(a64) & torch.isfinite(e64)
        if _rmse(a64, r, mask) > 2.0 * _rmse(e64, r, mask) + 1e-5:
            return False
    return True


# --------------------------------------------------------------------------- one op


def _options(inject_relu_bug: bool, fallback: str = "eager") -> dict:
    opts: dict[str, Any] = {"fallback": fallback}
    if inject_relu_bug:
        opts["inject_relu_bug_TESTING_ONLY"] = True
    return opts


def _random_sample(name: str, sample: Any) -> bool:
    """Samples of otherwise deterministic ops that draw random numbers."""
    fn = {
        "nn.functional.scaled_dot_product_attention": torch.nn.functional.scaled_dot_product_attention,
        "nn.functional.multi_head_attention_forward": torch.nn.functional.multi_head_attention_forward,
    }.get(name)
    if fn is None:
        return False
    try:  # dropout_p may come positionally
        bound = inspect.signature(fn).bind(sample.input, *sample.args, **sample.kwargs)
        arguments = bound.arguments
    except (TypeError, ValueError):
        arguments = sample.kwargs
    return (arguments.get("dropout_p") or 0) > 0 and bool(arguments.get("training", True))


def _fallbacks_of(records: Iterable[Any]) -> list[dict]:
    from ..report import graph_report

    out = []
    for record in records:
        if record.graph_fallback is not None:  # one reason for the graph, not a copy per node
            out.append({"op": "whole graph", "reason": record.graph_fallback})
        else:
            out.extend(graph_report(record).fallbacks)
    return out


def _lowers_with_fallback_error(op: Any, args: tuple, kwargs: dict, inject_relu_bug: bool) -> bool:
    def fn(*a: Any, **k: Any) -> Any:
        return op.op(*a, **k)

    compiled = torch.compile(fn, backend="cppinductor", options=_options(inject_relu_bug, "error"))
    try:
        compiled(*args, **kwargs)
    except Exception:
        return False
    return True


def sweep_op(
    name: str,
    op: Any,
    *,
    max_samples: int = 3,
    inject_relu_bug: bool = False,
    check_error_mode: bool = False,
    timeout_s: int = 120,
) -> OpResult:
    """Runs one op's first `max_samples` samples eagerly and compiled and compares."""
    from torch._dynamo.utils import counters

    from ..utils import compiled_records

    result = OpResult(name, "no_samples")
    start = time.perf_counter()
    if name.split("#")[0] in RANDOM_OPS:
        result.status = "random"
        return result

    def on_alarm(signum: int, frame: Any) -> None:
        raise OpTimeout(f"timed out after {timeout_s} s")

    previous = signal.signal(signal.SIGALRM, on_alarm) if timeout_s else None
    if timeout_s:
        signal.alarm(timeout_s)
    torch._dynamo.reset()
    counters.clear()
    try:
        torch.manual_seed(0)
        samples = list(itertools.islice(op.sample_inputs("cpu", torch.float32, requires_grad=False), max_samples))
    except OpTimeout as e:
        result.status, result.reason = "timeout", str(e)
        return _finish(result, start, previous, timeout_s)
    except Exception as e:
        result.status, result.reason = "harness_error", f"sample_inputs raised {type(e).__name__}: {_first_line(e)}"
        return _finish(result, start, previous, timeout_s)

    tol = REDUCTION_TOLERANCE if _reduction_like(name, op) else STRICT_TOLERANCE
    compiled = torch.compile(lambda *a, **k: op.op(*a, **k), backend="cppinductor", options=_options(inject_relu_bug))
    first_problem = None
    fallbacks: list[dict] = []
    lowered_by_error_mode = True
    ran_compiled = False
    try:
        for index, sample in enumerate(samples):
            if _random_sample(name, sample):
                result.samples_skipped += 1
                continue
            args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
            eager_args = _clone_tree((args, kwargs))
            try:
                torch.manual_seed(0)
                expected = op.op(*eager_args[0], **eager_args[1])
            except OpTimeout:
                raise
            except Exception:
                result.samples_skipped += 1  # eager refuses this sample: nothing to compare
                continue
            result.samples_run += 1
            what = f"sample {index}"
            compiled_args = _clone_tree((args, kwargs))
            try:
                torch.manual_seed(0)
                actual, records = compiled_records(compiled, *compiled_args[0], **compiled_args[1])
                ran_compiled = True
            except OpTimeout:
                raise
            except Exception as e:
                first_problem = first_problem or f"{what}: compiled raised {type(e).__name__}: {_first_line(e)}"
                continue
            fallbacks.extend(_fallbacks_of(records))
            result.graphs += len(records)
            if check_error_mode:
                torch._dynamo.reset()
                lowered_by_error_mode &= _lowers_with_fallback_error(op, *_clone_tree((args, kwargs)), inject_relu_bug)
                torch._dynamo.reset()
            problem = mismatch(actual, expected, tol, f"{what} output")
            if problem is None:
                problem = mismatch(compiled_args, eager_args, tol, f"{what} inputs after the call")
                if problem is not None:
                    problem = (problem[0], [])  # a mutation difference is never a rounding question
            if problem is not None and problem[1]:
                if _forgiven(op, args, kwargs, actual, expected, problem[1]):
                    result.fp64_forgiven = True
                    problem = None
            if problem is not None:
                first_problem = first_problem or problem[0]
    except OpTimeout as e:
        result.status, result.reason = "timeout", f"{e} ({result.samples_run} samples run)"
        return _finish(result, start, previous, timeout_s, fallbacks)
    except Exception as e:  # the harness itself: report, don't stop the sweep
        result.status, result.reason = "harness_error", f"{type(e).__name__}: {_first_line(e)}"
        return _finish(result, start, previous, timeout_s, fallbacks)

    result.graph_breaks = sum(counters["graph_break"].values())
    first_break = next(iter(counters["graph_break"]), "")
    if result.samples_run == 0:
        result.status, result.reason = "no_samples", f"eager raised on all {result.samples_skipped} samples"
    elif first_problem:
        result.status, result.reason = "incorrect", first_problem
    else:
        result.status = "correct"
    if ran_compiled and result.graphs:
        result.lowered = not fallbacks
    elif ran_compiled and result.status == "correct":  # Dynamo ran it all in Python: nothing reached us
        result.reason = f"no graph compiled (graph break: {_first_line(first_break, 160)})"
    if check_error_mode and ran_compiled:
        result.error_mode_lowered = lowered_by_error_mode
    if fallbacks and result.status == "correct":
        first = fallbacks[0]
        result.reason = f"fallback {first['op']}: {_first_line(first['reason'], 200)}"
    return _finish(result, start, previous, timeout_s, fallbacks)


def _reduction_like(name: str, op: Any) -> bool:
    from torch.testing._internal.opinfo.core import ReductionOpInfo

    return isinstance(op, ReductionOpInfo) or name.split("#")[0] in REDUCTION_LIKE or name.startswith("linalg.")


def _forgiven(op: Any, args: tuple, kwargs: dict, actual: Any, expected: Any, leaves: list[int]) -> bool:
    try:
        a64, k64 = pytree.tree_map(_to_float64, (_clone_tree(args), _clone_tree(kwargs)))
        torch.manual_seed(0)
        reference = op.op(*a64, **k64)
    except OpTimeout:
        raise
    except Exception:
        return False
    return forgiven_by_float64(actual, expected, reference, leaves)


def _finish(result: OpResult, start: float, previous: Any, timeout_s: int, fallbacks: list | None = None) -> OpResult:
    if timeout_s:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    seen = set()
    for f in fallbacks or []:
        key = (f["op"], f["reason"])
        if key not in seen:
            seen.add(key)
            result.fallbacks.append({"op": f["op"], "reason": f["reason"]})
    result.seconds = round(time.perf_counter() - start, 3)
    try:
        torch._dynamo.reset()
    except Exception:
        pass
    return result


# --------------------------------------------------------------------------- running many


def quiet() -> None:
    """Warnings and fallback log lines would drown the table."""
    warnings.filterwarnings("ignore")
    for name in ("cppinductor", "torch._dynamo", "torch._inductor", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 256
    torch._dynamo.config.accumulated_cache_size_limit = 4096
    torch._dynamo.config.automatic_dynamic_shapes = False  # each sample compiles with static sizes


def sweep(
    names: list[str] | None = None,
    *,
    max_samples: int = 3,
    inject_relu_bug: bool = False,
    check_error_mode: bool = False,
    timeout_s: int = 120,
    on_result: Any = None,
) -> list[OpResult]:
    """The sweep in this process (the function tests call)."""
    quiet()
    ops = float32_cpu_ops()
    results = []
    for name in names if names is not None else list(ops):
        if name not in ops:
            res = OpResult(name, "harness_error", reason="no such float32 CPU OpInfo")
        else:
            res = sweep_op(
                name, ops[name], max_samples=max_samples, inject_relu_bug=inject_relu_bug,
                check_error_mode=check_error_mode, timeout_s=timeout_s,
            )
        results.append(res)
        if on_result:
            on_result(res)
    return results


def _worker(conn: Any, config: dict) -> None:
    quiet()
    ops = float32_cpu_ops()
    while True:
        name = conn.recv()
        if name is None:
            return
        res = sweep_op(name, ops[name], **config)
        conn.send(asdict(res))


class _Worker:
    def __init__(self, ctx: Any, config: dict) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, config), daemon=True)
        self.proc.start()
        child.close()
        self.name: str | None = None
        self.since = 0.0

    def give(self, name: str) -> None:
        self.name, self.since = name, time.monotonic()
        self.conn.send(name)

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


def sweep_isolated(
    names: list[str], *, jobs: int, config: dict, timeout_s: int, on_result: Any = None
) -> list[OpResult]:
    """The sweep in `jobs` worker processes; an op that outlives its alarm by a
    minute, or kills its worker, is recorded and the worker replaced."""
    ctx = multiprocessing.get_context("spawn")
    config = dict(config, timeout_s=timeout_s)
    hard_limit = timeout_s + 60 + 30  # the alarm, then a grace minute, plus the worker's start-up
    pending = collections.deque(names)
    results: list[OpResult] = []
    workers = [_Worker(ctx, config) for _ in range(max(1, min(jobs, len(names))))]

    def record(res: OpResult) -> None:
        results.append(res)
        if on_result:
            on_result(res)

    for w in workers:
        if pending:
            w.give(pending.popleft())
    try:
        while any(w.name for w in workers):
            busy = [w for w in workers if w.name]
            ready = multiprocessing.connection.wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], 5)
            now = time.monotonic()
            for i, w in enumerate(workers):
                if not w.name:
                    continue
                got, replace = None, False
                if w.conn in ready or w.proc.sentinel in ready:
                    try:
                        got = OpResult(**w.conn.recv()) if w.conn.poll() else None
                    except (EOFError, OSError):
                        got = None
                    if got is None and not w.proc.is_alive():
                        w.proc.join(1)
                        got = OpResult(w.name, "crashed", reason=f"worker died (exit code {w.proc.exitcode})")
                        replace = True
                elif now - w.since > hard_limit:
                    got = OpResult(w.name, "timeout", reason=f"hung past {hard_limit} s; worker killed")
                    replace = True
                if got is None:
                    continue
                got.seconds = got.seconds or round(now - w.since, 3)
                record(got)
                if replace:
                    w.stop()
                    w = workers[i] = _Worker(ctx, config)
                w.name = None
                if pending:
                    w.give(pending.popleft())
    finally:
        for w in workers:
            try:
                w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            w.proc.join(2)
            w.stop()
    order = {n: i for i, n in enumerate(names)}
    return sorted(results, key=lambda r: order.get(r.name, len(order)))


# --------------------------------------------------------------------------- report


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


CORRECT_COLUMN = {
    "correct": "yes", "incorrect": "NO", "random": "random, skipped", "no_samples": "no samples",
    "timeout": "TIMEOUT", "crashed": "CRASHED", "harness_error": "harness error",
}


def format_row(r: OpResult) -> str:
    correct = CORRECT_COLUMN.get(r.status, r.status)
    if r.fp64_forgiven and r.status == "correct":
        correct = "yes (f64)"
    return f"{r.name:55} {correct:15} {_yes_no(r.lowered):7} {r.samples_run:>2}/{r.samples_skipped:<2} {r.seconds:6.1f}s  {r.reason}"


TABLE_HEADER = f"{'op':55} {'correct':15} {'lowered':7} run/skip {'time':>7}  reason"


def summarize(results: list[OpResult]) -> dict:
    tested = [r for r in results if r.status not in ("random", "no_samples")]
    correct = [r for r in tested if r.status == "correct"]
    compiled = [r for r in tested if r.lowered is not None]
    lowered = [r for r in compiled if r.lowered]
    by_reason: dict[str, list[str]] = collections.defaultdict(list)
    for r in results:
        for key in sorted({f"{f['op']}: {_first_line(f['reason'], 160)}" for f in r.fallbacks}):
            by_reason[key].append(r.name)
    statuses = collections.Counter(r.status for r in results)
    return {
        "ops": len(results),
        "statuses": dict(statuses),
        "tested": len(tested),
        "correct": len(correct),
        "correct_pct": round(100.0 * len(correct) / max(len(tested), 1), 2),
        "compiled": len(compiled),
        "lowered": len(lowered),
        "lowered_pct": round(100.0 * len(lowered) / max(len(compiled), 1), 2),
        "fp64_forgiven": [r.name for r in results if r.fp64_forgiven],
        "graph_break_ops": [r.name for r in results if r.graph_breaks],
        "no_graph_ops": [r.name for r in tested if r.lowered is None],
        "incorrect": {r.name: r.reason for r in results if r.status in ("incorrect", "timeout", "crashed", "harness_error")},
        "fallback_reasons": dict(sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
    }


def format_summary(summary: dict) -> str:
    lines = [
        "",
        f"ops: {summary['ops']} ({', '.join(f'{k} {v}' for k, v in sorted(summary['statuses'].items()))})",
        f"correct: {summary['correct']}/{summary['tested']} tested ops = {summary['correct_pct']}%"
        " (random and no-sample ops excluded)",
        f"lowered without fallback: {summary['lowered']}/{summary['compiled']} compiled ops = {summary['lowered_pct']}%"
        f" ({len(summary['no_graph_ops'])} tested ops compiled no graph: Dynamo ran them in Python)",
    ]
    if summary["fp64_forgiven"]:
        lines.append(f"correct only against a float64 reference: {', '.join(summary['fp64_forgiven'])}")
    if summary["incorrect"]:
        lines.append("not correct:")
        lines += [f"  {name}: {reason}" for name, reason in summary["incorrect"].items()]
    if summary["fallback_reasons"]:
        lines.append("fallbacks (ATen op: reason -> sweep ops):")
        for key, names in summary["fallback_reasons"].items():
            shown = ", ".join(names[:8]) + (f", ... ({len(names)} ops)" if len(names) > 8 else "")
            lines.append(f"  [{len(names)}] {key} -> {shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cppinductor.tools.opinfo_sweep", description=__doc__.split("\n")[0])
    p.add_argument("--ops", help="comma-separated op names (name or name.variant); default: all float32 CPU ops")
    p.add_argument("--max-samples", type=int, default=3, help="samples per op (default 3)")
    p.add_argument("--limit", type=int, help="only the first N ops")
    p.add_argument("--json", help="write per-op results and the summary here")
    p.add_argument("--timeout", type=int, default=120, help="seconds per op (default 120)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--no-isolate", action="store_true", help="run in this process (no watchdog)")
    p.add_argument("--inject-relu-bug", action="store_true", help="compile with inject_relu_bug_TESTING_ONLY")
    p.add_argument("--check-error-mode", action="store_true",
                   help="also compile each sample with fallback='error' and record whether it succeeds")
    args = p.parse_args(argv)

    quiet()
    names = [n.strip() for n in args.ops.split(",") if n.strip()] if args.ops else list(float32_cpu_ops())
    if args.limit is not None:
        names = names[: args.limit]
    config = {"max_samples": args.max_samples, "inject_relu_bug": args.inject_relu_bug,
              "check_error_mode": args.check_error_mode}
    print(TABLE_HEADER, flush=True)
    show = lambda r: print(format_row(r), flush=True)  # noqa: E731
    start = time.perf_counter()
    if args.no_isolate:
        results = sweep(names, timeout_s=args.timeout, on_result=show, **config)
    else:
        known = float32_cpu_ops()
        unknown = [OpResult(n, "harness_error", reason="no such float32 CPU OpInfo") for n in names if n not in known]
        for r in unknown:
            show(r)
        results = unknown + sweep_isolated(
            [n for n in names if n in known], jobs=args.jobs, config=config, timeout_s=args.timeout, on_result=show
        )
    summary = summarize(results)
    summary["wall_s"] = round(time.perf_counter() - start, 1)
    print(format_summary(summary))
    print(f"wall time: {summary['wall_s']} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": [asdict(r) for r in results]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
