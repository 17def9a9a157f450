"""The distributed suite: a small transformer trained under DDP and FSDP2,
one process per device, eager / Inductor / cppinductor side by side.

``python -m cppinductor.bench --suite distributed --device cuda`` (NCCL, one
process per GPU, at least two GPUs) or ``--device cpu`` (gloo, two processes).

Strategies, as users write them:
- ``ddp``: ``torch.compile(DDP(model))``; Dynamo's DDPOptimizer splits the
  graph at bucket boundaries so the all-reduces overlap the backward.
- ``ddp_inner``: ``DDP(torch.compile(model))``; DDP's hooks fire as our
  backward graph produces the gradients.
- ``fsdp2``: ``fully_shard`` on every block and the root, then
  ``torch.compile(model)``; Dynamo breaks the graph at FSDP2's hooks, so the
  all-gathers and reduce-scatters run between our graphs.

Per strategy and backend each process builds the same model (same seed), runs
``steps`` SGD steps on its own batches and keeps it; the results are compared
with eager's (each step's loss, the final parameters gathered whole), the
compile counts come from Dynamo's counters and our graph records. Then every
kept model is timed in interleaved rounds: a step is timed on every rank, the
slowest rank's time counts, the median over rounds is reported. Peak memory is
the most any rank allocated during a backend's checked steps above what was
allocated before its model was built.

Nothing hangs: the process group has a timeout, the parent kills the workers
at a deadline, and each rank writes its results after every backend, so what
finished before a failure is still reported.
"""

from __future__ import annotations

import datetime
import gc
import json
import math
import os
import socket
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..cudagraphs import MODES as CUDA_GRAPH_MODES
from .backends import Backend
from .workloads import TransformerBlock

STRATEGIES = ("ddp", "ddp_inner", "fsdp2")
DISTRIBUTED_BACKENDS = ("eager", "inductor", "cppinductor", "inductor:reduce-overhead",
                        "cppinductor:reduce-overhead")
# NVLink multicast stays off on shared hosts (it can take their GPUs out of service).
_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class ModelSize:
    vocab: int
    dim: int
    heads: int
    layers: int
    batch: int  # per rank
    tokens: int


SIZES = {
    "full": ModelSize(vocab=8192, dim=1024, heads=16, layers=4, batch=8, tokens=512),
    "quick": ModelSize(vocab=4096, dim=512, heads=8, layers=2, batch=4, tokens=256),
    "tiny": ModelSize(vocab=128, dim=64, heads=4, layers=2, batch=2, tokens=16),
}


@dataclass
class DistributedConfig:
    device: str = "cuda"
    size: str = "full"
    strategies: Sequence[str] = STRATEGIES
    backends: Sequence[Backend] = ()
    world: int = 2
    steps: int = 5  # checked against eager
    rounds: int = 7  # timed, interleaved
    steps_per_round: int = 3
    timeout_s: float = 900.0
    # Training tolerances against eager (float32, TF32 off): every step's loss
    # relative, the final parameters absolute.
    loss_rtol: float = 1e-4
    param_atol: float = 1e-4


class TinyTransformer(nn.Module):
    """Token and position embeddings, pre-norm causal blocks, a head and the
    next-token cross-entropy."""

    def __init__(self, size: ModelSize):
        super().__init__()
        self.embed = nn.Embedding(size.vocab, size.dim)
        self.pos = nn.Parameter(torch.randn(size.tokens, size.dim) * 0.02)
        self.blocks = nn.ModuleList(TransformerBlock(size.dim, size.heads) for _ in range(size.layers))
        self.norm = nn.LayerNorm(size.dim)
        self.head = nn.Linear(size.dim, size.vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _wrap(strategy: str, model: nn.Module, backend: Backend, device: torch.device) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    compile_ = backend.compiler()
    ids = [device.index] if device.type == "cuda" else None
    if strategy == "ddp":
        return compile_(DDP(model, device_ids=ids, bucket_cap_mb=1))
    if strategy == "ddp_inner":
        return DDP(compile_(model), device_ids=ids, bucket_cap_mb=1)
    if strategy == "fsdp2":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        # The mesh on the model's device (left out, FSDP2 picks CUDA where
        # torch has it, under a gloo process group too).
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return compile_(model)
    raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


class _Trainer:
    """One backend's model, its wrapper and its optimizer."""

    def __init__(self, strategy: str, backend: Backend, size: ModelSize, device: torch.device):
        torch.manual_seed(0)
        self.model = TinyTransformer(size).to(device)
        self.wrapped = _wrap(strategy, self.model, backend, device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.cudagraphs = backend.mode in CUDA_GRAPH_MODES

    def step(self, batch) -> torch.Tensor:
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        loss = self.wrapped(*batch)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def full_parameters(self) -> List[torch.Tensor]:
        return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().cpu()
                for p in self.model.parameters()]


def _batches(size: ModelSize, count: int, rank: int, device: torch.device):
    gen = torch.Generator().manual_seed(1000 + rank)
    out = []
    for _ in range(count):
        tokens = torch.randint(0, size.vocab, (size.batch, size.tokens), generator=gen)
        out.append((tokens.to(device), torch.roll(tokens, -1, dims=1).to(device)))
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _compile_counts(records) -> Dict[str, object]:
    from torch._dynamo.utils import counters

    return {
        "dynamo_graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "our_graphs": [r.kind for r in records],
        "fallbacks": [r.graph_fallback for r in records if r.graph_fallback],
        "cudagraphs": sorted({str(r.cudagraphs) for r in records if r.cudagraphs is not None}),
    }


def _check(config: DistributedConfig, trainer_losses, params, reference) -> Dict[str, object]:
    if reference is None:
        return {}
    ref_losses, ref_params = reference
    loss_rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(trainer_losses, ref_losses))
    param_diff = max(float((a - b).abs().max()) for a, b in zip(params, ref_params))
    return {"loss_rel_diff": loss_rel, "param_max_diff": param_diff,
            "correct": loss_rel <= config.loss_rtol and param_diff <= config.param_atol}


def _run_strategy(config: DistributedConfig, strategy: str, rank: int, device: torch.device, out_path: str,
                  results: List[dict]) -> None:
    import torch.distributed as dist

    from .. import debug

    size = SIZES[config.size]
    batches = _batches(size, config.steps, rank, device)
    trainers: Dict[str, _Trainer] = {}
    reference = None
    for backend in config.backends:
        row: Dict[str, object] = {"strategy": strategy, "backend": backend.label}
        results.append(row)
        torch._dynamo.utils.counters.clear()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        try:
            with debug.recording() as records:
                trainer = _Trainer(strategy, backend, size, device)
                start = time.perf_counter()
                losses = [float(trainer.step(batches[0]))]
                row["first_step_s"] = time.perf_counter() - start
                losses += [float(trainer.step(b)) for b in batches[1:]]
            _sync(device)
            if device.type == "cuda":
                row["peak_mib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            params = trainer.full_parameters()
            row.update(_compile_counts(records))
            row.update(_check(config, losses, params, reference))
            if reference is None:
                reference = (losses, params)
            trainers[backend.label] = trainer
        except Exception as e:  # one backend's failure is its row's, the others still run
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
            row["traceback"] = traceback.format_exc()[-4000:]
        _write(out_path, results)
        dist.barrier()

    times: Dict[str, List[float]] = {label: [] for label in trainers}
    for _ in range(config.rounds):
        for label, trainer in trainers.items():
            _sync(device)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(config.steps_per_round):
                trainer.step(batches[0])
            _sync(device)
            elapsed = torch.tensor([(time.perf_counter() - start) / config.steps_per_round], dtype=torch.float64,
                                   device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's step
            times[label].append(float(elapsed))
    for row in results:
        if row["strategy"] == strategy and row["backend"] in times:
            row["step_ms"] = statistics.median(times[row["backend"]]) * 1e3
    _write(out_path, results)
    del trainers
    torch._dynamo.reset()


def _write(path: str, results: List[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f)
    os.replace(tmp, path)


def _worker(rank: int, config: DistributedConfig, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if config.device == "cuda":
        torch.cuda.set_device(rank)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        device = torch.device("cuda", rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=config.world,
                            timeout=datetime.timedelta(seconds=max(60.0, config.timeout_s / 3)))
    out_path = os.path.join(out_dir, f"rank{rank}.json")
    results: List[dict] = []
    try:
        for strategy in config.strategies:
            _run_strategy(config, strategy, rank, device, out_path, results)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_distributed(config: DistributedConfig) -> List[dict]:
    """Runs the workers; returns one row per (strategy, backend), merged over
    ranks: the worst correctness numbers, the largest peak memory, and an
    error where any rank had one (or where the deadline cut a rank short)."""
    import torch.multiprocessing as mp

    if config.device == "cuda" and torch.cuda.device_count() < config.world:
        raise RuntimeError(f"the distributed suite needs {config.world} GPUs; this machine has "
                           f"{torch.cuda.device_count()}")
    for key, value in _NCCL_ENV.items():
        os.environ.setdefault(key, value)
    with tempfile.TemporaryDirectory(prefix="cppinductor-dist-") as out_dir:
        context = mp.start_processes(_worker, args=(config, _free_port(), out_dir), nprocs=config.world,
                                     join=False, start_method="spawn")
        deadline = time.monotonic() + config.timeout_s
        failure = None
        try:
            while not context.join(timeout=2):
                if time.monotonic() > deadline:
                    failure = f"timed out after {config.timeout_s:.0f} s"
                    break
        except Exception as e:  # a worker raised outside a backend's row
            failure = f"{type(e).__name__}: {e}"[:2000]
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
        per_rank = []
        for rank in range(config.world):
            path = os.path.join(out_dir, f"rank{rank}.json")
            per_rank.append(json.load(open(path)) if os.path.exists(path) else [])
    return _merge(config, per_rank, failure)


def _merge(config: DistributedConfig, per_rank: List[List[dict]], failure: Optional[str]) -> List[dict]:
    rows: List[dict] = []
    for strategy in config.strategies:
        for backend in config.backends:
            found = [r for rows_ in per_rank for r in rows_
                     if r["strategy"] == strategy and r["backend"] == backend.label]
            row: Dict[str, object] = {"strategy": strategy, "backend": backend.label}
            if len(found) < config.world:
                row["error"] = failure or "a rank did not report this row"
            for r in found:
                for key, value in r.items():
                    if key in ("loss_rel_diff", "param_max_diff", "peak_mib", "first_step_s"):
                        row[key] = max(value, row.get(key, value))
                    elif key == "correct":
                        row[key] = value and row.get(key, True)
                    elif key not in row:
                        row[key] = value
            rows.append(row)
    eager = {r["strategy"]: r.get("step_ms") for r in rows if r["backend"] == "eager"}
    for r in rows:
        if r.get("step_ms") and eager.get(r["strategy"]):
            r["speedup"] = eager[r["strategy"]] / r["step_ms"]
    return rows


def format_distributed(rows: List[dict]) -> str:
    head = ("strategy", "backend", "step ms", "vs eager", "peak MiB", "1st step s", "graphs", "breaks",
            "ours (fwd/bwd)", "check")
    lines = [head]
    for r in rows:
        ours = r.get("our_graphs") or []
        check = ("ERROR: " + str(r["error"]).splitlines()[0][:80]) if "error" in r else (
            "reference" if r["backend"] == "eager" else
            ("ok" if r.get("correct") else "INCORRECT") + f" (loss {r.get('loss_rel_diff', math.nan):.1e}, "
            f"params {r.get('param_max_diff', math.nan):.1e})")
        if r.get("fallbacks"):
            check += f"; {len(r['fallbacks'])} graph(s) fell back"
        lines.append((
            r["strategy"], r["backend"], _fmt(r.get("step_ms"), ".2f"), _fmt(r.get("speedup"), ".2f", "x"),
            _fmt(r.get("peak_mib"), ".0f"), _fmt(r.get("first_step_s"), ".1f"), str(r.get("dynamo_graphs", "-")),
            str(r.get("graph_breaks", "-")),
            f"{ours.count('forward')}/{ours.count('backward')}" if ours else "-", check))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def config_for(device: str, size: str, backends: Sequence[Backend], strategies: Optional[Sequence[str]] = None,
               **kwargs) -> DistributedConfig:
    unknown = set(strategies or ()) - set(STRATEGIES)
    if unknown:
        raise ValueError(f"unknown strategy {', '.join(sorted(unknown))}; known: {', '.join(STRATEGIES)}")
    return DistributedConfig(device=device, size=size, backends=list(backends),
                             strategies=tuple(strategies or STRATEGIES), **kwargs)
