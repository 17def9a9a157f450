// ir::can_write_over: when a kernel may store a buffer over the storage of a
// buffer it reads (the in-place reuse the wrapper plan makes of a dying input).
#include <gtest/gtest.h>

#include "ir_builders.h"
#include "lowering/ir/in_place.h"

namespace cppi::ir {
namespace {

class InPlaceTest : public ::testing::Test {
 protected:
  IndexExpr s0 = sym("s0");
  IndexExpr rows = index_const(32), cols = index_const(48);
  BufferPtr in = matrix("in", rows, cols);
  BufferPtr out = matrix("out", rows, cols);
  IndexExpr x0 = var("x0"), x1 = var("x1");

  static BufferPtr matrix(const std::string& name, const IndexExpr& r, const IndexExpr& c) {
    return Buffer::make_contiguous(name, DType::Float32, Device::CPU, BufferKind::Intermediate, {r, c});
  }
  static Expr relu(const Expr& e) { return binary(BinaryOp::Maximum, e, const_float(0)); }
  KernelPtr pointwise(std::vector<Store> stores, std::vector<Loop> outer = {}) {
    if (outer.empty()) outer = {{x0, rows}, {x1, cols}};
    return Kernel::make("k", Device::CPU, std::move(outer), {PointwiseStage{{}, std::move(stores)}});
  }
  IndexExpr at(const BufferPtr& b) { return b->layout.index({x0, x1}); }
};

TEST_F(InPlaceTest, APointwiseMapReadingEachElementOnceMayWriteOverIt) {
  KernelPtr k = pointwise({Store::make(out, at(out), relu(load(in, at(in))))});
  EXPECT_TRUE(can_write_over(*k, "in", "out"));
  EXPECT_FALSE(can_write_over(*k, "out", "in")) << "out is written, in is not";
}

TEST_F(InPlaceTest, AnOverlappedVectorTailMayNot) {
  // The CPU schedule's overlapped tail computes the last columns twice: the
  // second time would load what the first stored.
  KernelPtr k = pointwise({Store::make(out, at(out), relu(load(in, at(in))))});
  Schedule s = k->schedule;
  s.cpu.vectorized = VectorizedLoop::InnermostOuter;
  s.cpu.vector_width = 16;
  s.cpu.tail = TailKind::Overlapped;
  EXPECT_FALSE(can_write_over(*k->with_schedule(s), "in", "out"));
  s.cpu.tail = TailKind::ScalarLoop;
  EXPECT_TRUE(can_write_over(*k->with_schedule(s), "in", "out"));
}

TEST_F(InPlaceTest, SymbolicRowsAreStillProvedDisjoint) {
  BufferPtr a = matrix("a", s0, cols), b = matrix("b", s0, cols);
  KernelPtr k = pointwise({Store::make(b, b->layout.index({x0, x1}), relu(load(a, a->layout.index({x0, x1}))))},
                          {{x0, s0}, {x1, cols}});
  EXPECT_TRUE(can_write_over(*k, "a", "b"));
}

TEST_F(InPlaceTest, ATransposedOrShiftedReadMayNot) {
  BufferPtr square_in = matrix("sq_in", cols, cols), square_out = matrix("sq_out", cols, cols);
  IndexExpr stored = square_out->layout.index({x0, x1});
  KernelPtr transposed = pointwise(
      {Store::make(square_out, stored, relu(load(square_in, square_in->layout.index({x1, x0}))))},
      {{x0, cols}, {x1, cols}});
  EXPECT_FALSE(can_write_over(*transposed, "sq_in", "sq_out"));
  KernelPtr shifted = pointwise({Store::make(out, at(out), binary(BinaryOp::Add, load(in, at(in)), load(in, at(in) + 1)))});
  EXPECT_FALSE(can_write_over(*shifted, "in", "out")) << "the next element is read after this one is stored";
}

TEST_F(InPlaceTest, AStoreRepeatedOverALoopIsNotInjective) {
  // out[x0, 0] = in[x0, 0] for every x1: the second iteration would read what the first stored.
  IndexExpr first = out->layout.index({x0, index_const(0)});
  KernelPtr k = pointwise({Store::make(out, first, relu(load(in, first)))});
  EXPECT_FALSE(can_write_over(*k, "in", "out"));
}

TEST_F(InPlaceTest, NoReadOfTheInputAfterTheStore) {
  BufferPtr other = matrix("other", rows, cols);
  // Same stage: a later store reads `in` at the element `out` just took.
  KernelPtr same_stage = pointwise({Store::make(out, at(out), relu(load(in, at(in)))),
                                    Store::make(other, at(other), binary(BinaryOp::Mul, load(in, at(in)), const_float(2)))});
  EXPECT_FALSE(can_write_over(*same_stage, "in", "out"));
  // Reversed order: both reads come first.
  KernelPtr reads_first = pointwise({Store::make(other, at(other), binary(BinaryOp::Mul, load(in, at(in)), const_float(2))),
                                     Store::make(out, at(out), relu(load(in, at(in))))});
  EXPECT_TRUE(can_write_over(*reads_first, "in", "out"));
  // A later stage reads `in` again: the row was already overwritten.
  IndexExpr r0 = var("r0");
  PointwiseStage store_row{{{r0, cols}}, {Store::make(out, out->layout.index({x0, r0}), relu(load(in, in->layout.index({x0, r0}))))}};
  auto sum_row = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, load(in, in->layout.index({x0, r0})), {"s"});
  BufferPtr sums = Buffer::make_contiguous("sums", DType::Float32, Device::CPU, BufferKind::Intermediate, {rows});
  PointwiseStage store_sum{{}, {Store::make(sums, x0, sum_row.result())}};
  KernelPtr later = Kernel::make("k", Device::CPU, {{x0, rows}}, {store_row, sum_row, store_sum});
  EXPECT_FALSE(can_write_over(*later, "in", "out"));
}

TEST_F(InPlaceTest, SoftmaxReadsTheRowInEveryStageBeforeStoringIt) {
  // Stages name their loops differently (r0 in the reductions, x1 in the
  // store) and still walk the same elements.
  IndexExpr r0 = var("r0");
  Expr x_r = load(in, in->layout.index({x0, r0}));
  auto amax = ReductionStage::make({{r0, cols}}, ReductionKind::Max, x_r, {"amax"});
  auto denom = ReductionStage::make({{r0, cols}}, ReductionKind::Sum,
                                    unary(UnaryOp::Exp, binary(BinaryOp::Sub, x_r, amax.result())), {"denom"});
  Expr x_c = load(in, in->layout.index({x0, x1}));
  PointwiseStage normalize{{{x1, cols}},
                           {Store::make(out, out->layout.index({x0, x1}),
                                        binary(BinaryOp::TrueDiv,
                                               unary(UnaryOp::Exp, binary(BinaryOp::Sub, x_c, amax.result())),
                                               denom.result()))}};
  KernelPtr k = Kernel::make("softmax", Device::CPU, {{x0, rows}}, {amax, denom, normalize});
  EXPECT_TRUE(can_write_over(*k, "in", "out"));
  // The same kernel whose reductions read one column further than the store walks.
  auto wide = ReductionStage::make({{r0, cols + 1}}, ReductionKind::Max, x_r, {"amax"});
  KernelPtr overreach = Kernel::make("softmax", Device::CPU, {{x0, rows}}, {wide, denom, normalize});
  EXPECT_FALSE(can_write_over(*overreach, "in", "out"));
}

TEST_F(InPlaceTest, TheOutputMustBeStored) {
  BufferPtr other = matrix("other", rows, cols);
  KernelPtr k = pointwise({Store::make(other, at(other), relu(load(in, at(in))))});
  EXPECT_FALSE(can_write_over(*k, "in", "out"));
}

}  // namespace
}  // namespace cppi::ir
