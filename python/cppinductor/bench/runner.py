"""Runs workloads x backends and fills the rows.

Order of work, and why:
1. fresh-process probes (subprocesses, one per compiled backend and probed
   workload): first-graph compile time in a new process, cold caches;
2. one throwaway compile per backend in this process, so later compiles
   measure a warm process rather than one-time initialisation;
3. per workload, eager first (it is the reference output and the baseline
   time), then each backend with fresh caches: first call (compile), check
   against eager, steady-state median;
4. derived columns: speedups, GB/s, % of copy, compile time over aot_eager;
   for an alternating workload, its step over the sum of its two halves
   each timed alone.
A backend that raises or differs from eager marks its row; the bench goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import kernel_counts
from .kernel_counts import graph_counts
from ._compile_probe import ProbeResult, probe
from .backends import Backend, parse_backends
from .bandwidth import CopyReferences, gbps
from .caches import clear_in_memory_caches, fresh_caches
from .correctness import fp64_mismatch, mismatch, snapshot
from .progress import Progress
from .row import ERROR, INCORRECT, Row
from .timing import POLICIES, alternation, interleaved_steady_times, time_once
from .workloads import Case, Workload, select, sizes_for, tolerance

FRESH_PROCESS_CHOICES = ("first", "all", "none")
_PREFERRED_PROBE = "relu_bias"  # a small pointwise graph: what the compile-time targets talk about
_MAX_ERROR_CHARS = 2000


@dataclass
class BenchConfig:
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    size: str = "full"  # full | quick | tiny (tests)
    only: Optional[Sequence[str]] = None
    backends: Sequence[Any] = ("eager", "aot_eager", "inductor", "cppinductor")
    fresh_process: str = "first"  # which workloads get a fresh-process compile probe
    mode: Optional[str] = None  # torch.compile mode for inductor and cppinductor
    threads: Optional[int] = None
    cpu_isa: Optional[str] = None  # cppinductor's cpu_isa option; None: its default (CPPINDUCTOR_CPU_ISA, else native)
    suite: str = "kernels"  # workloads.SUITES
    train: bool = False  # the models suite: training steps instead of forwards
    batch: str = "large"  # the models suite: small (latency) or large (throughput) inputs
    progress: bool = True
    workloads: List[Workload] = field(init=False)
    backend_list: List[Backend] = field(init=False)

    def __post_init__(self) -> None:
        if self.fresh_process not in FRESH_PROCESS_CHOICES:
            raise ValueError(f"fresh_process must be one of {FRESH_PROCESS_CHOICES}")
        if self.cpu_isa is not None:
            from ..options import parse_options

            parse_options(None, {"cpu_isa": self.cpu_isa})  # a ValueError where the host cannot run it
        if self.batch not in ("small", "large"):
            raise ValueError(f"batch must be small or large, got {self.batch!r}")
        self.workloads = select(self.only, quick=self.size == "quick", suite=self.suite, train=self.train,
                                device=self.device)
        self.backend_list = parse_backends(self.backends, self.mode,
                                           {"cpu_isa": self.cpu_isa} if self.cpu_isa else None)

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")


def _load_average() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return None


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:_MAX_ERROR_CHARS]


def _probed_workloads(config: BenchConfig) -> List[Workload]:
    if config.fresh_process == "none" or not config.workloads:
        return []
    if config.fresh_process == "all":
        return list(config.workloads)
    preferred = [w for w in config.workloads if w.name == _PREFERRED_PROBE]
    return preferred or config.workloads[:1]


def _warm_up(backend: Backend, device: str) -> float:
    """One throwaway compile of a tiny graph: process-level initialisation happens here."""
    with fresh_caches():
        x = torch.ones(64, 64, device=device)
        compiled = backend.compiler()(lambda x: torch.relu(x) * 2 + 1)
        seconds, _ = time_once(lambda: compiled(x), device)
    return seconds


def _cppinductor_cpu_isa(requested: Optional[str]) -> Optional[str]:
    """The ISA cppinductor's CPU kernels are compiled for under the bench's
    choice (the option, else CPPINDUCTOR_CPU_ISA, else native); None where it
    cannot say (no x86-64, or an ISA the host lacks: the rows show the error)."""
    from .. import _C
    from ..options import parse_options

    try:
        options = parse_options(None, {"cpu_isa": requested} if requested else None)
        return _C.resolve_cpu_isa(options.get("cpu_isa", "native"))
    except (ValueError, _C.UnsupportedError, _C.CompilerError):
        return None


def _cppinductor_cuda_binary() -> Optional[str]:
    """What NVRTC makes for cppinductor's CUDA kernels under the bench
    (CPPINDUCTOR_CUDA_BINARY, else cubin); None where the variable is invalid
    (the rows show the error)."""
    from ..options import parse_options

    try:
        return parse_options().get("cuda_binary", "cubin")
    except ValueError:
        return None


class _Runner:
    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        self.policy = POLICIES[config.size]
        self.sizes = dataclasses.replace(sizes_for(config.device, config.size), model_batch=config.batch)
        self.copy_refs = CopyReferences(config.device, self.policy)
        self.unavailable = {b.label: b.unavailable_reason() for b in config.backend_list}
        self.runnable = [b for b in config.backend_list if self.unavailable[b.label] is None]
        self.cppinductor_cpu_isa = _cppinductor_cpu_isa(config.cpu_isa)
        self.cppinductor_cuda_binary = _cppinductor_cuda_binary()

    def row(self, workload: Workload, backend: Backend) -> Row:
        c = self.config
        return Row(workload=workload.name, backend=backend.label, mode=backend.mode, device=c.device,
                   dtype=c.dtype_name, threads=torch.get_num_threads(), torch_version=torch.__version__,
                   kind=workload.kind)

    def run(self) -> List[Row]:
        c = self.config
        compiled = [b for b in self.runnable if not b.is_eager]
        probed = [(w, b) for w in _probed_workloads(c) for b in compiled if b.runs_in_subprocess]
        total = len(probed) + len(compiled) + len(c.workloads) * len(c.backend_list)
        progress = Progress(total, c.progress)
        try:
            probes: Dict[Tuple[str, str], ProbeResult] = {}
            for w, b in probed:
                progress.start(f"{w.name} · {b.label} · fresh process")
                probes[(w.name, b.label)] = probe(w.name, b.label, c.device, c.dtype_name, c.size,
                                                  torch.get_num_threads(), b.mode)
                progress.advance()
            warmups: Dict[str, float] = {}
            for b in compiled:
                progress.start(f"{b.label} · warm-up compile")
                try:
                    warmups[b.label] = _warm_up(b, c.device)
                except Exception as e:  # the workload rows will show the error
                    self.unavailable[b.label] = f"warm-up compile failed: {_describe(e)}"
                progress.advance()
            rows = []
            for w in c.workloads:
                rows += self.run_workload(w, progress)
        finally:
            progress.close()
        for r in rows:
            p = probes.get((r.workload, r.backend))
            if p is not None:
                r.compile_s_fresh = p.compile_s
                r.fresh_process_total_s = p.total_s
                if p.error and r.error is None:
                    r.error = f"fresh-process probe: {p.error}"[:_MAX_ERROR_CHARS]
            r.backend_warmup_s = warmups.get(r.backend)
        _derive(rows)
        return rows

    def run_workload(self, workload: Workload, progress: Progress) -> List[Row]:
        """Every backend's first call (compile), checked against eager's, then
        the steady state of all of them timed in interleaved rounds."""
        expected: Any = None
        reference: Any = None  # the float64 result, where the case has one
        eager_failed: Optional[str] = None
        rows: List[Row] = []
        steps: Dict[str, Any] = {}
        by_label: Dict[str, Row] = {}
        with contextlib.ExitStack() as workload_scope:
            # One Dynamo reset for the workload: every backend's compile stays
            # alive for the interleaved timing (each compiles cold all the
            # same: its own empty cache directories, Inductor's in-memory
            # caches cleared).
            workload_scope.callback(self._release, self.config.device)
            clear_in_memory_caches()
            workload_scope.callback(clear_in_memory_caches)
            for backend in self.config.backend_list:
                progress.start(f"{workload.name} · {backend.label}")
                row = self.row(workload, backend)
                reason = self.unavailable[backend.label] or (eager_failed and f"eager reference failed: {eager_failed}")
                if reason:
                    row.status, row.error = ERROR, reason
                else:
                    try:
                        step, result, case = self.first_call(workload, backend, row, workload_scope)
                        steps[backend.label], by_label[backend.label] = step, row
                        if backend.is_eager:
                            expected = result
                            reference = case.reference() if case.reference is not None else None
                        else:
                            self.check(workload, expected, reference, result, row)
                    except Exception as e:
                        row.status, row.error = ERROR, _describe(e)
                        if backend.is_eager:
                            eager_failed = row.error
                rows.append(row)
                progress.advance()
            for label, steady in interleaved_steady_times(steps, self.config.device, self.policy).items():
                row = by_label[label]
                if isinstance(steady, BaseException):
                    row.status, row.error = ERROR, _describe(steady)
                    continue
                row.time_ms, row.reps = steady.median_s * 1e3, steady.reps
                if row.compile_s_warm is not None:
                    row.compile_s_warm = max(row.first_call_s - steady.median_s, 0.0)
        return rows

    @staticmethod
    def _release(device: str) -> None:
        gc.collect()
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()

    def first_call(self, workload: Workload, backend: Backend, row: Row,
                   scope: contextlib.ExitStack) -> Tuple[Any, Any, Case]:
        """Builds the case and times its first call (the compile) into row.
        Returns the step to time later, a snapshot of the first result and
        the case.
        The backend's cache directories stay in place until `scope` closes."""
        c = self.config
        scope.enter_context(fresh_caches(reset_dynamo=False))
        case = workload.build(self.sizes, c.device, c.dtype)
        row.shape, row.bytes_moved, row.flops = case.shape, case.bytes_moved, case.flops
        before = kernel_counts.read(backend.label)
        if case.parts is not None:
            eager_part, compiled_part = case.parts(backend.compiler())

            def step() -> Any:
                eager_part()
                return compiled_part()
        else:
            step = case.make_step(backend.compiler())
        cuda = torch.device(c.device).type == "cuda"
        if cuda:
            torch.cuda.synchronize()
            baseline = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        with graph_counts(backend) as counts:
            first_s, result = time_once(step, c.device)
        row.graphs, row.graph_breaks, row.fallbacks = counts.graphs, counts.breaks, counts.fallbacks
        compiled = kernel_counts.difference(before, kernel_counts.read(backend.label))
        result = snapshot(result)
        if cuda:
            # Two more calls: CUDA graphs record on the second; the peak
            # covers the pool, the graph's buffers and a replay.
            step()
            step()
            torch.cuda.synchronize()
            row.peak_mb = (torch.cuda.max_memory_allocated() - baseline) / 2**20
        if case.parts is not None:
            alt = alternation(eager_part, compiled_part, c.device, self.policy)
            row.eager_part_ms, row.compiled_part_ms = alt.eager_part_s * 1e3, alt.compiled_part_s * 1e3
            row.alternating_ratio = alt.ratio
        row.first_call_s = first_s
        row.load_avg = _load_average()
        if not backend.is_eager:
            row.compile_s_warm = first_s  # less the steady time, once measured
            if backend.name == "cppinductor" and torch.device(c.device).type == "cpu":
                row.cpu_isa = self.cppinductor_cpu_isa
            if backend.name == "cppinductor" and torch.device(c.device).type == "cuda":
                row.cuda_binary = self.cppinductor_cuda_binary
        if compiled is not None:
            row.kernels = compiled.kernels
            if compiled.kernel_compile_s is not None and compiled.kernels:
                row.kernel_compile_ms = 1e3 * compiled.kernel_compile_s / compiled.kernels
        if case.bytes_moved is not None and case.largest_input is not None:
            ref = self.copy_refs.for_tensor(case.largest_input)
            row.copy_gbps, row.copy_prealloc_gbps = ref.clone_gbps, ref.prealloc_gbps
        return step, result, case

    def check(self, workload: Workload, expected: Any, reference: Any, actual: Any, row: Row) -> None:
        tol = tolerance(workload, self.config.dtype)
        if reference is not None:
            problem = fp64_mismatch(expected, actual, reference, tol[0])
        else:
            problem = mismatch(expected, actual, tol)
        row.correct = problem is None
        if problem:
            row.status, row.error = INCORRECT, problem[:_MAX_ERROR_CHARS]


def _derive(rows: List[Row]) -> None:
    by_key = {(r.workload, r.backend): r for r in rows}
    for r in rows:
        if r.backend == "eager" and r.time_ms is not None:
            r.correct = True
        eager = by_key.get((r.workload, "eager"))
        # A backend in a mode compares against Inductor in that mode where the run has it.
        mode = r.backend.partition(":")[2]
        inductor = by_key.get((r.workload, f"inductor:{mode}")) if mode else None
        inductor = inductor or by_key.get((r.workload, "inductor"))
        aot = by_key.get((r.workload, "aot_eager"))
        if r.time_ms:
            if eager and eager.time_ms:
                r.speedup_vs_eager = eager.time_ms / r.time_ms
            if inductor and inductor.time_ms:
                r.speedup_vs_inductor = inductor.time_ms / r.time_ms
        r.gbps = gbps(r.bytes_moved, r.time_ms and r.time_ms / 1e3)
        if r.flops and r.time_ms:
            r.tflops = r.flops / (r.time_ms / 1e3) / 1e12
        if r.gbps is not None and r.copy_gbps:
            r.pct_of_copy = 100.0 * r.gbps / r.copy_gbps
        if r.compile_s_warm is not None and aot and aot.compile_s_warm is not None and r is not aot:
            r.compile_over_aot_eager_s = r.compile_s_warm - aot.compile_s_warm


def run_bench(config: BenchConfig) -> List[Row]:
    if config.threads:
        torch.set_num_threads(config.threads)
    return _Runner(config).run()
