// Index expressions: canonical forms, printing, the floordiv/mod algebra, the
// range-aware simplifier, affine decomposition, evaluation and substitution.
#include <gtest/gtest.h>

#include <functional>
#include <unordered_set>

#include "lowering/ir/index_affine.h"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/index_simplify.h"
#include "support/status.h"

namespace cppi::ir {
namespace {

class IndexExprTest : public ::testing::Test {
 protected:
  IndexExpr x0 = var("x0"), x1 = var("x1"), x2 = var("x2"), r0 = var("r0");
  IndexExpr s0 = sym("s0"), s1 = sym("s1");
};

TEST_F(IndexExprTest, ConstantsFold) {
  EXPECT_EQ(to_string(index_const(3) + 4), "7");
  EXPECT_EQ(to_string(index_const(3) * 4 - 12), "0");
  EXPECT_EQ(to_string(floordiv(-7, 2)), "-4");  // Python floor division
  EXPECT_EQ(to_string(mod(-7, 2)), "1");        // non-negative for a positive divisor
  EXPECT_EQ(to_string(floordiv(7, -2)), "-4");
  EXPECT_EQ(to_string(mod(7, -2)), "-1");
  EXPECT_EQ(to_string(min(3, 5)), "3");
  EXPECT_EQ(to_string(max(3, 5)), "5");
}

TEST_F(IndexExprTest, CanonicalSumOfProducts) {
  EXPECT_EQ(x0 + 64 * x1, 64 * x1 + x0);
  EXPECT_EQ(to_string(64 * x1 + x0), "x0 + 64*x1");
  EXPECT_EQ(to_string(x1 + x0 + x1), "x0 + 2*x1");
  EXPECT_EQ(to_string(x0 - x0), "0");
  EXPECT_EQ(to_string(x0 * s0 + x1), "s0*x0 + x1");  // terms ordered by variable
  EXPECT_EQ(to_string((x0 + 1) * s0), "s0*x0 + s0");
  EXPECT_EQ(to_string(x0 - 1), "x0 - 1");
  EXPECT_EQ(to_string(-x0 + 3), "-x0 + 3");
  EXPECT_EQ(to_string(x2 + s0 * s1 * x0 + s1 * x1), "s0*s1*x0 + s1*x1 + x2");
  EXPECT_EQ(to_string(var("x10") + var("x2")), "x2 + x10");  // natural order
  EXPECT_EQ(to_string(x0 * 1 + 0), "x0");
  EXPECT_EQ(to_string(x0 * 0), "0");
  EXPECT_TRUE((x0 + 64 * x1).same_as(x0 + 64 * x1) == false);  // new nodes, equal structure
}

TEST_F(IndexExprTest, HashingAndEquality) {
  std::unordered_set<IndexExpr> set;
  set.insert(x0 + 64 * x1);
  set.insert(64 * x1 + x0);
  set.insert(floordiv(x0, 4));
  set.insert(floordiv(x0, 4));
  set.insert(mod(x0, 4));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_NE(x0, var("x1"));
  EXPECT_NE(sym("x0"), x0);  // a symbol is not a loop variable of the same name
  EXPECT_EQ(min(x0, x1), min(x1, x0));
}

TEST_F(IndexExprTest, FloorDivAlgebraWithoutRanges) {
  EXPECT_EQ(to_string(floordiv(x0 * 4 + x1, 4)), "x0 + (x1 // 4)");
  EXPECT_EQ(to_string(floordiv(x0 * 8 + 4, 4)), "2*x0 + 1");
  EXPECT_EQ(to_string(floordiv(x0 + 5, 4)), "((x0 + 1) // 4) + 1");
  EXPECT_EQ(to_string(floordiv(2 * x0, 4)), "(x0 // 2)");
  EXPECT_EQ(to_string(floordiv(floordiv(x0, 2), 3)), "(x0 // 6)");
  EXPECT_EQ(to_string(floordiv(x0, 1)), "x0");
  EXPECT_EQ(to_string(floordiv(x0 * s0 + x1, s0)), "x0 + (x1 // s0)");
  EXPECT_EQ(to_string(floordiv(x0 * s0 * s1, s0)), "s1*x0");
  EXPECT_EQ(to_string(floordiv(x0, 3 * s0)), "(x0 // (3*s0))");
  EXPECT_EQ(to_string(floordiv(x0 + x1, x2)), "((x0 + x1) // x2)");  // not a positive monomial: kept
  EXPECT_THROW(floordiv(x0, 0), CompilerError);
}

TEST_F(IndexExprTest, ModAlgebraWithoutRanges) {
  EXPECT_EQ(to_string(mod(x0 * 4 + x1, 4)), "(x1 % 4)");
  EXPECT_EQ(to_string(mod(x0 * 4, 4)), "0");
  EXPECT_EQ(to_string(mod(x0, 1)), "0");
  EXPECT_EQ(to_string(mod(x0 + 9, 4)), "((x0 + 1) % 4)");
  EXPECT_EQ(to_string(mod(2 * x0, 4)), "2*(x0 % 2)");
  EXPECT_EQ(to_string(mod(mod(x0, 6), 3)), "(x0 % 3)");
  EXPECT_EQ(to_string(mod(x0 * s0 + x1, s0)), "(x1 % s0)");
  EXPECT_THROW(mod(x0, 0), CompilerError);
}

TEST_F(IndexExprTest, SimplifyFlattenUnflatten) {
  // view (A, 4) -> (4A) -> (A, 4): the round trip must give back x0 and x1.
  VarRanges ranges{{"x0", index_const(8)}, {"x1", index_const(4)}};
  IndexExpr flat = x0 * 4 + x1;
  EXPECT_EQ(to_string(simplify(floordiv(flat, 4), ranges)), "x0");
  EXPECT_EQ(to_string(simplify(mod(flat, 4), ranges)), "x1");
  // Without ranges nothing is known about x1.
  EXPECT_EQ(to_string(simplify(floordiv(flat, 4))), "x0 + (x1 // 4)");
  // Symbolic sizes: x1 < s0.
  VarRanges sym_ranges{{"x0", s1}, {"x1", s0}};
  EXPECT_EQ(to_string(simplify(floordiv(x0 * s0 + x1, s0), sym_ranges)), "x0");
  EXPECT_EQ(to_string(simplify(mod(x0 * s0 + x1, s0), sym_ranges)), "x1");
}

TEST_F(IndexExprTest, SimplifyReshapeChains) {
  // (2, 3, 4) viewed as (6, 4) then indexed back: dims from a flat index.
  VarRanges ranges{{"x0", index_const(2)}, {"x1", index_const(3)}, {"x2", index_const(4)}};
  IndexExpr flat = 12 * x0 + 4 * x1 + x2;
  EXPECT_EQ(to_string(simplify(floordiv(flat, 4), ranges)), "3*x0 + x1");
  EXPECT_EQ(to_string(simplify(mod(floordiv(flat, 4), 3), ranges)), "x1");
  EXPECT_EQ(to_string(simplify(floordiv(flat, 12), ranges)), "x0");
  EXPECT_EQ(to_string(simplify(mod(flat, 12), ranges)), "4*x1 + x2");
  // Split then merge: 3*(x // 3) + x % 3 -> x, for any x.
  IndexExpr y = var("y");
  EXPECT_EQ(to_string(simplify(3 * floordiv(y, 3) + mod(y, 3))), "y");
  EXPECT_EQ(to_string(simplify(s0 * floordiv(y, s0) + mod(y, s0) + 1)), "y + 1");
}

TEST_F(IndexExprTest, SimplifySymbolicViews) {
  // A (s1, s0, 8) tensor flattened and unflattened again.
  VarRanges ranges{{"x0", s1}, {"x1", s0}, {"x2", index_const(8)}};
  IndexExpr flat = 8 * s0 * x0 + 8 * x1 + x2;
  EXPECT_EQ(to_string(simplify(mod(floordiv(flat, 8), s0), ranges)), "x1");
  EXPECT_EQ(to_string(simplify(floordiv(flat, 8 * s0), ranges)), "x0");
  EXPECT_EQ(to_string(simplify(mod(flat, 8 * s0), ranges)), "8*x1 + x2");
  // (x // s1) % s0 with x < s0*s1 is x // s1: needs (s0*s1 - 1) // s1 = s0 - 1.
  IndexExpr x = var("y");
  VarRanges yr{{"y", s0 * s1}};
  EXPECT_EQ(to_string(simplify(mod(floordiv(x, s1), s0), yr)), "(y // s1)");
  EXPECT_EQ(to_string(simplify(floordiv(-1, s0))), "-1");
  EXPECT_EQ(to_string(simplify(mod(-1, s0))), "s0 - 1");
  // Stride-2 slicing then a view: (2*x1) // 4 with x1 < 2 is 0.
  VarRanges sl{{"x1", index_const(2)}};
  EXPECT_EQ(to_string(simplify(floordiv(2 * x1, 4), sl)), "0");
}

TEST_F(IndexExprTest, SimplifyKeepsWhatItCannotProve) {
  VarRanges ranges{{"x1", index_const(5)}};
  EXPECT_EQ(to_string(simplify(floordiv(x1, 4), ranges)), "(x1 // 4)");
  EXPECT_EQ(to_string(simplify(mod(x1, 4), ranges)), "(x1 % 4)");
  // x0 has no range: could be negative.
  EXPECT_EQ(to_string(simplify(mod(x0, 4), ranges)), "(x0 % 4)");
  // Unchanged input comes back as the same node.
  IndexExpr e = x0 + floordiv(x1, 4);
  EXPECT_TRUE(simplify(e, ranges).same_as(e));
}

TEST_F(IndexExprTest, SimplifyMinMax) {
  VarRanges ranges{{"x0", s0}};
  EXPECT_EQ(to_string(simplify(min(x0, s0), ranges)), "x0");
  EXPECT_EQ(to_string(simplify(max(x0, s0), ranges)), "s0");
  EXPECT_EQ(to_string(simplify(max(x0 - 1, 0), ranges)), "max(0, x0 - 1)");
  EXPECT_EQ(to_string(min(x0 + 1, x0)), "x0");  // constant difference: no ranges needed
}

TEST_F(IndexExprTest, Proofs) {
  VarRanges ranges{{"x0", s0}, {"x1", index_const(4)}};
  EXPECT_TRUE(prove_nonnegative(x0 + 3 * x1, ranges));
  EXPECT_TRUE(prove_lt(x0, s0, ranges));
  EXPECT_FALSE(prove_lt(x0, s0 - 1, ranges));
  EXPECT_TRUE(prove_le(s0, s0 * s1));  // symbols are >= 1
  EXPECT_TRUE(prove_positive(s0 * s1 - s0 + 1));
  EXPECT_FALSE(prove_nonnegative(s0 - s1));
  EXPECT_TRUE(prove_lt(4 * x0 + x1, 4 * s0, ranges));
  IndexBounds b = bounds(4 * x0 + x1, ranges);
  ASSERT_TRUE(b.lo && b.hi);
  EXPECT_EQ(to_string(*b.lo), "0");
  EXPECT_EQ(to_string(*b.hi), "4*s0 - 1");
}

TEST_F(IndexExprTest, AffineForms) {
  // Contiguous: stride 1 in the innermost variable.
  auto f = affine_form(x1 + 64 * x0 + 5, {x0, x1});
  ASSERT_TRUE(f);
  EXPECT_EQ(to_string(f->strides[0]), "64");
  EXPECT_EQ(to_string(f->strides[1]), "1");
  EXPECT_EQ(to_string(f->offset), "5");
  // Broadcast: no dependence on x0.
  f = affine_form(x1, {x0, x1});
  ASSERT_TRUE(f);
  EXPECT_EQ(to_string(f->strides[0]), "0");
  // Transposed with a symbolic stride.
  f = affine_form(x0 + s0 * x1, {x0, x1});
  ASSERT_TRUE(f);
  EXPECT_EQ(to_string(f->strides[0]), "1");
  EXPECT_EQ(to_string(f->strides[1]), "s0");
  // Other variables go to the offset.
  f = affine_form(x0 + 7 * r0, {x0});
  ASSERT_TRUE(f);
  EXPECT_EQ(to_string(f->offset), "7*r0");
  // Not affine.
  EXPECT_FALSE(affine_form(floordiv(x0, 4), {x0}));
  EXPECT_FALSE(affine_form(x0 * x1, {x0, x1}));
  EXPECT_TRUE(affine_form(x0 * x1, {x0}));  // x1 is just part of the stride
  EXPECT_EQ(to_string(*coefficient(x0 * x1 + x0, x0)), "x1 + 1");
  EXPECT_FALSE(coefficient(mod(x0, 3), x0));
  EXPECT_EQ(to_string(*coefficient(mod(x1, 3), x0)), "0");
}

TEST_F(IndexExprTest, EvaluateAndSubstitute) {
  IndexBindings b{{"x0", -7}, {"x1", 3}, {"s0", 5}};
  EXPECT_EQ(evaluate(floordiv(x0, 2), b), -4);
  EXPECT_EQ(evaluate(mod(x0, s0), b), 3);
  EXPECT_EQ(evaluate(x1 * s0 + x0, b), 8);
  EXPECT_EQ(evaluate(min(x0, x1), b), -7);
  EXPECT_THROW(evaluate(x2, b), CompilerError);
  EXPECT_THROW(evaluate(floordiv(x1, x0 + 7), b), CompilerError);

  IndexExpr e = floordiv(x0 * 4 + x1, 4);
  IndexExpr sub = substitute(e, {{"x0", x2 + 1}});
  EXPECT_EQ(to_string(sub), "x2 + (x1 // 4) + 1");
  EXPECT_TRUE(substitute(e, {{"x5", x2}}).same_as(e));
  EXPECT_EQ(to_string(substitute(s0 * x0, {{"s0", index_const(3)}})), "3*x0");
}

TEST_F(IndexExprTest, FreeNames) {
  IndexExpr e = floordiv(x0 + s0 * x1, s1);
  EXPECT_EQ(free_vars(e), (std::set<std::string>{"x0", "x1"}));
  EXPECT_EQ(free_symbols(e), (std::set<std::string>{"s0", "s1"}));
  EXPECT_TRUE(depends_on(e, "s1"));
  EXPECT_FALSE(depends_on(e, "x2"));
}

TEST_F(IndexExprTest, RandomizedAgreementWithEvaluation) {
  // The canonicalising factories and simplify() must not change values:
  // compare against a direct evaluation of the construction tree.
  using Ref = std::function<int64_t(const IndexBindings&)>;
  struct Gen {
    IndexExpr e;
    Ref ref;
  };
  auto py_div = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  };
  std::vector<Gen> leaves{{x0, [](const IndexBindings& b) { return b.at("x0"); }},
                          {x1, [](const IndexBindings& b) { return b.at("x1"); }},
                          {s0, [](const IndexBindings& b) { return b.at("s0"); }},
                          {index_const(3), [](const IndexBindings&) { return int64_t{3}; }},
                          {index_const(-2), [](const IndexBindings&) { return int64_t{-2}; }}};
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>(state >> 33);
  };
  std::function<Gen(int)> gen = [&](int depth) -> Gen {
    if (depth == 0) return leaves[next() % leaves.size()];
    Gen a = gen(depth - 1), b = gen(depth - 1);
    int64_t d = 1 + next() % 5;
    switch (next() % 9) {
      case 0: return {a.e + b.e, [=](const IndexBindings& v) { return a.ref(v) + b.ref(v); }};
      case 1: return {a.e * b.e, [=](const IndexBindings& v) { return a.ref(v) * b.ref(v); }};
      case 2: return {a.e - b.e, [=](const IndexBindings& v) { return a.ref(v) - b.ref(v); }};
      case 3: return {floordiv(a.e, d), [=](const IndexBindings& v) { return py_div(a.ref(v), d); }};
      case 4:
        return {mod(a.e, d), [=](const IndexBindings& v) { return a.ref(v) - d * py_div(a.ref(v), d); }};
      case 5:
        return {mod(a.e, s0), [=](const IndexBindings& v) {
                  int64_t n = v.at("s0");
                  return a.ref(v) - n * py_div(a.ref(v), n);
                }};
      case 6: return {min(a.e, b.e), [=](const IndexBindings& v) { return std::min(a.ref(v), b.ref(v)); }};
      case 7: return {max(a.e, b.e), [=](const IndexBindings& v) { return std::max(a.ref(v), b.ref(v)); }};
      default:
        return {floordiv(a.e, s0), [=](const IndexBindings& v) { return py_div(a.ref(v), v.at("s0")); }};
    }
  };
  VarRanges ranges{{"x0", index_const(6)}, {"x1", s0}};
  for (int trial = 0; trial < 1500; ++trial) {
    Gen g = gen(3);
    IndexExpr s = simplify(g.e, ranges);
    ASSERT_EQ(simplify(s, ranges), s) << "simplify is not idempotent on " << g.e;
    auto affine = affine_form(g.e, {x0, x1});
    for (int64_t s0v = 1; s0v <= 4; ++s0v) {
      for (int64_t a = 0; a < 6; ++a) {
        for (int64_t c = 0; c < s0v; ++c) {
          IndexBindings b{{"x0", a}, {"x1", c}, {"s0", s0v}};
          int64_t want = g.ref(b);
          ASSERT_EQ(evaluate(g.e, b), want) << g.e;
          ASSERT_EQ(evaluate(s, b), want) << g.e << " simplified to " << s;
          if (affine) {
            int64_t v = evaluate(affine->offset, b) + evaluate(affine->strides[0], b) * a +
                        evaluate(affine->strides[1], b) * c;
            ASSERT_EQ(v, want) << "affine form of " << g.e;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cppi::ir
