"""Shared fixtures for the end-to-end tests (see check.py for check_model).

Every test starts from a clean Dynamo (no cached frames, zeroed counters) and
a fixed seed. The `device` fixture runs a test on CPU and, where a GPU is
present, on CUDA; the CUDA variants are skipped otherwise.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


@pytest.fixture
def graph_count():
    """A function returning how many graphs Dynamo has handed to a backend since the test began."""
    return lambda: counters["stats"]["unique_graphs"]
