"""Where the host time of a launch-bound compiled call goes.

    python3 gpu_codegen/tools/call_profile.py [--workload layer_stack] [--mode default] [--calls 2000] [--out DIR]

Builds one workload of the bench's launch suite on CUDA, compiles it with
cppinductor and Inductor in one mode (--mode), and for each: µs per call
(host wall time over many calls, the GPU far from busy), a cProfile of the
calls sorted by own time, written with our generated wrappers (wrapper.py)
to DIR/profile_<backend>.txt, so the lines a call runs can be read beside
the profile.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="layer_stack")
    p.add_argument("--mode", default="default", help="torch.compile mode of both backends")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()

    from cppinductor import debug
    from cppinductor.bench.workloads import BY_NAME, sizes_for

    case = BY_NAME[args.workload].build(sizes_for("cuda", "quick"), "cuda", torch.float32)
    for backend in ("cppinductor", "inductor"):
        with debug.recording() as records:
            step = case.make_step(lambda fn: torch.compile(fn, backend=backend, mode=args.mode))
            for _ in range(20):
                step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.calls):
            step()
        torch.cuda.synchronize()
        per_call = (time.perf_counter() - start) / args.calls * 1e6
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            step()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        print(f"== {backend}: {per_call:.1f} us per call")
        print(text.getvalue()[:6000])
        with open(os.path.join(args.out, f"profile_{backend}.txt"), "w") as f:
            f.write(f"{per_call:.1f} us per call\n" + text.getvalue())
            for r in records:
                if r.wrapper_source:
                    f.write(f"\n# wrapper.py of graph {r.id} ({r.kind})\n{r.wrapper_source}")


if __name__ == "__main__":
    main()
