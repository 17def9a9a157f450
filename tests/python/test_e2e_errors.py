"""User mistakes and unsupported input: the clear error, or eager with a warning.

Dynamo wraps an exception raised by a backend in BackendCompilerFailed (a
RuntimeError); the backend's own exception is its inner exception, and its
message is part of Dynamo's. `_backend_error` digs it out.
"""

import os
import subprocess
import sys

import pytest
import torch

from check import check_model, compile_fn


def _backend_error(excinfo: pytest.ExceptionInfo) -> BaseException:
    e = excinfo.value
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if not isinstance(e, torch._dynamo.exc.BackendCompilerFailed):
            return e
        e = getattr(e, "inner_exception", None) or e.__cause__
    return excinfo.value


def _f(x):
    return x * 2 + 1


def test_registered_with_dynamo():
    assert "cppinductor" in torch._dynamo.list_backends()


def test_works_without_importing_the_package():
    """The entry point registers the backend: a process that only imports torch can use it."""
    code = (
        "import sys, torch\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2, backend='cppinductor')\n"
        "x = torch.randn(8)\n"
        "assert torch.equal(f(x), torch.relu(x) * 2)\n"
        "assert 'cppinductor' in sys.modules, 'backend did not run'\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def test_unknown_option_names_valid_ones():
    f = torch.compile(_f, backend="cppinductor", options={"bogus": 1})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    err = _backend_error(excinfo)
    assert isinstance(err, ValueError), repr(err)
    msg = str(err)
    assert "bogus" in msg
    for valid in ("fallback", "mode", "debug_dir"):
        assert valid in msg, msg


def test_bad_option_value_names_allowed_values():
    f = torch.compile(_f, backend="cppinductor", options={"fallback": "sometimes"})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    err = _backend_error(excinfo)
    assert isinstance(err, ValueError), repr(err)
    assert "fallback" in str(err) and "eager" in str(err) and "error" in str(err)


@pytest.mark.parametrize("level", ["default", "off", "min", "mid", "max"])
def test_every_cuda_fast_compile_level_gives_eagers_results(level):
    """NVRTC's -Ofast-compile levels skip optimisations, never numerics: a
    softmax and a layer_norm's gradients (row reductions, math, masked
    tails) at each level against eager. The CPU ignores the option."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(37, 1000, device=device)
    w = torch.randn(1000, device=device)
    check_model(lambda x: torch.softmax(x * 1.5, -1).sin(), (x,), options={"cuda_fast_compile": level},
                reduction=True)
    check_model(lambda x, w: torch.nn.functional.layer_norm(x, (1000,), w).exp(), (x, w), grad=True,
                options={"cuda_fast_compile": level}, reduction=True)


@pytest.mark.parametrize("binary", ["ptx", "cubin"])
def test_cuda_kernels_as_ptx_or_cubin_give_eagers_results(binary):
    """What NVRTC hands the driver (PTX it compiles at load, or the device's
    cubin) changes nothing in the results: a softmax and a layer_norm's
    gradients, each way, against eager. The CPU ignores the option."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(37, 1000, device=device)
    w = torch.randn(1000, device=device)
    check_model(lambda x: torch.softmax(x * 1.5, -1).sin(), (x,), options={"cuda_binary": binary}, reduction=True)
    check_model(lambda x, w: torch.nn.functional.layer_norm(x, (1000,), w).exp(), (x, w), grad=True,
                options={"cuda_binary": binary}, reduction=True)


def test_bad_cuda_fast_compile_level_names_the_levels():
    f = torch.compile(_f, backend="cppinductor", options={"cuda_fast_compile": "fastest"})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    err = _backend_error(excinfo)
    assert isinstance(err, ValueError), repr(err)
    assert "cuda_fast_compile" in str(err) and "'min'" in str(err) and "'off'" in str(err), str(err)


def _kernel_source(f, *args, **options):
    from cppinductor.utils import run_and_get_code

    out, sources = run_and_get_code(torch.compile(f, backend="cppinductor", options={"fallback": "error", **options}),
                                    *args)
    torch.testing.assert_close(out, f(*args))
    return "\n".join(sources)


def test_cpu_isa_avx2_gives_eight_float_lanes_on_any_x86_host():
    """cpu_isa="avx2" runs on every AVX2 host, AVX-512 ones included (the
    host CPU with its AVX-512 features off): 8-float vectors."""
    from conftest import HOST_CPU_ISAS

    if "avx2" not in HOST_CPU_ISAS:
        pytest.skip("the host's CPU does not run AVX2")
    src = _kernel_source(lambda x: (x * 2).exp() + 1, torch.randn(5, 1000), cpu_isa="avx2")
    assert "width=8" in src and "cppi_f32x8" in src and "cppi_f32x16" not in src, src


def test_cpu_isa_the_host_lacks_names_what_it_has():
    from conftest import HOST_CPU_ISAS

    missing = [isa for isa in ("avx2", "avx512") if isa not in HOST_CPU_ISAS]
    if not missing:
        pytest.skip("the host runs every ISA")
    f = torch.compile(_f, backend="cppinductor", options={"cpu_isa": missing[0]})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    err = _backend_error(excinfo)
    assert isinstance(err, ValueError), repr(err)
    assert f"cpu_isa {missing[0]!r} is not available" in str(err) and "'native'" in str(err), str(err)
    for isa in HOST_CPU_ISAS:
        assert repr(isa) in str(err), str(err)


def test_bad_cpu_isa_value_and_environment_variable_are_rejected(monkeypatch):
    f = torch.compile(_f, backend="cppinductor", options={"cpu_isa": "sse9"})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    assert "cpu_isa" in str(_backend_error(excinfo)) and "'avx512'" in str(_backend_error(excinfo))
    torch._dynamo.reset()
    monkeypatch.setenv("CPPINDUCTOR_CPU_ISA", "sse9")
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        torch.compile(_f, backend="cppinductor")(torch.randn(3))
    assert "CPPINDUCTOR_CPU_ISA" in str(_backend_error(excinfo))


def test_cuda_binary_environment_variable_is_the_default_and_the_option_wins(monkeypatch):
    from cppinductor.options import parse_options

    monkeypatch.setenv("CPPINDUCTOR_CUDA_BINARY", "cubin")
    assert parse_options().get("cuda_binary") == "cubin"
    assert parse_options(options={"cuda_binary": "ptx"}).get("cuda_binary") == "ptx"
    monkeypatch.setenv("CPPINDUCTOR_CUDA_BINARY", "sass")
    with pytest.raises(ValueError, match="CPPINDUCTOR_CUDA_BINARY must be one of"):
        parse_options()


def test_cpu_isa_environment_variable_is_the_default_and_the_option_wins(monkeypatch):
    from conftest import HOST_CPU_ISAS

    if "avx2" not in HOST_CPU_ISAS:
        pytest.skip("the host's CPU does not run AVX2")
    monkeypatch.setenv("CPPINDUCTOR_CPU_ISA", "avx2")
    assert "cppi_f32x8" in _kernel_source(lambda x: x.exp(), torch.randn(4, 1000))
    torch._dynamo.reset()
    native = _kernel_source(lambda x: x.exp(), torch.randn(4, 1000), cpu_isa="native")
    lanes = 16 if HOST_CPU_ISAS[0] == "avx512" else 8
    assert f"cppi_f32x{lanes}" in native, native


@pytest.mark.parametrize("how", ["mode", "options"])
def test_unknown_mode(how):
    kwargs = {"mode": "turbo"} if how == "mode" else {"options": {"mode": "turbo"}}
    f = torch.compile(_f, backend="cppinductor", **kwargs)
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    err = _backend_error(excinfo)
    assert isinstance(err, ValueError), repr(err)
    assert "turbo" in str(err) and "max-autotune" in str(err) and "reduce-overhead" in str(err)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_every_mode_is_accepted(mode, device):
    f = torch.compile(_f, backend="cppinductor", mode=mode)
    x = torch.randn(5, device=device)
    torch.testing.assert_close(f(x), _f(x))


def test_mode_and_options_together_refused_by_torch():
    with pytest.raises(RuntimeError, match="mode.*options|options.*mode"):
        torch.compile(_f, backend="cppinductor", mode="default", options={"fallback": "eager"})


def test_complex_runs_eagerly_with_warning(device):
    def f(x):
        return x * x.conj() + 1

    x = torch.randn(4, dtype=torch.complex64, device=device)
    with pytest.warns(UserWarning, match="eager"):
        out = compile_fn(f)(x)
    torch.testing.assert_close(out, f(x))


def test_complex_with_fallback_error_raises(device):
    x = torch.randn(4, dtype=torch.complex64, device=device)
    f = compile_fn(lambda x: x * 2, options={"fallback": "error"})
    with pytest.raises(Exception) as excinfo:
        f(x)
    err = _backend_error(excinfo)
    assert "complex" in str(err), repr(err)


def test_complex_mixed_with_real_graph(device):
    """A complex intermediate in an otherwise real graph: still correct."""

    def f(x):
        c = torch.view_as_complex(x.reshape(-1, 2))
        return torch.view_as_real(c * c).sum(-1)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_model(f, (torch.randn(4, 2, device=device),), reduction=True)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_ops_run_in_aten_and_the_rest_of_the_graph_compiles(device, fp8):
    """A float8 quantise-dequantise: the casts to and from float8 run through
    ATen with the reason in explain(); the scaling and relu around them are
    kernels; results equal eager's bit for bit (values past the format's range
    included: e4m3fn has no infinity)."""
    from cppinductor import explain

    def f(x, scale):
        q = (x / scale).to(fp8)
        return q.to(torch.float32).relu() * scale, q

    x = torch.randn(16, 64, device=device) * 300
    scale = torch.tensor(0.5, device=device)
    compiled = compile_fn(f)
    for got, want in zip(compiled(x, scale), f(x, scale)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.float(), want.float(), equal_nan=True, rtol=0, atol=0)
    text = str(explain(compiled)(x, scale))
    assert text.count("not computed in kernels yet") == 2 and "kernel1_relu" in text, text


def test_scaled_mm_is_an_extern_and_its_epilogue_a_kernel(device):
    """torch._scaled_mm on float8 operands calls ATen (cuBLASLt on CUDA) as an
    extern, not a fallback; the relu after it is our kernel."""
    from cppinductor import explain

    def f(a, b, scale_a, scale_b):
        return torch.relu(torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16))

    if device == "cuda" and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 matmuls need compute capability 8.9")
    a = torch.randn(16, 64, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(32, 64, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm takes it
    scales = (torch.tensor(0.5, device=device), torch.tensor(2.0, device=device))
    try:
        want = f(a, b, *scales)
    except RuntimeError as e:  # a build of torch without this FP8 path
        pytest.skip(f"eager _scaled_mm: {e}")
    compiled = compile_fn(f, options={"fallback": "error"})
    torch.testing.assert_close(compiled(a, b, *scales), want, rtol=0, atol=0)
    text = str(explain(compiled)(a, b, *scales))
    assert "1 extern, 0 fallback" in text and "kernel0_relu" in text, text


def test_user_error_inside_compiled_function_propagates(device):
    def f(x, y):
        return x + y  # shapes do not broadcast

    with pytest.raises(RuntimeError, match="size"):
        compile_fn(f)(torch.randn(3, device=device), torch.randn(4, device=device))


def test_shape_mismatch_in_matmul_is_a_clear_error(device):
    with pytest.raises(RuntimeError, match="shape|size|mat"):
        compile_fn(lambda a, b: a @ b)(torch.randn(2, 3, device=device), torch.randn(4, 5, device=device))


def test_bool_option_rejects_a_string():
    f = torch.compile(_f, backend="cppinductor", options={"fuse": "yes"})
    with pytest.raises((ValueError, torch._dynamo.exc.BackendCompilerFailed)) as excinfo:
        f(torch.randn(3))
    assert isinstance(_backend_error(excinfo), ValueError)


@pytest.mark.parametrize("background", [True, False])
def test_a_failed_kernel_compile_runs_the_graph_in_eager_with_a_warning(monkeypatch, background):
    """The CPU compile (here a g++ that always fails) runs in the background by
    default and its failure surfaces at the first call; either way the graph
    falls back with the compiler's reason, and later calls stay in eager."""
    monkeypatch.setenv("CPPINDUCTOR_CXX", "/bin/false")
    x = torch.randn(33)

    def f(x):
        return x * 1.8125 + (0.40625 if background else 0.59375)  # a source no cache holds

    g = torch.compile(f, backend="cppinductor", options={"cpu_compiler": "gxx", "background_compile": background})
    with pytest.warns(UserWarning, match="runs in eager PyTorch: /bin/false failed"):
        torch.testing.assert_close(g(x), f(x))
    torch.testing.assert_close(g(x + 1), f(x + 1))


def test_a_failed_background_compile_with_fallback_error_raises_at_the_first_call(monkeypatch):
    monkeypatch.setenv("CPPINDUCTOR_CXX", "/bin/false")
    from cppinductor import _C

    g = torch.compile(lambda x: x * 2.21875 - 3, backend="cppinductor",
                      options={"cpu_compiler": "gxx", "fallback": "error"})
    with pytest.raises(Exception) as excinfo:
        g(torch.randn(5))
    err = _backend_error(excinfo)
    assert isinstance(err, _C.CompilerError) and "/bin/false failed" in str(err), repr(err)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_a_graph_whose_compile_the_parent_started():
    """Compiles run on a background thread; a fork waits for them first, so
    the child finds the kernels compiled instead of waiting on a thread it
    does not have."""
    from cppinductor import _C, debug
    from cppinductor.backend import compile_fx_graph
    from cppinductor.options import parse_options

    def f(x):
        return torch.relu(x) * 1.71875 + 0.21875  # a source no cache holds

    x = torch.randn(64)
    gm = torch.fx.symbolic_trace(f)
    aten = torch.fx.experimental.proxy_tensor.make_fx(gm)(x)
    compiled = compile_fx_graph(aten, [x], parse_options(None, None), "inference")
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only for eager's answer
        try:
            out = compiled([x.clone()])
            os._exit(0 if torch.allclose(out, f(x)) else 3)
        except BaseException:
            os._exit(4)
    import time

    deadline = time.monotonic() + 60
    while True:  # a child waiting on its parent's compile thread never ends
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if not done:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung waiting for the parent's compile thread")
    assert os.waitstatus_to_exitcode(status) == 0
    torch.testing.assert_close(compiled([x.clone()]), f(x))


@pytest.mark.parametrize("background", [None, True, False])
def test_cpu_kernels_compile_in_the_background_by_default(background):
    """compile_graph returns with the CPU compile still pending unless the
    option turns it off; the first call finishes it and records its time."""
    from cppinductor.backend import compile_fx_graph
    from cppinductor.options import parse_options

    x = torch.randn(40)
    aten = torch.fx.experimental.proxy_tensor.make_fx(lambda x: torch.sigmoid(x) * 3.15625)(x)
    options = parse_options(None, None if background is None else {"background_compile": background})
    function = compile_fx_graph(aten, [x], options, "inference")
    assert function.compiled.compiling == (background is not False)
    torch.testing.assert_close(function([x.clone()]), torch.sigmoid(x) * 3.15625)
    assert not function.compiled.compiling
    assert "cpu_compile" in [stage for stage, _ in function.compiled.stage_times]
