"""Backends under test: a label and what torch.compile gets (a name or a callable).

"eager" is the baseline and is not compiled at all. Any other name goes to
``torch.compile(fn, backend=name)``; a callable (a Dynamo backend function)
is accepted too, which the tests use to inject a wrong backend. A mode
(--mode) goes to the backends that take one (MODE_BACKENDS); "name:mode"
names a backend in one mode, so one run can set modes side by side
("inductor:reduce-overhead,cppinductor:reduce-overhead").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

EAGER = "eager"
DEFAULT_BACKENDS = ("eager", "aot_eager", "inductor", "cppinductor")
# The launch-bound suite: both backends in the default mode and with CUDA graphs.
LAUNCH_BACKENDS = ("eager", "inductor", "inductor:reduce-overhead", "cppinductor", "cppinductor:reduce-overhead")
# The GEMM suite: both backends in the default mode and in max-autotune (where templates compete).
GEMM_BACKENDS = ("eager", "inductor", "inductor:max-autotune-no-cudagraphs", "cppinductor",
                 "cppinductor:max-autotune-no-cudagraphs")
MODE_BACKENDS = ("inductor", "cppinductor")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Backend:
    label: str
    target: Union[str, Callable, None] = None  # None: the label is the torch.compile name
    mode: Optional[str] = None  # torch.compile(mode=...)
    options: Optional[Dict[str, Any]] = None  # torch.compile(options=...)

    @property
    def name(self) -> str:
        """The backend's name without its mode ("inductor" for "inductor:reduce-overhead")."""
        return self.target if isinstance(self.target, str) else self.label

    @property
    def is_eager(self) -> bool:
        return self.label == EAGER and self.target is None

    @property
    def runs_in_subprocess(self) -> bool:
        """Only registered names can be handed to a fresh process."""
        return not self.is_eager and self.target is None

    def compiler(self) -> Callable[[Callable], Callable]:
        if self.is_eager:
            return lambda fn: fn
        target = self.label if self.target is None else self.target
        kwargs: Dict[str, Any] = {} if self.mode is None else {"mode": self.mode}
        if self.options:  # torch.compile takes a mode or options: cppinductor reads a mode from its options
            kwargs = {"options": {**self.options, **kwargs}}
        return lambda fn: torch.compile(fn, backend=target, **kwargs)

    def unavailable_reason(self) -> Optional[str]:
        """Why torch.compile would reject this backend name, or None."""
        if self.is_eager or (self.target is not None and not isinstance(self.target, str)):
            return None
        from torch._dynamo.backends.registry import lookup_backend

        try:
            lookup_backend(self.name)
        except Exception as e:  # InvalidBackend, or an import error inside the backend
            return f"backend {self.label!r} unavailable: {type(e).__name__}: {e}"
        return None


def _named(spec: str, mode: Optional[str], cppinductor_options: Optional[Dict[str, Any]]) -> Backend:
    """"name" (with --mode where the backend takes one) or "name:mode"."""
    name, _, own_mode = spec.partition(":")
    options = cppinductor_options if name == "cppinductor" else None
    if own_mode:
        if own_mode not in MODES:
            raise ValueError(f"unknown mode {own_mode!r} in {spec!r}; known: {', '.join(MODES)}")
        return Backend(spec, target=name, mode=own_mode, options=options)
    return Backend(name, mode=mode if name in MODE_BACKENDS else None, options=options)


def parse_backends(spec: Union[str, Sequence[Union[str, Backend]]], mode: Optional[str] = None,
                   cppinductor_options: Optional[Dict[str, Any]] = None) -> List[Backend]:
    """Backends in run order; eager always first since it is the reference and
    baseline. cppinductor_options go to cppinductor's torch.compile."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    backends = [b if isinstance(b, Backend) else _named(b.strip(), mode, cppinductor_options) for b in items if b]
    backends = [b for b in backends if not b.is_eager]
    labels = [b.label for b in backends]
    duplicates = {label for label in labels if labels.count(label) > 1}
    if duplicates:
        raise ValueError(f"backend listed twice: {', '.join(sorted(duplicates))}")
    return [Backend(EAGER)] + backends
