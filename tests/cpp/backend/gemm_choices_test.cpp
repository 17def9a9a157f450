// Which matmuls max-autotune's GEMM template takes (backend/gemm_choices.h),
// on hand-built graph nodes: the problem it reads off them, and the reason it
// gives for each it does not take. The whole choice needs a GPU
// (tests/python/test_gemm_epilogue.py).
#include <gtest/gtest.h>

#include "graph_builders.h"

#include "backend/gemm_choices.h"

namespace cppi {
namespace {

using testing::node_arg;

ValueInfo tensor(std::vector<int64_t> sizes, std::vector<int64_t> strides, DType dtype = DType::BFloat16,
                 Device device = Device::CUDA) {
  ValueInfo v;
  v.kind = ValueInfo::Kind::Tensor;
  for (int64_t s : sizes) v.tensor.sizes.push_back(SizeExpr::constant(s));
  for (int64_t s : strides) v.tensor.strides.push_back(SizeExpr::constant(s));
  v.tensor.storage_offset = SizeExpr::constant(0);
  v.tensor.dtype = dtype;
  v.tensor.device = device;
  return v;
}

/// A graph of inputs and one matmul node `target` over them (the last node).
struct MatmulGraph {
  Graph g;
  int input(ValueInfo v) {
    Node n;
    n.name = cat("in", g.nodes.size());
    n.op = Node::Op::Placeholder;
    n.target = "placeholder";
    n.value = std::move(v);
    g.nodes.push_back(n);
    return int(g.nodes.size()) - 1;
  }
  const Node& matmul(const std::string& target, std::vector<int> args, ValueInfo result) {
    Node n;
    n.name = "mm";
    n.target = target;
    for (int a : args) n.args.push_back(node_arg(a));
    n.value = std::move(result);
    g.nodes.push_back(n);
    return g.nodes.back();
  }
};

TEST(GemmChoices, ALinearAtDecodeSizes) {
  MatmulGraph m;
  const int x = m.input(tensor({4, 512}, {512, 1})), w_t = m.input(tensor({512, 1024}, {1, 512}));
  const Node& mm = m.matmul("aten.mm.default", {x, w_t}, tensor({4, 1024}, {1024, 1}));
  ASSERT_TRUE(is_half_cuda_matmul(mm));
  std::string why;
  auto taken = gemm_template_matmul(m.g, mm, 80, &why);
  ASSERT_TRUE(taken) << why;
  EXPECT_EQ(taken->problem.m, 4);
  EXPECT_EQ(taken->problem.k, 512);
  EXPECT_EQ(taken->problem.n, 1024);
  EXPECT_EQ(taken->problem.ldb, 512);
  EXPECT_TRUE(taken->problem.b_k_contiguous);
  EXPECT_EQ(taken->a_slot, x);
  EXPECT_EQ(taken->b_slot, w_t);
  EXPECT_EQ(taken->bias_slot, -1);
}

TEST(GemmChoices, AddmmWithAConv1DWeight) {
  MatmulGraph m;
  const int bias = m.input(tensor({1024}, {1})), x = m.input(tensor({1, 512}, {512, 1})),
            w = m.input(tensor({512, 1024}, {1024, 1}));
  const Node& mm = m.matmul("aten.addmm.default", {bias, x, w}, tensor({1, 1024}, {1024, 1}));
  std::string why;
  auto taken = gemm_template_matmul(m.g, mm, 80, &why);
  ASSERT_TRUE(taken) << why;
  EXPECT_FALSE(taken->problem.b_k_contiguous);
  EXPECT_EQ(taken->problem.ldb, 1024);
  EXPECT_TRUE(taken->problem.bias);
  EXPECT_EQ(taken->bias_slot, bias);
}

TEST(GemmChoices, UpTo64RowsOnSm90) {
  const auto take = [](int64_t rows, int cc, std::vector<int64_t> w_strides, std::string* why) {
    MatmulGraph m;
    const int x = m.input(tensor({rows, 512}, {512, 1})), w = m.input(tensor({512, 1024}, w_strides));
    const Node& mm = m.matmul("aten.mm.default", {x, w}, tensor({rows, 1024}, {1024, 1}));
    return gemm_template_matmul(m.g, mm, cc, why).has_value();
  };
  std::string why;
  EXPECT_TRUE(take(64, 90, {1, 512}, &why)) << why;  // the wgmma kernel, K-contiguous B
  EXPECT_FALSE(take(65, 90, {1, 512}, &why));
  EXPECT_NE(why.find("65 rows: the small-M templates take 64 at most"), std::string::npos) << why;
  EXPECT_FALSE(take(17, 80, {1, 512}, &why));
  EXPECT_NE(why.find("take 16 at most (64 on sm_90)"), std::string::npos) << why;
  EXPECT_TRUE(take(64, 90, {1024, 1}, &why)) << why;  // N-contiguous B too
}

/// _scaled_mm(a, b, scale_a, scale_b, None, None, bfloat16) as AOTAutograd prints it.
Node scaled_mm(MatmulGraph& m, int a, int b, int scale_a, int scale_b, int64_t rows, int64_t cols) {
  Node n = m.matmul("aten._scaled_mm.default", {a, b, scale_a, scale_b}, tensor({rows, cols}, {cols, 1}));
  Arg none, dtype;
  dtype.kind = Arg::Kind::DType;
  dtype.dtype = DType::BFloat16;
  n.args.insert(n.args.end(), {none, none, dtype});
  return n;
}

TEST(GemmChoices, ScaledMmOfFloat8OnSm90) {
  MatmulGraph m;
  const int a = m.input(tensor({32, 512}, {512, 1}, DType::Float8E4M3FN));
  const int b = m.input(tensor({512, 1024}, {1, 512}, DType::Float8E4M3FN));
  const int one = m.input(tensor({}, {}, DType::Float32));
  const int rows = m.input(tensor({32, 1}, {1, 1}, DType::Float32));
  const int cols = m.input(tensor({1, 1024}, {1024, 1}, DType::Float32));
  const Node mm = scaled_mm(m, a, b, one, one, 32, 1024);
  ASSERT_TRUE(is_half_cuda_matmul(mm));
  std::string why;
  auto taken = gemm_template_matmul(m.g, mm, 90, &why);
  ASSERT_TRUE(taken) << why;
  EXPECT_TRUE(taken->problem.fp8);
  EXPECT_EQ(taken->problem.dtype, DType::BFloat16);
  EXPECT_EQ(taken->problem.scale_a, gpu::GemmProblem::Scale::One);
  EXPECT_EQ(taken->scale_a_slot, one);
  EXPECT_EQ(taken->bias_slot, -1);
  EXPECT_FALSE(gemm_template_matmul(m.g, mm, 80, &why));  // wgmma's alone
  // One scale per row of A and per column of B.
  auto row_wise = gemm_template_matmul(m.g, scaled_mm(m, a, b, rows, cols, 32, 1024), 90, &why);
  ASSERT_TRUE(row_wise) << why;
  EXPECT_EQ(row_wise->problem.scale_a, gpu::GemmProblem::Scale::PerRow);
  EXPECT_EQ(row_wise->problem.scale_b, gpu::GemmProblem::Scale::PerRow);
  // Refused: scales of other shapes.
  EXPECT_FALSE(gemm_template_matmul(m.g, scaled_mm(m, a, b, cols, rows, 32, 1024), 90, &why));
  EXPECT_NE(why.find("scales"), std::string::npos) << why;
  // One float8_e5m2 operand (FP8 training's gradients) is taken; two are refused, as torch refuses them.
  const int e5 = m.input(tensor({32, 512}, {512, 1}, DType::Float8E5M2));
  const int e5_b = m.input(tensor({512, 1024}, {1, 512}, DType::Float8E5M2));
  auto mixed = gemm_template_matmul(m.g, scaled_mm(m, e5, b, one, one, 32, 1024), 90, &why);
  ASSERT_TRUE(mixed) << why;
  EXPECT_TRUE(mixed->problem.a_e5m2);
  EXPECT_FALSE(mixed->problem.b_e5m2);
  EXPECT_FALSE(gemm_template_matmul(m.g, scaled_mm(m, e5, e5_b, one, one, 32, 1024), 90, &why));
  EXPECT_NE(why.find("two float8_e5m2"), std::string::npos) << why;
}

TEST(GemmChoices, EachRefusalSaysWhy) {
  const auto why_not = [](std::vector<int64_t> x_sizes, std::vector<int64_t> x_strides, std::vector<int64_t> w_strides,
                          std::vector<int64_t> w_sizes = {512, 1024}) {
    MatmulGraph m;
    const int x = m.input(tensor(x_sizes, x_strides)), w = m.input(tensor(w_sizes, w_strides));
    const Node& mm = m.matmul("aten.mm.default", {x, w}, tensor({x_sizes[0], w_sizes[1]}, {w_sizes[1], 1}));
    std::string why;
    EXPECT_FALSE(gemm_template_matmul(m.g, mm, 80, &why));
    return why;
  };
  EXPECT_NE(why_not({17, 512}, {512, 1}, {1, 512}).find("17 rows"), std::string::npos);
  EXPECT_NE(why_not({4, 512}, {1, 4}, {1, 512}).find("A's rows"), std::string::npos);
  EXPECT_NE(why_not({4, 512}, {512, 1}, {2048, 2}).find("neither dimension"), std::string::npos);
  EXPECT_NE(why_not({4, 500}, {500, 1}, {1, 500}, {500, 1024}).find("multiple of 8"), std::string::npos);

  MatmulGraph m;  // addmm with a [4, 1024] bias (a residual folded in): not one row
  const int bias = m.input(tensor({4, 1024}, {1024, 1})), x = m.input(tensor({4, 512}, {512, 1})),
            w = m.input(tensor({512, 1024}, {1, 512}));
  std::string why;
  EXPECT_FALSE(gemm_template_matmul(m.g, m.matmul("aten.addmm.default", {bias, x, w}, tensor({4, 1024}, {1024, 1})),
                                    80, &why));
  EXPECT_NE(why.find("bias"), std::string::npos) << why;
}

TEST(GemmChoices, OnlySixteenBitCudaMatmulsAreConsidered) {
  MatmulGraph m;
  const int x = m.input(tensor({4, 512}, {512, 1}, DType::Float32)),
            w = m.input(tensor({512, 1024}, {1, 512}, DType::Float32));
  EXPECT_FALSE(is_half_cuda_matmul(m.matmul("aten.mm.default", {x, w}, tensor({4, 1024}, {1024, 1}, DType::Float32))));
  MatmulGraph c;
  const int xc = c.input(tensor({4, 512}, {512, 1}, DType::BFloat16, Device::CPU)),
            wc = c.input(tensor({512, 1024}, {1, 512}, DType::BFloat16, Device::CPU));
  EXPECT_FALSE(is_half_cuda_matmul(
      c.matmul("aten.mm.default", {xc, wc}, tensor({4, 1024}, {1024, 1}, DType::BFloat16, Device::CPU))));
}

}  // namespace
}  // namespace cppi
