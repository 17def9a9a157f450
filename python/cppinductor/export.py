"""ATen FX graph -> plain data ("graph description") for the C++ core.

The description is nested dicts/lists/scalars only (see lowering/graph/desc.h):

    {"symbols": ["s0", ...],
     "nodes": [{"name", "op", "target", "args", "kwargs", "val", ["stack_trace"]}, ...]}

- ``op``: placeholder | get_attr | call_function | output
- ``target``: the ATen overload name ("aten.add.Tensor"), "getitem",
  "operator.mul", ... or the attribute name for get_attr.
- argument encoding: None/bool/int/float/str and lists as themselves; tagged
  one-key dicts for the rest: {"node": name}, {"dtype": "float32"},
  {"device": "cpu"}, {"layout": ...}, {"memory_format": ...},
  {"symexpr": size-expr}, {"unsupported": repr}.
- ``val``: {"tensor": {"dtype", "sizes", "strides", "offset", "device"}},
  {"symint": e}, {"int": e}, {"float": x}, {"symfloat": x} or
  {"symfloat": {"hint": x, "expr": float-expr}}, {"symbool"|"bool": b},
  {"tuple": [val, ...]}, None, or {"unsupported": why}.
- float expressions (a SymFloat computed from sizes, e.g. var's backward
  scale 2 / (n - 1)): {"f": x}, {"to_float": size-expr},
  {"fadd"|"fmul": [fe, ...]}, {"fdiv": [a, b]}; a SymFloat whose expression
  has anything else carries only its hint, and nodes reading it fall back.
- size expressions: ints, {"sym": "s0"}, {"add"|"mul"|"min"|"max": [e, ...]},
  {"floordiv"|"mod": [a, b]}, or {"unsupported": text}.

Anything the core cannot take (complex dtypes, sparse layouts, quantized
tensors, meta tensors) is described as "unsupported" so the C++ import rejects
the graph with a reason naming the node; the backend then runs it eagerly.
"""

from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils._sympy import functions as symfn

_DTYPES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    # Storage only: ATen ops (torch._scaled_mm, casts) compute on them, kernels never do.
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}


# The core's dtype names back to torch's (runtime layouts).
TORCH_DTYPES = {name: dtype for dtype, name in _DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str | None:
    return _DTYPES.get(dtype)


def size_expr(e: Any) -> Any:
    """A python int, SymInt or sympy expression as a size expression."""
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    if isinstance(e, torch.SymInt):
        hint = e.node.maybe_as_int()
        if hint is not None and not e.node.expr.free_symbols:
            return int(hint)
        return _sympy_expr(e.node.expr)
    if isinstance(e, sympy.Basic):
        return _sympy_expr(e)
    return {"unsupported": f"size {e!r}"}


def _sympy_expr(e: sympy.Basic) -> Any:
    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return {"sym": e.name}
    if isinstance(e, sympy.Add):
        return {"add": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, sympy.Mul):
        return {"mul": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, (symfn.FloorDiv, symfn.CleanDiv)):
        return {"floordiv": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, (symfn.PythonMod, symfn.Mod, sympy.Mod)):
        return {"mod": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, (symfn.Min, sympy.Min)):
        return {"min": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, (symfn.Max, sympy.Max)):
        return {"max": [_sympy_expr(a) for a in e.args]}
    if isinstance(e, (sympy.Pow, symfn.PowByNatural)):
        base, exp = e.args
        if isinstance(exp, sympy.Integer) and 0 < int(exp) <= 8:
            return {"mul": [_sympy_expr(base)] * int(exp)}
    return {"unsupported": str(e)}


def _float_expr(e: sympy.Basic) -> Any:
    """A SymFloat's sympy expression as a float expression (see the module
    docstring), or None where it holds something the core cannot evaluate."""
    if isinstance(e, (sympy.Float, sympy.Integer, sympy.Rational)):
        return {"f": float(e)}
    if isinstance(e, symfn.ToFloat):
        size = size_expr(e.args[0])
        return None if isinstance(size, dict) and "unsupported" in size else {"to_float": size}
    if isinstance(e, symfn.IntTrueDiv):
        a, b = (_float_expr(symfn.ToFloat(x)) for x in e.args)
        return None if a is None or b is None else {"fdiv": [a, b]}
    if isinstance(e, symfn.FloatTrueDiv):
        a, b = (_float_expr(x) for x in e.args)
        return None if a is None or b is None else {"fdiv": [a, b]}
    if isinstance(e, (sympy.Add, sympy.Mul)):
        args = [_float_expr(x) for x in e.args]
        if any(a is None for a in args):
            return None
        return {"fadd" if isinstance(e, sympy.Add) else "fmul": args}
    if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer):
        base, k = _float_expr(e.args[0]), int(e.args[1])
        if base is None or k == 0 or abs(k) > 8:
            return None
        power = base if abs(k) == 1 else {"fmul": [base] * abs(k)}
        return power if k > 0 else {"fdiv": [{"f": 1.0}, power]}
    return None


def tensor_val(t: torch.Tensor) -> Any:
    if t.layout != torch.strided:
        return {"unsupported": f"tensor layout {t.layout} is not supported"}
    if t.is_quantized:
        return {"unsupported": "quantized tensors are not supported"}
    name = dtype_name(t.dtype)
    if name is None:
        return {"unsupported": f"dtype {t.dtype} is not supported"}
    if t.device.type not in ("cpu", "cuda"):
        return {"unsupported": f"device {t.device} is not supported"}
    device = "cpu" if t.device.type == "cpu" else f"cuda:{t.device.index or 0}"
    return {
        "tensor": {
            "dtype": name,
            "sizes": [size_expr(s) for s in t.shape],
            "strides": [size_expr(s) for s in t.stride()],
            "offset": size_expr(t.storage_offset()),
            "device": device,
        }
    }


def value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        return tensor_val(v)
    if isinstance(v, torch.SymInt):
        return {"symint": size_expr(v)}
    if isinstance(v, torch.SymFloat):
        hint = float(v.node.hint) if v.node.hint is not None else 0.0
        expr = _float_expr(v.node.expr)
        return {"symfloat": hint if expr is None else {"hint": hint, "expr": expr}}
    if isinstance(v, torch.SymBool):
        return {"symbool": bool(v.node.hint) if v.node.hint is not None else False}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": v}
    if isinstance(v, (tuple, list)):
        return {"tuple": [value(x) for x in v]}
    return {"unsupported": f"value of type {type(v).__name__}"}


def target_name(target: Any) -> str:
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)  # "aten.add.Tensor"
    if target is operator.getitem:
        return "getitem"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if module.startswith("torch"):
        return f"{module}.{name}"
    return name


def arg(a: Any, names: dict[torch.fx.Node, str]) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"node": names[a]}
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, (list, tuple)):
        return [arg(x, names) for x in a]
    if isinstance(a, torch.dtype):
        name = dtype_name(a)
        return {"dtype": name} if name else {"unsupported": f"dtype {a}"}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    if isinstance(a, torch.layout):
        return {"layout": str(a).replace("torch.", "")}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).replace("torch.", "")}
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"symexpr": size_expr(a)} if isinstance(a, torch.SymInt) else {"unsupported": repr(a)}
    return {"unsupported": f"{type(a).__name__} argument"}


def _free_symbols(v: Any, out: set[str]) -> None:
    if isinstance(v, torch.Tensor):
        for s in (*v.shape, *v.stride(), v.storage_offset()):
            if isinstance(s, torch.SymInt):
                out.update(sym.name for sym in s.node.expr.free_symbols)
    elif isinstance(v, torch.SymInt):
        out.update(sym.name for sym in v.node.expr.free_symbols)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _free_symbols(x, out)


def _stack_line(node: torch.fx.Node) -> str:
    """The innermost user frame of the node's stack trace, e.g. 'model.py:12 | y = x.relu()'."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) else ""
            parts = lines[i].split('"')
            where = parts[1].rsplit("/", 1)[-1] if len(parts) > 1 else lines[i]
            lineno = lines[i].split("line ")[-1].split(",")[0] if "line " in lines[i] else "?"
            return f"{where}:{lineno} | {code}"
    return ""


def export_graph(gm: torch.fx.GraphModule) -> dict:
    """The graph description of an ATen FX graph carrying FakeTensor metadata."""
    names: dict[torch.fx.Node, str] = {}
    nodes = []
    symbols: set[str] = set()
    for node in gm.graph.nodes:
        names[node] = node.name
        val = node.meta.get("val")
        if node.op == "placeholder":
            _free_symbols(val, symbols)
        if node.op == "call_function":
            target = target_name(node.target)
        elif node.op == "get_attr":
            target = str(node.target)
            if val is None:
                val = getattr(gm, node.target, None)
        else:
            target = node.op
        entry = {
            "name": node.name,
            "op": node.op,
            "target": target,
            "args": [arg(a, names) for a in node.args],
            "kwargs": {k: arg(v, names) for k, v in node.kwargs.items()},
            "val": value(val) if node.op != "output" else None,
        }
        if node.op in ("call_method", "call_module"):
            entry["op"] = node.op  # rejected by the importer with a reason
        trace = _stack_line(node)
        if trace:
            entry["stack_trace"] = trace
        nodes.append(entry)
    return {"symbols": sorted(symbols), "nodes": nodes}
