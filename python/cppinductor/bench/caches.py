"""Cold compiles: fresh, empty cache directories for every compiler we time.

Compile times in the bench are cold-cache numbers: each (workload, backend)
compiles with new TORCHINDUCTOR_CACHE_DIR, CPPINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR directories, Inductor's in-memory caches cleared and Dynamo
reset, so no earlier compile in the process can be reused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from typing import Dict, Iterator

import torch

CACHE_ENV_VARS = ("TORCHINDUCTOR_CACHE_DIR", "CPPINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def fresh_cache_env(root: str) -> Dict[str, str]:
    """Environment entries pointing every compiler cache under root (used for subprocesses too)."""
    return {var: os.path.join(root, var.lower()) for var in CACHE_ENV_VARS}


def _clear_compiler_caches() -> None:
    if "torch._inductor.utils" in sys.modules:  # don't import Inductor just to clear it
        sys.modules["torch._inductor.utils"].clear_caches()


def clear_in_memory_caches() -> None:
    torch._dynamo.reset()
    _clear_compiler_caches()


@contextlib.contextmanager
def fresh_caches(reset_dynamo: bool = True) -> Iterator[str]:
    """Empty cache directories and cleared in-memory caches for the compiles
    inside. reset_dynamo=False keeps what Dynamo compiled before and inside
    (graphs that must stay callable), clearing only the compilers' caches."""
    root = tempfile.mkdtemp(prefix="cppinductor-bench-")
    saved = {var: os.environ.get(var) for var in CACHE_ENV_VARS}
    os.environ.update(fresh_cache_env(root))
    clear = clear_in_memory_caches if reset_dynamo else _clear_compiler_caches
    clear()
    try:
        yield root
    finally:
        clear()
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        shutil.rmtree(root, ignore_errors=True)
