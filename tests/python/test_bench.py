"""The benchmark's machinery on tiny sizes with fast backends (eager, aot_eager).

Tests that need Inductor are marked ``inductor`` and skipped unless
CPPINDUCTOR_TEST_INDUCTOR=1 (Inductor's first compile takes ~20-60 s here).
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from cppinductor.bench import Backend, BenchConfig, Row, run_bench
from cppinductor.bench.bandwidth import gbps
from cppinductor.bench.cli import main
from cppinductor.bench.correctness import fp64_mismatch, mismatch
from cppinductor.bench.report import format_table, read_json
from cppinductor.bench.workloads import BY_NAME, MLP, WORKLOADS, select, sizes_for

needs_inductor = pytest.mark.skipif(
    os.environ.get("CPPINDUCTOR_TEST_INDUCTOR") != "1", reason="slow: set CPPINDUCTOR_TEST_INDUCTOR=1"
)


def _wrong(gm, example_inputs):
    """A Dynamo backend that is wrong on purpose: every output * 1.5 + 1 (so gradients change too)."""

    def run(*args):
        out = gm(*args)
        return type(out)(o * 1.5 + 1 for o in out) if isinstance(out, (tuple, list)) else out * 1.5 + 1

    return run


def _raises(gm, example_inputs):
    raise RuntimeError("this backend always fails")


def _bench(only, backends=("eager", "aot_eager"), fresh_process="none"):
    return run_bench(BenchConfig(size="tiny", only=only, backends=backends, fresh_process=fresh_process,
                                 progress=False))


@pytest.fixture(scope="module")
def pointwise_rows():
    return _bench(["copy", "relu_bias", "softmax"], fresh_process="first")


def test_rows_cover_workloads_and_backends_eager_first(pointwise_rows):
    assert [(r.workload, r.backend) for r in pointwise_rows] == [
        (w, b) for w in ("copy", "relu_bias", "softmax") for b in ("eager", "aot_eager")
    ]


def test_rows_have_timing_speedup_bandwidth_and_compile_time(pointwise_rows):
    for r in pointwise_rows:
        assert r.status == "ok" and r.error is None and r.correct is True, r
        assert r.time_ms > 0 and r.reps >= 3
        assert r.gbps > 0 and r.copy_gbps > 0 and r.copy_prealloc_gbps > 0 and r.pct_of_copy > 0
        assert r.threads == torch.get_num_threads() and r.device == "cpu" and r.dtype == "float32"
        if r.backend == "eager":
            assert r.speedup_vs_eager == pytest.approx(1.0) and r.compile_s_warm is None
        else:
            assert r.speedup_vs_eager > 0 and r.compile_s_warm > 0 and r.backend_warmup_s > 0
            assert r.compile_over_aot_eager_s is None  # aot_eager is the baseline itself
        assert r.speedup_vs_inductor is None  # inductor not run


def test_fresh_process_probe_fills_only_the_probed_workload(pointwise_rows):
    probed = {(r.workload, r.backend): r.compile_s_fresh for r in pointwise_rows}
    assert probed[("relu_bias", "aot_eager")] > 0
    fresh = next(r for r in pointwise_rows if r.compile_s_fresh is not None)
    assert fresh.fresh_process_total_s > fresh.compile_s_fresh  # includes interpreter start and imports
    assert probed[("copy", "aot_eager")] is None and probed[("relu_bias", "eager")] is None


def test_bytes_moved_is_inputs_read_plus_outputs_written():
    s = sizes_for("cpu", "tiny")
    n, c = s.rows * s.cols, s.cols
    expected = {
        "copy": 2 * n,
        "relu_bias": 2 * n + c,
        "sin_cos": 2 * n,
        "gelu_bias": 2 * n + c,
        "softmax": 2 * s.softmax[0] * s.softmax[1],
        "layer_norm": 2 * n + 2 * c,
        "var_mean": n + 2 * s.rows,
        "row_sum": n + s.rows,
        "col_sum": n + c,
        # AdamW: param, grad and both moments read; param and both moments written
        "adamw_step": 7 * sum(p.numel() for p in MLP(s.mlp[1], s.mlp[2]).parameters()),
    }
    for name, elements in expected.items():
        case = BY_NAME[name].build(s, "cpu", torch.float32)
        assert case.bytes_moved == 4 * elements, name
    for w in (w for w in WORKLOADS if w.runs_on("cpu")):
        assert (w.kind == "memory") == (w.build(s, "cpu", torch.float32).bytes_moved is not None), w.name


def test_gbps_and_percent_of_copy_arithmetic(pointwise_rows):
    assert gbps(2_000_000_000, 0.5) == pytest.approx(4.0)
    assert gbps(None, 1.0) is None and gbps(100, 0.0) is None
    for r in pointwise_rows:
        assert r.gbps == pytest.approx(r.bytes_moved / (r.time_ms / 1e3) / 1e9)
        assert r.pct_of_copy == pytest.approx(100 * r.gbps / r.copy_gbps)


def test_wrong_backend_is_flagged_incorrect_not_fatal():
    rows = _bench(["relu_bias", "mlp_train"], backends=["aot_eager", Backend("wrong", _wrong)])
    wrong = [r for r in rows if r.backend == "wrong"]
    assert [r.workload for r in wrong] == ["relu_bias", "mlp_train"]
    for r in wrong:
        assert r.status == "incorrect" and r.correct is False and "mismatch" in r.error.lower()
        assert r.time_ms > 0  # it ran and was timed; only its results are wrong
    assert all(r.status == "ok" for r in rows if r.backend != "wrong")


def test_failing_and_unknown_backends_mark_rows_with_the_error():
    rows = _bench(["sin_cos"], backends=[Backend("raises", _raises), "no_such_backend"])
    by_backend = {r.backend: r for r in rows}
    assert by_backend["eager"].status == "ok"
    assert by_backend["raises"].status == "error" and "always fails" in by_backend["raises"].error
    assert by_backend["no_such_backend"].status == "error"
    assert "no_such_backend" in by_backend["no_such_backend"].error
    table = format_table(rows)
    assert "ERROR" in table and "sin_cos/raises:" in table


def test_training_step_compares_parameters_after_one_sgd_step():
    rows = _bench(["mlp_train"])
    assert all(r.status == "ok" and r.kind == "train" and r.gbps is None for r in rows)


def test_alternating_times_each_half_alone_and_reports_the_ratio():
    rows = _bench(["alternating"], backends=["aot_eager", Backend("wrong", _wrong)])
    by_backend = {r.backend: r for r in rows}
    for r in rows:
        assert r.kind == "interop" and r.gbps is None
        assert r.eager_part_ms > 0 and r.compiled_part_ms > 0
        assert 0 < r.alternating_ratio < 100  # a median of per-round ratios, not of these medians
    assert by_backend["aot_eager"].status == "ok"
    # The compiled half's output is what gets checked against eager.
    assert by_backend["wrong"].status == "incorrect"
    assert " alt" in format_table(rows)


def test_busy_machine_is_called_out():
    from cppinductor.bench.report import busy_warning

    row = Row(workload="copy", backend="eager", mode=None, device="cpu", dtype="float32", threads=2,
              torch_version=torch.__version__, kind="memory", load_avg=9.0)
    assert "machine busy" in busy_warning([row], cores=2)
    row.load_avg = 1.0
    assert busy_warning([row], cores=2) is None


def test_mode_goes_to_inductor_and_cppinductor_only():
    from cppinductor.bench.backends import parse_backends

    backends = parse_backends("aot_eager,inductor,cppinductor,eager", mode="max-autotune")
    assert [(b.label, b.mode) for b in backends] == [
        ("eager", None), ("aot_eager", None), ("inductor", "max-autotune"), ("cppinductor", "max-autotune")]
    with pytest.raises(ValueError, match="listed twice"):
        parse_backends("inductor,inductor")
    with pytest.raises(ValueError, match="unknown mode"):
        parse_backends("inductor", mode="fast")


def test_kernel_counters_of_a_backend_package_are_differenced(monkeypatch):
    import types

    from cppinductor.bench import kernel_counts

    package = types.ModuleType("fake_backend")
    package.compile_counters = lambda: {"kernels": 7, "kernel_compile_s": 0.35}
    monkeypatch.setitem(sys.modules, "fake_backend", package)
    before = kernel_counts.read("fake_backend")
    package.compile_counters = lambda: {"kernels": 12, "kernel_compile_s": 0.45}
    diff = kernel_counts.difference(before, kernel_counts.read("fake_backend"))
    assert diff.kernels == 5 and diff.kernel_compile_s == pytest.approx(0.1)
    assert kernel_counts.read("aot_eager") is None


def test_cppinductor_reports_its_kernels_and_their_compile_time():
    from cppinductor.bench import kernel_counts

    before = kernel_counts.read("cppinductor")
    torch._dynamo.reset()
    x = torch.randn(33, 7)
    torch.compile(lambda x: (torch.relu(x) * 3, x.sum(0)), backend="cppinductor")(x)
    diff = kernel_counts.difference(before, kernel_counts.read("cppinductor"))
    assert diff is not None and diff.kernels == 2, diff  # the pointwise and the column sum
    assert diff.kernel_compile_s is not None and diff.kernel_compile_s > 0


def test_mismatch_reports_structure_and_values():
    a = torch.ones(3)
    assert mismatch((a, a), (a, a), (1e-5, 1e-5)) is None
    assert "structure" in mismatch((a, a), a, (1e-5, 1e-5))
    assert "output 1" in mismatch((a, a), (a, a + 1), (1e-5, 1e-5))
    nan = torch.tensor([float("nan")])
    assert mismatch(nan, nan.clone(), (1e-5, 1e-5)) is None  # NaN must propagate, and it did


def test_only_filters_and_quick_subset():
    assert [w.name for w in select(["softmax", "copy"], quick=False)] == ["copy", "softmax"]
    quick = [w.name for w in select(None, quick=True)]
    assert {"copy", "relu_bias", "sin_cos", "gelu_bias", "softmax", "mlp"} <= set(quick)
    assert len(quick) < len(WORKLOADS)
    with pytest.raises(ValueError, match="unknown workload"):
        select(["nope"], quick=False)


def test_cli_json_table_and_only(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert main(["--size", "tiny", "--only", "copy,row_sum", "--backends", "eager,aot_eager",
                 "--fresh-process", "none", "--no-progress", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "copy reference" in table and "row_sum" in table and "softmax" not in table
    data = json.loads(out.read_text())
    assert [(d["workload"], d["backend"]) for d in data] == [
        ("copy", "eager"), ("copy", "aot_eager"), ("row_sum", "eager"), ("row_sum", "aot_eager")]
    fields = {"workload", "backend", "mode", "device", "dtype", "threads", "torch_version", "kind", "cpu_isa",
              "cuda_binary", "shape", "status",
              "error", "correct", "time_ms", "reps", "speedup_vs_eager", "speedup_vs_inductor", "bytes_moved",
              "gbps", "flops", "tflops", "copy_gbps", "pct_of_copy", "copy_prealloc_gbps", "first_call_s", "compile_s_warm",
              "compile_s_fresh", "fresh_process_total_s", "kernels", "kernel_compile_ms", "compile_over_aot_eager_s",
              "backend_warmup_s", "load_avg", "peak_mb", "graphs", "graph_breaks", "fallbacks",
              "eager_part_ms", "compiled_part_ms", "alternating_ratio"}
    assert all(set(d) == fields for d in data)
    assert read_json(str(out))[1] == Row.from_json(data[1])
    aot = data[1]
    assert (aot["graphs"], aot["graph_breaks"], aot["fallbacks"]) == (1, 0, None)
    assert data[0]["graphs"] is None  # eager compiles nothing


def test_models_suite_selects_forwards_or_training_steps():
    pytest.importorskip("transformers")
    forwards = [w.name for w in select(None, quick=False, suite="models")]
    steps = [w.name for w in select(None, quick=False, suite="models", train=True)]
    assert {"gpt2", "bert", "t5", "llama", "mistral", "vit", "convnext", "resnet", "wav2vec2", "whisper"} <= set(forwards)
    assert steps == [n + "_train" for n in forwards]


def test_models_suite_row_is_checked_against_float64_and_counts_graphs(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "rows.json"
    assert main(["--size", "tiny", "--suite", "models", "--only", "bert", "--batch", "small",
                 "--backends", "eager,cppinductor", "--fresh-process", "none", "--no-progress",
                 "--json", str(out)]) == 0
    ours = json.loads(out.read_text())[1]
    assert ours["status"] == "ok", ours["error"]
    assert (ours["graphs"], ours["graph_breaks"], ours["fallbacks"]) == (1, 0, 0)
    assert "1/0/0" in capsys.readouterr().out


def test_fp64_mismatch_accepts_reordered_sums_and_flags_wrong_values():
    torch.manual_seed(0)
    x = torch.randn(4096)
    reference = x.double().sum()
    eager, reordered = x.sum(), x.view(64, 64).sum(0).sum()
    assert fp64_mismatch(eager, reordered, reference, atol=1e-3) is None
    problem = fp64_mismatch(eager, eager + 0.01, reference, atol=1e-3)
    assert problem is not None and "RMS error" in problem


def test_cli_rejects_unknown_workload(capsys):
    assert main(["--only", "nope", "--no-progress"]) == 2
    assert "unknown workload" in capsys.readouterr().err


def test_plot_without_matplotlib_fails_clearly_before_running():
    pytest.importorskip("torch")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(SystemExit, match="pip install matplotlib"):
            main(["--size", "tiny", "--only", "copy", "--plot", "x.png"])
    else:
        pytest.skip("matplotlib is installed")


def test_plot_writes_png(tmp_path, pointwise_rows):
    pytest.importorskip("matplotlib")
    from cppinductor.bench.plot import write_plot

    path = tmp_path / "bench.png"
    write_plot(pointwise_rows, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_module_entry_point_runs():
    from cppinductor.bench._compile_probe import _package_root

    env = dict(os.environ, PYTHONPATH=_package_root())  # the cppinductor this test imported
    proc = subprocess.run([sys.executable, "-m", "cppinductor.bench", "--help"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--only" in proc.stdout


@needs_inductor
def test_inductor_rows_get_ratio_and_overhead_over_aot_eager():
    rows = _bench(["relu_bias"], backends=["aot_eager", "inductor"])
    ind = next(r for r in rows if r.backend == "inductor")
    assert ind.status == "ok" and ind.speedup_vs_inductor == pytest.approx(1.0)
    assert ind.compile_over_aot_eager_s is not None
    assert ind.kernels >= 1


def test_cppinductor_rows_name_the_cpu_isa_and_the_header_the_host():
    from cppinductor import _C

    rows = _bench(["relu_bias"], backends=["cppinductor"])
    ours = next(r for r in rows if r.backend == "cppinductor")
    assert ours.status == "ok" and ours.cpu_isa == _C.resolve_cpu_isa(os.environ.get("CPPINDUCTOR_CPU_ISA", "native"))
    assert next(r for r in rows if r.backend == "eager").cpu_isa is None
    assert ours.cuda_binary is None  # a CPU row
    assert f"cpu isa {ours.cpu_isa} (host: " in format_table(rows)
    assert "cuda binary" not in format_table(rows)


def test_cuda_rows_name_what_nvrtc_made_in_the_header(monkeypatch):
    from cppinductor.bench.runner import _cppinductor_cuda_binary

    assert _cppinductor_cuda_binary() == os.environ.get("CPPINDUCTOR_CUDA_BINARY", "cubin")
    monkeypatch.setenv("CPPINDUCTOR_CUDA_BINARY", "cubin")
    assert _cppinductor_cuda_binary() == "cubin"
    monkeypatch.setenv("CPPINDUCTOR_CUDA_BINARY", "elf")
    assert _cppinductor_cuda_binary() is None
    row = Row(workload="copy", backend="cppinductor", mode=None, device="cuda", dtype="float32", threads=1,
              torch_version=torch.__version__, kind="memory", cuda_binary="cubin")
    assert " · cuda binary cubin" in format_table([row])


def test_cli_rejects_a_cpu_isa_the_host_lacks(capsys):
    from cppinductor import _C

    missing = [isa for isa in ("avx2", "avx512") if isa not in _C.host_cpu_isas()]
    if not missing:
        pytest.skip("the host runs every ISA")
    assert main(["--size", "tiny", "--only", "copy", "--cpu-isa", missing[0], "--no-progress"]) == 2
    assert f"cpu_isa {missing[0]!r} is not available" in capsys.readouterr().err


def test_interleaved_rounds_time_each_function_and_isolate_one_that_raises():
    from cppinductor.bench.timing import POLICIES, SteadyTime, interleaved_steady_times

    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1

    def b():
        calls["b"] += 1
        if calls["b"] > 4:
            raise RuntimeError("broke on call 5")

    times = interleaved_steady_times({"a": a, "b": b}, "cpu", POLICIES["tiny"], rounds=3)
    assert isinstance(times["a"], SteadyTime) and times["a"].median_s > 0 and times["a"].reps >= 3
    assert isinstance(times["b"], RuntimeError) and "call 5" in str(times["b"])
    assert calls["b"] == 5  # timed no further once it raised


def test_backend_specs_name_a_mode_and_compare_against_inductor_in_it():
    from cppinductor.bench.backends import parse_backends

    eager, plain, graphs = parse_backends("cppinductor,cppinductor:reduce-overhead")
    assert eager.is_eager and plain.mode is None and plain.name == "cppinductor"
    assert (graphs.label, graphs.name, graphs.mode) == ("cppinductor:reduce-overhead", "cppinductor", "reduce-overhead")
    with pytest.raises(ValueError, match="unknown mode 'turbo'"):
        parse_backends("inductor:turbo")
    rows = [Row("w", b, None, "cpu", "float32", 1, "t", "launch", time_ms=t)
            for b, t in (("eager", 4.0), ("inductor", 2.0), ("inductor:reduce-overhead", 1.0),
                         ("cppinductor", 1.0), ("cppinductor:reduce-overhead", 0.5))]
    from cppinductor.bench.runner import _derive

    _derive(rows)
    by = {r.backend: r for r in rows}
    assert by["cppinductor"].speedup_vs_inductor == pytest.approx(2.0)
    assert by["cppinductor:reduce-overhead"].speedup_vs_inductor == pytest.approx(2.0)  # against its mode


def test_launch_suite_selects_its_own_workloads_and_runs_modes_side_by_side():
    launch = [w.name for w in select(None, quick=False, suite="launch")]
    assert launch == ["layer_stack", "small_mlp", "decoder_step", "layer_stack_train"]
    assert not set(launch) & {w.name for w in select(None, quick=False)}
    rows = run_bench(BenchConfig(size="tiny", only=["layer_stack"], suite="launch", fresh_process="none",
                                 backends=["cppinductor", "cppinductor:reduce-overhead"], progress=False))
    assert [r.backend for r in rows] == ["eager", "cppinductor", "cppinductor:reduce-overhead"]
    assert all(r.status == "ok" and r.correct for r in rows), rows
    assert rows[2].mode == "reduce-overhead"


def test_gemm_suite_reports_tflops_and_leaves_fp8_to_cuda(capsys):
    cpu = [w.name for w in select(None, quick=False, suite="gemm")]
    cuda = [w.name for w in select(None, quick=False, suite="gemm", device="cuda")]
    assert cpu[:2] == ["mm_relu_m1", "addmm_gelu_m1"] and "bmm_scale" in cpu
    assert [n for n in cuda if n not in cpu] == ["scaled_mm_relu_m16", "scaled_mm_relu_m64", "scaled_mm_relu_large"]
    assert main(["--suite", "gemm", "--size", "tiny", "--only", "addmm_gelu_m16,bmm_scale", "--backends",
                 "cppinductor", "--fresh-process", "none", "--no-progress"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("addmm_gelu_m16", "bmm_scale"))]
    assert [r[2] for r in rows] == ["16x64x96", "4x32x16x32"], out
    # 2 * M * N * K flops: 196608 for 16 x 64 x 96; TFLOP/s is a column of its own.
    built = BY_NAME["addmm_gelu_m16"].build(sizes_for("cpu", "tiny"), "cpu", torch.float32)
    assert built.flops == 2 * 16 * 64 * 96
    assert "TFLOP/s" in out and out.count(" ok") >= 4


def test_roofline_explains_each_workload_prints_its_table_and_charts_it(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "roofline.png"
    assert main(["--size", "tiny", "--only", "row_sum,softmax", "--roofline", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "row_sum: 1 graph(s)" in out and "softmax: 1 graph(s)" in out
    assert out.count("Roofline (cpu): copy") == 2 and "memory" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_roofline_without_matplotlib_fails_clearly_before_running(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit, match="pip install matplotlib"):
        main(["--size", "tiny", "--only", "copy", "--roofline", "x.png"])
