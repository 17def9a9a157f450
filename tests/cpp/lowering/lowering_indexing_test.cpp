// Lowerings of the indirect-indexing family (gather, index_select, embedding,
// advanced indexing, index_put, scatter), run on the reference interpreter.
//
// Index tensors hold negative entries: they wrap, as advanced indexing does in
// eager (eager's gather/index_select/scatter reject them; the IR's result is
// then unspecified but in bounds, and wrapping is what it does). The printed
// IR shows the positions as indirect(...) leaves.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "tests/cpp/lowering/lowering_test_support.h"

namespace cppi::lowering {
namespace {

using namespace test_support;

TEST(Lowering, GatherAlongDim1) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {3, 4}))
                .input("i", tensor("int64", {3, 2}))
                .call("g", "aten.gather.default", {ref("x"), 1, ref("i")}, tensor("float32", {3, 2}))
                .output({ref("g")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  // gather takes no negative index (eager raises): the leaf does not wrap.
  EXPECT_NE(ir.find("load x[4*x0 + indirect_nowrap(load i[2*x0 + x1], 4)]"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("x", {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  m.set("i", {3, 0, 3, 1, 2, 0});
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
  m.set("i", {2, 1, 0});
  m.run();
  expect_near(m.get("s0"), {20, 21, 22, 10, 11, 12, 0, 1, 2});
  expect_near(m.get("s1"), {2, 1, 0, 12, 11, 10, 22, 21, 20, 32, 31, 30});
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
  EXPECT_NE(ir.find("load w[x2 + 2*indirect_nowrap(load i[2*x0 + x1], 5)]"), std::string::npos) << ir;
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
  m.set("i", {2, 0, 2, 1});
  m.set("s", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("a"), {2, 0, 1, 0, 5, 4});
  expect_near(m.get("b"), {9, 0, 9, 0, 9, 9});
}

TEST(Lowering, AccumulatingIndexPutAddsEveryRepeat) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4, 2}))
                .input("i", tensor("int64", {4}))
                .input("v", tensor("float32", {4, 2}))
                .call("p", "aten.index_put.default", {ref("x"), Desc::List{ref("i")}, ref("v"), true},
                      tensor("float32", {4, 2}))
                .output({ref("p")});
  auto l = lower(g);
  expect_all_lowered(l);
  std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("store p[x1 + 2*indirect(load i[x0], 4)] += "), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("x", {1, 2, 3, 4, 5, 6, 7, 8});
  m.set("i", {3, -1, 0, 3});  // -1 is 3 as well: three adds into row 3
  m.set("v", {10, 20, 100, 200, 1000, 2000, 10000, 20000});
  m.run();
  expect_near(m.get("p"), {1001, 2002, 3, 4, 5, 6, 10117, 20228});
}

TEST(Lowering, ScatterAddAndScatterReduceSum) {
  Graph g = GraphBuilder()
                .input("x", tensor("int64", {2, 3}))
                .input("i", tensor("int64", {2, 2}))
                .input("s", tensor("int64", {2, 3}))
                .call("a", "aten.scatter_add.default", {ref("x"), 1, ref("i"), ref("s")}, tensor("int64", {2, 3}))
                .call("b", "aten.scatter_reduce.two", {ref("x"), 1, ref("i"), ref("s"), std::string("sum"), false},
                      tensor("int64", {2, 3}))
                .call("c", "aten.scatter_reduce.two", {ref("x"), 1, ref("i"), ref("s"), std::string("sum")},
                      tensor("int64", {2, 3}))
                .output({ref("a"), ref("b"), ref("c")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("x", {100, 200, 300, 400, 500, 600});
  m.set("i", {2, 2, 0, 0});
  m.set("s", {1, 2, 3, 4, 5, 6});
  m.run();
  expect_near(m.get("a"), {100, 200, 303, 409, 500, 600});
  expect_near(m.get("b"), {100, 200, 3, 9, 500, 600});  // scattered-to positions start from 0
  expect_near(m.get("c"), {100, 200, 303, 409, 500, 600});
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


}  // namespace
}  // namespace cppi::lowering
