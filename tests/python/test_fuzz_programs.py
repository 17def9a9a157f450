"""The random-program fuzzer (cppinductor.tools.fuzz_programs) on a fixed set
of seeds, and proof that it catches a wrong result."""

from __future__ import annotations

import torch

from cppinductor.tools import fuzz_programs

# Seeds whose programs cover reductions, views, broadcasting, casts, indexing
# and a backward between them; a few seconds in all.
SEEDS = [3, 10, 27, 1172, 1197, 1417]


def test_fixed_seeds_are_correct():
    results = fuzz_programs.fuzz(SEEDS, timeout_s=60)
    bad = {r.seed: (r.status, r.reason, r.source) for r in results if r.status not in ("correct", "eager_error")}
    assert not bad, bad
    assert sum(r.status == "correct" for r in results) >= len(SEEDS) - 1


def test_a_seed_is_one_program():
    assert fuzz_programs.generate(27).source() == fuzz_programs.generate(27).source()
    assert fuzz_programs.generate(27).source() != fuzz_programs.generate(28).source()


def test_repro_runs_as_it_stands():
    namespace: dict = {}
    exec(fuzz_programs.generate(10).repro(), namespace)


def test_injected_bug_is_reported_wrong():
    program = fuzz_programs.Program(
        seed=0,
        inputs=[fuzz_programs.InputSpec((7, 33), torch.float32, "transposed", 1)],
        lines=["v0 = torch.relu(a0 * 2)", "v1 = torch.sum(v0, dim=(0,), keepdim=False)"],
        outputs=["v1"],
        dynamic=False,
        grad=True,
        lowest_float=torch.float32,
    )
    assert fuzz_programs.run_program(program).status == "correct"
    wrong = fuzz_programs.run_program(program, options={"inject_relu_bug_TESTING_ONLY": True})
    assert wrong.status == "wrong", wrong
    assert wrong.max_error and wrong.max_error > 0.1
