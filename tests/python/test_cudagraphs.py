"""mode="reduce-overhead": CUDA graphs recorded on the second call and
replayed after, checked against eager; the overwrite error; every reason a
graph runs uncaptured; memory that does not grow. GPU tests skip without one."""

import gc
import logging

import pytest
import torch
import torch.nn as nn

import cppinductor
from cppinductor import _C, debug
from conftest import requires_cuda


def _compile(f, **kwargs):
    return torch.compile(f, backend="cppinductor", mode="reduce-overhead", **kwargs)


def _states(f, *args):
    """explain()'s CUDA-graph line of each compiled graph after three calls of
    f(*args) (the first warms up, the second records, the third replays)."""
    records = []
    from cppinductor import debug

    torch._dynamo.reset()
    with debug.recording() as records:
        compiled = _compile(f)
        for _ in range(3):
            compiled(*args)
    return [str(r.cudagraphs) for r in records]


def test_a_cpu_graph_runs_as_in_default_mode_and_says_why(caplog):
    def f(x):
        return torch.softmax(x * 2, -1)

    x = torch.randn(8, 33)
    with caplog.at_level(logging.INFO, logger="cppinductor.perf_hints"):
        compiled = _compile(f)
        for _ in range(3):
            torch.testing.assert_close(compiled(x), f(x))
    report = cppinductor.explain(f, mode="reduce-overhead")(x)
    (graph,) = report.graphs
    assert graph.cudagraphs.startswith("not used: the graph runs on the CPU"), graph.cudagraphs
    assert "CUDA graphs: not used" in str(report)
    assert any("CUDA graph not used" in r.message for r in caplog.records)


def test_the_state_names_the_static_inputs_that_moved():
    from cppinductor.cudagraphs import CudaGraphState

    state = CudaGraphState()
    state.recorded, state.replays, state.uncaptured = 2, 5, 3
    state.moved = {"primals_3": 1, "primals_1": 3}
    state.copied = ["primals_5"]
    assert str(state) == ("used: 2 graph(s) recorded, 5 replays, 3 calls uncaptured "
                          "(static inputs that moved: primals_1 x3, primals_3 x1); "
                          "1 input(s) copied in per call (primals_5)")
    state.reason = "parameters or saved tensors moved to new addresses more than 8 times"
    assert str(state).startswith("not used: parameters") and str(state).endswith("primals_3 x1)")


def test_default_mode_reports_nothing_about_cuda_graphs():
    report = cppinductor.explain(lambda x: x.relu() + 1)(torch.randn(4))
    assert report.graphs[0].cudagraphs is None and "CUDA graphs" not in str(report)


def _aten_graph(f, *args, tracing_mode="real"):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(f, tracing_mode=tracing_mode)(*args)


def test_the_reasons_decided_at_compile_time():
    """What makes a graph uncapturable before anything runs: devices, a
    mutated input that is not static, a sync point (checked on ATen graphs,
    no GPU needed)."""
    from cppinductor.cudagraphs import mutated_inputs, static_reason, unsafe_op

    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert static_reason({cpu}, ["cpu"], [], {}).startswith("the graph runs on the CPU")
    assert static_reason({cuda, cpu}, ["cuda"], [], {}).startswith("the graph has CPU tensors")
    assert static_reason({cuda}, ["cpu", "cuda"], [], {}).startswith("the graph has CPU tensors")
    assert static_reason({cuda, torch.device("cuda", 1)}, ["cuda"], [], {}).startswith("the graph uses several")
    assert static_reason({cuda}, ["cuda"], [], {}) is None

    def add_into(x, acc):
        return acc.add_(x) * 2

    gm = _aten_graph(add_into, torch.randn(4), torch.zeros(4))
    assert mutated_inputs(gm) == {1: "acc_1"}
    reason = static_reason({cuda}, ["cuda"], [], mutated_inputs(gm))
    assert reason.startswith("the graph mutates input 1 (acc_1), which is not a parameter or buffer"), reason
    assert static_reason({cuda}, ["cuda"], [1], mutated_inputs(gm)) is None  # a buffer: captured by address

    gm = _aten_graph(lambda x: x * x.sum().item(), torch.randn(4), tracing_mode="symbolic")
    unsafe = unsafe_op(gm)
    assert unsafe is not None and "_local_scalar_dense" in unsafe, gm.graph
    assert "a sync point" in static_reason({cuda}, ["cuda"], [], {}, unsafe)
    assert unsafe_op(_aten_graph(lambda x: x.relu() + 1, torch.randn(4))) is None


@requires_cuda
def test_replays_equal_eager_over_calls_with_new_inputs():
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()) for _ in range(4)]).cuda()
    compiled = _compile(model)
    with torch.no_grad():
        for step in range(6):
            x = torch.randn(8, 64, device="cuda")
            out = compiled(x)
            torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)
        # (Under no_grad: with grad on, warm start compiles the backward with the forward.)
        (state,) = _states(model, x)
        # The parameters are read where they are; only x is copied in.
        assert state.startswith("used: 1 graph(s) recorded, 2 replays, 1 calls uncaptured; "
                                "1 input(s) copied in per call ("), state


@requires_cuda
def test_inputs_of_several_dtypes_and_an_expanded_one_are_copied_in_at_each_replay():
    """Non-static inputs are copied in together before each replay: an
    expanded one (stride 0) through its one element per expanded dim, a 0-dim
    one, and inputs of different dtypes in one foreach copy."""
    def f(x, b, scale, index):
        return (x + b) * scale + index.float().sum()

    compiled = torch.compile(f, backend="cppinductor", mode="reduce-overhead")
    for step in range(5):
        x = torch.randn(8, 64, device="cuda")
        b = torch.randn(64, device="cuda").expand(8, 64)
        scale = torch.tensor(step + 0.5, device="cuda")
        index = torch.randint(0, 9, (3,), device="cuda")
        torch.testing.assert_close(compiled(x, b, scale, index).clone(), f(x, b, scale, index))


@requires_cuda
def test_an_output_read_after_the_next_replay_raises_and_a_clone_survives():
    def f(x):
        return (x * 2).relu() + 1

    compiled = _compile(f)
    xs = [torch.randn(1000, device="cuda") for _ in range(4)]
    for x in xs[:2]:
        compiled(x)  # warm-up, record
    first = compiled(xs[2])
    kept = first.clone()
    second = compiled(xs[3])
    torch.testing.assert_close(second, f(xs[3]))
    torch.testing.assert_close(kept, f(xs[2]))
    with pytest.raises(RuntimeError, match="overwrote"):
        first + 1


@requires_cuda
def test_training_steps_equal_eager_and_peak_memory_stays_near_default_mode():
    """Five SGD steps of a transformer layer (the optimizer outside the
    graphs): eager's losses and parameters, and at every step (warm-up,
    recording, replays) a peak no higher than 1.2x the default mode's (the
    forward and backward share one pool, and the backward's capture reuses
    each saved tensor's memory after its last read), and once replaying no
    higher than the default mode's. The capture stream's library
    workspaces, made once per process (Inductor's graphs pay them too), are
    made before measuring."""
    from cppinductor import cudagraph_pool

    def make():
        torch.manual_seed(0)
        return nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).cuda()

    def train(model, compile_mode):
        step_model = torch.compile(model, backend="cppinductor", mode=compile_mode) if compile_mode else model
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        gen = torch.Generator(device="cuda").manual_seed(1)
        losses, peaks = [], []
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        for _ in range(5):
            torch.cuda.reset_peak_memory_stats()
            x = torch.randn(8, 64, 256, device="cuda", generator=gen)
            loss = step_model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            peaks.append(torch.cuda.max_memory_allocated() - base)
        torch.cuda.synchronize()
        return losses, [p.detach().clone() for p in model.parameters()], peaks

    pool = cudagraph_pool.pool_for(torch.device("cuda", torch.cuda.current_device()))
    pool.stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(pool.stream):  # the libraries' per-stream workspaces (cuBLAS, cuBLASLt)
        make()(torch.randn(2, 4, 256, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    eager_losses, eager_params, _ = train(make(), None)
    _, _, default_peaks = train(make(), "default")
    losses, params, peaks = train(make(), "reduce-overhead")
    torch.testing.assert_close(losses, eager_losses, rtol=1e-4, atol=1e-5)
    for p, q in zip(params, eager_params):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert max(peaks) <= 1.2 * max(default_peaks), (peaks, default_peaks)
    assert max(peaks[2:]) <= max(default_peaks), (peaks, default_peaks)  # 1 warms up, 2 records, 3-5 replay


def test_a_cached_output_is_held_by_a_python_or_a_cpp_reference():
    """The liveness test behind handing a replay's outputs out again (no
    GPU needed: reference counts are the same on the CPU). A tensor only the
    cache holds is free; one a caller keeps, or an autograd node saved for
    its backward, is held."""
    cache = [torch.ones(4)]
    ids, versions, ptrs = [cache[0].untyped_storage()._cdata], [0], [cache[0].data_ptr()]

    def held() -> bool:
        return _C.scan_cached(cache, ids, versions, ptrs, torch._C._storage_Use_Count)[1] == [0]

    assert not held()
    kept = cache[0]
    assert held()
    del kept
    assert not held()

    class SavesIt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(cache[0])
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            (saved,) = ctx.saved_tensors
            return grad * saved

    x = torch.zeros(4, requires_grad=True)
    y = SavesIt.apply(x)
    assert held()  # the saved variable (C++)
    y.sum().backward()
    assert not held()  # released by the backward
    torch.testing.assert_close(x.grad, torch.ones(4))


def test_a_view_or_a_stolen_gradient_reaches_an_outputs_storage():
    """What decides whether a replay may rewrite an output's memory: a view
    of it, or a gradient AccumulateGrad took from a lent output (a new
    tensor over the same storage), shows in the storage's use count."""
    from cppinductor.cudagraph_pool import _register, _storage_use_count, _unregister

    owner = torch.zeros(16)
    storage = torch._C._construct_storage_from_data_pointer(owner.data_ptr(), owner.device, owner.nbytes)
    cache = [torch.empty(0).set_(storage, 0, (16,), (1,))]
    assert _storage_use_count(storage) == 2  # the tensor and our Python storage
    view = cache[0][:4]
    assert _storage_use_count(storage) == 3
    del view
    assert _storage_use_count(storage) == 2

    class ReturnsIt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return cache[0]

    _register(cache[0])
    p = torch.zeros(16, requires_grad=True)
    ReturnsIt.apply(p).sum().backward()
    assert p.grad.data_ptr() == owner.data_ptr()  # taken as it is, not copied
    scan = _C.scan_cached(cache, [storage._cdata], [cache[0]._version], [cache[0].data_ptr()],
                          torch._C._storage_Use_Count)
    assert scan == (True, [], []) and _storage_use_count(storage) == 3  # reached only through p.grad
    p.grad = None
    assert _storage_use_count(storage) == 2
    _unregister(cache)
    assert not torch._C._is_cached_tensor(cache[0])


@requires_cuda
def test_a_replay_hands_out_the_same_tensors_while_nobody_holds_them():
    """Replays reuse the output tensors nobody kept (no tensor is made per
    output per call); an output still held is retired and replaced."""
    import weakref

    compiled = _compile(lambda x: (x * 2).relu() + 1)
    x = torch.randn(1000, device="cuda")
    compiled(x), compiled(x)  # warm-up, record
    first = weakref.ref(compiled(x))
    second = compiled(x + 1)
    assert first() is second  # the first call's output was dropped: handed out again
    third = compiled(x + 2)
    assert third is not second
    torch.testing.assert_close(third, ((x + 2) * 2).relu() + 1)
    with pytest.raises(RuntimeError, match="overwrote"):
        second + 1
    del second
    third.unsqueeze_(0)  # changed in place, then dropped: not handed out again
    del third
    fourth = compiled(x + 3)
    assert fourth.shape == (1000,)
    torch.testing.assert_close(fourth, ((x + 3) * 2).relu() + 1)


@requires_cuda
def test_a_view_of_an_output_keeps_its_value_after_the_next_call():
    compiled = _compile(lambda x: (x * 2).relu() + 1)
    x = torch.randn(1000, device="cuda")
    compiled(x), compiled(x)  # warm-up, record
    view = compiled(x)[:10]  # the output itself is dropped
    expected = view.clone()
    torch.testing.assert_close(compiled(x + 1), ((x + 1) * 2).relu() + 1)
    torch.testing.assert_close(view, expected)


@requires_cuda
def test_gradients_kept_in_grad_across_steps_accumulate_as_in_eager():
    """A .grad set to None takes the next backward's lent output as it is
    (AccumulateGrad steals it); zero_grad(set_to_none=False) then keeps it,
    and later gradients accumulate into the graph's memory. Replays that
    would rewrite it run uncaptured, or record again over new memory."""

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).cuda()

    eager, model = make(), make()
    records = []
    from cppinductor import debug

    torch._dynamo.reset()
    with debug.recording() as records:
        compiled = _compile(model)
        for step in range(12):
            x = torch.randn(16, 32, device="cuda")
            for m, f in ((eager, eager), (model, compiled)):
                if step % 2 == 0:
                    m.zero_grad(set_to_none=step % 6 == 0)
                f(x).square().mean().backward()  # two backwards per zeroing: accumulated
            for p, q in zip(model.parameters(), eager.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    states = {r.kind: r.cudagraphs for r in records}
    assert states["forward"].replays >= 2 and states["backward"].replays >= 2, [str(s) for s in states.values()]


@requires_cuda
def test_gradients_laid_over_saved_tensors_are_stolen_and_never_silently_rewritten():
    """The backward's capture lays gradients in the memory of the saved
    tensors it freed. Such a gradient is the pool's output like any other:
    .grad takes it without a copy, and one held across the next step (from
    torch.autograd.grad) raises or keeps its value, never silently changes.
    Taken for an alias of a saved input, it was once returned as the same
    tensor at every replay: copied into .grad, and overwritten when held."""

    def make():
        torch.manual_seed(0)
        layers = [nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()) for _ in range(6)]
        return nn.Sequential(*layers).cuda()

    eager, model = make(), make()
    compiled = _compile(model)
    held = []
    for step in range(6):
        x = torch.randn(8, 64, device="cuda")
        expected = torch.autograd.grad(eager(x).square().mean(), list(eager.parameters()))
        taken = {}
        hooks = [p.register_hook(lambda g, p=p: taken.__setitem__(p, g.data_ptr())) for p in model.parameters()]
        compiled(x).square().mean().backward()
        for h in hooks:
            h.remove()
        for p, q in zip(model.parameters(), expected):
            torch.testing.assert_close(p.grad, q, rtol=1e-4, atol=1e-5)
        if step >= 2:  # replays: every gradient taken into .grad as the backward returned it
            copied = [n for n, p in model.named_parameters() if p.grad.data_ptr() != taken[p]]
            assert not copied, copied
        model.zero_grad(set_to_none=True)
        held.append((torch.autograd.grad(compiled(x).square().mean(), list(model.parameters())), expected))
    for grads, expected in held:
        for g, q in zip(grads, expected):
            try:
                value = g.clone()
            except RuntimeError as e:
                assert "overwrote" in str(e), e
                continue
            torch.testing.assert_close(value, q, rtol=1e-4, atol=1e-5)


@requires_cuda
def test_two_forwards_before_their_backwards_give_eagers_gradients():
    """The second forward's replay would overwrite what the first's backward
    reads: it runs outside the graph, so the gradients stay eager's."""

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)).cuda()

    eager, model = make(), make()
    compiled = _compile(model)
    for step in range(4):
        a, b = torch.randn(8, 32, device="cuda"), torch.randn(8, 32, device="cuda")
        (eager(a).sum() * 2 + eager(b).sum()).backward()
        (compiled(a).sum() * 2 + compiled(b).sum()).backward()
        for p, q in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None


@requires_cuda
def test_memory_does_not_grow_over_a_thousand_replays():
    compiled = _compile(lambda x, y: torch.tanh(x @ y).sum(-1))
    x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    for _ in range(3):
        compiled(x, y)
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(1000):
        compiled(x, y)
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= before


@requires_cuda
def test_a_mutated_input_that_is_not_a_buffer_runs_uncaptured_with_the_reason():
    def f(x, acc):
        acc.add_(x)
        return acc * 2

    x, acc, expected = torch.randn(16, device="cuda"), torch.zeros(16, device="cuda"), torch.zeros(16, device="cuda")
    compiled = _compile(f)
    for _ in range(3):
        out = compiled(x, acc)
        expected += x
        torch.testing.assert_close(acc, expected)
        torch.testing.assert_close(out, expected * 2)
    (state,) = _states(f, x, acc.clone())
    assert state.startswith("not used: the graph mutates input"), state


@requires_cuda
def test_a_buffer_updated_in_place_replays():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(8))

        def forward(self, x):
            self.total.add_(x)
            return self.total * 1.5

    model, reference = Counter().cuda(), Counter().cuda()
    compiled = _compile(model)
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(8, device="cuda")
            torch.testing.assert_close(compiled(x), reference(x))
    torch.testing.assert_close(model.total, reference.total)
    with torch.no_grad():
        assert _states(Counter().cuda(), x)[0].startswith("used: 1 graph(s) recorded"), _states(Counter().cuda(), x)


@requires_cuda
def test_a_cpu_tensor_in_a_cuda_graph_is_a_reason():
    def f(x, s):
        return x * s.to(x.device) + 1

    (state,) = _states(f, torch.randn(8, device="cuda"), torch.tensor(3.0))
    assert state.startswith("not used: the graph has CPU tensors"), state


@requires_cuda
def test_dynamic_shapes_record_a_graph_per_size_up_to_a_limit():
    from cppinductor.cudagraphs import MAX_SHAPES

    compiled = torch.compile(lambda x: (x * 2).sin(), backend="cppinductor", mode="reduce-overhead", dynamic=True)
    for n in range(3, 3 + MAX_SHAPES + 2):
        x = torch.randn(n, device="cuda")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), (x * 2).sin())


@torch.library.custom_op("cppinductor_test::synchronized_copy", mutates_args=())
def _synchronized_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy that waits for the device first: a sync point no capture allows."""
    torch.cuda.synchronize()
    return x.clone()


@_synchronized_copy.register_fake
def _(x):
    return torch.empty_like(x)


@requires_cuda
def test_a_capture_that_fails_runs_uncaptured_with_the_reason():
    def f(x):
        return torch.ops.cppinductor_test.synchronized_copy(x * 2) + 1

    x = torch.randn(16, device="cuda")
    compiled = _compile(f)
    for _ in range(4):
        torch.testing.assert_close(compiled(x), f(x))
    states = _states(f, x)
    assert any(s.startswith("not used: capture failed") for s in states), states
    torch.randn(4, device="cuda")  # the generator left capture mode: random draws still work


@requires_cuda
def test_a_python_scalar_input_is_part_of_the_recording_key():
    """A float argument (an unbacked value from .item(), say) is baked into a
    captured launch: each value is recorded apart, and past eight values the
    graph runs uncaptured, never replaying a stale one."""

    def f(x, scale: float):
        return (x * scale).sin()

    x = torch.randn(32, device="cuda")
    compiled = _compile(f, dynamic=True)
    for scale in [0.5, 1.5, 2.5] * 2 + [float(v) for v in range(12)]:
        for _ in range(3):
            torch.testing.assert_close(compiled(x, scale), f(x, scale))


@requires_cuda
def test_a_replays_output_keeps_its_value_when_moved_parameters_make_the_graph_record_again():
    """FSDP2 frees and gathers parameters every step, so their addresses move
    and the graph records again, and after MAX_RERECORDS stops using CUDA
    graphs, while outputs of earlier replays (a forward's saved tensors) are
    still held: those keep their values."""
    from cppinductor import cudagraphs

    lin = nn.Linear(256, 256).cuda()
    compiled = _compile(lin)
    x = torch.randn(64, 256, device="cuda")
    held = []
    with torch.no_grad():
        for step in range(cudagraphs.RERECORD_AFTER * (cudagraphs.MAX_RERECORDS + 2)):
            if step >= 2:
                lin.weight.data = lin.weight.data.clone()  # same parameter, a new address
            out = compiled(x + step)
            torch.testing.assert_close(out, lin(x + step))
            if step % cudagraphs.RERECORD_AFTER == 1:  # a replay's output (the others run uncaptured)
                held.append((out, out.clone()))
    checked = 0
    for out, expected in held:
        try:
            value = out + 0
        except RuntimeError as e:  # retired by a later replay: an error, never a changed value
            assert "overwrote" in str(e)
            continue
        torch.testing.assert_close(value, expected)
        checked += 1
    assert checked >= cudagraphs.MAX_RERECORDS, checked


@requires_cuda
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_a_chain_of_graphs_replays_after_its_first_graph_records_again(train):
    """DDP splits a model into pieces, each a graph of its own, the output of
    one the input of the next. When the first records again (its parameters
    moved), its new capture comes after the others', whose replays would
    rewrite it: they record again too, and the chain replays, equal to eager."""
    from cppinductor import cudagraphs

    torch.manual_seed(0)
    first, second = nn.Linear(128, 128).cuda(), nn.Linear(128, 128).cuda()
    pieces = [_compile(first), _compile(second)]
    x = torch.randn(32, 128, device="cuda")
    with torch.set_grad_enabled(train), debug.recording() as records:
        for step in range(2 + cudagraphs.RERECORD_AFTER + 4):
            if 2 <= step < 2 + cudagraphs.RERECORD_AFTER:
                first.weight.data = first.weight.data.clone()  # moved: uncaptured, then recorded again
            out = pieces[1](torch.relu(pieces[0](x + step)))
            expected = second(torch.relu(first(x + step)))
            torch.testing.assert_close(out, expected)
            if train:
                grads = torch.autograd.grad(out.square().sum(), [first.weight, second.weight])
                eager = torch.autograd.grad(expected.square().sum(), [first.weight, second.weight])
                torch.testing.assert_close(grads, eager)
    states = [str(r.cudagraphs) for r in records]
    assert states and all(s.startswith("used") for s in states), states


_WARM_STEP = """
import json, torch
from cppinductor import debug
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
x = torch.randn(16, 64, device="cuda")
with debug.recording() as records:
    compiled = torch.compile(model, backend="cppinductor", mode="reduce-overhead")
    for _ in range(4):
        compiled(x).square().sum().backward()
        model.zero_grad(set_to_none=True)
from torch._dynamo.utils import counters
print(json.dumps({"hits": counters["aot_autograd"].get("autograd_cache_hit", 0),
                  "states": {r.kind: str(r.cudagraphs) for r in records}}))
"""


@requires_cuda
def test_a_training_graph_from_the_warm_start_cache_reads_its_parameters_where_they_are(tmp_path):
    """A second process loads the training graphs from AOTAutograd's cache:
    their parameters must still be static inputs (read by address), not
    copied into the graph's buffers at every replay."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "step.py"
    script.write_text(_WARM_STEP)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "aot"), CPPINDUCTOR_CACHE_DIR=str(tmp_path / "k"))
    results = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert results[1]["hits"] == 1, results
    for result in results:
        assert "; 1 input(s) copied in per call (" in result["states"]["forward"], result
