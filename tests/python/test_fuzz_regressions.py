"""Programs the random-program fuzzer (cppinductor.tools.fuzz_programs) found
wrong, crashing or needlessly falling back, minimised. Each compiles with
fallback="error" where the fix made it lower, so a regression to a fallback
fails here too."""

from __future__ import annotations

import pytest
import torch

from check import check_model

LOWERED = {"fallback": "error"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_reduced_float_to_bool_mask_in_a_vector_loop(dtype):
    """A half or bfloat16 value cast to bool is compared with zero as float32,
    so its vector mask has 4-byte lanes; the printer declared it with 2-byte
    lanes and clang rejected the kernel (the whole graph fell back)."""

    def f(x):
        b = x.to(torch.bool)
        return torch.any(b, dim=1, keepdim=True), torch.logical_not(b)

    x = torch.randn(4, 33, 5).to(dtype)
    x[0, :, 1] = 0
    check_model(f, (x,), options=LOWERED)


def test_gather_with_a_wrapping_arange_index():
    """x[arange(n) * 3 % n] fuses into a loop reading in[(3 * i) % 64], which
    LLVM 16's loop vectoriser turned into a stride-3 load group ignoring the
    wrap (351 of 4096 elements were garbage); such loops now stay scalar."""

    def f(a):
        g = torch.gather(a.squeeze(1), 0, torch.arange(64) * 3 % 64)
        return torch.maximum(a, g), a[torch.arange(64) * 5 % 64] * 2

    check_model(f, (torch.randn(64, 1),), options=LOWERED)
