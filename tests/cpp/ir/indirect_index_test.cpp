// Indirect indexing (index_expr.h / expr.h): the indirect(value, size) leaf,
// its printing, canonical form, analyses (opaque atom with bounds
// [0, size)), traversal by visitors and mutators, and its run-time semantics
// in the interpreter (negative indices wrap, out-of-range ones clamp).
#include <gtest/gtest.h>

#include <vector>

#include "lowering/ir/ir.h"
#include "support/status.h"

namespace cppi::ir {
namespace {

BufferPtr buffer(const std::string& name, DType t, std::vector<IndexExpr> sizes,
                 BufferKind kind = BufferKind::GraphInput) {
  return Buffer::make_contiguous(name, t, Device::CPU, kind, std::move(sizes));
}

struct Embedding {
  IndexExpr x0 = pointwise_var(0), x1 = pointwise_var(1);
  BufferPtr idx = buffer("idx", DType::Int64, {4});
  BufferPtr w = buffer("w", DType::Float32, {10, 3});
  BufferPtr out = buffer("out", DType::Float32, {4, 3}, BufferKind::GraphOutput);
  Expr idx_load = load(idx, x0);
  IndexExpr row = indirect(idx_load, 10);
  Expr gathered = load(w, row * 3 + x1);
};

TEST(IndirectIndex, FactoryChecksAndFolds) {
  Embedding e;
  EXPECT_EQ(e.row.kind(), IndexKind::Indirect);
  EXPECT_THROW(indirect(const_float(1.0), 10), CompilerError);                // not an integer
  EXPECT_THROW(indirect(load(buffer("m", DType::Bool, {4}), e.x0), 10), CompilerError);
  EXPECT_THROW(indirect(e.idx_load, e.x1), CompilerError);                    // size uses a loop var
  EXPECT_THROW(indirect(e.idx_load, 0), CompilerError);                       // empty dimension
  EXPECT_EQ(indirect(const_int(-1), 10), index_const(9));                     // constants fold, wrapped
  EXPECT_EQ(indirect(const_int(42), 10), index_const(9));                     // ... and clamped
  // int32 index tensors are fine (the position is computed in int64).
  EXPECT_NO_THROW(indirect(load(buffer("i32", DType::Int32, {4}), e.x0), sym("s0")));
}

TEST(IndirectIndex, PrintsAndCompares) {
  Embedding e;
  EXPECT_EQ(to_string(e.row * 3 + e.x1), "x1 + 3*indirect(load idx[x0], 10)");
  EXPECT_EQ(to_string(e.gathered), "load w[x1 + 3*indirect(load idx[x0], 10)]");
  // Built twice from equal values: structurally equal, same hash, same canonical sum.
  IndexExpr again = indirect(load(e.idx, e.x0), 10);
  EXPECT_EQ(e.row, again);
  EXPECT_EQ(e.row.hash(), again.hash());
  EXPECT_EQ(e.row * 3 + e.x1, e.x1 + again * 3);
  EXPECT_TRUE(structurally_equal(e.gathered, load(e.w, e.x1 + 3 * again)));
  EXPECT_EQ((e.row + e.row).str(), "2*indirect(load idx[x0], 10)");
  EXPECT_NE(e.row, indirect(load(e.idx, e.x0), 11));
  EXPECT_NE(e.row, indirect(load(e.idx, e.x1), 10));
}

TEST(IndirectIndex, AGatheredRowIsAffineAlongItsOwnVariable) {
  // w[idx[x0] * 3 + x1] over (x0, x1): not affine in x0, but the leaf, which
  // does not move along x1, is a variable of its own whose stride (3) the
  // vector checks hold to the width.
  Embedding e;
  IndexExpr at = e.row * 3 + e.x1 + 5;
  EXPECT_FALSE(affine_form(at, {e.x0, e.x1}).has_value());
  auto form = affine_form_over_gathers(at, {e.x0, e.x1});
  ASSERT_TRUE(form.has_value());
  ASSERT_EQ(form->strides.size(), 3u);
  EXPECT_EQ(form->strides[0], index_const(0));
  EXPECT_EQ(form->strides[1], index_const(1));
  EXPECT_EQ(form->strides[2], index_const(3));
  EXPECT_EQ(form->offset, index_const(5));
  // A gather along the last variable stays refused.
  IndexExpr along = indirect(load(e.idx, e.x1), 10) * 3;
  EXPECT_FALSE(affine_form_over_gathers(along, {e.x0, e.x1}).has_value());
}

TEST(IndirectIndex, AnalysesTreatItAsAnOpaqueBoundedAtom) {
  Embedding e;
  IndexExpr at = e.row * 3 + e.x1;
  EXPECT_EQ(free_vars(at), (std::set<std::string>{"x0", "x1"}));
  EXPECT_EQ(free_symbols(indirect(e.idx_load, sym("s0"))), (std::set<std::string>{"s0"}));
  EXPECT_TRUE(depends_on(e.row, "x0"));
  // Contiguous along x1, a gather along x0.
  EXPECT_EQ(coefficient(at, e.x1), index_const(1));
  EXPECT_FALSE(coefficient(at, e.x0).has_value());
  auto form = affine_form(at, {e.x1});
  ASSERT_TRUE(form.has_value());
  EXPECT_EQ(form->offset, e.row * 3);
  // The simplifier leaves the leaf alone but knows 0 <= leaf < size.
  VarRanges ranges{{"x0", 4}, {"x1", 3}};
  EXPECT_TRUE(simplify(at, ranges).same_as(at));
  IndexBounds b = bounds(e.row, ranges);
  ASSERT_TRUE(b.lo && b.hi);
  EXPECT_EQ(*b.lo, index_const(0));
  EXPECT_EQ(*b.hi, index_const(9));
  EXPECT_EQ(simplify(mod(e.row, 10), ranges), e.row);
  EXPECT_EQ(simplify(floordiv(e.row, 10), ranges), index_const(0));
  EXPECT_TRUE(prove_lt(at, 30, ranges));
  // evaluate() needs memory for it.
  EXPECT_THROW(evaluate(at, {{"x0", 0}, {"x1", 0}}), CompilerError);
  EXPECT_EQ(evaluate(at, {{"x0", 0}, {"x1", 2}}, [](const IndexIndirect&) { return -2; }), 8 * 3 + 2);
}

TEST(IndirectIndex, WrapAndClampSemantics) {
  EXPECT_EQ(indirect_position(3, 10), 3);
  EXPECT_EQ(indirect_position(-1, 10), 9);
  EXPECT_EQ(indirect_position(-10, 10), 0);
  EXPECT_EQ(indirect_position(-11, 10), 0);   // eager: IndexError; here: clamped
  EXPECT_EQ(indirect_position(10, 10), 9);    // eager: IndexError; here: clamped
  EXPECT_EQ(indirect_position(INT64_MIN, 10), 0);
}

TEST(IndirectIndex, VisitorsAndMutatorsReachTheValue) {
  Embedding e;
  // The index load is an operand of the gather, computed first.
  auto ops = operands(e.gathered);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_TRUE(ops[0].same_as(e.idx_load));
  auto order = post_order({e.gathered});
  ASSERT_EQ(order.size(), 2u);
  EXPECT_TRUE(order[0].same_as(e.idx_load));
  auto r = reads(e.gathered);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].buffer->name, "idx");
  // A masked gather keeps its mask last.
  Expr mask = compare(CompareOp::Lt, IndexValue::make(e.x1), const_int(2));
  EXPECT_EQ(to_string(load(e.w, e.row * 3 + e.x1, mask)),
            "load w[x1 + 3*indirect(load idx[x0], 10)] if lt(index(x1), int64(2))");

  // replace_loads reaches a load inside an indirect leaf (fusion inlines an
  // index producer that way).
  Expr replaced = replace_loads(e.gathered, "idx", [](const Load&) { return const_int(7); });
  EXPECT_EQ(to_string(replaced), "load w[x1 + 21]");
  // Renaming x0 -> x1 and x1 -> x2 applies once, inside and outside the leaf.
  Expr renamed = substitute_indices(e.gathered, {{"x0", var("x1")}, {"x1", var("x2")}});
  EXPECT_EQ(to_string(renamed), "load w[x2 + 3*indirect(load idx[x1], 10)]");
  EXPECT_EQ(substitute(e.row * 3 + e.x1, {{"x0", var("x1")}, {"x1", var("x2")}}).str(),
            "x2 + 3*indirect(load idx[x1], 10)");
  // Unchanged means the same node.
  EXPECT_TRUE(substitute_indices(e.gathered, {{"x7", var("x8")}}).same_as(e.gathered));
  EXPECT_TRUE(cse({e.gathered})[0].same_as(e.gathered));
  EXPECT_EQ(free_vars(e.gathered), (std::set<std::string>{"x0", "x1"}));
}

TEST(IndirectIndex, InterpreterGathersWithWrapAndClamp) {
  Embedding e;
  auto node = PointwiseNode::make("embedding", e.out, e.gathered);
  std::vector<int64_t> iv{2, -1, 0, 12};  // -1 wraps to 9; 12 clamps to 9
  std::vector<float> wv(30);
  for (int i = 0; i < 30; ++i) wv[i] = static_cast<float>(i);
  std::vector<float> ov(12, -1);
  auto args = InterpreterArgs().bind("idx", iv).bind("w", wv).bind("out", ov);
  ASSERT_TRUE(interpret(ComputeNode(node), args).ok());
  std::vector<float> expect{6, 7, 8, 27, 28, 29, 0, 1, 2, 27, 28, 29};
  EXPECT_EQ(ov, expect);
}

TEST(IndirectIndex, InterpreterScattersThroughAStoreIndex) {
  // out[idx[x0]] = src[x0] over an out of 5 elements.
  IndexExpr x0 = pointwise_var(0);
  auto idx = buffer("idx", DType::Int32, {3});
  auto src = buffer("src", DType::Float32, {3});
  auto out = buffer("out", DType::Float32, {5}, BufferKind::GraphOutput);
  auto node = PointwiseNode::make_with_store("scatter", {3}, Store::make(out, indirect(load(idx, x0), 5), load(src, x0)));
  auto r = reads(ComputeNode(node));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].buffer->name, "idx");
  EXPECT_EQ(to_string(ComputeNode(node)).find("store out[indirect(") != std::string::npos, true)
      << to_string(ComputeNode(node));
  std::vector<int32_t> iv{4, -5, 99};
  std::vector<float> sv{1, 2, 3};
  std::vector<float> ov(5, 0);
  ASSERT_TRUE(interpret(ComputeNode(node), InterpreterArgs().bind("idx", iv).bind("src", sv).bind("out", ov)).ok());
  // 4 -> 4, -5 -> 0, 99 clamps to 4 (written last).
  EXPECT_EQ(ov, (std::vector<float>{2, 0, 0, 0, 3}));
}

TEST(IndirectIndex, AccumulatingStoresAddEveryHitAndKeepTheirMode) {
  // out[idx[x0]] += src[x0]: repeated positions each add.
  IndexExpr x0 = pointwise_var(0);
  auto idx = buffer("idx", DType::Int32, {4});
  auto src = buffer("src", DType::Float32, {4});
  auto out = buffer("out", DType::Float32, {5}, BufferKind::GraphOutput);
  Store add = Store::make_accumulate(out, indirect(load(idx, x0), 5), load(src, x0));
  auto node = PointwiseNode::make_with_store("scatter_add", {4}, add);
  EXPECT_NE(to_string(ComputeNode(node)).find("store out[indirect(load idx[x0], 5)] += t0"),
            std::string::npos)
      << to_string(ComputeNode(node));
  std::vector<int32_t> iv{4, -1, 2, 4};
  std::vector<float> sv{1, 2, 3, 4};
  std::vector<float> ov{10, 10, 10, 10, 10};
  ASSERT_TRUE(interpret(ComputeNode(node), InterpreterArgs().bind("idx", iv).bind("src", sv).bind("out", ov)).ok());
  EXPECT_EQ(ov, (std::vector<float>{10, 10, 13, 10, 17}));  // -1 wraps to 4: 10 + 1 + 2 + 4
  // A kernel's stage reads what it accumulates into.
  bool reads_out = false;
  for (const auto& a : reads(Stage(PointwiseStage{{}, {add}}))) reads_out |= a.buffer->name == "out";
  EXPECT_TRUE(reads_out);
  // Rewrites keep the mode; bool has no add; reduced floats add in float32.
  EXPECT_TRUE(add.with(add.index, const_float(1)).accumulate);
  EXPECT_FALSE(Store::make(out, x0, const_float(1)).with(x0, const_float(2)).accumulate);
  auto flags = buffer("flags", DType::Bool, {5});
  EXPECT_THROW(Store::make_accumulate(flags, x0, const_bool(true)), CompilerError);
  auto half = buffer("half", DType::BFloat16, {5});
  Expr v = stored_value(Store::make_accumulate(half, x0, cast(const_float(1), DType::BFloat16)));
  EXPECT_EQ(v.dtype(), DType::BFloat16);
  EXPECT_NE(to_string(v).find("float32"), std::string::npos) << to_string(v);
}

TEST(IndirectIndex, DisjointElementsPerPointOfTheLeadingLoops) {
  IndexExpr x0 = pointwise_var(0), x1 = pointwise_var(1), x2 = pointwise_var(2);
  auto idx = buffer("idx", DType::Int64, {8, 6});
  const VarRanges ranges{{"x0", index_const(8)}, {"x1", index_const(6)}, {"x2", index_const(4)}};
  // scatter_add along the last dim of [8, 5]: row x0 adds into row x0 only,
  // whatever position the index tensor holds.
  IndexExpr columns = x0 * 5 + indirect(load(idx, x0 * 6 + x1), 5);
  EXPECT_TRUE(selects_disjoint_elements(columns, {x0}, ranges));
  EXPECT_FALSE(selects_disjoint_elements(columns, {x0, x1}, ranges));  // two x1 may hit one column
  // A row read from memory: any two x0 may add into one row.
  IndexExpr rows = indirect(load(idx, x0 * 6 + x1), 8) * 4 + x2;
  EXPECT_FALSE(selects_disjoint_elements(rows, {x0}, ranges));
  // Rows 4 apart and positions up to 5: planes overlap.
  EXPECT_FALSE(selects_disjoint_elements(x0 * 4 + indirect(load(idx, x0 * 6 + x1), 6), {x0}, ranges));
  // Upsampling's backward: out[x0, x1 // 2] of [8, 3] (a floordiv of x1 only).
  EXPECT_TRUE(selects_disjoint_elements(x0 * 3 + floordiv(x1, index_const(2)), {x0}, ranges));
  EXPECT_FALSE(selects_disjoint_elements(x0 * 3 + floordiv(x1, index_const(2)), {x0, x1}, ranges));
}

}  // namespace
}  // namespace cppi::ir
