"""The generated wrapper (python/cppinductor/wrapper.py): the Python function
a compiled graph runs as. Its source is dumped and is what runs; every kind of
step keeps eager's results (ATen calls, in-place and reused buffers, inputs
re-laid out and written back, inputs returned as outputs); frees happen where
the plan puts them; kernel launchers check their arguments."""

from __future__ import annotations

import linecache
import os
import re

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from cppinductor import _C, debug
from cppinductor.backend import compile_fx_graph
from cppinductor.decompositions import decomposition_table
from cppinductor.memory import track_live_bytes
from cppinductor.options import parse_options
from cppinductor.runtime import CompiledFunction


def program(x: torch.Tensor, w: torch.Tensor, t: torch.Tensor):
    a = x @ w                              # an ATen step
    s = torch.softmax(a, -1)               # written in place over a
    c = s @ w
    d, e = torch.relu(c), torch.tanh(c)    # one of them takes s's dead storage
    t.mul_(2)                              # a graph input the kernels write
    return torch.sigmoid(d @ w + e @ w) + t.sum(), x


def compile_program(args, fn=program) -> CompiledFunction:
    """`fn` traced to ATen with its mutations as copy_ back, as AOTAutograd
    hands it to us, then compiled; called directly, so inputs may have
    layouts Dynamo would have recompiled for."""
    functional = torch.func.functionalize(fn, remove="mutations")
    gm = make_fx(functional, decomposition_table=decomposition_table())(*args)
    function = compile_fx_graph(gm, args, parse_options(None, {"fallback": "error"}), "inference")
    assert isinstance(function, CompiledFunction)
    return function


def inputs():
    return torch.randn(8, 12), torch.randn(12, 12) / 4, torch.randn(12, 12)


def test_every_kind_of_step_is_in_the_source():
    function = compile_program(inputs())
    source = function.source
    # On the CPU an extern matmul writes into a buffer of the memory plan,
    # whose layout the kernels after it need not check.
    assert re.search(r"^    mm = torch_mm\(x_1, w_1, out=mm\)$", source, re.M), source
    assert "mm_2.stride()" not in source, source
    assert "= in_place(mm, (8, 12), (12, 1), float32, 384, 'cpu')" in source, source
    assert re.search(r"= reuse\(\w+, \(8, 12\), \(12, 1\), float32, 384, 'cpu'\)\n", source), source
    assert "_original.copy_(" in source, source  # the write-back of a re-laid-out mutated input
    assert re.search(r"^    \w+( = \w+)* = None$", source, re.M), source
    assert re.search(r"^    return \(\w+, x_1\)$", source, re.M), source


def test_a_non_contiguous_input_is_re_laid_out_and_written_back():
    args = inputs()
    function = compile_program(args)
    x, w, t = inputs()
    t_transposed = t.t().contiguous().t()  # the same values, column-major
    expected_t = t.clone()
    expected, expected_x = program(x, w, expected_t)
    out, out_x = function([x, w, t_transposed])
    torch.testing.assert_close(out, expected)
    assert out_x is x  # an input returned as an output is that very tensor
    torch.testing.assert_close(t_transposed, expected_t)  # written back through the caller's layout
    assert t_transposed.stride() == (1, 12)


def test_a_view_is_reinterpreted_only_when_its_input_has_the_traced_strides():
    def linear_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.nn.functional.linear(x, w, b))  # w.t() is a view step

    x, w, b = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6)
    function = compile_program((x, w, b), linear_relu)
    assert re.search(r"= reinterpret_tensor\(w_1, \(8, 6\), \(1, 8\), 0\) if w_1.stride\(\) == \(8, 1\) else aten_", function.source)
    expected = linear_relu(x, w, b)
    for w_layout in (w, w.t().contiguous().t()):  # the traced strides, then others: ATen's own view
        out = function([x, w_layout, b])
        torch.testing.assert_close(out, expected)


def heads(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor):
    y = x @ w                              # an extern result
    a, b, c = y.split(8, -1)
    q = a.view(4, 2, 4).permute(1, 0, 2)   # views of a split piece
    s = torch.relu(b) + c                  # pieces only a kernel reads
    t = v.t().unsqueeze(0)                 # views of views of an input
    return q @ t[:, :4, :2], s


def test_a_chain_of_views_is_one_reinterpret_of_its_root():
    args = (torch.randn(4, 12), torch.randn(12, 24), torch.randn(2, 4))
    function = compile_program(args, heads)
    source = function.source
    # The split and the views between a root and what the matmul reads are not made ...
    assert not re.search(r"^    \w+ = aten_split", source, re.M), source
    assert re.search(r"^    \w+ = reinterpret_tensor\(mm, \(2, 4, 4\), \(4, 24, 1\), 0\) if mm.stride\(\) == \(24, 1\) else ", source, re.M), source
    assert re.search(r"^    \w+ = reinterpret_tensor\(v_1, \(2, 4, 2\), \(0, 1, 4\), 0\) if v_1.stride\(\) == \(4, 1\) else ", source, re.M), source
    # ... so not one line makes a piece of the split, nor a view nothing prints.
    assert not re.search(r"^    \w+ = \w+\[\d\]$", source, re.M), source
    assert source.count("reinterpret_tensor(") == 3, source
    x, w, v = args
    expected = heads(x, w, v)
    for v_layout in (v, v.t().contiguous().t()):  # the traced strides, then the chain of ATen views
        torch.testing.assert_close(function([x, w, v_layout]), expected)


def test_an_input_is_checked_once():
    def two_kernels(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.relu(x) @ w + x)  # x is read by the kernels before and after the matmul

    args = (torch.randn(8, 8), torch.randn(8, 8))
    function = compile_program(args, two_kernels)
    assert function.source.count("if x_1.stride() != (8, 1)") == 1, function.source
    x, w = args
    x_transposed = x.t().contiguous().t()
    torch.testing.assert_close(function([x_transposed, w]), two_kernels(x, w))


def test_the_dumped_wrapper_is_the_function_that_runs(tmp_path):
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w) * 2

    args = (torch.randn(4, 8), torch.randn(8, 8))
    with debug.recording() as records:
        compiled = torch.compile(f, backend="cppinductor", options={"debug_dir": str(tmp_path)})
        torch.testing.assert_close(compiled(*args), f(*args))
    (record,) = records
    (path,) = [os.path.join(d, "wrapper.py") for d, _, files in os.walk(tmp_path) if "wrapper.py" in files]
    dumped = open(path).read()
    assert dumped == record.wrapper_source
    function = CompiledFunction(record.gm, record.compiled, graph_id=record.id)
    code = function._run.__code__
    assert code.co_filename == f"<cppinductor graph {record.id}>"
    # Tracebacks through the wrapper show its lines.
    assert "".join(linecache.getlines(code.co_filename)) == dumped
    scope: dict = {}
    exec(compile(dumped, code.co_filename, "exec"), scope)
    assert scope["call"].__code__.co_code == code.co_code


def test_the_observed_variant_is_the_same_function_plus_observations():
    function = compile_program(inputs())
    observed = function._code.observed_source
    assert observed.count("observe(") == len(function.compiled.steps) + 1
    without = "".join(line for line in observed.splitlines(True) if not line.lstrip().startswith("observe("))
    assert without == function.source


def test_frees_bound_the_live_bytes():
    def chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        for _ in range(6):
            x = torch.sin(x) @ w  # each kernel result and each product dies in the next step
        return x

    args = (torch.randn(64, 64), torch.randn(64, 64) / 8)
    compiled = torch.compile(chain, backend="cppinductor", options={"reuse_buffers": False})
    compiled(*args)
    with track_live_bytes() as live:
        torch.testing.assert_close(compiled(*args), chain(*args))
    buffer = 64 * 64 * 4
    # Without frees, 12 intermediates would be held by the end; with them, at
    # most the two inputs, a product and the kernel result reading it.
    assert 3 * buffer <= live.peak <= 4 * buffer, live.peaks


def test_a_launcher_checks_its_arguments():
    function = compile_program(inputs())
    compiled = function.compiled
    step = next(s for s in compiled.steps if s.kind == _C.StepKind.Kernel)
    launch = compiled.kernel_launcher(step.kernel, len(step.buffers))
    with pytest.raises(TypeError, match="takes"):
        launch(torch.empty(1))
    with pytest.raises(AttributeError, match="data_ptr"):
        launch(*(["not a tensor"] * len(step.buffers)))


def test_reduce_overhead_leaves_out_the_input_checks_dynamo_guards():
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.relu(x) @ w + x)

    x, w = torch.randn(8, 8), torch.randn(8, 8)
    sources = {}
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        with debug.recording() as records:
            compiled = torch.compile(f, backend="cppinductor", mode=mode)
            torch.testing.assert_close(compiled(x, w), f(x, w))
            # Other strides: Dynamo's guard recompiles; the unchecked kernels never see them.
            x_t = x.t().contiguous().t()
            torch.testing.assert_close(compiled(x_t, w), f(x_t, w))
        sources[mode] = records[0].wrapper_source
    input_check = r"arg\d+_1\.stride\(\) != "
    assert re.search(input_check, sources["default"]), sources["default"]
    assert not re.search(input_check, sources["reduce-overhead"]), sources["reduce-overhead"]
    torch._dynamo.reset()


def test_reduce_overhead_keeps_a_backwards_input_checks():
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.relu(x) @ w + x).sum()

    x, w = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8)
    torch._dynamo.reset()
    with debug.recording() as records:
        torch.compile(f, backend="cppinductor", mode="reduce-overhead")(x, w).backward()
    backward = [r for r in records if r.kind == "backward"]
    assert backward and ".stride() != " in backward[0].wrapper_source
    expected = torch.autograd.grad(f(x, w), x)[0]
    torch.testing.assert_close(x.grad, expected)
    torch._dynamo.reset()


def _overloads_called(fn, *args, **kwargs) -> list:
    """The ATen overloads `fn(*args, **kwargs)` dispatches to."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.called = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.called.append(func)
            return func(*args, **(kwargs or {}))

    with Record() as record:
        fn(*args, **kwargs)
    return record.called


def test_native_bindings_reach_the_overload_they_stand_for():
    """Each binding the wrapper calls in place of an OpOverload, given the
    arguments as the wrapper prints them (positional, then keywords by name),
    runs that overload and gives its result."""
    from cppinductor.wrapper import NATIVE_BINDINGS

    aten = torch.ops.aten
    a, b, bias = torch.randn(4, 3), torch.randn(3, 5), torch.randn(5)
    a3, b3, c3 = torch.randn(2, 4, 3), torch.randn(2, 3, 5), torch.randn(2, 4, 5)
    x, w, conv_bias = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), torch.randn(3)
    q = torch.randn(1, 2, 4, 8)
    calls = {
        aten.convolution.default: ((x, w, conv_bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}),
        aten.mm.default: ((a, b), {}),
        aten.mm.out: ((a, b), {"out": torch.empty(4, 5)}),
        aten.addmm.default: ((bias, a, b), {"beta": 0.5, "alpha": 2.0}),
        aten.addmm.out: ((bias, a, b), {"beta": 0.5, "out": torch.empty(4, 5)}),
        aten.bmm.default: ((a3, b3), {}),
        aten.bmm.out: ((a3, b3), {"out": torch.empty(2, 4, 5)}),
        aten.baddbmm.default: ((c3, a3, b3), {"alpha": 3.0}),
        aten._scaled_dot_product_flash_attention_for_cpu.default: ((q, q, q, 0.0, True), {"scale": 0.5}),
    }
    assert set(calls) == set(NATIVE_BINDINGS)
    for overload, binding in NATIVE_BINDINGS.items():
        args, kwargs = calls[overload]
        assert _overloads_called(binding, *args, **kwargs) == [overload], overload
        expected = overload(*args, **{k: v.clone() if k == "out" else v for k, v in kwargs.items()})
        torch.testing.assert_close(binding(*args, **kwargs), expected, msg=str(overload))
