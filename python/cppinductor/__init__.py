"""cppinductor: a torch.compile backend whose compiler is C++.

    torch.compile(model, backend="cppinductor")

The backend is registered by the package's entry point; importing this
package is only needed for its tools: explain(), utils, bench.
"""

from __future__ import annotations

from .backend import compile_counters, cppinductor
from .options import MODES, OPTIONS
from .report import ExplainReport, explain

__all__ = ["cppinductor", "compile_counters", "explain", "ExplainReport", "MODES", "OPTIONS"]
__version__ = "0.1.0"
