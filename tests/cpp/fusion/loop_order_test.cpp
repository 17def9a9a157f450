// fusion::order_loops_for_stores: a pointwise kernel's outer loops follow its
// stores' memory order; anything it cannot judge keeps its order.
#include <gtest/gtest.h>

#include "lowering/fusion/loop_order.h"
#include "lowering/ir/expr.h"

namespace cppi::lowering::fusion {
namespace {

using namespace cppi::ir;

class LoopOrderTest : public ::testing::Test {
 protected:
  IndexExpr rows = index_const(32), cols = index_const(48);
  IndexExpr x0 = var("x0"), x1 = var("x1");
  // A [32, 48] tensor stored column-major, as eager lays out `x.t() + 1`.
  BufferPtr in_t = Buffer::make("in", DType::Float32, Device::CPU, BufferKind::GraphInput,
                                Layout::with_order({rows, cols}, {0, 1}), true);
  BufferPtr out_t = Buffer::make("out", DType::Float32, Device::CPU, BufferKind::GraphOutput,
                                 Layout::with_order({rows, cols}, {0, 1}), true);
  BufferPtr out_c = Buffer::make_contiguous("out_c", DType::Float32, Device::CPU, BufferKind::GraphOutput, {rows, cols});

  Expr plus_one(const BufferPtr& b) { return binary(BinaryOp::Add, load(b, b->layout.index({x0, x1})), const_float(1)); }
  KernelPtr pointwise(std::vector<Store> stores) {
    return Kernel::make("k", Device::CPU, {{x0, rows}, {x1, cols}}, {PointwiseStage{{}, std::move(stores)}});
  }
  static std::vector<std::string> order(const KernelPtr& k) {
    std::vector<std::string> names;
    for (const auto& l : k->outer) names.push_back(to_string(l.var));
    return names;
  }
};

TEST_F(LoopOrderTest, ColumnMajorStoresPutTheFirstDimensionInnermost) {
  KernelPtr k = pointwise({Store::make(out_t, out_t->layout.index({x0, x1}), plus_one(in_t))});
  KernelPtr ordered = order_loops_for_stores(k);
  EXPECT_EQ(order(ordered), (std::vector<std::string>{"x1", "x0"}));
  EXPECT_EQ(ordered->stages.size(), 1u);
  EXPECT_EQ(order_loops_for_stores(ordered), ordered) << "already ordered: the same kernel";
}

TEST_F(LoopOrderTest, RowMajorStoresKeepTheirOrderWhateverTheLoadsDo) {
  // A transpose copy: one side strides whichever order; the stores decide.
  KernelPtr k = pointwise({Store::make(out_c, out_c->layout.index({x0, x1}), plus_one(in_t))});
  EXPECT_EQ(order_loops_for_stores(k), k);
}

TEST_F(LoopOrderTest, StoresThatDisagreeFollowTheirSummedStrides) {
  // out_t moves 1 along x0 and 32 along x1; out_c 48 and 1: x0 sums 49, x1 33.
  KernelPtr k = pointwise({Store::make(out_t, out_t->layout.index({x0, x1}), plus_one(in_t)),
                           Store::make(out_c, out_c->layout.index({x0, x1}), plus_one(in_t))});
  EXPECT_EQ(order_loops_for_stores(k), k);
}

TEST_F(LoopOrderTest, SymbolicStridesAndReductionsAreLeftAlone) {
  IndexExpr s0 = sym("s0");
  BufferPtr sym_t = Buffer::make("sym_out", DType::Float32, Device::CPU, BufferKind::GraphOutput,
                                 Layout::with_order({s0, cols}, {0, 1}), true);
  KernelPtr symbolic = Kernel::make(
      "k", Device::CPU, {{x0, s0}, {x1, cols}},
      {PointwiseStage{{}, {Store::make(sym_t, sym_t->layout.index({x0, x1}), const_float(1))}}});
  EXPECT_EQ(order_loops_for_stores(symbolic), symbolic);

  IndexExpr r0 = var("r0");
  BufferPtr sums = Buffer::make_contiguous("sums", DType::Float32, Device::CPU, BufferKind::GraphOutput, {rows});
  auto sum = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, load(in_t, in_t->layout.index({x0, r0})), {"s"});
  KernelPtr reduction = Kernel::make("r", Device::CPU, {{x0, rows}},
                                     {sum, PointwiseStage{{}, {Store::make(sums, sums->layout.index({x0}), sum.result())}}});
  EXPECT_EQ(order_loops_for_stores(reduction), reduction);
}

TEST_F(LoopOrderTest, AWindowReductionFollowsItsStoresALongOneDoesNot) {
  // out[x0, x1] = max over a 3-point window of in_t, stored column-major (a
  // channels-last max_pool2d stores so): x0 goes innermost. A 64-point
  // reduction (a row sum) keeps its order.
  IndexExpr r0 = var("r0");
  auto window = [&](int64_t points) {
    auto max = ReductionStage::make({{r0, index_const(points)}}, ReductionKind::Max,
                                    load(in_t, in_t->layout.index({x0, x1})), {"m"});
    return Kernel::make("w", Device::CPU, {{x0, rows}, {x1, cols}},
                        {max, PointwiseStage{{}, {Store::make(out_t, out_t->layout.index({x0, x1}), max.result())}}});
  };
  KernelPtr ordered = order_loops_for_stores(window(3));
  EXPECT_EQ(order(ordered), (std::vector<std::string>{"x1", "x0"}));
  EXPECT_EQ(ordered->stages.size(), 2u);
  KernelPtr row = window(64);
  EXPECT_EQ(order_loops_for_stores(row), row);
}

}  // namespace
}  // namespace cppi::lowering::fusion
