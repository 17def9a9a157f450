"""The Python half of the graph boundary: export -> C++ import -> export."""

import pytest
import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd

from cppinductor import _C
from cppinductor.decompositions import decomposition_table
from cppinductor.export import export_graph


def _aten_graphs(fn, *args, dynamic=False):
    graphs = []

    def grab(gm, example_inputs):
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=grab, decompositions=decomposition_table())
    torch.compile(fn, backend=backend, dynamic=dynamic)(*args)
    return graphs


def _roundtrip(gm):
    desc = export_graph(gm)
    assert _C.roundtrip_graph(desc) == desc
    return desc


def test_roundtrip_static_graph():
    (gm,) = _aten_graphs(lambda x, y: (torch.softmax(x @ y, -1).to(torch.float64), x.t()),
                         torch.randn(4, 5), torch.randn(5, 3))
    desc = _roundtrip(gm)
    targets = [n["target"] for n in desc["nodes"]]
    assert "aten.mm.default" in targets
    assert desc["symbols"] == []


def test_roundtrip_dynamic_graph_binds_symbols():
    (gm,) = _aten_graphs(lambda x: (x * 2).sum(0), torch.randn(8, 3), dynamic=True)
    desc = _roundtrip(gm)
    assert desc["symbols"], desc
    cg = _C.compile_graph(desc, {})
    assert [b[0] for b in cg.symbol_bindings] == desc["symbols"]


def test_unsupported_dtype_is_reported_with_the_node():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(2, dtype=torch.complex64, device="meta")
    g.output((x,))
    desc = export_graph(torch.fx.GraphModule(torch.nn.Module(), g))
    with pytest.raises(_C.UnsupportedError, match="complex64") as info:
        _C.compile_graph(desc, {})
    assert "'x'" in str(info.value)


def test_bad_description_raises_a_python_exception():
    with pytest.raises(_C.CompilerError, match="nodes"):
        _C.compile_graph({"not": "a graph"}, {})
    with pytest.raises(TypeError):
        _C.compile_graph({"nodes": [object()]}, {})
