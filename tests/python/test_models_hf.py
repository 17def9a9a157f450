"""HuggingFace models, built from configs with random weights (nothing is
downloaded), compiled whole: no graph break, nothing left to eager
(fallback="error"), and as close to a float64 run as eager is.

These are the CPU models of the bench's model suite at its small batch, so
what the suite times is what these tests check. One forward and one training
step (loss, backward, every gradient) per model.
"""

import os

import pytest
import torch

pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from cppinductor.bench.correctness import fp64_mismatch  # noqa: E402
from cppinductor.bench.models import SPECS, model_case  # noqa: E402


def _compile(model):
    return torch.compile(model, backend="cppinductor", fullgraph=True, options={"fallback": "error"})


@pytest.mark.parametrize("train", [False, True], ids=["forward", "train"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_model_matches_float64_like_eager(spec, train):
    torch._dynamo.reset()
    case = model_case(spec, "cpu", torch.float32, "small", train)
    eager = case.make_step(lambda m: m)()
    compiled_step = case.make_step(_compile)
    first = compiled_step()
    second = compiled_step()  # the guarded, cached path
    reference = case.reference()
    for result in (first, second):
        problem = fp64_mismatch(eager, result, reference, atol=1e-3)
        assert problem is None, problem
