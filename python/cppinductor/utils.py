"""Helpers for tests and users: run something and get the code we generated."""

from __future__ import annotations

from typing import Any, Callable

from . import debug


def run_and_get_code(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """Runs fn(*args, **kwargs) and returns (its result, the generated sources
    of every graph compiled during the call), like Inductor's utility."""
    with debug.recording() as records:
        result = fn(*args, **kwargs)
    sources = [text for record in records for _, text in record.sources]
    return result, sources


def compiled_records(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[debug.GraphRecord]]:
    """Runs fn and returns (its result, the GraphRecords compiled during the call)."""
    with debug.recording() as records:
        result = fn(*args, **kwargs)
    return result, list(records)
