"""Shared fixtures for the end-to-end tests (see check.py for check_model).

Every test starts from a clean Dynamo (no cached frames, zeroed counters) and
a fixed seed. The `device` fixture runs a test on CPU and, where a GPU is
present, on CUDA; the CUDA variants are skipped otherwise.
"""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from cppinductor import _C

# Training graphs go through AOTAutograd's cache (warm start): each test
# session starts from an empty one, so no test sees a graph an earlier run
# stored.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="cppinductor-test-aot-")

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]

# The CPU vector ISAs this host runs ("avx2", "avx512"). A test of generated
# CPU code that depends on the vector width asks for an ISA (options
# {"cpu_isa": ...}) and asserts that ISA's text; the ISAs the host cannot
# run are skipped, so every host checks what it can and none fails by what
# it is.
HOST_CPU_ISAS = tuple(_C.host_cpu_isas())
FLOAT_LANES = {"avx2": 8, "avx512": 16}


def cpu_isa_param(isa: str, *values):
    """A pytest.param of (isa, *values), skipped where the host cannot run `isa`."""
    return pytest.param(isa, *values, marks=pytest.mark.skipif(isa not in HOST_CPU_ISAS,
                                                                reason=f"the host's CPU does not run {isa}"),
                        id="-".join(str(v) for v in (isa, *values)))


@pytest.fixture(params=[cpu_isa_param("avx2"), cpu_isa_param("avx512")])
def cpu_isa(request) -> str:
    """Each CPU vector ISA the host runs, in turn."""
    return request.param


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


@pytest.fixture
def fresh_tuning_cache(tmp_path, monkeypatch):
    """A kernel and tuning cache of the test's own: max-autotune measures
    instead of reading another test's winners."""
    monkeypatch.setenv("CPPINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


@pytest.fixture
def graph_count():
    """A function returning how many graphs Dynamo has handed to a backend since the test began."""
    return lambda: counters["stats"]["unique_graphs"]
