"""The backend's `mode` and `options`, validated before anything compiles.

torch.compile refuses `mode` and `options` together, so `options` may also
carry a "mode" key. An unknown mode, option or value raises ValueError naming
the valid ones.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from typing import Any

import torch

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CPU_ISAS = ("native", "avx2", "avx512")
CPU_ISA_ENV = "CPPINDUCTOR_CPU_ISA"

# name -> (allowed values or type, help)
OPTIONS: dict[str, tuple[Any, str]] = {
    "mode": (MODES, "same as torch.compile's mode"),
    "fallback": (("eager", "error"), "what an unsupported node or graph does: run in eager, or raise"),
    "cpu_compiler": (("default", "clang", "gxx"), "in-process clang + ORC JIT, or a g++ subprocess"),
    "cpu_isa": (CPU_ISAS, "the vector ISA of CPU kernels: the host's widest (native), or avx2 / avx512 where the "
                          "host runs it (default: $CPPINDUCTOR_CPU_ISA, else native)"),
    "debug_dir": (str, "dump every compiled graph's stages here (like CPPINDUCTOR_DEBUG_DIR)"),
    "dump_code": (bool, "log generated code to the cppinductor.output_code logger"),
    "fuse": (bool, "fuse loops (turn off to debug fusion)"),
    "unfuse_addmm_bias": (("auto", True, False), "run a float addmm whose uses are all pointwise as mm + a bias add "
                                                 "fused into them (auto, the default: in CUDA graphs)"),
    "cuda_fast_compile": (("default", "off", "min", "mid", "max"),
                          "NVRTC's --Ofast-compile level for CUDA kernels (default: min; off in the max-autotune modes)"),
    "cuda_binary": (("ptx", "cubin"), "what NVRTC hands the CUDA driver: PTX, which the driver compiles to machine "
                                      "code as each module loads (and keeps in its own cache, ~/.nv/ComputeCache), or "
                                      "the device's machine code (cubin), compiled by NVRTC and kept in our cache "
                                      "(default: $CPPINDUCTOR_CUDA_BINARY, else cubin)"),
    "background_compile": (bool, "compile CPU kernels on a background thread while Dynamo and AOTAutograd finish "
                                 "the graph; its first call waits for them (default: on)"),
    "cpu_unroll_loops": (bool, "let LLVM unroll loops of CPU kernels (clang JIT) beyond the vector code's own "
                               "unrolling"),
    "warm_start": (("auto", True, False), "store compiled graphs in AOTAutograd's cache so that another process "
                                          "compiling the same model skips AOTAutograd's tracing (auto: training "
                                          "graphs only)"),
    "layout_optimization": (("auto", True, False), "run inference graphs' 2-d convolutions and the values between "
                                                   "them channels-last (auto, the default: graphs with CUDA "
                                                   "convolutions, and CPU graphs that hand a convolution a "
                                                   "channels-last input themselves)"),
    "reuse_buffers": (bool, "let a kernel buffer take over a dead buffer's storage (turn off to debug it)"),
    "max_autotune": (("auto", True, False), "time each kernel's candidate schedules at its first call and keep "
                                            "the fastest, caching the winner on disk (auto, the default: in the "
                                            "max-autotune modes)"),
    "max_autotune_seconds": (float, "the most seconds one graph's first call spends timing candidates (default 10)"),
    "autotune_fault_TESTING_ONLY": (bool, "make max-autotune's second candidate of each kernel look wrong, to test "
                                          "that a wrong candidate is dropped"),
    "inject_relu_bug_TESTING_ONLY": (bool, "make relu codegen wrong on purpose, to test accuracy checks"),
}


# Options whose default an environment variable sets (the option wins).
ENV_DEFAULTS = {"cpu_isa": CPU_ISA_ENV, "cuda_binary": "CPPINDUCTOR_CUDA_BINARY"}

@dataclass(frozen=True)
class Options:
    mode: str = "default"
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def fallback_error(self) -> bool:
        return self.values.get("fallback") == "error"

    @property
    def autotune(self) -> bool:
        """Whether kernels are tuned (the max_autotune option, else the mode)."""
        value = self.values.get("max_autotune", "auto")
        return self.mode in ("max-autotune", "max-autotune-no-cudagraphs") if value == "auto" else value

    def for_core(self, debug_dir: str | None) -> dict[str, Any]:
        """The dict handed to the C++ core (lowering/graph/options.cpp)."""
        out = {k: v for k, v in self.values.items() if k not in ("dump_code",)}
        out["mode"] = self.mode
        out["background_compile"] = self.values.get("background_compile", True)
        out["autotune"] = self.autotune
        # Not a user option: accumulating scatters on CUDA fall back to
        # ATen's deterministic kernels when the user asked for determinism.
        out["deterministic"] = torch.are_deterministic_algorithms_enabled()
        if debug_dir:
            out["debug_dir"] = debug_dir
        else:
            out.pop("debug_dir", None)
        return out


def _check(name: str, value: Any) -> None:
    allowed, _ = OPTIONS[name]
    if isinstance(allowed, tuple):
        if not any(type(value) is type(a) and value == a for a in allowed):  # 1 is not True
            raise ValueError(f"cppinductor: option {name!r} must be one of {list(allowed)}, got {value!r}")
    elif allowed is bool:
        if not isinstance(value, bool):
            raise ValueError(f"cppinductor: option {name!r} must be a bool, got {value!r}")
    elif allowed is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"cppinductor: option {name!r} must be a number of seconds, got {value!r}")
    elif not isinstance(value, allowed):
        raise ValueError(f"cppinductor: option {name!r} must be a {allowed.__name__}, got {value!r}")


def _check_host_runs(isa: str) -> None:
    from . import _C

    host = list(_C.host_cpu_isas())
    if isa not in host:
        has = " and ".join(repr(h) for h in host) if host else f"neither 'avx2' nor 'avx512' ({platform.machine()})"
        raise ValueError(f"cppinductor: cpu_isa {isa!r} is not available: this host's CPU runs {has}; "
                         "use 'native' for the host's widest")


def parse_options(mode: str | None = None, options: dict[str, Any] | None = None) -> Options:
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"cppinductor: options must be a dict, got {type(options).__name__}")
    options = dict(options or {})
    for name in options:
        if name not in OPTIONS:
            raise ValueError(f"cppinductor: unknown option {name!r}; valid options are {sorted(OPTIONS)}")
    for name, value in options.items():
        _check(name, value)
    for name, env in ENV_DEFAULTS.items():
        if name not in options and os.environ.get(env):
            value, allowed = os.environ[env], OPTIONS[name][0]
            if value not in allowed:
                raise ValueError(f"cppinductor: environment variable {env} must be one of {list(allowed)}, "
                                 f"got {value!r}")
            options[name] = value
    if options.get("cpu_isa", "native") != "native":
        _check_host_runs(options["cpu_isa"])
    chosen = options.pop("mode", None) or mode or "default"
    if mode is not None and mode not in MODES:
        raise ValueError(f"cppinductor: unknown mode {mode!r}; valid modes are {list(MODES)}")
    return Options(mode=chosen, values=options)


def env_flag(name: str) -> bool:
    """A boolean environment variable; anything but 0/1/empty is rejected."""
    raw = os.environ.get(name, "")
    if raw in ("", "0"):
        return False
    if raw == "1":
        return True
    raise ValueError(f"cppinductor: environment variable {name} must be 0 or 1, got {raw!r}")
