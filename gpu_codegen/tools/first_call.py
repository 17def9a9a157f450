"""Where a suite model's first compiled call goes, stage by stage, for one backend in a fresh process.

  python3 gpu_codegen/tools/first_call.py cppinductor gpt2 --train [--dtype float32] [--device cuda]

Runs the model once in eager (as the bench does, so CUDA, cuBLAS and cuDNN are initialised), makes one throwaway
compile (the backend's imports), then times the first compiled call and, inside it, what the backend's stages took:
AOTAutograd's cache key (warm start), the partitioner, our compile_graph (lowering to NVRTC and module load), the
wrapper, and the first run (waiting for background CPU compiles). NVRTC makes cubins by default; with
`CPPINDUCTOR_CUDA_BINARY=ptx` a machine's first run pays the CUDA driver's JIT of our PTX inside compile_graph. For a cold run
give it fresh caches: TORCHINDUCTOR_CACHE_DIR, CPPINDUCTOR_CACHE_DIR and (for PTX) ~/.nv/ComputeCache.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import time

import torch
import torch._functorch._aot_autograd.autograd_cache as autograd_cache

import cppinductor.backend as backend_module
import cppinductor.partition as partition_module
import cppinductor.runtime as runtime_module
from cppinductor import _C
from cppinductor.bench import models

_times: dict[str, float] = collections.defaultdict(float)


def _timed(owner, attr: str, label: str) -> None:
    """Wraps owner.attr so each call adds its seconds to _times[label]."""
    f = getattr(owner, attr)

    @functools.wraps(f)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            _times[label] += time.perf_counter() - start

    setattr(owner, attr, timed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("backend", help="cppinductor, inductor, aot_eager, ...")
    p.add_argument("model", help="a models-suite name: gpt2, bert, ...")
    p.add_argument("--train", action="store_true", help="a training step (forward, loss, backward)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dtype = getattr(torch, args.dtype)
    spec = {s.name: s for s in models.SPECS}[args.model]
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    model = spec.build(cuda).to(args.device, dtype).eval()
    inputs = models.make_inputs(spec, args.device, dtype, "large", cuda)

    def step(fn) -> None:
        if args.train:
            models.main_output(fn(**inputs)).float().square().mean().backward()
        else:
            with torch.no_grad():
                fn(**inputs)
        if cuda:
            torch.cuda.synchronize()

    # Wrapped before the backend is first looked up: torch keeps the function it finds then.
    for owner, attr, label in [
        (backend_module, "cppinductor", "our backend (AOTAutograd and ours)"),
        (autograd_cache, "autograd_cache_key", "  AOTAutograd's cache key"),
        (partition_module, "partition", "  partitioner"),
        (_C, "compile_graph", "  compile_graph"),
        (runtime_module, "generate_wrapper", "  wrapper"),
        (runtime_module.CompiledFunction, "_first_run", "first run (waits for CPU kernels)"),
    ]:
        _timed(owner, attr, label)
    step(model)
    torch.compile(lambda x: x.sin() + 1, backend=args.backend)(torch.randn(8, device=args.device))
    torch._dynamo.reset()
    _times.clear()
    compiled = torch.compile(model, backend=args.backend)
    start = time.perf_counter()
    step(compiled)
    total = time.perf_counter() - start
    binary = os.environ.get("CPPINDUCTOR_CUDA_BINARY", "cubin") if cuda else "-"
    print(f"{args.backend} {args.model}{' train' if args.train else ''} {args.dtype} {args.device} "
          f"(cuda_binary {binary}): first call {total:.2f} s")
    for label, seconds in _times.items():
        print(f"  {label}: {seconds:.2f} s")
    start = time.perf_counter()
    step(compiled)
    print(f"  second call: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
