"""Compile time of the first graph in a fresh process.

The parent (:func:`probe`) starts ``python -m cppinductor.bench._compile_probe``
with fresh cache directories; the child builds one workload, times its first
compiled call and the steady state, and prints one JSON line. compile_s is
the first call minus the steady-state time; startup_s (interpreter, import
torch, import cppinductor) and total_s (launch to the end of the first
compiled call, everything included) are measured from the parent's launch
time, since ``-m cppinductor.bench...`` imports the package before any probe
code runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import List, Optional

PROBE_TIMEOUT_S = 900


@dataclass(frozen=True)
class ProbeResult:
    compile_s: Optional[float] = None
    first_s: Optional[float] = None
    steady_s: Optional[float] = None
    startup_s: Optional[float] = None
    total_s: Optional[float] = None
    error: Optional[str] = None


def _package_root() -> str:
    """The sys.path entry this process imported cppinductor from, so the child imports the same one."""
    package = sys.modules["cppinductor"]
    if getattr(package, "__file__", None):
        return os.path.dirname(os.path.dirname(os.path.abspath(package.__file__)))
    return os.path.dirname(os.path.abspath(list(package.__path__)[0]))


def probe(workload: str, backend: str, device: str, dtype: str, size: str, threads: int,
          mode: Optional[str] = None) -> ProbeResult:
    """Run the probe in a fresh process with fresh cache directories."""
    from .caches import fresh_cache_env

    with tempfile.TemporaryDirectory(prefix="cppinductor-probe-") as root:
        env = dict(os.environ, **fresh_cache_env(root))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "cppinductor.bench._compile_probe", "--workload", workload,
               "--backend", backend, "--device", device, "--dtype", dtype, "--size", size,
               "--threads", str(threads), "--launched-at", repr(time.time())]
        cmd += [] if mode is None else ["--mode", mode]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return ProbeResult(error=f"fresh-process probe timed out after {PROBE_TIMEOUT_S} s")
    lines = proc.stdout.strip().splitlines()
    try:
        return ProbeResult(**json.loads(lines[-1]))
    except (IndexError, ValueError, TypeError):
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        return ProbeResult(error=f"fresh-process probe failed (exit {proc.returncode}): {tail}")


def _child(argv: List[str]) -> int:
    import torch

    from .backends import Backend
    from .timing import POLICIES, steady_time, time_once
    from .workloads import BY_NAME, sizes_for

    parser = argparse.ArgumentParser(prog="python -m cppinductor.bench._compile_probe")
    for name in ("workload", "backend", "device", "dtype", "size"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--mode")
    parser.add_argument("--launched-at", type=float, required=True, help="the parent's time.time() at launch")
    args = parser.parse_args(argv)
    startup_s = time.time() - args.launched_at
    torch.set_num_threads(args.threads)
    try:
        workload = BY_NAME[args.workload]
        case = workload.build(sizes_for(args.device, args.size), args.device, getattr(torch, args.dtype))
        step = case.make_step(Backend(args.backend, mode=args.mode).compiler())
        first_s, _ = time_once(step, args.device)
        total_s = time.time() - args.launched_at
        steady_s = steady_time(step, args.device, POLICIES[args.size]).median_s
        result = ProbeResult(max(first_s - steady_s, 0.0), first_s, steady_s, startup_s, total_s)
    except Exception as e:
        result = ProbeResult(startup_s=startup_s, error=f"{type(e).__name__}: {e}")
    print(json.dumps(result.__dict__))
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
