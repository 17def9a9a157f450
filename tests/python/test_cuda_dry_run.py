"""The CUDA side of lowerings, without a GPU: graphs traced on CPU are moved to cuda:0 and printed by
generate_cuda_source (lowering, fusion and the GPU schedule for a default target); with NVRTC
(CPPINDUCTOR_NVRTC_LIBRARY, or one on the loader path) the source is also compiled to PTX. A lowering that
cannot run on CUDA must fall back there with a reason, never print something that does not compile."""

from __future__ import annotations

import math
import os
import re

import pytest
import torch
import torch.nn.functional as F

from check import check_model
from cppinductor import _C, debug
from cppinductor.export import export_graph


def _on_cuda(desc):
    """The same graph description with every CPU device replaced by cuda:0."""
    if isinstance(desc, dict):
        return {k: ("cuda:0" if k == "device" and v == "cpu" else _on_cuda(v)) for k, v in desc.items()}
    if isinstance(desc, list):
        return [_on_cuda(v) for v in desc]
    return desc


def _nvrtc() -> bool:
    path = os.environ.get("CPPINDUCTOR_NVRTC_LIBRARY")
    if path and not _C.nvrtc_available():
        _C.set_nvrtc_library(path)
    return _C.nvrtc_available()


def _cuda_sources(fn, args, grad: bool) -> list[tuple[str, str]]:
    with debug.recording() as records:
        check_model(fn, args, grad=grad, runs=1, reduction=True)
    return [(r.kind, _C.generate_cuda_source(_on_cuda(export_graph(r.gm)))) for r in records]


# name: (program, trained, the op each graph must have a kernel for: not a CUDA fallback)
PROGRAMS = {
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), True, "max_pool2d_with_indices"),
    "max_pool2d_dilated": (lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0), dilation=(2, 1)), True,
                           "max_pool2d_with_indices"),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), True, "avg_pool2d"),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), True, "adaptive_avg_pool2d"),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (3, 4)), True, "adaptive_max_pool2d"),
    "vector_norm": (lambda x: (torch.linalg.vector_norm(x, dim=-1), torch.linalg.vector_norm(x, 3),
                               torch.linalg.vector_norm(x, float("inf"), dim=(0, 1))), False, "linalg_vector_norm"),
    "repeat": (lambda x: x.repeat(2, 1, 3, 1) + 1, False, "repeat"),
    "slice_scatter": (lambda x: torch.slice_scatter(x, x[:, :, 1::3].exp(), dim=2, start=1, step=3), False,
                      "slice_scatter"),
    "round_decimals": (lambda x: torch.round(x, decimals=-1) + torch.round(x, decimals=2), False, "round"),
    "diagonal_scatter": (lambda x: torch.diagonal_scatter(x, x.diagonal(1, 2, 3).exp(), 1, 2, 3), False,
                         "diagonal_scatter"),
    "unfold_sum": (lambda x: x.unfold(2, 3, 2).sum(-1), False, "sum"),
    "fmax": (lambda x: torch.fmax(x, x[:, :1]), False, "fmax"),
    "angle": (lambda x: torch.angle(x), False, "angle"),
    # A block scan along the contiguous dim, and a thread per column down dim 2.
    "cumsum_rows": (lambda x: torch.cumsum(x.exp(), -1) * torch.cumprod(x, -1), True, "cumsum"),
    "cumsum_columns": (lambda x: torch.cumsum(x, 2, dtype=torch.float64).sin(), True, "cumsum"),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_generated_cuda_compiles(name):
    fn, grad, op = PROGRAMS[name]
    sources = _cuda_sources(fn, (torch.randn(2, 3, 11, 9),), grad)
    assert len(sources) == (2 if grad else 1)
    for kind, src in sources:
        # The op is in some kernel's origins (a fused producer may name the kernel).
        assert "__global__" in src and re.search(rf"// origins: .*{op}", src), (
            f"{kind}: no CUDA kernel for {op}\n{src[:2000]}")
    if not _nvrtc():
        pytest.skip("no NVRTC (set CPPINDUCTOR_NVRTC_LIBRARY)")
    for kind, src in sources:
        ptx = _C.compile_cuda_source(src)
        assert ".entry" in ptx, f"{kind}: no kernel in the PTX"


def test_training_layer_norm_forward_is_one_cuda_kernel():
    """The forward returns mean and rstd for the backward; the normalisation
    recomputes them from the row's reductions instead of loading them from a
    loop-less stage (which CUDA stages cannot read), so it stays in the
    statistics kernel rather than a second pass over the rows."""
    weight, bias = torch.randn(64, requires_grad=True), torch.randn(64, requires_grad=True)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (64,), weight, bias)

    sources = dict(_cuda_sources(norm, (torch.randn(4, 32, 64, requires_grad=True),), grad=True))
    assert sources["forward"].count("__global__") == 1, sources["forward"]


def test_an_expensive_permuted_producer_of_norms_is_stored_once_on_cuda():
    """gelu(x) permuted and read by two norms (Whisper's gelu(conv) +
    positions, read by every layer's norms along the channels, which the
    convolution's output strides by the sequence length). Recomputed in each
    norm pass, every lane of a warp would load its own 32-byte sector of x;
    stored once (a stage of the norms' kernel here), the norms read it
    contiguously and gelu's erf runs once per element. A small producer
    (below FusionHeuristics::cuda_min_gathered_producer_elements) is still
    recomputed: a kernel launch would cost more."""
    def norms_of_gelu(channels: int):
        w1, w2 = torch.randn(channels), torch.randn(channels)

        def f(x):
            h = F.gelu(x).transpose(1, 2)
            return F.layer_norm(h, (channels,), w1), F.layer_norm(h * 2, (channels,), w2)

        return f

    (_, source), = _cuda_sources(norms_of_gelu(256), (torch.randn(4, 256, 1024),), grad=False)
    assert source.count("cppi_erf(") == 1, source
    (_, small), = _cuda_sources(norms_of_gelu(64), (torch.randn(2, 64, 37),), grad=False)
    assert small.count("cppi_erf(") > 1, small
    if _nvrtc():
        assert ".entry" in _C.compile_cuda_source(source)


def test_layer_norm_weight_and_bias_gradients_fold_in_one_split_pass():
    """layer_norm backward's weight and bias gradients are two column sums over
    the same rows: one pass reads each element once, and with 256 columns (8
    groups of 32) the rows split across blocks so the GPU fills."""
    weight, bias = torch.randn(256, requires_grad=True), torch.randn(256, requires_grad=True)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (256,), weight, bias)

    sources = dict(_cuda_sources(norm, (torch.randn(4096, 256, requires_grad=True),), grad=True))
    backward = sources["backward"]
    column = backward[backward.index("mapping=column_reduction"):]
    column = column[:column.index("\n}\n")]
    assert "row_splits=8" in column, column
    assert column.count("for (int64_t pos") == 1, column
    assert column.count("atomicAdd(") == 1, column


def test_mse_loss_forward_stores_the_scaled_difference_in_the_split_loss_pass():
    """mse_loss's forward sums the squared difference over everything and
    saves the scaled difference for the backward: one kernel whose split
    pass (the sum across blocks) stores it too, reading both inputs once."""
    target = torch.randn(64, 1024)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(x * 2 + 1, target)

    sources = dict(_cuda_sources(loss, (torch.randn(64, 1024, requires_grad=True),), grad=True))
    forward = sources["forward"]
    assert forward.count("__global__") == 1, forward
    kernel = forward[forward.index("// schedule:"):]
    assert re.search(r"row_splits=\d+", kernel), kernel
    assert kernel.count("for (int64_t pos") == 1, kernel
    assert "(in the pass of stage 0)" in kernel, kernel


def test_out_of_range_index_fails_the_cuda_kernel_like_eager():
    """An index eager rejects fails the kernel with a device-side assert
    (eager's CUDA kernels assert on the device too); the index is clamped
    as well, so nothing reads outside the buffer. A masked load is not
    checked."""
    w = torch.randn(10, 16)

    def embed(i: torch.Tensor) -> torch.Tensor:
        return F.embedding(i, w) * 2

    (kind, src), = _cuda_sources(embed, (torch.randint(0, 10, (64,)),), grad=False)
    assert "if (" in src and "cppi_index_assert(" in src, src
    if not _nvrtc():
        pytest.skip("no NVRTC (set CPPINDUCTOR_NVRTC_LIBRARY)")
    assert "__assertfail" in _C.compile_cuda_source(src)


def test_integer_division_compiles_for_cuda_without_a_zero_report():
    """nonzero_divisor on CUDA takes a 0 divisor as 1 (CUDA eager does not
    raise); the CPU's runtime report does not exist there."""

    def div(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a // b, a % b

    (kind, src), = _cuda_sources(div, (torch.arange(-6, 6), torch.arange(1, 13)), grad=False)
    assert "cppi_nonzero_divisor<" in src, src
    if not _nvrtc():
        pytest.skip("no NVRTC (set CPPINDUCTOR_NVRTC_LIBRARY)")
    assert ".entry" in _C.compile_cuda_source(src)


def test_embedding_rows_are_cached_and_their_positions_found_once_per_row():
    """layer_norm of an embedding lookup: the gathered row is read into
    registers once (one pass, not three), in 16-byte vectors (the row's
    offset, a token id times 128, keeps them aligned), and the token's row
    position, with its bounds check, is computed once per row before the
    cache fill."""
    table = torch.randn(500, 128)

    def embed(ids: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(F.embedding(ids, table), (128,))

    (_, source), = _cuda_sources(embed, (torch.randint(0, 500, (64,)),), grad=False)
    kernel = source[source.index("// schedule:"):]
    assert "elements_per_thread=4 cache_vector=4" in kernel.splitlines()[0], kernel
    fill = kernel[kernel.index("// row cache"):kernel.index("// stage 0")]
    loop = fill[fill.index("for (int slot"):]
    assert "cppi_index_assert" in fill and "cppi_index_assert" not in loop, fill
    ids = re.search(r"const int64_t\* (\w+)", kernel).group(1)
    rows = re.search(r"const float\* (\w+)", kernel).group(1)
    body = kernel[kernel.index("{"):]
    assert body.count(rows) == 1 and f"*)({rows} + " in loop, kernel  # one vector read, in the fill
    assert kernel.count(f"{ids}[") == 1, kernel  # and the token once per row
    if _nvrtc():
        assert ".entry" in _C.compile_cuda_source(source)


def test_16_bit_arithmetic_of_paired_lanes_is_packed():
    """GPT-2's gelu_new in bfloat16 rounds each intermediate as eager does.
    Where an operation's operands are bfloat16 values (or constants
    bfloat16 holds: 0.5, 1.0), two lanes run as one packed operation; the
    cube and the multiplies by 0.044715 and sqrt(2/pi), which bfloat16 does
    not hold, stay float with a packed rounding."""
    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    (_, source), = _cuda_sources(gelu_new, (torch.randn(64, 256, dtype=torch.bfloat16),), grad=False)
    kernel = source[source.index("// schedule:"):]
    assert kernel.count("cppi_bf16x2_op<cppi_pair_mul>") == 2, kernel  # 0.5 * x, and the product
    assert kernel.count("cppi_bf16x2_op<cppi_pair_add>") == 2, kernel  # x + t, 1 + tanh
    assert kernel.count("cppi_float2_to_bf16(") == 4, kernel  # the cube, the two constants, tanh
    if _nvrtc():
        assert ".entry" in _C.compile_cuda_source(source)


def test_accumulating_scatters_add_atomically_one_element_per_thread():
    """An embedding's backward and scatter_add: each gradient element is one
    atomic add (threads may meet on a row), so no vector store; every int
    and float width the GPU adds whole compiles."""
    emb = torch.nn.Embedding(50, 64)

    def train(ids: torch.Tensor) -> torch.Tensor:
        return emb(ids) * 2

    sources = _cuda_sources(train, (torch.randint(0, 50, (8, 16)),), grad=True)
    backward = dict(sources)["backward"]
    kernel = backward[backward.index("index_put"):]
    assert "cppi_atomic_add(&" in kernel, backward
    scatter = kernel[kernel.rindex("// schedule:", 0, kernel.index("cppi_atomic_add(&")):]
    assert "elements_per_thread=1" in scatter.splitlines()[0], scatter
    for dtype in (torch.float64, torch.int32, torch.int64):
        (_, source), = _cuda_sources(lambda x, i, s: torch.scatter_add(x, 1, i, s),
                                     (torch.zeros(4, 6, dtype=dtype), torch.randint(0, 6, (4, 9)),
                                      torch.ones(4, 9, dtype=dtype)), grad=False)
        assert "cppi_atomic_add(&" in source, source
        if _nvrtc():
            assert "atom.global.add" in _C.compile_cuda_source(source) or "red.global.add" in _C.compile_cuda_source(source)
    if _nvrtc():
        ptx = _C.compile_cuda_source(backward)
        assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx, ptx


def test_16_bit_accumulating_scatters_add_into_float_and_round_once():
    """bfloat16 and half have no atomic add that rounds as ATen's CUDA kernel
    does (a position's updates summed in float, rounded once): the gradient
    of x[rows] (an index_put with accumulate into x's dtype) and a
    scatter_add add atomically into a float32 buffer, and a later kernel
    rounds it."""
    for dtype in (torch.bfloat16, torch.float16):
        table = torch.randn(50, 64).to(dtype)

        def gather(rows: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return x[rows] * 2

        sources = dict(_cuda_sources(gather, (torch.randint(0, 50, (300,)), table.requires_grad_()), grad=True))
        (_, scatter), = _cuda_sources(lambda x, i, s: torch.scatter_add(x, 1, i, s),
                                      (torch.zeros(4, 6, dtype=dtype), torch.randint(0, 6, (4, 9)),
                                       torch.ones(4, 9, dtype=dtype)), grad=False)
        for source in (sources["backward"], scatter):
            adds = re.findall(r"cppi_atomic_add\(&(\w+)\[", source)
            assert adds and all(re.search(rf"\bfloat\* {a}\b", source) for a in adds), source
            if _nvrtc():
                ptx = _C.compile_cuda_source(source)
                assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx, ptx


def test_cat_halves_load_vectors_and_odd_pads_vectorise_over_rows():
    """Rotary embeddings' cat of halves reads each half under a mask that is
    the same for four consecutive columns: vector loads (H200: 0.450 ms with
    lane-by-lane loads, 0.282 ms, Triton's time). A pad to 4101 columns
    cannot vectorise by rows; it does over the flattened elements (0.164 ms
    scalar, 0.068 ms, the copy's time)."""
    def rope_half(x, c, s):
        x1, x2 = x[..., :64], x[..., 64:]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)

    (_, source), = _cuda_sources(rope_half, (torch.randn(2, 16, 128), torch.randn(16, 64), torch.randn(16, 64)),
                                 grad=False)
    kernel = source[source.index("// schedule:"):]
    assert "elements_per_thread=4" in kernel.splitlines()[0], kernel
    assert kernel.count(" ? *(const cppi_vec<float, 4>*)(") == 8, kernel

    def pad_exp(x):
        return F.pad(x.exp() - 1, (3, 5), value=-2.0) * 2

    (_, source), = _cuda_sources(pad_exp, (torch.randn(8, 4093),), grad=False)
    kernel = source[source.index("// schedule:"):]
    assert "elements_per_thread=4 flat_vector=true" in kernel.splitlines()[0], kernel
    assert "if (++fx1 == 4101)" in kernel and "cppi_store_vec(" in kernel, kernel
    if _nvrtc():
        assert ".entry" in _C.compile_cuda_source(source)


def test_vector_store_staging_names_do_not_shadow_size_symbols():
    """A grid-stride kernel stages its vector store in a fresh local; named
    s<N>, it shadowed the size symbol s<N> of a dynamic graph (`s3*x1` became
    vector * int) and NVRTC rejected the kernel (found by the fuzzer)."""
    def positive(a1):  # torch names its sizes s3, s19, s74: the fourth fresh name was s3
        return a1 > 0

    fn = torch.compile(positive, backend="cppinductor", dynamic=True)
    with debug.recording() as records:
        fn(torch.randn(3, 7, 16))
    (record,) = records
    src = _C.generate_cuda_source(_on_cuda(export_graph(record.gm)))
    symbols = set(re.findall(r"\bint64_t (s\d+)\b", src))
    assert symbols, src
    declared = set(re.findall(r"cppi_vec<[^>]*> (\w+)\s*[;=]", src))
    assert not symbols & declared, (symbols & declared, src)
    if not _nvrtc():
        pytest.skip("no NVRTC (set CPPINDUCTOR_NVRTC_LIBRARY)")
    assert ".entry" in _C.compile_cuda_source(src)


def test_corrected_variance_sums_share_one_block_reduction():
    """layer_norm's corrected two-pass variance sums the deviations and their
    squares over the cached row: one slot loop and one paired block reduction
    (one barrier pair) for both, after the mean's own reduction."""
    weight, bias = torch.randn(4096), torch.randn(4096)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (4096,), weight, bias)

    (_, source), = _cuda_sources(norm, (torch.randn(64, 4096),), grad=False)
    kernel = source[source.index("// schedule:"):]
    assert "mapping=row_per_block" in kernel.splitlines()[0], kernel
    assert kernel.count("cppi_block_reduce_sum2(") == 1, kernel
    assert kernel.count("cppi_block_reduce(") == 1, kernel
    assert "(one pass with stages 1-2)" in kernel, kernel


def test_scans_take_the_block_mappings():
    """Along the contiguous dim a block per row combines its threads' totals
    with cppi_block_exclusive_scan; down 70 columns of 300 rows, blocks of 32
    columns x 32 row slices combine the slices' totals in shared memory."""
    (src,) = dict(_cuda_sources(lambda x: (torch.cumsum(x, 1), torch.cumsum(x, 0) * 2), (torch.randn(300, 70),),
                                grad=False)).values()
    kernels = src.split("// kernel: ")[1:]
    rows = next(k for k in kernels if re.search(r"// origins: cumsum\b(?!_)", k))
    columns = next(k for k in kernels if "// origins: cumsum_1" in k)
    assert "mapping=row_per_block" in rows and "cppi_block_exclusive_scan(" in rows, rows
    assert "mapping=column_reduction block=1024" in columns and "scan_scratch[1056]" in columns, columns


def test_few_long_scans_split_across_blocks():
    """One row of 1M and 40 columns of 20000 rows would each leave most of
    the GPU idle as a block per row or group: they split across blocks,
    which take tickets, publish their share's total and look back at those
    of the blocks before them (module-level arrays sized by the grid)."""
    (src,) = dict(_cuda_sources(lambda x, c: (torch.cumsum(x, 0), torch.cumsum(c, 0)),
                                (torch.randn(1 << 20), torch.randn(20000, 40)), grad=False)).values()
    kernels = src.split("// kernel: ")[1:]
    rows = next(k for k in kernels if re.search(r"// origins: cumsum\b(?!_)", k))
    columns = next(k for k in kernels if "// origins: cumsum_1" in k)
    assert re.search(r"mapping=row_per_block block=512 .*row_splits=(\d+)", rows), rows
    assert re.search(r"mapping=column_reduction block=1024 .*row_splits=(\d+)", columns), columns
    for k in (rows, columns):
        splits = int(re.search(r"row_splits=(\d+)", k).group(1))
        tiles = splits * (1 if k is rows else 2)
        assert f"_ready[{tiles}];" in k and "atomicAdd(&" in k and "<= epoch" in k, k


def _on_cuda_but_scalars(desc):
    """_on_cuda, except that 0-d tensors stay on the CPU (lifted Python scalars)."""
    if isinstance(desc, dict):
        if isinstance(desc.get("tensor"), dict) and desc["tensor"].get("sizes") == []:
            return desc
        return {k: ("cuda:0" if k == "device" and v == "cpu" else _on_cuda_but_scalars(v)) for k, v in desc.items()}
    if isinstance(desc, list):
        return [_on_cuda_but_scalars(v) for v in desc]
    return desc


def test_lifted_python_floats_are_kernel_arguments():
    """A float argument that changes between calls arrives as a 0-d float64 CPU tensor, converted on the CPU.
    The CUDA kernel takes its value by value and does the arithmetic itself: one kernel, no CPU kernel and
    no ATen call for the mul that reads it."""

    def f(x, a):
        return torch.softmax(x * a, -1) + torch.relu(x * a + 1.0) * (a * 2)

    compiled = torch.compile(f, backend="cppinductor")
    x = torch.randn(8, 64)
    with debug.recording() as records:
        for a in (1.5, 2.5, 3.5):
            torch.testing.assert_close(compiled(x, a), f(x, a))
    desc = _on_cuda_but_scalars(export_graph(records[-1].gm))
    scalars = [n for n in desc["nodes"] if n["op"] == "placeholder" and n["val"]["tensor"]["sizes"] == []]
    assert len(scalars) == 1 and scalars[0]["val"]["tensor"]["device"] == "cpu", "Dynamo no longer lifts the float"
    src = _C.generate_cuda_source(desc)
    assert src.count("__global__") == 1, src
    name = scalars[0]["name"]
    assert re.search(rf"const double in_{name}_value\b", src) and f"= &in_{name}_value;" in src, src
    if _nvrtc():
        assert ".entry" in _C.compile_cuda_source(src)


def test_the_cuda_sources_tool_writes_each_graphs_module_and_lists_its_kernels(tmp_path, monkeypatch, capsys):
    """gpu_codegen/tools/cuda_sources.py, the way to read a change's CUDA kernels without a GPU: one module per
    graph of the workload, each kernel listed with the reason for its schedule."""
    import pathlib
    import sys

    tools = pathlib.Path(__file__).resolve().parents[2] / "gpu_codegen" / "tools"
    monkeypatch.syspath_prepend(str(tools))
    import cuda_sources

    monkeypatch.setattr(sys, "argv", ["cuda_sources.py", "--out", str(tmp_path), "softmax"])
    cuda_sources.main()
    (module,) = tmp_path.glob("softmax_*.cu")
    assert "__global__" in module.read_text()
    listed = capsys.readouterr().out
    assert re.search(r"softmax_0\.cu: 1 kernels\n  kernel0_\w+: row per", listed), listed
    monkeypatch.setattr(sys, "argv", ["cuda_sources.py", "--out", str(tmp_path), "no_such_workload"])
    with pytest.raises(SystemExit, match="not one of"):
        cuda_sources.main()
