"""The cppinductor benchmark: ``python -m cppinductor.bench --help``.

Compares eager, Inductor and cppinductor (and aot_eager, the Dynamo +
AOTAutograd baseline for compile time) per workload: run time, speedup,
GB/s against the copy bandwidth of the same run, compile time in a warm and a
fresh process with cold caches, and correctness against eager.

Files, one job each: workloads (what runs, sizes, bytes moved), timing,
caches (fresh cache dirs), backends, correctness, bandwidth (copy reference),
kernel_counts (kernels per graph, compile time per kernel),
_compile_probe (fresh-process compile time), runner (the loop), row (the
result record), report (table, JSON), plot, progress, cli.
"""

from .backends import Backend
from .row import Row
from .runner import BenchConfig, run_bench

__all__ = ["Backend", "BenchConfig", "Row", "run_bench"]
