"""One compiled graph called on two CUDA streams at once.

A reduction over few long rows splits each row across blocks that meet in the
CUDA module's __device__ partials and arrival counter (gpu_schedule.h, split
rows). Two launches of such a kernel must not overlap; the runtime serialises
them across streams (cuda_module.h, launch()). Here two threads call one
compiled (x * x).mean() on their own streams many times, with different
inputs, and every result must be eager's for its own input."""

import threading

import pytest
import torch

from check import compile_fn
from cppinductor.utils import run_and_get_code

ROWS, COLS = 8192, 2048  # one long row (a full reduction): split across blocks
CALLS = 50
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def mean_square(x):
    return (x * x).mean()


def compiled_split_row_reduction(x):
    """The compiled function, after checking its kernel really splits rows."""
    fn = compile_fn(mean_square, options={"fallback": "error"})
    _, sources = run_and_get_code(fn, x)
    cuda = [s for s in sources if "__global__" in s]
    assert cuda, "no CUDA module was generated"
    assert any("_partials[" in s and "_arrivals[" in s for s in cuda), (
        "the reduction no longer splits its row across blocks; pick a shape that does"
    )
    return fn


@requires_cuda
def test_split_row_reduction_on_two_streams_concurrently():
    xs = [torch.randn(ROWS, COLS, device="cuda"), 3 * torch.randn(ROWS, COLS, device="cuda")]
    expected = [mean_square(x) for x in xs]
    fn = compiled_split_row_reduction(xs[0])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    results = [[None] * CALLS for _ in streams]
    torch.cuda.synchronize()

    def work(i):
        with torch.cuda.stream(streams[i]):
            for call in range(CALLS):
                results[i][call] = fn(xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    for i in range(len(streams)):
        for call in range(CALLS):
            torch.testing.assert_close(results[i][call], expected[i], msg=f"stream {i}, call {call}")


@requires_cuda
def test_split_row_reduction_alternating_streams_one_thread():
    xs = [torch.randn(ROWS, COLS, device="cuda"), 3 * torch.randn(ROWS, COLS, device="cuda")]
    expected = [mean_square(x) for x in xs]
    fn = compiled_split_row_reduction(xs[0])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    results = []
    for call in range(2 * CALLS):
        i = call % 2
        with torch.cuda.stream(streams[i]):
            results.append(fn(xs[i]))
    torch.cuda.synchronize()
    for call, r in enumerate(results):
        torch.testing.assert_close(r, expected[call % 2], msg=f"call {call}")
