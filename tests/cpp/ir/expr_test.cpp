// Value expressions: checking factories, structural hashing/equality, the
// visitor and the mutator.
#include <gtest/gtest.h>

#include <cmath>
#include <unordered_set>

#include "lowering/ir/expr.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/node.h"
#include "lowering/ir/printer.h"
#include "lowering/ir/reduction.h"

namespace cppi::ir {
namespace {

class ExprTest : public ::testing::Test {
 protected:
  BufferPtr a = Buffer::make_contiguous("buf0", DType::Float32, Device::CPU, BufferKind::GraphInput,
                                        {index_const(8), index_const(64)});
  BufferPtr h = Buffer::make_contiguous("buf1", DType::Float16, Device::CPU, BufferKind::GraphInput,
                                        {index_const(8), index_const(64)});
  BufferPtr i = Buffer::make_contiguous("buf2", DType::Int64, Device::CPU, BufferKind::GraphInput,
                                        {index_const(8)});
  IndexExpr x0 = var("x0"), x1 = var("x1");
};

TEST_F(ExprTest, FactoriesComputeDtypes) {
  Expr la = load(a, x1 + 64 * x0);
  EXPECT_EQ(la.dtype(), DType::Float32);
  EXPECT_EQ(unary(UnaryOp::Exp, la).dtype(), DType::Float32);
  EXPECT_EQ(unary(UnaryOp::IsNan, la).dtype(), DType::Bool);
  EXPECT_EQ(compare(CompareOp::Lt, la, const_float(0)).dtype(), DType::Bool);
  EXPECT_EQ(IndexValue::make(x0).dtype(), DType::Int64);
  EXPECT_EQ(Random::make(RandomKind::Normal, load(i, index_const(0)), x0).dtype(), DType::Float32);
  EXPECT_EQ(cast(load(h, x1), DType::Float32).dtype(), DType::Float32);
  Expr same = cast(la, DType::Float32);
  EXPECT_TRUE(same.same_as(la));  // cast() is a no-op on the same dtype
}

TEST_F(ExprTest, FactoriesRejectIllTypedInput) {
  Expr la = load(a, x0), li = load(i, x0), lh = load(h, x0);
  EXPECT_THROW(binary(BinaryOp::Add, la, li), CompilerError);            // mixed dtypes: no implicit promotion
  EXPECT_THROW(binary(BinaryOp::Add, lh, lh), CompilerError);            // reduced floats must be cast first
  EXPECT_THROW(unary(UnaryOp::Exp, lh), CompilerError);
  EXPECT_THROW(compare(CompareOp::Eq, lh, lh), CompilerError);
  EXPECT_THROW(unary(UnaryOp::Exp, li), CompilerError);                  // float-only op on int64
  EXPECT_THROW(binary(BinaryOp::TrueDiv, li, li), CompilerError);
  EXPECT_THROW(binary(BinaryOp::LShift, la, la), CompilerError);
  EXPECT_THROW(binary(BinaryOp::LogicalAnd, li, li), CompilerError);     // logical ops take bool
  EXPECT_THROW(where(la, la, la), CompilerError);                        // condition must be bool
  EXPECT_THROW(where(const_bool(true), la, li), CompilerError);
  EXPECT_THROW(Cast::make(la, DType::Float32), CompilerError);
  EXPECT_THROW(load(a, x0, la), CompilerError);                          // mask must be bool
  EXPECT_THROW(Random::make(RandomKind::Uniform, la, x0), CompilerError);  // seed must be int64
  EXPECT_THROW(const_int(1, DType::Float32), CompilerError);
  EXPECT_THROW(const_float(1, DType::Int32), CompilerError);
  EXPECT_THROW(Store::make(h, x0, la), CompilerError);                   // store needs an explicit cast
  EXPECT_NO_THROW(Store::make(h, x0, cast(la, DType::Float16)));
  EXPECT_NO_THROW(where(const_bool(true), lh, lh));                      // selecting reduced floats is fine
}

TEST_F(ExprTest, ConstantsRoundToTheirDtype) {
  auto c = const_float(0.1, DType::Float32).as<Constant>();
  EXPECT_EQ(c->float_value, static_cast<double>(0.1f));
  EXPECT_EQ(const_float(65520.0, DType::Float16).as<Constant>()->float_value, INFINITY);
  EXPECT_EQ(const_int(300, DType::UInt8).as<Constant>()->int_value, 44);
  EXPECT_EQ(const_int(-1, DType::Bool).as<Constant>()->int_value, 1);
  EXPECT_EQ(Constant::make(2.7, DType::Int32).as<Constant>()->int_value, 2);
  EXPECT_TRUE(std::isnan(const_float(NAN).as<Constant>()->float_value));
}

TEST_F(ExprTest, StructuralHashingAndEquality) {
  auto build = [&] {
    Expr x = load(a, x1 + 64 * x0);
    Expr e = unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, const_float(1)));
    return binary(BinaryOp::Mul, e, e);  // shared subexpression
  };
  Expr p = build(), q = build();
  EXPECT_FALSE(p.same_as(q));
  EXPECT_EQ(p.hash(), q.hash());
  EXPECT_TRUE(structurally_equal(p, q));
  Expr r = binary(BinaryOp::Mul, unary(UnaryOp::Exp, load(a, x0)), unary(UnaryOp::Exp, load(a, x0)));
  EXPECT_FALSE(structurally_equal(p, r));
  // NaN constants compare equal bitwise; 0.0 and -0.0 do not.
  EXPECT_TRUE(structurally_equal(const_float(NAN), const_float(NAN)));
  EXPECT_FALSE(structurally_equal(const_float(0.0), const_float(-0.0)));
  EXPECT_FALSE(structurally_equal(const_float(1, DType::Float32), const_float(1, DType::Float64)));
  std::unordered_set<Expr, ExprStructuralHash, ExprStructuralEqual> set{p, q, r};
  EXPECT_EQ(set.size(), 2u);
}

TEST_F(ExprTest, StructuralEqualityIsLinearOnDags) {
  // 60 levels of x = x*x would be 2^60 tree nodes.
  auto build = [&] {
    Expr e = load(a, x0);
    for (int k = 0; k < 60; ++k) e = binary(BinaryOp::Mul, e, e);
    return e;
  };
  EXPECT_TRUE(structurally_equal(build(), build()));
}

TEST_F(ExprTest, VisitorSeesEachNodeOnce) {
  struct Counter : ExprVisitor {
    int loads = 0, nodes = 0, indices = 0;
    void visit(const Load& n) override {
      ++loads;
      ExprVisitor::visit(n);
    }
    void visit(const Binary& n) override {
      ++nodes;
      ExprVisitor::visit(n);
    }
    void visit_index(const IndexExpr&) override { ++indices; }
  } counter;
  Expr e = load(a, x0);
  for (int k = 0; k < 40; ++k) e = binary(BinaryOp::Add, e, e);
  counter.walk(e);
  EXPECT_EQ(counter.loads, 1);
  EXPECT_EQ(counter.nodes, 40);
  EXPECT_EQ(counter.indices, 1);
}

TEST_F(ExprTest, MutatorReturnsSameNodeWhenUnchanged) {
  Expr x = load(a, x1 + 64 * x0);
  Expr e = where(compare(CompareOp::Gt, x, const_float(0)), x, binary(BinaryOp::Mul, x, const_float(0.5)));
  ExprMutator identity;
  EXPECT_TRUE(identity.mutate(e).same_as(e));
  // Substituting a variable the body does not use changes nothing either.
  EXPECT_TRUE(substitute_indices(e, {{"x7", var("y")}}).same_as(e));
  // Substituting x0 rebuilds, and keeps the shared load shared.
  Expr s = substitute_indices(e, {{"x0", x0 + 1}});
  EXPECT_FALSE(s.same_as(e));
  EXPECT_EQ(to_string(s),
            "where(gt(load buf0[64*x0 + x1 + 64], float32(0)), load buf0[64*x0 + x1 + 64], "
            "mul(load buf0[64*x0 + x1 + 64], float32(0.5)))");
  auto w = s.as<Where>();
  EXPECT_TRUE(w->then_value.same_as(w->cond.as<Compare>()->lhs));
}

TEST_F(ExprTest, MutatorRewritesOneKind) {
  // exp -> exp2 of x * log2(e): a typical strength-reduction pass.
  struct ExpToExp2 : ExprMutator {
    Expr visit(const Unary& n) override {
      if (n.op != UnaryOp::Exp) return ExprMutator::visit(n);
      Expr x = mutate(n.operand);
      return unary(UnaryOp::Exp2, binary(BinaryOp::Mul, x, const_float(1.4426950408889634, x.dtype())));
    }
  } pass;
  Expr e = binary(BinaryOp::Add, unary(UnaryOp::Exp, load(a, x0)), const_float(1));
  EXPECT_EQ(to_string(pass.mutate(e)), "add(exp2(mul(load buf0[x0], float32(1.442695))), float32(1))");
  Expr untouched = unary(UnaryOp::Sqrt, load(a, x0));
  EXPECT_TRUE(pass.mutate(untouched).same_as(untouched));
}

TEST_F(ExprTest, TraversalHelpers) {
  Expr x = load(a, x1 + 64 * x0);
  Expr y = load(a, x0 * 64 + 63 - x1);
  Expr e = binary(BinaryOp::Add, binary(BinaryOp::Mul, x, x), binary(BinaryOp::Sub, y, LocalRef::make("m", DType::Float32)));
  // post_order: operands first, each node once, deterministic.
  auto order = post_order({e});
  ASSERT_EQ(order.size(), 6u);
  EXPECT_TRUE(order[0].same_as(x));
  EXPECT_TRUE(order[5].same_as(e));
  EXPECT_EQ(free_vars(e), (std::set<std::string>{"x0", "x1"}));
  EXPECT_EQ(local_refs(e), std::set<std::string>{"m"});
  // replace_loads: inline a producer (here: buf0[i] := 2 * buf2-ish constant).
  Expr inlined = replace_loads(e, "buf0", [&](const Load& l) {
    return binary(BinaryOp::Mul, cast(IndexValue::make(l.index), DType::Float32), const_float(2));
  });
  EXPECT_EQ(reads(inlined).size(), 0u);
  EXPECT_TRUE(replace_loads(e, "other", [](const Load&) { return Expr(); }).same_as(e));
  EXPECT_THROW(replace_loads(e, "buf0", [](const Load&) { return const_int(1); }), CompilerError);
  // simplify_indices with ranges.
  Expr view = load(a, floordiv(x0 * 4 + x1, 4));
  VarRanges ranges{{"x0", index_const(8)}, {"x1", index_const(4)}};
  EXPECT_EQ(to_string(simplify_indices(view, ranges)), "load buf0[x0]");
  Expr plain = load(a, x0);
  EXPECT_TRUE(simplify_indices(plain, ranges).same_as(plain));
}

// A pooling window without padding: 0 <= 2*x1 + r0 < 56 holds for every
// x1 < 28, r0 < 2; the mask and the where() fold away, the load is plain.
TEST_F(ExprTest, RangeConditionsFoldWhereTheRangesDecideThem) {
  BufferPtr img = Buffer::make_contiguous("img", DType::Float32, Device::CPU, BufferKind::GraphInput,
                                          {index_const(56)});
  IndexExpr r0 = var("r0");
  auto iv = [](const IndexExpr& e) { return IndexValue::make(e); };
  IndexExpr h = 2 * x1 + r0;
  Expr valid = binary(BinaryOp::LogicalAnd, compare(CompareOp::Ge, iv(h), iv(index_const(0))),
                      compare(CompareOp::Lt, iv(h), iv(index_const(56))));
  Expr e = where(valid, load(img, h, valid), const_float(-INFINITY));
  VarRanges ranges{{"x1", index_const(28)}, {"r0", index_const(2)}};
  EXPECT_EQ(to_string(simplify_indices(e, ranges)), "load img[r0 + 2*x1]");

  // With one row of padding the lower bound is undecided (x1 = 0, r0 = 0)
  // and stays; the upper one still folds.
  IndexExpr padded = 2 * x1 + r0 - 1;
  Expr lower = compare(CompareOp::Ge, iv(padded), iv(index_const(0)));
  Expr upper = compare(CompareOp::Lt, iv(padded), const_int(56));
  Expr both = binary(BinaryOp::LogicalAnd, lower, upper);
  EXPECT_TRUE(structurally_equal(simplify_indices(load(img, padded, both), ranges), load(img, padded, lower)));

  // Every comparison both ways, and one that always fails: its masked load
  // reads the zero it would have read.
  for (auto [op, expect] : {std::pair{CompareOp::Lt, true}, {CompareOp::Le, true}, {CompareOp::Gt, false},
                            {CompareOp::Ge, false}, {CompareOp::Eq, false}, {CompareOp::Ne, true}}) {
    Expr c = simplify_indices(compare(op, iv(h), iv(index_const(56))), ranges);
    ASSERT_NE(c.as<Constant>(), nullptr) << to_string(c);
    EXPECT_EQ(c.as<Constant>()->int_value, expect ? 1 : 0);
  }
  Expr never = compare(CompareOp::Ge, iv(h), iv(index_const(56)));
  EXPECT_EQ(to_string(simplify_indices(load(img, h, never), ranges)), "float32(0)");

  // A position read from memory is only range-checked where it is used: a
  // comparison of it is not decided by its nominal size.
  IndexExpr pos = indirect(load(i, x0), index_const(56));
  Expr guard = compare(CompareOp::Lt, iv(pos), iv(index_const(56)));
  EXPECT_EQ(simplify_indices(guard, ranges).as<Constant>(), nullptr);
}

TEST_F(ExprTest, CommonSubexpressionElimination) {
  // Two stores that each rebuilt exp(x - 1) from scratch.
  auto build = [&] { return unary(UnaryOp::Exp, binary(BinaryOp::Sub, load(a, x0), const_float(1))); };
  Expr p = binary(BinaryOp::Mul, build(), const_float(2));
  Expr q = binary(BinaryOp::Add, build(), build());
  auto out = cse({p, q});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(post_order({p, q}).size(), 15u);
  EXPECT_EQ(post_order(out).size(), 7u);  // load, 1, sub, exp, 2, mul, add
  EXPECT_TRUE(out[0].as<Binary>()->lhs.same_as(out[1].as<Binary>()->lhs));
  EXPECT_TRUE(structurally_equal(out[0], p));
  Expr lone = unary(UnaryOp::Sqrt, load(a, x0));
  EXPECT_TRUE(cse({lone})[0].same_as(lone));
}

TEST_F(ExprTest, PrintsEveryKind) {
  Expr mask = compare(CompareOp::Lt, IndexValue::make(x0 + 1), const_int(8));
  Expr seed = load(i, index_const(0));
  Expr e = where(mask, cast(load(h, x0 + 1, mask), DType::Float32),
                 Random::make(RandomKind::Normal, seed, x0));
  EXPECT_EQ(to_string(e),
            "where(lt(index(x0 + 1), int64(8)), cast<float32>(load buf1[x0 + 1] if lt(index(x0 + 1), int64(8))), "
            "randn(seed=load buf2[0], offset=x0))");
  EXPECT_EQ(to_string(unary(UnaryOp::IsInf, const_float(-INFINITY, DType::Float64))), "isinf(float64(-inf))");
  EXPECT_EQ(to_string(binary(BinaryOp::LogicalAnd, const_bool(true), const_bool(false))), "logical_and(true, false)");
}

TEST_F(ExprTest, ReadsCollectsDistinctLoads) {
  Expr x = load(a, x0);
  Expr y = load(a, x0 + 1, compare(CompareOp::Lt, IndexValue::make(x0 + 1), const_int(8)));
  Expr e = binary(BinaryOp::Add, binary(BinaryOp::Add, x, x), y);
  auto r = reads(e);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(to_string(r[0].index), "x0");
  EXPECT_FALSE(r[0].masked);
  EXPECT_TRUE(r[1].masked);
}

TEST_F(ExprTest, MayRaiseOnIntegerDivisionByAVariableAndDivisorChecks) {
  Expr n = load(i, x0);
  EXPECT_TRUE(may_raise(binary(BinaryOp::FloorDiv, n, n)));
  EXPECT_TRUE(may_raise(binary(BinaryOp::Remainder, const_int(7), n)));
  EXPECT_TRUE(may_raise(binary(BinaryOp::TruncDiv, n, const_int(0))));
  EXPECT_TRUE(may_raise(unary(UnaryOp::NonzeroDivisor, n)));
  EXPECT_FALSE(may_raise(binary(BinaryOp::FloorDiv, n, const_int(3))));
  Expr x = load(a, x0);
  EXPECT_FALSE(may_raise(binary(BinaryOp::FloorDiv, x, x)));  // float: inf or NaN, no trap
  EXPECT_FALSE(may_raise(unary(UnaryOp::Log, x)));
}

TEST_F(ExprTest, ReductionTyping) {
  EXPECT_TRUE(reduction_result_dtypes(ReductionKind::Sum, DType::Float32).ok());
  EXPECT_FALSE(reduction_result_dtypes(ReductionKind::Sum, DType::Float16).ok());
  EXPECT_FALSE(reduction_result_dtypes(ReductionKind::Any, DType::Float32).ok());
  EXPECT_EQ(reduction_result_dtypes(ReductionKind::ArgMax, DType::Float32).value(), std::vector<DType>{DType::Int64});
  EXPECT_EQ(reduction_result_dtypes(ReductionKind::Welford, DType::Float32).value().size(), 3u);
  EXPECT_FALSE(reduction_result_dtypes(ReductionKind::Welford, DType::Int32).ok());
  EXPECT_EQ(to_string(reduction_identity(ReductionKind::Max, DType::Float32)[0]), "float32(-inf)");
  EXPECT_EQ(to_string(reduction_identity(ReductionKind::Min, DType::Int32)[0]), "int32(2147483647)");
  EXPECT_EQ(to_string(reduction_identity(ReductionKind::Prod, DType::Int64)[0]), "int64(1)");
}

}  // namespace
}  // namespace cppi::ir
