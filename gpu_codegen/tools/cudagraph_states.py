"""explain()'s CUDA-graph state of each graph of a launch-bound workload after
N steps under mode="reduce-overhead" (graphs recorded, replays, calls run
uncaptured), and the perf hints logged meanwhile.

    python3 gpu_codegen/tools/cudagraph_states.py [--workload layer_stack_train] [--steps 20]
"""

from __future__ import annotations

import argparse
import logging

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="layer_stack_train")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("cppinductor.perf_hints").setLevel(logging.INFO)

    from cppinductor import debug
    from cppinductor.bench.workloads import BY_NAME, sizes_for

    case = BY_NAME[args.workload].build(sizes_for("cuda", "quick"), "cuda", torch.float32)
    with debug.recording() as records:
        step = case.make_step(lambda fn: torch.compile(fn, backend="cppinductor", mode="reduce-overhead"))
        for _ in range(args.steps):
            step()
    torch.cuda.synchronize()
    for r in records:
        print(f"graph {r.id} ({r.kind}): {r.cudagraphs}")


if __name__ == "__main__":
    main()
