"""Command line: python -m cppinductor.bench [--quick] [--device cpu|cuda] [--only a,b] ..."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional

import torch

from .backends import DEFAULT_BACKENDS, GEMM_BACKENDS, LAUNCH_BACKENDS, MODE_BACKENDS, MODES, parse_backends
from .. import roofline
from .plot import require_matplotlib, write_plot
from .report import format_table, write_json
from .roofline import write_roofline
from .distributed import DISTRIBUTED_BACKENDS, STRATEGIES, config_for, format_distributed, run_distributed
from .runner import FRESH_PROCESS_CHOICES, BenchConfig, run_bench
from .workloads import BY_NAME, SUITES

_DTYPES = ("float32", "bfloat16", "float16")
SUITE_BACKENDS = {"launch": LAUNCH_BACKENDS, "gemm": GEMM_BACKENDS}


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m cppinductor.bench",
        description="Run time, speedup, bandwidth, compile time and correctness of eager, "
        "Inductor and cppinductor on a fixed set of workloads.",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--quick", action="store_true",
                   help="fewer workloads, smaller models, shorter measurements (make demo)")
    p.add_argument("--only", metavar="A,B", help=f"workloads to run, from: {','.join(BY_NAME)}")
    p.add_argument("--suite", choices=SUITES + ("distributed",), default="kernels",
                   help="kernels: memory- and compute-bound workloads; launch: launch-bound ones (tiny layer "
                   "stacks, a small MLP, a decoder step), each backend also in reduce-overhead; models: HuggingFace "
                   "models from configs (needs transformers), judged against float64; gemm: matmuls with "
                   "epilogues at model layer shapes, M from 1 up, each backend also in max-autotune (TFLOP/s); "
                   "distributed: a small "
                   "transformer trained under DDP and FSDP2, one process per GPU (NCCL; gloo with --device cpu), "
                   f"--only picks strategies from {','.join(STRATEGIES)}")
    p.add_argument("--train", action="store_true", help="models suite: training steps (forward + backward)")
    p.add_argument("--batch", choices=("small", "large"), default="large",
                   help="models suite: one short sequence (latency) or a batch (throughput)")
    p.add_argument("--backends",
                   help="torch.compile backend names, or name:mode; eager is always run (default: "
                   f"{','.join(DEFAULT_BACKENDS)}; with --suite launch: {','.join(LAUNCH_BACKENDS)}; with --suite "
                   f"gemm: {','.join(GEMM_BACKENDS)})")
    p.add_argument("--mode", choices=MODES, help=f"torch.compile mode for {' and '.join(MODE_BACKENDS)}")
    p.add_argument("--world", type=int, default=2, help="distributed suite: processes (one per GPU)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="distributed suite: seconds before the workers are stopped (what finished is reported)")
    p.add_argument("--dtype", choices=_DTYPES, default="float32")
    p.add_argument("--fresh-process", choices=FRESH_PROCESS_CHOICES, default="first",
                   help="workloads whose first compile is also timed in a fresh process: the first "
                   "small graph (relu_bias when selected), all of them, or none (default: %(default)s)")
    p.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--cpu-isa", choices=("native", "avx2", "avx512"),
                   help="cppinductor's cpu_isa option (default: $CPPINDUCTOR_CPU_ISA, else native)")
    p.add_argument("--json", metavar="FILE", help="write the rows as a JSON list")
    p.add_argument("--plot", metavar="FILE.png", help="speedup and compile time chart (needs matplotlib)")
    p.add_argument("--roofline", metavar="FILE.png",
                   help="instead of timing backends: explain each workload's step under cppinductor with its "
                   "kernels timed, print the roofline tables and chart the kernels against the machine's "
                   "roofs (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--size", choices=("full", "quick", "tiny"), help=argparse.SUPPRESS)  # tests: tiny
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.plot:
        require_matplotlib()
    if args.roofline:
        try:
            roofline.require_matplotlib()
        except ImportError as e:
            raise SystemExit(str(e)) from None
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    if args.suite == "distributed":
        return _main_distributed(args)
    try:
        config = BenchConfig(
            device=args.device,
            dtype=getattr(torch, args.dtype),
            size=args.size or ("quick" if args.quick else "full"),
            only=[n.strip() for n in args.only.split(",") if n.strip()] if args.only else None,
            backends=args.backends or ",".join(SUITE_BACKENDS.get(args.suite, DEFAULT_BACKENDS)),
            suite=args.suite,
            train=args.train,
            batch=args.batch,
            fresh_process=args.fresh_process,
            mode=args.mode,
            threads=args.threads,
            cpu_isa=args.cpu_isa,
            progress=not args.no_progress,
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    if args.roofline:
        print(write_roofline(config, args.roofline))
        print(f"roofline chart: {args.roofline}; took {time.perf_counter() - start:.1f} s")
        return 0
    rows = run_bench(config)
    print(format_table(rows))
    print(f"\nbench took {time.perf_counter() - start:.1f} s")
    if args.json:
        write_json(rows, args.json)
    if args.plot:
        write_plot(rows, args.plot)
    return 0


def _main_distributed(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        config = config_for(args.device, args.size or ("quick" if args.quick else "full"),
                            parse_backends(args.backends or ",".join(DISTRIBUTED_BACKENDS), args.mode),
                            [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None,
                            world=args.world, timeout_s=args.timeout)
        rows = run_distributed(config)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_distributed(rows))
    print(f"\nbench took {time.perf_counter() - start:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
