// Buffers, pre-fusion nodes, kernels: construction checks, read/write sets,
// signatures, and the exact printed text.
#include <gtest/gtest.h>

#include "ir_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::ir {
namespace {

class NodeKernelTest : public ::testing::Test {
 protected:
  IndexExpr s0 = sym("s0");
  BufferPtr a = Buffer::make_contiguous("buf0", DType::Float32, Device::CPU, BufferKind::GraphInput,
                                        {s0, index_const(64)});
  BufferPtr b = Buffer::make_contiguous("buf1", DType::Float32, Device::CPU, BufferKind::GraphInput,
                                        {index_const(64)});
  BufferPtr out = Buffer::make_contiguous("buf2", DType::Float32, Device::CPU, BufferKind::GraphOutput,
                                          {s0, index_const(64)});
  BufferPtr rowsum = Buffer::make_contiguous("buf3", DType::Float32, Device::CPU, BufferKind::Intermediate, {s0});
};

TEST_F(NodeKernelTest, Layouts) {
  Layout l = Layout::contiguous({s0, index_const(3), index_const(4)});
  EXPECT_EQ(to_string(l.strides[0]), "12");
  EXPECT_EQ(to_string(l.index({var("x0"), var("x1"), var("x2")})), "12*x0 + 4*x1 + x2");
  EXPECT_EQ(to_string(l.numel()), "12*s0");
  EXPECT_TRUE(l.is_contiguous());
  // NCHW channels-last: C innermost.
  Layout cl = Layout::with_order({index_const(2), index_const(3), s0, s0}, {1, 3, 2, 0});
  EXPECT_EQ(to_string(cl.strides[1]), "1");
  EXPECT_EQ(to_string(cl.strides[3]), "3");
  EXPECT_EQ(to_string(cl.strides[2]), "3*s0");
  EXPECT_EQ(to_string(cl.strides[0]), "3*s0*s0");
  EXPECT_EQ(to_string(cl.storage_size()), to_string(cl.numel()));
  EXPECT_FALSE(cl.is_contiguous());
  Layout unit{{index_const(4), index_const(1)}, {index_const(1), index_const(7)}, index_const(0)};
  EXPECT_TRUE(unit.is_contiguous());  // the stride of a size-1 dim is irrelevant
  EXPECT_EQ(to_string(*a), "buf0: float32[s0, 64] strides=[64, 1] offset=0 cpu input fixed");
  EXPECT_EQ(to_string(*rowsum), "buf3: float32[s0] strides=[1] offset=0 cpu intermediate flexible");
  EXPECT_THROW(a->with_layout(Layout::contiguous({index_const(64), s0})), CompilerError);
  EXPECT_NO_THROW(rowsum->with_layout(Layout::contiguous({s0})));
  EXPECT_THROW(Buffer::make("bad", DType::Float32, Device::CPU, BufferKind::Intermediate,
                            Layout{{s0}, {var("x0")}, index_const(0)}, false),
               CompilerError);
}

TEST_F(NodeKernelTest, PointwiseNodePrints) {
  auto node = testing::add_relu_node(a, b, out);
  EXPECT_EQ(to_string(ComputeNode(node)),
            "pointwise add_relu origins=[add, relu]\n"
            "  ranges: x0 < s0, x1 < 64\n"
            "  t0: float32 = load buf0[64*x0 + x1]\n"
            "  t1: float32 = load buf1[x1]\n"
            "  t2: float32 = add(t0, t1)\n"
            "  t3: float32 = maximum(t2, float32(0))\n"
            "  store buf2[64*x0 + x1] = t3\n");
  auto r = reads(ComputeNode(node));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].buffer->name, "buf1");
  auto w = writes(ComputeNode(node));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].buffer->name, "buf2");
}

TEST_F(NodeKernelTest, ReductionNodePrints) {
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  auto node = ReductionNode::make("sum_rows", rowsum, {index_const(64)}, ReductionKind::Sum,
                                  load(a, a->layout.index({x0, r0})), {"sum"});
  EXPECT_EQ(to_string(ComputeNode(node)),
            "reduction sum_rows origins=[sum]\n"
            "  ranges: x0 < s0\n"
            "  reduction_ranges: r0 < 64\n"
            "  t0: float32 = load buf0[r0 + 64*x0]\n"
            "  sum(t0) -> buf3[x0]\n");

  BufferPtr mean = Buffer::make_contiguous("mean", DType::Float32, Device::CPU, BufferKind::Intermediate, {s0});
  BufferPtr m2 = Buffer::make_contiguous("m2", DType::Float32, Device::CPU, BufferKind::Intermediate, {s0});
  auto welford = ReductionNode::make("var_mean", {s0}, {index_const(64)}, ReductionKind::Welford,
                                     load(a, a->layout.index({x0, r0})),
                                     {{mean, x0}, {m2, x0}, {nullptr, IndexExpr()}});
  EXPECT_EQ(to_string(ComputeNode(welford)),
            "reduction var_mean\n"
            "  ranges: x0 < s0\n"
            "  reduction_ranges: r0 < 64\n"
            "  t0: float32 = load buf0[r0 + 64*x0]\n"
            "  welford(t0) -> mean: mean[x0], m2: m2[x0], weight: -\n");
}

TEST_F(NodeKernelTest, NodesRejectMalformedInput) {
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  // Body uses a variable the node does not bind.
  EXPECT_THROW(PointwiseNode::make("bad", out, load(a, var("x5"))), CompilerError);
  // A reduction var in the output index.
  EXPECT_THROW(ReductionNode::make("bad", {s0}, {index_const(64)}, ReductionKind::Sum, load(a, 64 * x0 + r0),
                                   {{rowsum, r0}}),
               CompilerError);
  // Wrong output dtype for argmax (int64 expected).
  EXPECT_THROW(ReductionNode::make("bad", rowsum, {index_const(64)}, ReductionKind::ArgMax, load(a, 64 * x0 + r0)),
               CompilerError);
  // LocalRef outside a kernel.
  EXPECT_THROW(PointwiseNode::make("bad", rowsum, LocalRef::make("acc", DType::Float32)), CompilerError);
}

TEST_F(NodeKernelTest, SoftmaxKernelPrints) {
  auto k = testing::softmax_kernel(a, out, s0, index_const(64));
  EXPECT_EQ(to_string(*k),
            "kernel softmax_kernel cpu origins=[amax, sub, exp, sum, div]\n"
            "  for x0 in [0, s0):\n"
            "    reduce max for r0 in [0, 64):\n"
            "      t0: float32 = load buf0[r0 + 64*x0]\n"
            "      amax: float32 = max(t0)\n"
            "    reduce sum for r0 in [0, 64):\n"
            "      t0: float32 = load buf0[r0 + 64*x0]\n"
            "      t1: float32 = sub(t0, amax)\n"
            "      t2: float32 = exp(t1)\n"
            "      denom: float32 = sum(t2)\n"
            "    pointwise for r0 in [0, 64):\n"
            "      t0: float32 = load buf0[r0 + 64*x0]\n"
            "      t1: float32 = sub(t0, amax)\n"
            "      t2: float32 = exp(t1)\n"
            "      t3: float32 = truediv(t2, denom)\n"
            "      store buf2[r0 + 64*x0] = t3\n");
  Schedule s;
  s.cpu.parallel_loops = 1;
  s.cpu.vectorized = VectorizedLoop::InnermostOfEachStage;
  s.cpu.vector_width = 16;
  s.gpu.mapping = GpuMapping::RowPerBlock;
  s.gpu.block_size = 256;
  auto scheduled = k->with_schedule(s);
  std::string text = to_string(*scheduled);
  EXPECT_NE(text.find("  schedule cpu: parallel_loops=1 grain=0 parallel_reduction=false "
                      "vectorized=innermost_of_each_stage width=16 tail=scalar_loop\n"
                      "  schedule gpu: mapping=row_per_block block=256 grid=0 elements_per_thread=1\n"),
            std::string::npos)
      << text;

  KernelSignature sig = signature(*k);
  ASSERT_EQ(sig.buffers.size(), 2u);
  EXPECT_EQ(sig.buffers[0].buffer->name, "buf0");
  EXPECT_TRUE(sig.buffers[0].read);
  EXPECT_FALSE(sig.buffers[0].written);
  EXPECT_TRUE(sig.buffers[1].written);
  EXPECT_EQ(sig.symbols, std::vector<std::string>{"s0"});
}

TEST_F(NodeKernelTest, KernelVerifierCatchesScopingErrors) {
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(a, 64 * x0 + r0);
  auto amax = ReductionStage::make({{r0, index_const(64)}}, ReductionKind::Max, x, {"amax"});
  // LocalRef before the stage that defines it.
  PointwiseStage early{{{r0, index_const(64)}}, {Store::make(out, 64 * x0 + r0, amax.result())}};
  EXPECT_THROW(Kernel::make("k", Device::CPU, {{x0, s0}}, {early, amax}), CompilerError);
  // A stage's loop variable is not visible to the next stage.
  PointwiseStage no_loop{{}, {Store::make(out, 64 * x0 + r0, amax.result())}};
  EXPECT_THROW(Kernel::make("k", Device::CPU, {{x0, s0}}, {amax, no_loop}), CompilerError);
  // The same variable bound by an outer loop and a stage.
  auto clash = ReductionStage::make({{x0, index_const(64)}}, ReductionKind::Max, x, {"m"});
  EXPECT_THROW(Kernel::make("k", Device::CPU, {{x0, s0}}, {clash}), CompilerError);
  // Wrong device.
  EXPECT_THROW(Kernel::make("k", Device::CUDA, {{x0, s0}}, {amax, PointwiseStage{{}, {Store::make(rowsum, x0, amax.result())}}}),
               CompilerError);
  // LocalRef with the wrong dtype.
  BufferPtr ints = Buffer::make_contiguous("ints", DType::Int64, Device::CPU, BufferKind::Intermediate, {s0});
  PointwiseStage wrong{{}, {Store::make(ints, x0, LocalRef::make("amax", DType::Int64))}};
  EXPECT_THROW(Kernel::make("k", Device::CPU, {{x0, s0}}, {amax, wrong}), CompilerError);
  // Correct version is accepted.
  EXPECT_NO_THROW(Kernel::make("k", Device::CPU, {{x0, s0}},
                               {amax, PointwiseStage{{}, {Store::make(rowsum, x0, amax.result())}}}));
}

TEST_F(NodeKernelTest, NodeListVerification) {
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  auto add = testing::add_relu_node(a, b, out);
  auto sum = ReductionNode::make("sum_rows", rowsum, {index_const(64)}, ReductionKind::Sum,
                                 load(out, out->layout.index({x0, r0})));
  NodeList ok{{a, b, out, rowsum}, {add, sum}};
  EXPECT_TRUE(verify(ok).ok());
  NodeList wrong_order{{a, b, out, rowsum}, {sum, add}};
  Status s = verify(wrong_order);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "node sum_rows reads buf2 before any node writes it");
  NodeList undeclared{{a, out, rowsum}, {add}};
  EXPECT_FALSE(verify(undeclared).ok());
  auto clobber = PointwiseNode::make("clobber", a, const_float(0));
  NodeList writes_input{{a}, {clobber}};
  EXPECT_FALSE(verify(writes_input).ok());
  EXPECT_EQ(to_string(NodeList{{a, rowsum}, {}}),
            "buf0: float32[s0, 64] strides=[64, 1] offset=0 cpu input fixed\n"
            "buf3: float32[s0] strides=[1] offset=0 cpu intermediate flexible\n");
}

TEST_F(NodeKernelTest, SingleNodeKernel) {
  IndexExpr x0 = pointwise_var(0), r0 = reduction_var(0);
  auto node = ReductionNode::make("sum_rows", rowsum, {index_const(64)}, ReductionKind::Sum,
                                  load(a, a->layout.index({x0, r0})), {"sum"});
  EXPECT_EQ(to_string(*single_node_kernel(node)),
            "kernel sum_rows cpu origins=[sum]\n"
            "  for x0 in [0, s0):\n"
            "    reduce sum for r0 in [0, 64):\n"
            "      t0: float32 = load buf0[r0 + 64*x0]\n"
            "      sum_rows: float32 = sum(t0)\n"
            "    pointwise:\n"
            "      store buf3[x0] = sum_rows\n");
}

}  // namespace
}  // namespace cppi::ir
