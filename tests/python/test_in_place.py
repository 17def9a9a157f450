"""End to end: a kernel writes its result over an input it reads for the last
time (lowering/ir/in_place.h, backend/buffer_reuse.h), as Inductor's
in-place reuse does; results stay eager's."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from check import check_model
from cppinductor.runtime import _in_place


def plan_text(fn, args, tmp_path, **compile_kwargs) -> str:
    torch.compile(fn, backend="cppinductor", options={"debug_dir": str(tmp_path)}, **compile_kwargs)(*args)
    plans = [os.path.join(d, "wrapper_plan.txt") for d, _, files in os.walk(tmp_path) if "wrapper_plan.txt" in files]
    assert len(plans) == 1
    return open(plans[0]).read()


def matmul_relu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w)


def test_an_epilogue_writes_over_the_matmul_result(device, tmp_path):
    args = (torch.randn(24, 16, device=device), torch.randn(16, 40, device=device))
    check_model(matmul_relu, args)
    text = plan_text(matmul_relu, args, tmp_path)
    assert "alloc    relu float32[24, 40] = in place of mm\n" in text, text


def test_the_returned_tensor_keeps_the_matmul_result_storage_size():
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    out = torch.compile(matmul_relu, backend="cppinductor")(x, w)
    torch.testing.assert_close(out, matmul_relu(x, w))
    assert out.untyped_storage().nbytes() == 8 * 8 * 4


def test_softmax_over_a_matmul_result_in_place(device, tmp_path):
    def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.t() / 4, dim=-1)

    args = (torch.randn(32, 16, device=device), torch.randn(48, 16, device=device))
    check_model(attention_scores, args, reduction=True)
    assert "= in place of mm" in plan_text(attention_scores, args, tmp_path)


def test_a_flat_matmul_result_is_written_over_as_a_3d_buffer(device, tmp_path):
    linear = torch.nn.Linear(16, 32).to(device).requires_grad_(False)

    def mlp_in(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(linear(x))  # mm's [B*T, 32] result, gelu's [B, T, 32] output

    args = (torch.randn(2, 12, 16, device=device),)
    check_model(mlp_in, args)
    text = plan_text(mlp_in, args, tmp_path)
    # CUDA: the bias add is fused into gelu (unfuse_addmm_bias); the CPU keeps addmm.
    product = "addmm_mm" if device == "cuda" else "addmm"
    assert f"float32[2, 12, 32] = in place of {product}\n" in text, text


def test_a_result_read_again_later_is_not_overwritten(device, tmp_path):
    def two_readers(x: torch.Tensor, w: torch.Tensor):
        y = x @ w
        return torch.relu(y), y.sum(0)

    args = (torch.randn(24, 16, device=device), torch.randn(16, 40, device=device))
    check_model(two_readers, args, reduction=True)
    assert "in place" not in plan_text(two_readers, args, tmp_path)


def test_a_transposed_read_is_not_overwritten(device, tmp_path):
    def transposed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x @ w  # square: y and its transpose have one shape
        return torch.relu(y.t() + y)  # element (i, j) reads y[i, j] and y[j, i]

    args = (torch.randn(32, 32, device=device), torch.randn(32, 32, device=device))
    check_model(transposed, args)
    assert "in place" not in plan_text(transposed, args, tmp_path)


def test_graph_inputs_are_never_overwritten(device):
    x = torch.randn(64, device=device)
    keep = x.clone()
    out = torch.compile(lambda t: torch.relu(t) * 2, backend="cppinductor")(x)
    torch.testing.assert_close(x, keep)
    torch.testing.assert_close(out, torch.relu(keep) * 2)


def test_symbolic_shapes_in_place(tmp_path):
    compiled = torch.compile(matmul_relu, backend="cppinductor", dynamic=True)
    w = torch.randn(16, 24)
    for rows in (5, 9, 13):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(compiled(x, w), matmul_relu(x, w))
    text = plan_text(matmul_relu, (torch.randn(7, 16), w), tmp_path, dynamic=True)
    assert "= in place of mm" in text, text


class GatedMLP(torch.nn.Module):
    """Linear layers whose results each die in one pointwise or softmax kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.fc3(torch.tanh(self.fc2(F.gelu(self.fc1(x))))), -1)


def test_mlp_training_in_place_matches_eager(device):
    check_model(GatedMLP().to(device), (torch.randn(12, 16, device=device, requires_grad=True),),
                reduction=True, grad=True)


def test_the_runtime_writes_over_the_storage_where_the_kernel_reads():
    same = torch.randn(6, 8)
    assert _in_place(same, (6, 8), (8, 1), torch.float32, 192, "cpu") is same
    flat = torch.randn(48)  # a [B*T, C] result written as [B, T, C]
    view = _in_place(flat, (6, 8), (8, 1), torch.float32, 192, "cpu")
    assert view.data_ptr() == flat.data_ptr() and view.stride() == (8, 1)
    # A tensor that does not start at its storage (or is too small): fresh.
    offset = torch.randn(10)[2:]
    fresh = _in_place(offset, (8,), (1,), torch.float32, 32, "cpu")
    assert fresh.untyped_storage().data_ptr() != offset.untyped_storage().data_ptr()
    small = torch.randn(4)
    assert _in_place(small, (2, 4), (4, 1), torch.float32, 32, "cpu").data_ptr() != small.data_ptr()
