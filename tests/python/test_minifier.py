"""TORCHDYNAMO_REPRO_AFTER=aot with backend="cppinductor": a compiled graph
that differs from eager (the relu fault injected on purpose) is minified to
the op at fault and written as a repro that reproduces on its own."""

import os
import subprocess
import sys

import pytest
import torch
from torch._dynamo.debug_utils import AccuracyError


def test_an_injected_fault_is_minified_to_a_repro_that_reproduces(tmp_path):
    def f(x, y):
        a = (x * 2).sin()
        b = torch.relu(a + y)
        return (b * 3).sum(-1), a.exp()

    root = tmp_path / "debug"
    with torch._dynamo.config.patch(repro_after="aot", repro_level=4, debug_dir_root=str(root)):
        compiled = torch.compile(f, backend="cppinductor", options={"inject_relu_bug_TESTING_ONLY": True})
        with pytest.raises(AccuracyError, match="differs from eager"):
            compiled(torch.randn(8, 16), torch.randn(8, 16))
    folder = root / "cppinductor_repro" / "graph_000"
    module = (folder / "module" / "module.py").read_text()
    ops = [line.split("=")[1].split("(")[0].strip() for line in module.splitlines() if "torch.ops.aten" in line]
    assert ops == ["torch.ops.aten.relu.default"], module  # the sin, adds, exp and sum are gone
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 1 and "reproduces" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_without_the_fault_the_checked_graph_runs_as_eager(tmp_path):
    def f(x):
        return torch.relu(x * 2) + 1

    x = torch.randn(32)
    with torch._dynamo.config.patch(repro_after="aot", repro_level=4, debug_dir_root=str(tmp_path)):
        torch.testing.assert_close(torch.compile(f, backend="cppinductor")(x), f(x))
    assert not (tmp_path / "cppinductor_repro").exists()
