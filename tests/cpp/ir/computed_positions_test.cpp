// resolve_computed_positions (computed_positions.h): indirect leaves whose
// position is computed from one loop variable become index arithmetic when a
// tabulation over the variable's range proves them equal; anything else is
// kept as the gather it was.
#include <gtest/gtest.h>

#include <algorithm>

#include "lowering/ir/computed_positions.h"
#include "lowering/ir/ir.h"

namespace cppi::ir {
namespace {

/// (float)x * scale, truncated to int64: nearest upsampling's source index.
Expr scaled(const IndexExpr& x, double scale) {
  return cast(binary(BinaryOp::Mul, cast(IndexValue::make(x), DType::Float32), const_float(scale)), DType::Int64);
}

TEST(ComputedPositions, NearestUpsamplingIsAFloorDivision) {
  const IndexExpr x = var("x0");
  const VarRanges ranges = {{"x0", index_const(128)}};
  EXPECT_EQ(resolve_computed_positions(indirect(scaled(x, 0.5), 64) * 3 + 7, ranges),
            simplify(floordiv(x, index_const(2)) * 3 + 7, ranges));
  EXPECT_EQ(resolve_computed_positions(indirect(scaled(x, 0.25), 32), ranges), floordiv(x, index_const(4)));
  // Downsampling by 2 is a stride.
  EXPECT_EQ(resolve_computed_positions(indirect(scaled(x, 2.0), 256), ranges), simplify(x * 2, ranges));
  // 1.5x (the float 2/3 rounds): whatever it is, it is exact where it resolves.
  const IndexExpr third = resolve_computed_positions(indirect(scaled(x, 2.0 / 3.0), 86), ranges);
  EXPECT_FALSE(has_indirect(third)) << third;
  InterpreterArgs none;
  for (int64_t v = 0; v < 128; ++v) {
    auto want = evaluate_expr(scaled(x, 2.0 / 3.0), none, {{"x0", v}});
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(evaluate(third, {{"x0", v}}, [&](const IndexIndirect& leaf) {
                return evaluate_expr(leaf.value(), none, {{"x0", v}})->i;
              }),
              want->i)
        << v;
  }
}

TEST(ComputedPositions, ClampedPositionsKeepTheirClamps) {
  // Bilinear's left neighbour: max((x + 0.5) * 0.5 - 0.5, 0) truncated, and
  // its right one, min(left + 1, 63).
  const IndexExpr x = var("x0");
  const VarRanges ranges = {{"x0", index_const(128)}};
  Expr src = binary(BinaryOp::Sub,
                    binary(BinaryOp::Mul,
                           binary(BinaryOp::Add, cast(IndexValue::make(x), DType::Float32), const_float(0.5)),
                           const_float(0.5)),
                    const_float(0.5));
  Expr left = cast(binary(BinaryOp::Maximum, src, const_float(0)), DType::Int64);
  Expr right = binary(BinaryOp::Minimum, binary(BinaryOp::Add, left, const_int(1)), const_int(63));
  const IndexExpr l = resolve_computed_positions(indirect(left, 64), ranges);
  const IndexExpr r = resolve_computed_positions(indirect(right, 64), ranges);
  EXPECT_FALSE(has_indirect(l));
  EXPECT_FALSE(has_indirect(r));
  for (int64_t v = 0; v < 128; ++v) {
    EXPECT_EQ(evaluate(l, {{"x0", v}}), v == 0 ? 0 : (v - 1) / 2) << v;
    EXPECT_EQ(evaluate(r, {{"x0", v}}), std::min<int64_t>(evaluate(l, {{"x0", v}}) + 1, 63)) << v;
  }
}

TEST(ComputedPositions, WhatCannotBeProvenStaysAGather) {
  const IndexExpr x = var("x0");
  const VarRanges ranges = {{"x0", index_const(128)}};
  auto kept = [&](const IndexExpr& leaf) { return resolve_computed_positions(leaf, ranges) == leaf; };
  // x * x: no (a x + b) // k fits.
  Expr square = binary(BinaryOp::Mul, IndexValue::make(x), IndexValue::make(x));
  EXPECT_TRUE(kept(indirect(square, 1 << 14)));
  // Positions past the dimension: the index check must still see them.
  EXPECT_TRUE(kept(indirect(scaled(x, 1.0), 64, /*wraps=*/true)));
  // Values read from memory, transcendental math, symbolic or large ranges.
  auto table = Buffer::make_contiguous("t", DType::Int64, Device::CPU, BufferKind::GraphInput, {index_const(128)});
  EXPECT_TRUE(kept(indirect(load(table, x), 64)));
  Expr logx = cast(unary(UnaryOp::Log, cast(IndexValue::make(x + 1), DType::Float32)), DType::Int64);
  EXPECT_TRUE(kept(indirect(logx, 8)));
  EXPECT_TRUE(resolve_computed_positions(indirect(scaled(x, 0.5), 64), {{"x0", sym("s0")}}) ==
              indirect(scaled(x, 0.5), 64));
  EXPECT_TRUE(resolve_computed_positions(indirect(scaled(x, 0.5), 1 << 20), {{"x0", index_const(1 << 21)}}) ==
              indirect(scaled(x, 0.5), 1 << 20));
}

}  // namespace
}  // namespace cppi::ir
