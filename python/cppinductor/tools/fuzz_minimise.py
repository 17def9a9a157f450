"""Shrinks a failing fuzz program (cppinductor.tools.fuzz_programs) to a small repro.

    python -m cppinductor.tools.fuzz_programs --seed N --count 1 --minimise
"""

from __future__ import annotations

import re

import torch

from .fuzz_programs import FuzzResult, Program, run_program
from .opinfo_sweep import quiet


def _names_in(expr: str) -> list[str]:
    return re.findall(r"\b[av]\d+\b", expr)


def _prune(program: Program) -> Program:
    """Without the lines no output depends on, and inputs renumbered."""
    needed = set(program.outputs)
    kept = []
    for line in reversed(program.lines):
        name, expr = line.split(" = ", 1)
        if name in needed:
            needed.update(_names_in(expr))
            kept.append(line)
    kept.reverse()
    return Program(program.seed, program.inputs, kept, program.outputs, program.dynamic, program.grad,
                   program.lowest_float)


def _variants(program: Program) -> list[Program]:
    """Smaller programs: an output fewer, or one line replaced by one of its operands."""
    out = []
    for i in range(len(program.outputs)):
        if len(program.outputs) > 1:
            outputs = program.outputs[:i] + program.outputs[i + 1:]
            out.append(_prune(Program(program.seed, program.inputs, program.lines, outputs, program.dynamic,
                                      program.grad, program.lowest_float)))
    for i, line in enumerate(program.lines):
        name, expr = line.split(" = ", 1)
        if re.fullmatch(r"[av]\d+", expr):
            continue  # already folded
        for operand in dict.fromkeys(_names_in(expr)):
            lines = program.lines[:i] + [f"{name} = {operand}"] + program.lines[i + 1:]
            out.append(_prune(Program(program.seed, program.inputs, lines, program.outputs, program.dynamic,
                                      program.grad, program.lowest_float)))
    if program.grad:
        out.append(Program(program.seed, program.inputs, program.lines, program.outputs, program.dynamic, False,
                           program.lowest_float))
    if program.dynamic:
        out.append(Program(program.seed, program.inputs, program.lines, program.outputs, False, program.grad,
                           program.lowest_float))
    return out


def minimise(program: Program, *, timeout_s: int = 60, cuda_dry_run: bool = False) -> tuple[Program, FuzzResult]:
    """Greedily the smallest variant of a failing program that fails with the
    same status (a line folded into its operand, an output, the backward or
    dynamic shapes dropped), until no variant does."""
    quiet()
    torch._dynamo.config.automatic_dynamic_shapes = False
    best = _prune(program)
    result = run_program(best, timeout_s=timeout_s, cuda_dry_run=cuda_dry_run)
    status = result.status
    if status in ("correct", "eager_error"):
        return best, result
    improved = True
    while improved:
        improved = False
        for candidate in _variants(best):
            if candidate.source() == best.source() and (candidate.grad, candidate.dynamic) == (best.grad, best.dynamic):
                continue
            res = run_program(candidate, timeout_s=timeout_s, cuda_dry_run=cuda_dry_run)
            if res.status == status:
                best, result, improved = candidate, res, True
                break
    return best, result
