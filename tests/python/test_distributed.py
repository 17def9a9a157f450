"""Distributed training on the CPU: two gloo processes, SGD steps, compiled
against eager DDP in the same processes.

- DDP(torch.compile(model, backend="cppinductor")): our forward and
  backward graphs run inside DDP's hooks; parameters equal eager DDP's.
- torch.compile(DDP(model)) and FSDP2 (fully_shard) under torch.compile of
  this nn.Sequential: on this torch (2.11-2.13) Dynamo compiles nothing of
  either on the CPU, for any backend (DDP's forward and FSDP2's hooks are
  skipped frames; why no frame of the Sequential is traced after them was
  not established), so they run eagerly: the test checks results stay eager's and that no graph
  reached us, and will say so if a torch release starts compiling them. A
  module with a forward of its own is compiled under both: the distributed
  bench suite's transformer (test_distributed_suite.py).
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")

_WORKER = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 512), nn.GELU(), nn.Linear(512, 512), nn.LayerNorm(512), nn.GELU(),
                             nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 8))


    def train(rank, how, steps=3):
        model = make()
        if how == "eager":
            wrapped = DDP(model)
        elif how == "ddp_of_compiled":
            wrapped = DDP(torch.compile(model, backend="cppinductor", options={"fallback": "error"}))
        elif how == "compiled_ddp":
            wrapped = torch.compile(DDP(model, bucket_cap_mb=1), backend="cppinductor")
        else:
            from torch.distributed.fsdp import fully_shard
            for layer in model:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer)
            fully_shard(model)
            wrapped = torch.compile(model, backend="cppinductor")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(100 + rank)
        for _ in range(steps):
            loss = wrapped(torch.randn(16, 32, generator=gen)).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone() for p in model.parameters()]


    def worker(rank, world, port, out):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        from cppinductor import debug
        eager = train(rank, "eager")
        result = {}
        for how in ("ddp_of_compiled", "compiled_ddp", "fsdp2"):
            torch._dynamo.reset()
            with debug.recording() as records:
                params = train(rank, how)
            result[how] = {"max_difference": max(float((a - b).abs().max()) for a, b in zip(params, eager)),
                           "graphs": [r.kind for r in records]}
        with open(f"{out}.{rank}", "w") as f:
            json.dump(result, f)
        dist.destroy_process_group()


    if __name__ == "__main__":
        mp.spawn(worker, args=(2, int(sys.argv[2]), sys.argv[1]), nprocs=2)
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_ranks(folder, worker: str) -> list:
    """Runs `worker` (a script spawning two gloo ranks) and returns each rank's JSON result."""
    script = folder / "worker.py"
    script.write_text(worker)
    out = folder / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, str(script), str(out), str(_free_port())], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads((folder / f"result.json.{rank}").read_text()) for rank in range(2)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return _run_two_ranks(tmp_path_factory.mktemp("distributed"), _WORKER)


def test_ddp_around_a_compiled_module_trains_as_eager_ddp(results):
    for rank in results:
        r = rank["ddp_of_compiled"]
        assert r["max_difference"] < 1e-5, r
        assert "forward" in r["graphs"] and "backward" in r["graphs"], r


@pytest.mark.parametrize("how", ["compiled_ddp", "fsdp2"])
def test_wrappers_torch_does_not_compile_on_the_cpu_stay_eager(results, how):
    for rank in results:
        r = rank[how]
        assert r["max_difference"] < 1e-5, r
        # Nothing reached us on this torch; a release that compiles these
        # on the CPU turns this into a reminder to test what it compiles.
        assert r["graphs"] == [], f"{how} now compiles graphs on the CPU: {r}"


_COLLECTIVES_WORKER = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch.multiprocessing as mp


    def f(x):
        y = funcol.all_reduce(x.relu() * 2, "sum", dist.group.WORLD)
        z = funcol.all_gather_tensor(y + 1, 0, dist.group.WORLD)
        return z.sin() + 1


    def worker(rank, world, port, out):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        from cppinductor import debug
        x = torch.randn(8, 4) + rank
        with debug.recording() as records:
            got = torch.compile(f, backend="cppinductor", options={"fallback": "error"})(x)
        want = f(x)
        with open(f"{out}.{rank}", "w") as fh:
            json.dump({"max_difference": float((got - want).abs().max()), "shape": list(got.shape),
                       "wrappers": [r.wrapper_source for r in records]}, fh)
        dist.destroy_process_group()


    if __name__ == "__main__":
        mp.spawn(worker, args=(2, int(sys.argv[2]), sys.argv[1]), nprocs=2)
''')


def test_functional_collectives_inside_a_compiled_graph_run_between_our_kernels(tmp_path):
    """all_reduce and all_gather traced into the graph (as FSDP2 and DDP's
    python reducer put them there) run as ATen calls in our wrapper, each
    waited for before its result is read."""
    for r in _run_two_ranks(tmp_path, _COLLECTIVES_WORKER):
        assert r["max_difference"] < 1e-5 and r["shape"] == [16, 4], r
        (wrapper,) = r["wrappers"]
        assert "all_reduce" in wrapper and "all_gather_into_tensor" in wrapper and "wait_tensor" in wrapper
        assert "kernel" in wrapper  # the pointwise work around them is ours
