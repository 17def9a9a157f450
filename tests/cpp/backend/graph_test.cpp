// Graph import/export: the round trip, validation errors and symbol binding.
#include <gtest/gtest.h>

#include "lowering/graph/graph.h"

namespace cppi {
namespace {

Desc tag(const std::string& t, Desc v) { return Desc(Desc::Dict{{t, std::move(v)}}); }

Desc tensor(const std::string& dtype, Desc::List sizes, Desc::List strides, const std::string& device = "cpu") {
  return tag("tensor", Desc::Dict{{"dtype", dtype},
                                  {"sizes", sizes},
                                  {"strides", strides},
                                  {"offset", 0},
                                  {"device", device}});
}

Desc node(const std::string& name, const std::string& op, const std::string& target, Desc::List args, Desc val,
          Desc::Dict kwargs = {}) {
  return Desc(Desc::Dict{{"name", name}, {"op", op},         {"target", target},
                         {"args", args}, {"kwargs", kwargs}, {"val", std::move(val)}});
}

/// x: f32[s0, 4] (dynamic batch), y = x + 1.5, z = y.sum(dim=[1]) as float64.
Desc dynamic_graph() {
  Desc s0 = tag("sym", "s0");
  Desc x = node("x", "placeholder", "placeholder", {}, tensor("float32", {s0, 4}, {4, 1}));
  Desc y = node("y", "call_function", "aten.add.Tensor", {tag("node", "x"), 1.5},
                tensor("float32", {s0, 4}, {4, 1}));
  Desc z = node("z", "call_function", "aten.sum.dim_IntList", {tag("node", "y"), Desc::List{1}},
                tensor("float64", {s0}, {1}), {{"dtype", tag("dtype", "float64")}});
  Desc out = node("output", "output", "output", {Desc::List{tag("node", "z"), tag("node", "y")}}, Desc());
  return Desc(Desc::Dict{{"symbols", Desc::List{"s0"}}, {"nodes", Desc::List{x, y, z, out}}});
}

TEST(GraphImport, RoundTripIsIdentity) {
  Desc desc = dynamic_graph();
  auto g = import_graph(desc);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(export_graph(*g), desc) << export_graph(*g).to_json() << "\n" << desc.to_json();
}

TEST(GraphImport, TypedContent) {
  auto g = import_graph(dynamic_graph());
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->nodes.size(), 4u);
  const Node& y = g->nodes[1];
  EXPECT_EQ(y.op, Node::Op::CallFunction);
  EXPECT_EQ(y.target, "aten.add.Tensor");
  ASSERT_EQ(y.args.size(), 2u);
  EXPECT_EQ(y.args[0].kind, Arg::Kind::Node);
  EXPECT_EQ(y.args[0].i, 0);
  EXPECT_EQ(y.args[1].kind, Arg::Kind::Float);
  const Node& z = g->nodes[2];
  EXPECT_EQ(z.kwargs.at(0).second.kind, Arg::Kind::DType);
  EXPECT_EQ(z.kwargs.at(0).second.dtype, DType::Float64);
  EXPECT_EQ(z.value.tensor.dtype, DType::Float64);
  EXPECT_EQ(z.value.tensor.sizes[0].kind, SizeExpr::Kind::Symbol);
}

TEST(GraphImport, BindsSymbolsToInputSizes) {
  auto g = import_graph(dynamic_graph());
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->bindings.size(), 1u);
  EXPECT_EQ(g->bindings[0].symbol, "s0");
  EXPECT_EQ(g->bindings[0].placeholder, 0);
  EXPECT_EQ(g->bindings[0].dim, 0);
}

TEST(GraphImport, UnboundSymbolIsUnsupported) {
  Desc x = node("x", "placeholder", "placeholder", {}, tensor("float32", {4}, {1}));
  Desc y = node("y", "call_function", "aten.nonzero.default", {tag("node", "x")},
                tensor("int64", {tag("sym", "u0"), 1}, {1, 1}));
  Desc out = node("output", "output", "output", {Desc::List{tag("node", "y")}}, Desc());
  auto g = import_graph(Desc(Desc::Dict{{"symbols", Desc::List{"u0"}}, {"nodes", Desc::List{x, y, out}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(g.error().message.find("u0"), std::string::npos);
}

TEST(GraphImport, RejectsUnknownDtypeNamingTheNode) {
  Desc x = node("x", "placeholder", "placeholder", {}, tensor("complex64", {4}, {1}));
  Desc out = node("output", "output", "output", {Desc::List{tag("node", "x")}}, Desc());
  auto g = import_graph(Desc(Desc::Dict{{"nodes", Desc::List{x, out}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(g.error().message.find("node 'x'"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("complex64"), std::string::npos);
}

TEST(GraphImport, RejectsUnsupportedDeviceAndLayout) {
  Desc meta = node("x", "placeholder", "placeholder", {}, tensor("float32", {4}, {1}, "meta"));
  Desc out = node("output", "output", "output", {Desc::List{tag("node", "x")}}, Desc());
  auto g = import_graph(Desc(Desc::Dict{{"nodes", Desc::List{meta, out}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("device meta"), std::string::npos);

  Desc sparse = node("x", "placeholder", "placeholder", {}, tag("unsupported", "tensor layout torch.sparse_coo"));
  g = import_graph(Desc(Desc::Dict{{"nodes", Desc::List{sparse, out}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(g.error().message.find("sparse_coo"), std::string::npos);
}

TEST(GraphImport, RejectsMalformedGraphs) {
  // A reference to a node defined later.
  Desc y = node("y", "call_function", "aten.relu.default", {tag("node", "x")}, tensor("float32", {4}, {1}));
  Desc x = node("x", "placeholder", "placeholder", {}, tensor("float32", {4}, {1}));
  Desc out = node("output", "output", "output", {Desc::List{tag("node", "y")}}, Desc());
  auto g = import_graph(Desc(Desc::Dict{{"nodes", Desc::List{y, x, out}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().kind, Error::Kind::InvalidInput);
  // No output node.
  g = import_graph(Desc(Desc::Dict{{"nodes", Desc::List{x}}}));
  ASSERT_FALSE(g.ok());
  // Not a graph at all.
  g = import_graph(Desc(42));
  ASSERT_FALSE(g.ok());
}

TEST(SizeExpr, EvaluatesWithPythonFloorSemantics) {
  SizeExpr e;
  e.kind = SizeExpr::Kind::FloorDiv;
  e.operands = {SizeExpr::constant(-7), SizeExpr::sym("s0")};
  EXPECT_EQ(*e.evaluate({"s0"}, {2}), -4);
  e.kind = SizeExpr::Kind::Mod;
  EXPECT_EQ(*e.evaluate({"s0"}, {2}), 1);
  EXPECT_FALSE(e.evaluate({"s0"}, {0}).ok());
  EXPECT_FALSE(e.evaluate({}, {}).ok());
  EXPECT_EQ(e.to_string(), "mod(-7, s0)");
}

TEST(Desc, JsonEscapesAndSpecialFloats) {
  Desc d(Desc::Dict{{"a\"b", Desc::List{1, 2.5, "x\ny", nullptr, true}}, {"inf", Desc(1.0 / 0.0)}});
  EXPECT_EQ(d.to_json(), "{\"a\\\"b\": [1, 2.5, \"x\\ny\", null, true], \"inf\": \"inf\"}");
}

}  // namespace
}  // namespace cppi
