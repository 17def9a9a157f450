"""One result row: a workload run by one backend. The JSON output is a list of these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Optional

OK, INCORRECT, ERROR = "ok", "incorrect", "error"


@dataclass
class Row:
    workload: str
    backend: str
    mode: Optional[str]  # torch.compile mode, None: not given
    device: str
    dtype: str
    threads: int
    torch_version: str
    kind: str  # memory | compute | train | interop | launch | model | gemm
    cpu_isa: Optional[str] = None  # cppinductor on the CPU: the vector ISA its kernels were compiled for
    cuda_binary: Optional[str] = None  # cppinductor on CUDA: what NVRTC made (ptx | cubin; $CPPINDUCTOR_CUDA_BINARY)
    shape: str = ""
    status: str = OK  # ok | incorrect (ran, differs from eager) | error (raised)
    error: Optional[str] = None  # the exception or the mismatch; or a failed fresh-process probe
    correct: Optional[bool] = None  # vs eager; None when it did not run
    time_ms: Optional[float] = None  # median steady-state time per call
    reps: Optional[int] = None  # calls behind the median
    speedup_vs_eager: Optional[float] = None  # eager time / this time
    speedup_vs_inductor: Optional[float] = None  # inductor time / this time (>1: faster than inductor)
    bytes_moved: Optional[int] = None  # minimal bytes: inputs read once + outputs written once
    gbps: Optional[float] = None  # bytes_moved / time, 1e9 bytes
    flops: Optional[int] = None  # floating-point operations per call (the GEMM suite)
    tflops: Optional[float] = None  # flops / time, 1e12
    copy_gbps: Optional[float] = None  # eager x.clone() of the largest input, same run
    pct_of_copy: Optional[float] = None  # 100 * gbps / copy_gbps
    copy_prealloc_gbps: Optional[float] = None  # eager out.copy_(x), no allocation: raw bandwidth
    first_call_s: Optional[float] = None  # first call in this process, fresh caches
    compile_s_warm: Optional[float] = None  # first call - steady time, process already warm
    compile_s_fresh: Optional[float] = None  # same, first graph of a fresh process (probed workloads only)
    fresh_process_total_s: Optional[float] = None  # launch of that fresh process to its first result, imports included
    graphs: Optional[int] = None  # graphs Dynamo compiled on the first call
    graph_breaks: Optional[int] = None  # graph breaks Dynamo took on the first call
    fallbacks: Optional[int] = None  # cppinductor: ops it left to eager ATen on the first call
    kernels: Optional[int] = None  # kernels generated for this graph, when the compiler reports it
    kernel_compile_ms: Optional[float] = None  # mean compile time per kernel (cppinductor's counters)
    compile_over_aot_eager_s: Optional[float] = None  # compile_s_warm - aot_eager's compile_s_warm
    backend_warmup_s: Optional[float] = None  # this backend's first (throwaway) compile in the bench process
    eager_part_ms: Optional[float] = None  # interop: the eager half of the step, timed in a loop of its own
    compiled_part_ms: Optional[float] = None  # interop: the compiled half, likewise
    alternating_ratio: Optional[float] = None  # interop: alternating / (eager alone + compiled alone), median of rounds
    load_avg: Optional[float] = None  # 1-minute load average when the row was measured (other processes)
    peak_mb: Optional[float] = None  # CUDA: peak memory of the case over its first three calls, MiB

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Row":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
