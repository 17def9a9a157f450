// Fusion on what the real lowerings (lowering/ops) produce: graphs built as
// Descs the way export.py writes them, lowered, fused, and compared with the
// unfused program through the reference interpreter. A separate executable,
// so fusion_test does not depend on the lowering library.
#include <gtest/gtest.h>

#include "lowering/graph/graph.h"
#include "fusion_test_util.h"
#include "lowering/ir/printer.h"
#include "lowering/ops/lower_graph.h"

namespace cppi::lowering::testing {
namespace {

Desc tag(const std::string& t, Desc v) { return Desc(Desc::Dict{{t, std::move(v)}}); }
Desc ref(const std::string& n) { return tag("node", n); }

Desc tensor(Desc::List sizes, const std::string& dtype = "float32", const std::string& device = "cpu") {
  Desc::List strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i].as_int();
  }
  return tag("tensor", Desc::Dict{{"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"offset", 0},
                                  {"device", device}});
}

struct Builder {
  Desc::List nodes;
  Builder& input(const std::string& name, Desc val) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "placeholder"}, {"target", name}, {"args", Desc::List{}},
                               {"kwargs", Desc::Dict{}}, {"val", std::move(val)}});
    return *this;
  }
  Builder& call(const std::string& name, const std::string& target, Desc::List args, Desc val, Desc::Dict kwargs = {}) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "call_function"}, {"target", target}, {"args", args},
                               {"kwargs", kwargs}, {"val", std::move(val)}});
    return *this;
  }
  Graph output(Desc::List outs) {
    nodes.push_back(Desc::Dict{{"name", "output"}, {"op", "output"}, {"target", "output"},
                               {"args", Desc::List{Desc(outs)}}, {"kwargs", Desc::Dict{}}, {"val", Desc()}});
    auto g = import_graph(Desc(Desc::Dict{{"symbols", Desc::List{}}, {"nodes", nodes}}));
    if (!g.ok()) throw std::runtime_error(g.error().message);
    return *g;
  }
};

struct Result {
  LoweredGraph lowered;
  FusedGraph fused;
  Remarks remarks;
};

Result lower_and_fuse(const Graph& g, LoweringOptions options = {}) {
  Result r;
  auto lowered = lower_graph(g, options, r.remarks);
  if (!lowered.ok()) throw std::runtime_error(lowered.error().message);
  r.lowered = std::move(*lowered);
  r.fused = fuse(r.lowered, {}, r.remarks);
  return r;
}

/// With CUDA codegen on: CUDA nodes lower to kernels instead of falling back.
Result lower_and_fuse_with_cuda(const Graph& g) {
  LoweringOptions options;
  options.cuda = true;
  return lower_and_fuse(g, options);
}

std::string dump(const FusedGraph& f) {
  std::string out;
  for (const auto& k : kernels(f)) out += ir::to_string(*k);
  return out;
}

TEST(FusionOfLowered, Softmax) {
  Graph g = Builder()
                .input("x", tensor({4, 10}))
                .call("amax", "aten.amax.default", {ref("x"), Desc::List{1}, true}, tensor({4, 1}))
                .call("sub", "aten.sub.Tensor", {ref("x"), ref("amax")}, tensor({4, 10}))
                .call("exp", "aten.exp.default", {ref("sub")}, tensor({4, 10}))
                .call("sum", "aten.sum.dim_IntList", {ref("exp"), Desc::List{1}, true}, tensor({4, 1}))
                .call("div", "aten.div.Tensor", {ref("exp"), ref("sum")}, tensor({4, 10}))
                .output({ref("div")});
  auto r = lower_and_fuse(g);
  auto ks = kernels(r.fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(r.remarks) << dump(r.fused);
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 P1") << dump(r.fused);
  EXPECT_EQ(r.fused.buffers.size(), 2u);
  EXPECT_EQ(compare_numerics(r.lowered, r.fused), "");
}

TEST(FusionOfLowered, LayerNormThroughVarMean) {
  Graph g = Builder()
                .input("x", tensor({6, 16}))
                .input("w", tensor({16}))
                .input("b", tensor({16}))
                .call("vm", "aten.var_mean.correction", {ref("x"), Desc::List{1}},
                      tag("tuple", Desc::List{tensor({6, 1}), tensor({6, 1})}), {{"correction", 0}, {"keepdim", true}})
                .call("var", "getitem", {ref("vm"), 0}, tensor({6, 1}))
                .call("mean", "getitem", {ref("vm"), 1}, tensor({6, 1}))
                .call("add", "aten.add.Tensor", {ref("var"), 1e-5}, tensor({6, 1}))
                .call("rsqrt", "aten.rsqrt.default", {ref("add")}, tensor({6, 1}))
                .call("sub", "aten.sub.Tensor", {ref("x"), ref("mean")}, tensor({6, 16}))
                .call("mul", "aten.mul.Tensor", {ref("sub"), ref("rsqrt")}, tensor({6, 16}))
                .call("mul_1", "aten.mul.Tensor", {ref("mul"), ref("w")}, tensor({6, 16}))
                .call("add_1", "aten.add.Tensor", {ref("mul_1"), ref("b")}, tensor({6, 16}))
                .output({ref("add_1")});
  auto r = lower_and_fuse(g);
  auto ks = kernels(r.fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(r.remarks) << dump(r.fused);
  // A 16-element row takes the corrected two-pass variance on CPU: the sum,
  // the deviations from its mean and their squares, then the normalisation,
  // all in one kernel.
  EXPECT_EQ(stage_shape(*ks[0]), "R1 R1 R1 P1") << dump(r.fused);
  EXPECT_EQ(compare_numerics(r.lowered, r.fused), "");
}

TEST(FusionOfLowered, GeluOfBiasAdd) {
  Graph g = Builder()
                .input("x", tensor({4, 32}))
                .input("b", tensor({32}))
                .call("add", "aten.add.Tensor", {ref("x"), ref("b")}, tensor({4, 32}))
                .call("mul", "aten.mul.Tensor", {ref("add"), 0.5}, tensor({4, 32}))
                .call("mul_1", "aten.mul.Tensor", {ref("add"), 0.7071067811865476}, tensor({4, 32}))
                .call("erf", "aten.erf.default", {ref("mul_1")}, tensor({4, 32}))
                .call("add_1", "aten.add.Tensor", {ref("erf"), 1}, tensor({4, 32}))
                .call("mul_2", "aten.mul.Tensor", {ref("mul"), ref("add_1")}, tensor({4, 32}))
                .output({ref("mul_2")});
  auto r = lower_and_fuse(g);
  ASSERT_EQ(kernels(r.fused).size(), 1u) << remark_text(r.remarks) << dump(r.fused);
  EXPECT_EQ(r.fused.buffers.size(), 3u);
  EXPECT_EQ(compare_numerics(r.lowered, r.fused), "");
}

TEST(FusionOfLowered, MlpEpilogues) {
  Graph g = Builder()
                .input("x", tensor({4, 8}))
                .input("w1", tensor({8, 16}))
                .input("b1", tensor({16}))
                .input("w2", tensor({16, 8}))
                .input("b2", tensor({8}))
                .call("mm", "aten.mm.default", {ref("x"), ref("w1")}, tensor({4, 16}))
                .call("add", "aten.add.Tensor", {ref("mm"), ref("b1")}, tensor({4, 16}))
                .call("relu", "aten.relu.default", {ref("add")}, tensor({4, 16}))
                .call("mm_1", "aten.mm.default", {ref("relu"), ref("w2")}, tensor({4, 8}))
                .call("add_1", "aten.add.Tensor", {ref("mm_1"), ref("b2")}, tensor({4, 8}))
                .call("relu_1", "aten.relu.default", {ref("add_1")}, tensor({4, 8}))
                .output({ref("relu_1")});
  auto r = lower_and_fuse(g);
  auto ks = kernels(r.fused);
  ASSERT_EQ(ks.size(), 2u) << remark_text(r.remarks) << dump(r.fused);  // one epilogue per matmul
  EXPECT_EQ(ks[1]->origins, (std::vector<std::string>{"add_1", "relu_1"}));
  // After the last matmul nothing else can read add_1: it is never stored.
  for (const auto& b : r.fused.buffers) EXPECT_NE(b.buffer->name, "add_1");
}

TEST(FusionOfLowered, HostScalarArithmeticRunsInTheCudaKernel) {
  // f(x, a) = relu(x * a) * (a * 2) called with varying Python floats: Dynamo
  // passes `a` as a 0-d float64 CPU tensor and converts it on the CPU. The
  // conversions and the product are inlined into the CUDA kernel, which reads
  // `a` by value: no CPU kernel, no ATen call.
  Graph g = Builder()
                .input("x", tensor({4, 8}, "float32", "cuda:0"))
                .input("a", tensor({}, "float64"))
                .call("a32", "prims.convert_element_type.default", {ref("a"), "float32"}, tensor({}))
                .call("mul", "aten.mul.Tensor", {ref("x"), ref("a32")}, tensor({4, 8}, "float32", "cuda:0"))
                .call("relu", "aten.relu.default", {ref("mul")}, tensor({4, 8}, "float32", "cuda:0"))
                .call("twice", "aten.mul.Tensor", {ref("a"), 2.0}, tensor({}, "float64"))
                .call("t32", "prims.convert_element_type.default", {ref("twice"), "float32"}, tensor({}))
                .call("out", "aten.mul.Tensor", {ref("relu"), ref("t32")}, tensor({4, 8}, "float32", "cuda:0"))
                .output({ref("out")});
  auto r = lower_and_fuse_with_cuda(g);
  auto ks = kernels(r.fused);
  ASSERT_EQ(ks.size(), 1u) << remark_text(r.remarks) << dump(r.fused);
  EXPECT_EQ(ks[0]->device, ir::Device::CUDA);
  EXPECT_EQ(r.fused.program.size(), 1u) << remark_text(r.remarks);
  for (const auto& b : r.fused.buffers) {
    if (b.buffer->device == ir::Device::CPU) EXPECT_EQ(b.buffer->name, "a");
  }
  EXPECT_EQ(compare_numerics(r.lowered, r.fused), "");
}

TEST(FusionOfLowered, HostScalarNeededOnTheCpuStaysThere) {
  // The converted scalar is also a graph output: its CPU kernel stays, and
  // the CUDA kernel reads its result by value.
  Graph g = Builder()
                .input("x", tensor({8}, "float32", "cuda:0"))
                .input("a", tensor({}, "float64"))
                .call("a32", "prims.convert_element_type.default", {ref("a"), "float32"}, tensor({}))
                .call("mul", "aten.mul.Tensor", {ref("x"), ref("a32")}, tensor({8}, "float32", "cuda:0"))
                .output({ref("mul"), ref("a32")});
  auto r = lower_and_fuse_with_cuda(g);
  auto ks = kernels(r.fused);
  ASSERT_EQ(ks.size(), 2u) << remark_text(r.remarks) << dump(r.fused);
  EXPECT_EQ(ks[0]->device, ir::Device::CPU);
  EXPECT_EQ(ks[1]->device, ir::Device::CUDA);
  EXPECT_EQ(compare_numerics(r.lowered, r.fused), "");
}

}  // namespace
}  // namespace cppi::lowering::testing
