// lower_graph: graphs built as Descs (the format export.py produces), lowered,
// then checked structurally (printed IR) and numerically with the reference
// interpreter against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "tests/cpp/lowering/lowering_test_support.h"

namespace cppi::lowering {
namespace {

using namespace test_support;

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

TEST(Lowering, VarMeanOfAShortRowTakesTwoPasses) {
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
  // At most 1024 elements on CPU: sum, then sum of squared deviations.
  EXPECT_EQ(printed(l.lowered).find("welford"), std::string::npos) << printed(l.lowered);
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 2, 2, 2, 10});
  m.run();
  expect_near(m.get("mean"), {2.5, 4});
  expect_near(m.get("var"), {1.25, 12});
  expect_near(m.get("std"), {std::sqrt(5.0 / 3), 4}, 1e-5);
  // The getitem nodes own the results: no AtenItem for them.
  for (const auto& item : l.lowered.program) EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(item));
}

TEST(Lowering, VarMeanOfALongRowThroughWelford) {
  const int64_t n = 2048;  // past the two-pass limit
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, n}))
                .call("vm", "aten.var_mean.correction", {ref("x"), Desc::List{1}},
                      tag("tuple", Desc::List{tensor("float32", {2}), tensor("float32", {2})}), {{"correction", 1}})
                .call("var", "getitem", {ref("vm"), 0}, tensor("float32", {2}))
                .call("mean", "getitem", {ref("vm"), 1}, tensor("float32", {2}))
                .output({ref("var"), ref("mean")});
  auto l = lower(g);
  expect_all_lowered(l);
  EXPECT_NE(printed(l.lowered).find("welford"), std::string::npos) << printed(l.lowered);
  // Row 0 alternates 0, 1 (mean 0.5, m2 n/4); row 1 is 0, 1, ..., n-1.
  std::vector<double> x(2 * n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<double>(i % 2), x[n + i] = static_cast<double>(i);
  Memory m(l.lowered);
  m.set("x", x);
  m.run();
  const double nd = static_cast<double>(n);
  expect_near(m.get("mean"), {0.5, (nd - 1) / 2}, 1e-4);
  const std::vector<double> var = m.get("var");
  EXPECT_NEAR(var[0], nd / 4 / (nd - 1), 1e-6);
  EXPECT_NEAR(var[1], nd * (nd + 1) / 12, 1e-5 * nd * (nd + 1) / 12);  // float32 state
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


}  // namespace
}  // namespace cppi::lowering
