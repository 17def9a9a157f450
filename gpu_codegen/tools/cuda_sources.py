"""The CUDA modules cppinductor prints for bench workloads and suite models, without a GPU.

Each workload (python -m cppinductor.bench's names) or model (the models suite's: gpt2, bert, ...) is traced
on the CPU, its ATen graphs exported with the device rewritten to cuda:0, and the module the CUDA printer
prints for each graph is written to DIR/<name>_<graph>.cu. Each kernel's schedule and the reason for it
are listed. For reading what a change does to the kernels (diff two dumps) where no GPU is at hand:

  PYTHONPATH=python python3 gpu_codegen/tools/cuda_sources.py --out DIR softmax layer_norm
  PYTHONPATH=python python3 gpu_codegen/tools/cuda_sources.py --out DIR --models gpt2 bert --dtype bfloat16
  PYTHONPATH=python python3 gpu_codegen/tools/cuda_sources.py --out DIR --models gpt2_train   (forward + backward)

Models (--models) are built at the GPU suite's size (large configs, 64 x 256 tokens or 64 images); tracing is
all this does with them. Workloads keep their own dtypes, at nvrtc_time.py's sizes.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nvrtc_time import sources_of, trace_cuda_sources  # noqa: E402

from cppinductor.bench import workloads  # noqa: E402


def model_sources(name: str, dtype: torch.dtype) -> list[str]:
    """CUDA modules of a suite model's graphs: its forward (eval, no_grad),
    or for `<model>_train` its training step's forward and backward."""
    from cppinductor.bench import models

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    train = name.endswith("_train")
    spec = {s.name: s for s in models.SPECS}[name.removesuffix("_train")]
    torch.manual_seed(0)
    model = spec.build(True).to(dtype=dtype).eval()
    # The GPU suite's batch shape: tracing is all this does with it.
    inputs = models.make_inputs(spec, "cpu", dtype, "large", True, shape_of="cuda")

    def run(compile):
        if train:
            models.main_output(compile(model)(**inputs)).float().square().mean().backward()
            return
        with torch.no_grad():
            compile(model)(**inputs)

    return trace_cuda_sources(run)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="+", help="bench workloads (with --models: suite models)")
    p.add_argument("--out", required=True, help="directory the modules are written to")
    p.add_argument("--models", action="store_true", help="the names are the models suite's")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the models' dtype")
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from cppinductor.bench import models

    known = ({s.name for s in models.SPECS} | {s.name + "_train" for s in models.SPECS} if args.models
             else set(workloads.BY_NAME))
    for name in args.names:
        if name not in known:
            raise SystemExit(f"{name}: not one of {', '.join(sorted(known))}")
        sources = model_sources(name, getattr(torch, args.dtype)) if args.models else sources_of(workloads.BY_NAME[name])
        for i, source in enumerate(sources):
            path = out / f"{name}_{i}.cu"
            path.write_text(source)
            kernels = re.findall(r"^// kernel: (\S+)\n(?:.*\n)*?^// why: (.*)$", source, re.M)
            print(f"{path}: {len(kernels)} kernels")
            for kernel, why in kernels:
                print(f"  {kernel}: {why}")


if __name__ == "__main__":
    main()
