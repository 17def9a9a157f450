// lower_graph: graphs built as Descs (the format export.py produces), lowered,
// then checked structurally (printed IR) and numerically with the reference
// interpreter against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "backend/graph.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/printer.h"
#include "lowering/ir/scalar_convert.h"
#include "lowering/ops/lower_graph.h"
#include "lowering/ops/registry.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {
namespace {

// --- building graphs -----------------------------------------------------------------------

Desc tag(const std::string& t, Desc v) { return Desc(Desc::Dict{{t, std::move(v)}}); }
Desc ref(const std::string& n) { return tag("node", n); }

Desc::List contiguous_strides(const Desc::List& sizes) {
  Desc::List strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i].is_int() ? sizes[i].as_int() : 1;
  }
  return strides;
}

Desc tensor(const std::string& dtype, Desc::List sizes, Desc::List strides = {}, const std::string& device = "cpu") {
  if (strides.empty() && !sizes.empty()) strides = contiguous_strides(sizes);
  return tag("tensor", Desc::Dict{{"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"offset", 0},
                                  {"device", device}});
}

/// A graph under construction: nodes in order, then output().
struct GraphBuilder {
  Desc::List nodes;
  Desc::List symbols;

  GraphBuilder& input(const std::string& name, Desc val) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "placeholder"}, {"target", name}, {"args", Desc::List{}},
                               {"kwargs", Desc::Dict{}}, {"val", std::move(val)}});
    return *this;
  }
  GraphBuilder& call(const std::string& name, const std::string& target, Desc::List args, Desc val,
                     Desc::Dict kwargs = {}) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "call_function"}, {"target", target}, {"args", args},
                               {"kwargs", kwargs}, {"val", std::move(val)}});
    return *this;
  }
  Graph output(Desc::List outs) {
    nodes.push_back(Desc::Dict{{"name", "output"}, {"op", "output"}, {"target", "output"},
                               {"args", Desc::List{Desc(outs)}}, {"kwargs", Desc::Dict{}}, {"val", Desc()}});
    auto g = import_graph(Desc(Desc::Dict{{"symbols", symbols}, {"nodes", nodes}}));
    if (!g.ok()) throw std::runtime_error(g.error().message);
    return *g;
  }
};

// --- running lowered graphs ----------------------------------------------------------------

struct Lowered {
  Graph graph;
  LoweredGraph lowered;
  Remarks remarks;
};

Lowered lower(Graph g, LoweringOptions options = {}) {
  Lowered out{std::move(g), {}, {}};
  auto r = lower_graph(out.graph, options, out.remarks);
  if (!r.ok()) throw std::runtime_error(r.error().message);
  out.lowered = std::move(*r);
  return out;
}

ir::NodeList node_list(const LoweredGraph& lg) {
  ir::NodeList nl;
  for (const auto& b : lg.buffers) nl.buffers.push_back(b.buffer);
  for (const auto& item : lg.program)
    if (auto* n = std::get_if<ir::ComputeNode>(&item)) nl.nodes.push_back(*n);
  return nl;
}

std::string printed(const LoweredGraph& lg) { return ir::to_string(node_list(lg)); }

void store_scalar(void* base, int64_t idx, DType t, double v) {
  char* p = static_cast<char*>(base) + idx * dtype_size(t);
  switch (t) {
    case DType::Bool: *reinterpret_cast<bool*>(p) = v != 0; break;
    case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case DType::Int8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::Int16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
    case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::Float16: *reinterpret_cast<uint16_t*>(p) = ir::float_to_half(static_cast<float>(v)); break;
    case DType::BFloat16: *reinterpret_cast<uint16_t*>(p) = ir::float_to_bf16(static_cast<float>(v)); break;
    case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    case DType::Float64: *reinterpret_cast<double*>(p) = v; break;
  }
}

double load_scalar(const void* base, int64_t idx, DType t) {
  const char* p = static_cast<const char*>(base) + idx * dtype_size(t);
  switch (t) {
    case DType::Bool: return *reinterpret_cast<const bool*>(p);
    case DType::UInt8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Int8: return *reinterpret_cast<const int8_t*>(p);
    case DType::Int16: return *reinterpret_cast<const int16_t*>(p);
    case DType::Int32: return *reinterpret_cast<const int32_t*>(p);
    case DType::Int64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::Float16: return ir::half_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::BFloat16: return ir::bf16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::Float32: return *reinterpret_cast<const float*>(p);
    case DType::Float64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

/// Host memory for every buffer of a lowered graph; values are read and
/// written in logical row-major order through each buffer's layout.
struct Memory {
  const LoweredGraph& lg;
  ir::IndexBindings symbols;
  std::map<std::string, std::vector<double>> storage;  // double-aligned backing

  explicit Memory(const LoweredGraph& g, ir::IndexBindings syms = {}) : lg(g), symbols(std::move(syms)) {
    for (const auto& b : lg.buffers) {
      int64_t n = ir::evaluate(b.buffer->layout.storage_size(), symbols);
      storage[b.buffer->name].assign(static_cast<size_t>(n) + 1, 0.0);
    }
  }
  ir::BufferPtr find(const std::string& name) const {
    for (const auto& b : lg.buffers)
      if (b.buffer->name == name) return b.buffer;
    throw std::runtime_error("no buffer " + name);
  }
  template <typename F>
  void for_each(const ir::Layout& l, F f) const {
    std::vector<int64_t> sizes;
    int64_t total = 1;
    for (const auto& s : l.sizes) {
      sizes.push_back(ir::evaluate(s, symbols));
      total *= sizes.back();
    }
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t rest = flat;
      ir::IndexBindings at = symbols;
      std::vector<ir::IndexExpr> coords;
      for (size_t d = sizes.size(); d-- > 0;) {
        at["c" + std::to_string(d)] = rest % sizes[d];
        rest /= sizes[d];
      }
      for (size_t d = 0; d < sizes.size(); ++d) coords.push_back(ir::var("c" + std::to_string(d)));
      f(flat, ir::evaluate(l.index(coords), at));
    }
  }
  void set(const std::string& name, const std::vector<double>& values) {
    auto b = find(name);
    for_each(b->layout, [&](int64_t flat, int64_t idx) { store_scalar(storage[name].data(), idx, b->dtype, values.at(flat)); });
  }
  std::vector<double> get(const std::string& name) const {
    auto b = find(name);
    std::vector<double> out;
    for_each(b->layout, [&](int64_t, int64_t idx) { out.push_back(load_scalar(storage.at(name).data(), idx, b->dtype)); });
    return out;
  }
  void run() {
    ir::InterpreterArgs args;
    args.symbols = symbols;
    // With element counts, an out-of-bounds access is an error, not a corruption.
    for (const auto& b : lg.buffers)
      args.bind(b.buffer->name, storage[b.buffer->name].data(),
                ir::evaluate(b.buffer->layout.storage_size(), symbols));
    Status st = ir::interpret(node_list(lg), args);
    if (!st.ok()) throw std::runtime_error(st.error().message);
  }
};

std::vector<const Remark*> fallbacks(const Lowered& l) {
  std::vector<const Remark*> out;
  for (const auto& r : l.remarks.all())
    if (r.kind == Remark::Kind::Fallback) out.push_back(&r);
  return out;
}

void expect_all_lowered(const Lowered& l) {
  for (const auto* r : fallbacks(l)) ADD_FAILURE() << "fallback " << r->node << " (" << r->op << "): " << r->reason;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
    }
  }
}

// --- tests ---------------------------------------------------------------------------------

TEST(Lowering, BroadcastAddPrintsStructurally) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {2, 3}))
                .input("b", tensor("float32", {3}))
                .call("add", "aten.add.Tensor", {ref("a"), ref("b")}, tensor("float32", {2, 3}))
                .output({ref("add")});
  auto l = lower(g);
  expect_all_lowered(l);
  EXPECT_EQ(printed(l.lowered),
            "a: float32[2, 3] strides=[3, 1] offset=0 cpu input fixed\n"
            "b: float32[3] strides=[1] offset=0 cpu input fixed\n"
            "add: float32[2, 3] strides=[3, 1] offset=0 cpu output fixed\n"
            "\n"
            "pointwise op_add origins=[add]\n"
            "  ranges: x0 < 2, x1 < 3\n"
            "  t0: float32 = load a[3*x0 + x1]\n"
            "  t1: float32 = load b[x1]\n"
            "  t2: float32 = add(t0, t1)\n"
            "  store add[3*x0 + x1] = t2\n");
  Memory m(l.lowered);
  m.set("a", {1, 2, 3, 4, 5, 6});
  m.set("b", {10, 20, 30});
  m.run();
  expect_near(m.get("add"), {11, 22, 33, 14, 25, 36});
  ASSERT_EQ(l.lowered.buffers.size(), 3u);
  for (const auto& b : l.lowered.buffers) EXPECT_GE(b.graph_node, 0) << b.buffer->name;
}

TEST(Lowering, IntTensorPlusFloatScalarPromotesToFloat32) {
  Graph g = GraphBuilder()
                .input("a", tensor("int32", {3}))
                .call("add", "aten.add.Tensor", {ref("a"), 0.5}, tensor("float32", {3}))
                .call("mul", "aten.mul.Tensor", {ref("a"), 2}, tensor("int32", {3}))
                .output({ref("add"), ref("mul")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {1, -2, 3});
  m.run();
  expect_near(m.get("add"), {1.5, -1.5, 3.5});
  expect_near(m.get("mul"), {2, -4, 6});
}


const double kNaN = std::nan("");

TEST(Lowering, DivisionRoundingModesOnNegativeInts) {
  Graph g = GraphBuilder()
                .input("a", tensor("int64", {4}))
                .input("b", tensor("int64", {4}))
                .call("tdiv", "aten.div.Tensor", {ref("a"), ref("b")}, tensor("float32", {4}))
                .call("trunc", "aten.div.Tensor_mode", {ref("a"), ref("b")}, tensor("int64", {4}),
                      {{"rounding_mode", "trunc"}})
                .call("floor", "aten.div.Tensor_mode", {ref("a"), ref("b")}, tensor("int64", {4}),
                      {{"rounding_mode", "floor"}})
                .output({ref("tdiv"), ref("trunc"), ref("floor")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {-7, 7, -7, 5});
  m.set("b", {2, -2, -2, 0});
  m.run();
  expect_near(m.get("tdiv"), {-3.5, -3.5, 3.5, INFINITY});
  // Division by zero raises in eager; the kernel divides by 1 there instead of trapping.
  expect_near(m.get("trunc"), {-3, -3, 3, 5});
  expect_near(m.get("floor"), {-4, -4, 3, 5});
}

TEST(Lowering, FloatFloorDivisionMatchesTorch) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {3}))
                .call("floor", "aten.div.Tensor_mode", {ref("a"), -2.0}, tensor("float32", {3}),
                      {{"rounding_mode", "floor"}})
                .call("trunc", "aten.div.Tensor_mode", {ref("a"), -2.0}, tensor("float32", {3}),
                      {{"rounding_mode", "trunc"}})
                .output({ref("floor"), ref("trunc")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {7, -7, 1});
  m.run();
  expect_near(m.get("floor"), {-4, 3, -1});
  expect_near(m.get("trunc"), {-3, 3, -0.0});
}

TEST(Lowering, RemainderTakesTheDivisorsSignFmodTheDividends) {
  Graph g = GraphBuilder()
                .input("a", tensor("int32", {4}))
                .input("f", tensor("float32", {2}))
                .call("rem", "aten.remainder.Scalar", {ref("a"), 3}, tensor("int32", {4}))
                .call("remneg", "aten.remainder.Scalar", {ref("a"), -3}, tensor("int32", {4}))
                .call("fmod", "aten.fmod.Scalar", {ref("a"), 3}, tensor("int32", {4}))
                .call("frem", "aten.remainder.Scalar", {ref("f"), 2.0}, tensor("float32", {2}))
                .output({ref("rem"), ref("remneg"), ref("fmod"), ref("frem")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {-7, 7, -1, 6});
  m.set("f", {-7.5, 7.5});
  m.run();
  expect_near(m.get("rem"), {2, 1, 2, 0});
  expect_near(m.get("remneg"), {-1, -2, -1, 0});
  expect_near(m.get("fmod"), {-1, 1, -1, 0});
  expect_near(m.get("frem"), {0.5, 1.5});
}

TEST(Lowering, MaximumAndClampPropagateNaN) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {3}))
                .input("b", tensor("float32", {3}))
                .call("mx", "aten.maximum.default", {ref("a"), ref("b")}, tensor("float32", {3}))
                .call("cl", "aten.clamp.default", {ref("a"), 0.0, 1.5}, tensor("float32", {3}))
                .call("relu", "aten.relu.default", {ref("a")}, tensor("float32", {3}))
                .output({ref("mx"), ref("cl"), ref("relu")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {kNaN, 1, -2});
  m.set("b", {0, kNaN, 3});
  m.run();
  expect_near(m.get("mx"), {kNaN, kNaN, 3});
  expect_near(m.get("cl"), {kNaN, 1, 0});
  expect_near(m.get("relu"), {kNaN, 1, 0});
}

TEST(Lowering, ComparisonsAndWherePromote) {
  Graph g = GraphBuilder()
                .input("a", tensor("int32", {3}))
                .input("b", tensor("float32", {3}))
                .call("lt", "aten.lt.Tensor", {ref("a"), ref("b")}, tensor("bool", {3}))
                .call("w", "aten.where.self", {ref("lt"), ref("a"), ref("b")}, tensor("float32", {3}))
                .call("mf", "aten.masked_fill.Scalar", {ref("a"), ref("lt"), -1}, tensor("int32", {3}))
                .output({ref("w"), ref("mf")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {1, 5, 3});
  m.set("b", {1.5, 4.5, 3});
  m.run();
  expect_near(m.get("lt"), {1, 0, 0});
  expect_near(m.get("w"), {1, 4.5, 3});
  expect_near(m.get("mf"), {-1, 5, 3});
}

TEST(Lowering, SumOverADim) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .input("i", tensor("int32", {2, 3}))
                .call("s", "aten.sum.dim_IntList", {ref("x"), Desc::List{1}}, tensor("float32", {2}))
                .call("sk", "aten.sum.dim_IntList", {ref("x"), Desc::List{0}, true}, tensor("float32", {1, 3}))
                .call("si", "aten.sum.default", {ref("i")}, tensor("int64", {}))
                .call("mean", "aten.mean.dim", {ref("x"), Desc::List{-1}}, tensor("float32", {2}))
                .call("amax", "aten.amax.default", {ref("x"), Desc::List{1}}, tensor("float32", {2}))
                .output({ref("s"), ref("sk"), ref("si"), ref("mean"), ref("amax")});
  auto l = lower(g);
  expect_all_lowered(l);
  EXPECT_NE(printed(l.lowered).find("reduction op_s origins=[s]"), std::string::npos) << printed(l.lowered);
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 5, 6});
  m.set("i", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("s"), {6, 15});
  expect_near(m.get("sk"), {5, 7, 9});
  expect_near(m.get("si"), {21});
  expect_near(m.get("mean"), {2, 5});
  expect_near(m.get("amax"), {3, 6});
}

TEST(Lowering, VarMeanThroughWelford) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 4}))
                .call("vm", "aten.var_mean.correction", {ref("x"), Desc::List{1}},
                      tag("tuple", Desc::List{tensor("float32", {2, 1}), tensor("float32", {2, 1})}),
                      {{"correction", 0}, {"keepdim", true}})
                .call("var", "getitem", {ref("vm"), 0}, tensor("float32", {2, 1}))
                .call("mean", "getitem", {ref("vm"), 1}, tensor("float32", {2, 1}))
                .call("std", "aten.std.correction", {ref("x"), Desc::List{1}}, tensor("float32", {2}))
                .output({ref("var"), ref("mean"), ref("std")});
  auto l = lower(g);
  expect_all_lowered(l);
  EXPECT_NE(printed(l.lowered).find("welford"), std::string::npos) << printed(l.lowered);
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 2, 2, 2, 10});
  m.run();
  expect_near(m.get("mean"), {2.5, 4});
  expect_near(m.get("var"), {1.25, 12});
  expect_near(m.get("std"), {std::sqrt(5.0 / 3), 4}, 1e-5);
  // The getitem nodes own the results: no AtenItem for them.
  for (const auto& item : l.lowered.program) EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(item));
}

TEST(Lowering, MaxDimValuesAndIndices) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("mx", "aten.max.dim", {ref("x"), 1},
                      tag("tuple", Desc::List{tensor("float32", {2}), tensor("int64", {2})}))
                .call("v", "getitem", {ref("mx"), 0}, tensor("float32", {2}))
                .call("i", "getitem", {ref("mx"), 1}, tensor("int64", {2}))
                .call("am", "aten.argmin.default", {ref("x")}, tensor("int64", {}))
                .output({ref("v"), ref("i"), ref("am")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {1, 7, 7, kNaN, 0, 9});
  m.run();
  expect_near(m.get("v"), {7, kNaN});
  expect_near(m.get("i"), {1, 0});
  expect_near(m.get("am"), {3});  // the first NaN counts as the smallest
}

TEST(Lowering, ContiguousReshapeSimplifiesToAffineIndices) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3, 4}))
                .call("v", "aten.view.default", {ref("x"), Desc::List{6, 4}}, tensor("float32", {6, 4}))
                .call("y", "aten.mul.Tensor", {ref("v"), 2.0}, tensor("float32", {6, 4}))
                .output({ref("y")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("load x[4*x0 + x1]"), std::string::npos) << ir;
}

TEST(Lowering, PermuteThenReshapeUsesFloorDivMod) {
  // x: [2, 3, 4] -> permute(2, 0, 1): [4, 2, 3] (not contiguous) -> view [4, 6] -> clone.
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3, 4}))
                .call("p", "aten.permute.default", {ref("x"), Desc::List{2, 0, 1}},
                      tensor("float32", {4, 2, 3}, {1, 12, 4}))
                .call("c", "aten.clone.default", {ref("p")}, tensor("float32", {4, 2, 3}),
                      {{"memory_format", tag("memory_format", "contiguous_format")}})
                .call("v", "aten.view.default", {ref("c"), Desc::List{4, 6}}, tensor("float32", {4, 6}))
                .call("t", "aten.t.default", {ref("v")}, tensor("float32", {6, 4}, {1, 6}))
                .call("r", "aten._unsafe_view.default", {ref("t"), Desc::List{24}}, tensor("float32", {24}))
                .call("y", "aten.add.Tensor", {ref("r"), 0.0}, tensor("float32", {24}))
                .output({ref("y")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("//"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%"), std::string::npos) << ir;
  Memory m(l.lowered);
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i;
  m.set("x", x);
  m.run();
  // Reference: p[a][b][c] = x[b][c][a]; v = p flattened as [4, 6]; y[j*4 + a] = v[a][j].
  std::vector<double> want(24);
  for (int a = 0; a < 4; ++a)
    for (int j = 0; j < 6; ++j) {
      int b = j / 3, c = j % 3;
      want[j * 4 + a] = x[b * 12 + c * 4 + a];
    }
  expect_near(m.get("y"), want);
}

TEST(Lowering, SliceSelectExpandUnsqueeze) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3, 4}))
                .call("s", "aten.slice.Tensor", {ref("x"), 1, 1, Desc(int64_t{9223372036854775807}), 2},
                      tensor("float32", {3, 2}, {4, 2}))
                .call("row", "aten.select.int", {ref("x"), 0, -1}, tensor("float32", {4}, {1}))
                .call("u", "aten.unsqueeze.default", {ref("row"), 0}, tensor("float32", {1, 4}, {4, 1}))
                .call("e", "aten.expand.default", {ref("u"), Desc::List{2, 4}}, tensor("float32", {2, 4}, {0, 1}))
                .call("y", "aten.mul.Tensor", {ref("e"), 1.0}, tensor("float32", {2, 4}))
                .call("z", "aten.mul.Tensor", {ref("s"), 1.0}, tensor("float32", {3, 2}))
                .output({ref("y"), ref("z")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  std::vector<double> x(12);
  for (int i = 0; i < 12; ++i) x[i] = i;
  m.set("x", x);
  m.run();
  expect_near(m.get("y"), {8, 9, 10, 11, 8, 9, 10, 11});
  expect_near(m.get("z"), {1, 3, 5, 7, 9, 11});
}

TEST(Lowering, Cat) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {2, 2}))
                .input("b", tensor("float32", {2, 1}))
                .input("c", tensor("int32", {2, 1}))
                .call("cat", "aten.cat.default", {Desc::List{ref("a"), ref("b"), ref("c")}, 1},
                      tensor("float32", {2, 4}))
                .output({ref("cat")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {1, 2, 3, 4});
  m.set("b", {5, 6});
  m.set("c", {7, 8});
  m.run();
  expect_near(m.get("cat"), {1, 2, 5, 7, 3, 4, 6, 8});
}

TEST(Lowering, ConstantPadNd) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 2}))
                .call("p", "aten.constant_pad_nd.default", {ref("x"), Desc::List{1, 0, 0, 1}, -1.0},
                      tensor("float32", {3, 3}))
                .call("crop", "aten.constant_pad_nd.default", {ref("x"), Desc::List{-1, 1}},
                      tensor("float32", {2, 2}))
                .output({ref("p"), ref("crop")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4});
  m.run();
  expect_near(m.get("p"), {-1, 1, 2, -1, 3, 4, -1, -1, -1});
  expect_near(m.get("crop"), {2, 0, 4, 0});
}

TEST(Lowering, FlipAndRoll) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("f", "aten.flip.default", {ref("x"), Desc::List{-1}}, tensor("float32", {2, 3}))
                .call("r", "aten.roll.default", {ref("x"), Desc::List{1}, Desc::List{1}}, tensor("float32", {2, 3}))
                .output({ref("f"), ref("r")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("f"), {3, 2, 1, 6, 5, 4});
  expect_near(m.get("r"), {3, 1, 2, 6, 4, 5});
}

TEST(Lowering, CopyIntoAnInputMutatesItsBuffer) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3}))
                .call("y", "aten.mul.Tensor", {ref("x"), 2.0}, tensor("float32", {3}))
                .call("copy_", "aten.copy_.default", {ref("x"), ref("y")}, tensor("float32", {3}))
                .output({ref("y")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("store x[x0]"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("x", {1, 2, 3});
  m.run();
  expect_near(m.get("x"), {2, 4, 6});
}

TEST(Lowering, Float16ComputesInFloat32AndRoundsOnStore) {
  Graph g = GraphBuilder()
                .input("a", tensor("float16", {2}))
                .call("e", "aten.exp.default", {ref("a")}, tensor("float16", {2}))
                .call("s", "aten.add.Tensor", {ref("a"), 1.0 / 3}, tensor("float16", {2}))
                .output({ref("e"), ref("s")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("float32 = cast<float32>(t0)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("float16 = cast<float16>("), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("a", {1, 2});
  m.run();
  auto half = [](double v) { return ir::half_to_float(ir::float_to_half(static_cast<float>(v))); };
  expect_near(m.get("e"), {half(std::exp(1.0f)), half(std::exp(2.0f))}, 0);
  expect_near(m.get("s"), {half(1 + 1.0f / 3), half(2 + 1.0f / 3)}, 0);
}

TEST(Lowering, ToCopyConvertsDtype) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {3}))
                .call("i", "aten._to_copy.default", {ref("a")}, tensor("int32", {3}), {{"dtype", tag("dtype", "int32")}})
                .call("b", "prims.convert_element_type.default", {ref("a"), tag("dtype", "bool")}, tensor("bool", {3}))
                .output({ref("i"), ref("b")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("a", {-1.7, 0, 2.9});
  m.run();
  expect_near(m.get("i"), {-1, 0, 2});
  expect_near(m.get("b"), {1, 0, 1});
}

TEST(Lowering, FullAndArange) {
  Graph g = GraphBuilder()
                .call("f", "aten.full.default", {Desc::List{2}, 1.5}, tensor("float32", {2}),
                      {{"dtype", tag("dtype", "float32")}})
                .call("r", "aten.arange.start_step", {1, 10, 3}, tensor("int64", {3}), {{"dtype", tag("dtype", "int64")}})
                .call("rf", "aten.arange.start_step", {0.5, 2.0, 0.5}, tensor("float32", {3}))
                .output({ref("f"), ref("r"), ref("rf")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.run();
  expect_near(m.get("f"), {1.5, 1.5});
  expect_near(m.get("r"), {1, 4, 7});
  expect_near(m.get("rf"), {0.5, 1.0, 1.5});
}

TEST(Lowering, SymbolicSizesAndSymIntScalars) {
  GraphBuilder b;
  b.symbols = {"s0"};
  Graph g = b.input("x", tensor("float32", {tag("sym", "s0"), 2}, {2, 1}))
                .call("n", "aten.sym_size.int", {ref("x"), 0}, tag("symint", tag("sym", "s0")))
                .call("y", "aten.add.Tensor", {ref("x"), ref("n")}, tensor("float32", {tag("sym", "s0"), 2}, {2, 1}))
                .call("s", "aten.sum.dim_IntList", {ref("y"), Desc::List{0}}, tensor("float32", {2}))
                .output({ref("s")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered, {{"s0", 3}});
  m.set("x", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("s"), {9 + 9, 12 + 9});
}

TEST(Lowering, InjectedReluBugLetsNegativesThrough) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2}))
                .call("r", "aten.relu.default", {ref("x")}, tensor("float32", {2}))
                .output({ref("r")});
  LoweringOptions o;
  o.inject_relu_bug_testing_only = true;
  auto l = lower(g, o);
  Memory m(l.lowered);
  m.set("x", {-1, 2});
  m.run();
  expect_near(m.get("r"), {-1, 2});
}

// --- indirect indexing (gather / scatter family) --------------------------------------------
// Index tensors hold negative entries: they wrap, as advanced indexing does in
// eager (eager's gather/index_select/scatter reject them; the IR's result is
// then unspecified but in bounds, and wrapping is what it does). The printed
// IR shows the positions as indirect(...) leaves.

TEST(Lowering, GatherAlongDim1) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3, 4}))
                .input("i", tensor("int64", {3, 2}))
                .call("g", "aten.gather.default", {ref("x"), 1, ref("i")}, tensor("float32", {3, 2}))
                .output({ref("g")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("load x[4*x0 + indirect(load i[2*x0 + x1], 4)]"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("x", {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  m.set("i", {3, 0, -1, 1, 2, -4});
  m.run();
  expect_near(m.get("g"), {3, 0, 13, 11, 22, 20});
}

TEST(Lowering, IndexSelectAndInt32Indices) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4, 3}))
                .input("i", tensor("int32", {3}))
                .call("s0", "aten.index_select.default", {ref("x"), 0, ref("i")}, tensor("float32", {3, 3}))
                .call("s1", "aten.index_select.default", {ref("x"), -1, ref("i")}, tensor("float32", {4, 3}))
                .output({ref("s0"), ref("s1")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  m.set("i", {2, -1, 0});
  m.run();
  expect_near(m.get("s0"), {20, 21, 22, 30, 31, 32, 0, 1, 2});
  expect_near(m.get("s1"), {2, 2, 0, 12, 12, 10, 22, 22, 20, 32, 32, 30});
}

TEST(Lowering, Embedding) {
  Graph g = GraphBuilder()
                .input("w", tensor("float32", {5, 2}))
                .input("i", tensor("int64", {2, 2}))
                .call("e", "aten.embedding.default", {ref("w"), ref("i")}, tensor("float32", {2, 2, 2}))
                .output({ref("e")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("load w[x2 + 2*indirect(load i[2*x0 + x1], 5)]"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("w", {0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  m.set("i", {4, 0, 1, 4});
  m.run();
  expect_near(m.get("e"), {40, 41, 0, 1, 10, 11, 40, 41});
}

TEST(Lowering, AdvancedIndexingWithTwoBroadcastIndexTensors) {
  // x[i0, i1] with i0 of shape [2, 1] and i1 of shape [3]: result [2, 3].
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3, 4}))
                .input("i0", tensor("int64", {2, 1}))
                .input("i1", tensor("int64", {3}))
                .call("r", "aten.index.Tensor", {ref("x"), Desc::List{ref("i0"), ref("i1")}}, tensor("float32", {2, 3}))
                .output({ref("r")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  m.set("i0", {0, -1});
  m.set("i1", {1, -1, 0});
  m.run();
  expect_near(m.get("r"), {1, 3, 0, 21, 23, 20});
}

TEST(Lowering, AdvancedIndexingWithNoneSlices) {
  // x[:, i] keeps dim 0 first; x[i, :, j] (separated) puts the index dims first.
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3, 2}))
                .input("i", tensor("int64", {2}))
                .input("j", tensor("int64", {2}))
                .call("a", "aten.index.Tensor", {ref("x"), Desc::List{Desc(), ref("i")}}, tensor("float32", {2, 2, 2}))
                .call("b", "aten.index.Tensor", {ref("x"), Desc::List{ref("i"), Desc(), ref("j")}},
                      tensor("float32", {2, 3}))
                .output({ref("a"), ref("b")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  std::vector<double> x(12);
  for (int k = 0; k < 12; ++k) x[k] = k;  // x[a][b][c] = 6a + 2b + c
  m.set("x", x);
  m.set("i", {1, 0});
  m.set("j", {0, -1});
  m.run();
  expect_near(m.get("a"), {2, 3, 0, 1, 8, 9, 6, 7});
  expect_near(m.get("b"), {6, 8, 10, 1, 3, 5});
}

TEST(Lowering, IndexPutWritesACopyThenThePositions) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4, 2}))
                .input("i", tensor("int64", {2}))
                .input("v", tensor("float32", {2}))
                .call("p", "aten.index_put.default", {ref("x"), Desc::List{ref("i")}, ref("v")}, tensor("float32", {4, 2}))
                .output({ref("p")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("store p[x1 + 2*indirect(load i[x0], 4)]"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 5, 6, 7, 8});
  m.set("i", {3, -4});
  m.set("v", {10, 20});
  m.run();
  expect_near(m.get("p"), {10, 20, 3, 4, 5, 6, 10, 20});
  expect_near(m.get("x"), {1, 2, 3, 4, 5, 6, 7, 8});  // not mutated
}

TEST(Lowering, ScatterSrcAndValue) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .input("i", tensor("int64", {2, 2}))
                .input("s", tensor("float32", {2, 3}))
                .call("a", "aten.scatter.src", {ref("x"), 1, ref("i"), ref("s")}, tensor("float32", {2, 3}))
                .call("b", "aten.scatter.value", {ref("x"), 1, ref("i"), 9.0}, tensor("float32", {2, 3}))
                .output({ref("a"), ref("b")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("i", {2, 0, -1, 1});
  m.set("s", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("a"), {2, 0, 1, 0, 5, 4});
  expect_near(m.get("b"), {9, 0, 9, 0, 9, 9});
}

TEST(Lowering, OutOfRangeIndicesClampInsteadOfFaulting) {
  // Eager raises IndexError; compiled code reads the clamped element. The
  // interpreter runs with bounds checks, so any out-of-bounds access fails.
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3}))
                .input("i", tensor("int64", {3}))
                .call("s", "aten.index_select.default", {ref("x"), 0, ref("i")}, tensor("float32", {3}))
                .output({ref("s")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {5, 6, 7});
  m.set("i", {3, -4, 1000000});
  m.run();
  expect_near(m.get("s"), {7, 5, 7});
}

// --- fallbacks and the runtime contract ------------------------------------------------

TEST(Lowering, UnknownOpFallsBackWithAReasonNamingIt) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}))
                .call("y", "aten.mul.Tensor", {ref("x"), 2.0}, tensor("float32", {4}))
                .call("w", "aten.frobnicate.default", {ref("y")}, tensor("float32", {4}))
                .call("z", "aten.add.Tensor", {ref("w"), 1.0}, tensor("float32", {4}))
                .output({ref("z")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "w");
  EXPECT_EQ(fb[0]->op, "aten.frobnicate.default");
  EXPECT_NE(fb[0]->reason.find("no lowering for aten.frobnicate.default"), std::string::npos);
  ASSERT_EQ(l.lowered.program.size(), 3u);
  auto* item = std::get_if<AtenItem>(&l.lowered.program[1]);
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->graph_node, 2);
  EXPECT_FALSE(item->is_extern);
  // y (read by ATen) and w (read by a kernel) are bound to their nodes' slots.
  std::map<std::string, BufferBinding> by_name;
  for (const auto& b : l.lowered.buffers) by_name[b.buffer->name] = b;
  EXPECT_EQ(by_name.at("y").graph_node, 1);
  EXPECT_EQ(by_name.at("w").graph_node, 2);
  EXPECT_EQ(by_name.at("w").buffer->kind, ir::BufferKind::GraphInput);
  EXPECT_TRUE(by_name.at("w").buffer->layout_fixed);
}

TEST(Lowering, ExternsAndRandomOps) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {2, 3}))
                .input("b", tensor("float32", {3, 4}))
                .call("mm", "aten.mm.default", {ref("a"), ref("b")}, tensor("float32", {2, 4}))
                .call("r", "aten.rand_like.default", {ref("mm")}, tensor("float32", {2, 4}))
                .call("y", "aten.mul.Tensor", {ref("mm"), ref("r")}, tensor("float32", {2, 4}))
                .call("i", "aten.randint.low", {0, 5, Desc::List{2, 4}}, tensor("int64", {2, 4}))
                .output({ref("y"), ref("i")});
  auto l = lower(g);
  ASSERT_EQ(l.remarks.all().size(), 2u);
  EXPECT_EQ(l.remarks.all()[0].kind, Remark::Kind::Extern);
  EXPECT_EQ(l.remarks.all()[1].kind, Remark::Kind::Fallback);
  EXPECT_EQ(l.remarks.all()[1].node, "i");
  EXPECT_NE(l.remarks.all()[1].reason.find("random integers"), std::string::npos);
  auto* mm = std::get_if<AtenItem>(&l.lowered.program[0]);
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->is_extern);
  // rand_like reads the CPU seed buffer, which the runtime fills on every call.
  EXPECT_NE(printed(l.lowered).find("rand(seed="), std::string::npos) << printed(l.lowered);
  int seeds = 0;
  for (const auto& b : l.lowered.buffers) {
    if (!b.is_seed) continue;
    ++seeds;
    EXPECT_EQ(b.graph_node, -1);
    EXPECT_EQ(b.buffer->dtype, DType::Int64);
  }
  EXPECT_EQ(seeds, 1);
}

TEST(Lowering, RandomNodesDrawFromDisjointCounterRanges) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("r", "aten.rand.default", {Desc::List{2, 3}}, tensor("float32", {2, 3}))
                .call("n", "aten.randn_like.default", {ref("x")}, tensor("float32", {2, 3}))
                .call("b", "aten.bernoulli.p", {ref("x"), 0.25}, tensor("float32", {2, 3}))
                .output({ref("r"), ref("n"), ref("b")});
  auto l = lower(g);
  expect_all_lowered(l);
  const std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("rand(seed=t0, offset=3*x0 + x1)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("randn(seed=t0, offset=3*x0 + x1 + 6)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("rand(seed=t0, offset=3*x0 + x1 + 12)"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("seed_cpu", {1234});
  m.run();
  for (double u : m.get("r")) EXPECT_TRUE(u >= 0 && u < 1) << u;
  for (double b : m.get("b")) EXPECT_TRUE(b == 0 || b == 1) << b;
  EXPECT_NE(m.get("r"), m.get("n"));
}

TEST(Lowering, NativeDropoutOutputIsZeroExactlyWhereTheMaskIs) {
  const int n = 64;
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {n}))
                .call("d", "aten.native_dropout.default", {ref("x"), 0.5, true},
                      tag("tuple", Desc::List{tensor("float32", {n}), tensor("bool", {n})}))
                .call("out", "getitem", {ref("d"), 0}, tensor("float32", {n}))
                .call("mask", "getitem", {ref("d"), 1}, tensor("bool", {n}))
                .output({ref("out"), ref("mask")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("seed_cpu", {99});
  m.set("x", std::vector<double>(n, 3.0));
  m.run();
  const auto out = m.get("out"), mask = m.get("mask");
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], mask[i] ? 6.0 : 0.0) << i;
    kept += mask[i] != 0;
  }
  EXPECT_GT(kept, 8);  // about half of 64
  EXPECT_LT(kept, 56);
}

TEST(Lowering, AccumulatingScattersFallBackWithTheirReason) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4, 3}))
                .input("i", tensor("int64", {2}))
                .input("v", tensor("float32", {2, 3}))
                .call("p", "aten.index_put.default", {ref("x"), Desc::List{ref("i")}, ref("v"), true},
                      tensor("float32", {4, 3}))
                .output({ref("p")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_NE(fb[0]->reason.find("accumulate=True"), std::string::npos) << fb[0]->reason;
  EXPECT_NE(fb[0]->reason.find("race"), std::string::npos) << fb[0]->reason;
}

TEST(Lowering, ReturnedViewsAndViewsReadByAtenBecomeAtenItems) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("y", "aten.add.Tensor", {ref("x"), 1.0}, tensor("float32", {2, 3}))
                .call("t", "aten.t.default", {ref("y")}, tensor("float32", {3, 2}, {1, 3}))
                .call("mm", "aten.mm.default", {ref("t"), ref("y")}, tensor("float32", {3, 3}))
                .call("xt", "aten.permute.default", {ref("x"), Desc::List{1, 0}}, tensor("float32", {3, 2}, {1, 3}))
                .output({ref("mm"), ref("xt")});
  auto l = lower(g);
  ASSERT_EQ(l.lowered.program.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[0]));
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);  // t, for mm
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);  // mm
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[3]).graph_node, 4);  // xt, returned
  EXPECT_TRUE(fallbacks(l).empty());
}

TEST(Lowering, CudaNodesHaveNoCodegenYet) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2}, {}, "cuda:0"))
                .call("y", "aten.add.Tensor", {ref("x"), 1.0}, tensor("float32", {2}, {}, "cuda:0"))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->reason, "no codegen for cuda");
}

TEST(Lowering, CudaOpReadingACpuScalarTensorFallsBackAlone) {
  // A lifted Python float arrives as a 0-d CPU tensor; eager lets CUDA ops
  // read it, a CUDA kernel cannot. Only that node goes to ATen.
  LoweringOptions o;
  o.cuda = true;
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}, {}, "cuda:0"))
                .input("s", tensor("float32", {}, {}, "cpu"))
                .call("y", "aten.mul.Tensor", {ref("x"), ref("s")}, tensor("float32", {4}, {}, "cuda:0"))
                .call("z", "aten.relu.default", {ref("y")}, tensor("float32", {4}, {}, "cuda:0"))
                .output({ref("z")});
  auto l = lower(g, o);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "y");
  EXPECT_NE(fb[0]->reason.find("another device"), std::string::npos) << fb[0]->reason;
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program.back()));  // relu still lowers
}

TEST(Lowering, PromotionMismatchWithMetaFallsBackInsteadOfLying) {
  Graph g = GraphBuilder()
                .input("x", tensor("int32", {2}))
                .call("y", "aten.add.Tensor", {ref("x"), 1.5}, tensor("int32", {2}))  // eager would say float32
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_NE(fb[0]->reason.find("type promotion"), std::string::npos) << fb[0]->reason;
  EXPECT_EQ(l.lowered.program.size(), 1u);
}

TEST(TypePromotion, FollowsTorch) {
  using K = PromotionOperand::Kind;
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::Scalar, DType::Int64}}), DType::Int32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::Scalar, DType::Float64}}), DType::Float32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Float16}, {K::Scalar, DType::Float64}}), DType::Float16);
  EXPECT_EQ(result_type({{K::Tensor, DType::Float32}, {K::ZeroDimTensor, DType::Float64}}), DType::Float32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::ZeroDimTensor, DType::Float64}}), DType::Float64);
  EXPECT_EQ(result_type({{K::Tensor, DType::Bool}, {K::Scalar, DType::Int64}}), DType::Int64);
  auto t = elementwise_dtypes({{K::Tensor, DType::Int32}}, Promotion::IntToFloat);
  EXPECT_EQ(t.result, DType::Float32);
  t = elementwise_dtypes({{K::Tensor, DType::BFloat16}, {K::Tensor, DType::BFloat16}}, Promotion::AlwaysBool);
  EXPECT_EQ(t.compute, DType::Float32);
  EXPECT_EQ(t.result, DType::Bool);
}

TEST(Registry, CoversTheCoreOpsAndExplainsTheRest) {
  const Registry& r = builtin_lowerings();
  for (const char* op : {"aten.add.Tensor", "aten.sum.dim_IntList", "aten.view.default", "aten.var_mean.correction",
                         "aten.cat.default", "aten.where.self", "aten._to_copy.default", "aten.copy_.default"}) {
    const Lowering* l = r.find(op);
    ASSERT_NE(l, nullptr) << op;
    EXPECT_TRUE(l->fn) << op;
  }
  const Lowering* g = r.find("aten.scatter_add.default");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->fn);
  EXPECT_FALSE(g->fallback_reason.empty());
  for (const char* op : {"aten.gather.default", "aten.index_select.default", "aten.embedding.default",
                         "aten.index.Tensor", "aten._unsafe_index.Tensor", "aten.index_put.default",
                         "aten.scatter.src", "aten.scatter.value", "aten.max_pool2d_with_indices.default",
                         "aten.max_pool2d_with_indices_backward.default", "aten.avg_pool2d.default",
                         "aten.avg_pool2d_backward.default", "aten._adaptive_avg_pool2d.default",
                         "aten._adaptive_avg_pool2d_backward.default", "aten.adaptive_max_pool2d.default",
                         "aten.adaptive_max_pool2d_backward.default", "aten.linalg_vector_norm.default",
                         "aten.repeat.default"}) {
    const Lowering* l = r.find(op);
    ASSERT_NE(l, nullptr) << op;
    EXPECT_TRUE(l->fn) << op;
  }
}

TEST(Lowering, SymFloatScalarsFallBackRatherThanBakingInAHint) {
  GraphBuilder b;
  b.symbols = {"s0"};
  Graph g = b.input("x", tensor("float32", {tag("sym", "s0")}, {1}))
                .call("n", "aten.sym_size.int", {ref("x"), 0}, tag("symint", tag("sym", "s0")))
                .call("f", "operator.truediv", {1.0, ref("n")}, tag("symfloat", 0.25))
                .call("y", "aten.mul.Tensor", {ref("x"), ref("f")}, tensor("float32", {tag("sym", "s0")}, {1}))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "y");
  // The runtime computes n and f before running y through ATen.
  ASSERT_EQ(l.lowered.program.size(), 3u);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[0]).graph_node, 1);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);
}

TEST(Lowering, TupleFallbackItemsAreReadThroughGetitemSlots) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}))
                .call("e", "aten.exp.default", {ref("x")}, tensor("float32", {4}))
                .call("v", "aten.view.default", {ref("e"), Desc::List{2, 2}}, tensor("float32", {2, 2}))
                .call("sv", "aten.slice.Tensor", {ref("v"), 1, 0, 1}, tensor("float32", {2, 1}, {2, 1}))
                .call("srt", "aten.sort.default", {ref("sv")},
                      tag("tuple", Desc::List{tensor("float32", {2, 1}), tensor("int64", {2, 1})}))
                .call("vals", "getitem", {ref("srt"), 0}, tensor("float32", {2, 1}))
                .call("y", "aten.add.Tensor", {ref("vals"), 1.0}, tensor("float32", {2, 1}))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->op, "aten.sort.default");
  // exp (kernel), v and sv (views ATen needs), sort, getitem, add (kernel).
  ASSERT_EQ(l.lowered.program.size(), 6u);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[0]));
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[3]).graph_node, 4);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[4]).graph_node, 5);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[5]));
  bool found = false;
  for (const auto& b : l.lowered.buffers)
    if (b.buffer->name == "vals") {
      found = true;
      EXPECT_EQ(b.graph_node, 5);
      EXPECT_EQ(b.buffer->kind, ir::BufferKind::GraphInput);
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace cppi::lowering
