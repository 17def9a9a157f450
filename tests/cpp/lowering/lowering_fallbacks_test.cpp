// What does not lower: fallbacks with their reasons, externs, random nodes,
// ATen items in the wrapper, type promotion and the registry's coverage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "tests/cpp/lowering/lowering_test_support.h"

namespace cppi::lowering {
namespace {

using namespace test_support;

TEST(Lowering, UnknownOpFallsBackWithAReasonNamingIt) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}))
                .call("y", "aten.mul.Tensor", {ref("x"), 2.0}, tensor("float32", {4}))
                .call("w", "aten.frobnicate.default", {ref("y")}, tensor("float32", {4}))
                .call("z", "aten.add.Tensor", {ref("w"), 1.0}, tensor("float32", {4}))
                .output({ref("z")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "w");
  EXPECT_EQ(fb[0]->op, "aten.frobnicate.default");
  EXPECT_NE(fb[0]->reason.find("no lowering for aten.frobnicate.default"), std::string::npos);
  ASSERT_EQ(l.lowered.program.size(), 3u);
  auto* item = std::get_if<AtenItem>(&l.lowered.program[1]);
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->graph_node, 2);
  EXPECT_FALSE(item->is_extern);
  // y (read by ATen) and w (read by a kernel) are bound to their nodes' slots.
  std::map<std::string, BufferBinding> by_name;
  for (const auto& b : l.lowered.buffers) by_name[b.buffer->name] = b;
  EXPECT_EQ(by_name.at("y").graph_node, 1);
  EXPECT_EQ(by_name.at("w").graph_node, 2);
  EXPECT_EQ(by_name.at("w").buffer->kind, ir::BufferKind::GraphInput);
  EXPECT_TRUE(by_name.at("w").buffer->layout_fixed);
}

TEST(Lowering, ExternsAndRandomOps) {
  Graph g = GraphBuilder()
                .input("a", tensor("float32", {2, 3}))
                .input("b", tensor("float32", {3, 4}))
                .call("mm", "aten.mm.default", {ref("a"), ref("b")}, tensor("float32", {2, 4}))
                .call("r", "aten.rand_like.default", {ref("mm")}, tensor("float32", {2, 4}))
                .call("y", "aten.mul.Tensor", {ref("mm"), ref("r")}, tensor("float32", {2, 4}))
                .call("i", "aten.randint.low", {0, 5, Desc::List{2, 4}}, tensor("int64", {2, 4}))
                .output({ref("y"), ref("i")});
  auto l = lower(g);
  ASSERT_EQ(l.remarks.all().size(), 2u);
  EXPECT_EQ(l.remarks.all()[0].kind, Remark::Kind::Extern);
  EXPECT_EQ(l.remarks.all()[1].kind, Remark::Kind::Fallback);
  EXPECT_EQ(l.remarks.all()[1].node, "i");
  EXPECT_NE(l.remarks.all()[1].reason.find("random integers"), std::string::npos);
  auto* mm = std::get_if<AtenItem>(&l.lowered.program[0]);
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->is_extern);
  // rand_like reads the CPU seed buffer, which the runtime fills on every call.
  EXPECT_NE(printed(l.lowered).find("rand(seed="), std::string::npos) << printed(l.lowered);
  int seeds = 0;
  for (const auto& b : l.lowered.buffers) {
    if (!b.is_seed) continue;
    ++seeds;
    EXPECT_EQ(b.graph_node, -1);
    EXPECT_EQ(b.buffer->dtype, DType::Int64);
  }
  EXPECT_EQ(seeds, 1);
}

TEST(Lowering, RandomNodesDrawFromDisjointCounterRanges) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("r", "aten.rand.default", {Desc::List{2, 3}}, tensor("float32", {2, 3}))
                .call("n", "aten.randn_like.default", {ref("x")}, tensor("float32", {2, 3}))
                .call("b", "aten.bernoulli.p", {ref("x"), 0.25}, tensor("float32", {2, 3}))
                .output({ref("r"), ref("n"), ref("b")});
  auto l = lower(g);
  expect_all_lowered(l);
  const std::string ir = printed(l.lowered);
  EXPECT_NE(ir.find("rand(seed=t0, offset=3*x0 + x1)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("randn(seed=t0, offset=3*x0 + x1 + 6)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("rand(seed=t0, offset=3*x0 + x1 + 12)"), std::string::npos) << ir;
  Memory m(l.lowered);
  m.set("seed_cpu", {1234});
  m.run();
  for (double u : m.get("r")) EXPECT_TRUE(u >= 0 && u < 1) << u;
  for (double b : m.get("b")) EXPECT_TRUE(b == 0 || b == 1) << b;
  EXPECT_NE(m.get("r"), m.get("n"));
}

TEST(Lowering, NativeDropoutOutputIsZeroExactlyWhereTheMaskIs) {
  const int n = 64;
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {n}))
                .call("d", "aten.native_dropout.default", {ref("x"), 0.5, true},
                      tag("tuple", Desc::List{tensor("float32", {n}), tensor("bool", {n})}))
                .call("out", "getitem", {ref("d"), 0}, tensor("float32", {n}))
                .call("mask", "getitem", {ref("d"), 1}, tensor("bool", {n}))
                .output({ref("out"), ref("mask")});
  auto l = lower(g);
  expect_all_lowered(l);
  Memory m(l.lowered);
  m.set("seed_cpu", {99});
  m.set("x", std::vector<double>(n, 3.0));
  m.run();
  const auto out = m.get("out"), mask = m.get("mask");
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], mask[i] ? 6.0 : 0.0) << i;
    kept += mask[i] != 0;
  }
  EXPECT_GT(kept, 8);  // about half of 64
  EXPECT_LT(kept, 56);
}

TEST(Lowering, AccumulatingScattersFallBackWhereTheyCannotAdd) {
  auto index_put = [](const char* dtype, const char* device) {
    return GraphBuilder()
        .input("x", tensor(dtype, {4, 3}, {}, device))
        .input("i", tensor("int64", {2}, {}, device))
        .input("v", tensor(dtype, {2, 3}, {}, device))
        .call("p", "aten.index_put.default", {ref("x"), Desc::List{ref("i")}, ref("v"), true},
              tensor(dtype, {4, 3}, {}, device))
        .output({ref("p")});
  };
  auto reason = [](const Lowered& l) {
    auto fb = fallbacks(l);
    return fb.size() == 1 ? fb[0]->reason : cat(fb.size(), " fallbacks");
  };
  EXPECT_NE(reason(lower(index_put("bool", "cpu"))).find("accumulating into bool on cpu"), std::string::npos);
  LoweringOptions cuda;
  cuda.cuda = true;
  expect_all_lowered(lower(index_put("float32", "cuda:0"), cuda));
  // 16-bit floats add into a float32 copy (indirect_indexing.cpp, accumulates_in_float).
  expect_all_lowered(lower(index_put("bfloat16", "cuda:0"), cuda));
  expect_all_lowered(lower(index_put("float16", "cuda:0"), cuda));
  EXPECT_NE(reason(lower(index_put("int16", "cuda:0"), cuda)).find("no whole atomic add"), std::string::npos);
  // Atomic adds land in any order; the user asked for one result.
  LoweringOptions deterministic = cuda;
  deterministic.deterministic = true;
  EXPECT_NE(reason(lower(index_put("float32", "cuda:0"), deterministic)).find("use_deterministic_algorithms"),
            std::string::npos);
  expect_all_lowered(lower(index_put("float32", "cpu"), deterministic));  // one thread adds in order

  Graph amax = GraphBuilder()
                   .input("x", tensor("float32", {2, 3}))
                   .input("i", tensor("int64", {2, 2}))
                   .input("s", tensor("float32", {2, 3}))
                   .call("a", "aten.scatter_reduce.two", {ref("x"), 1, ref("i"), ref("s"), std::string("amax")},
                         tensor("float32", {2, 3}))
                   .output({ref("a")});
  EXPECT_NE(reason(lower(amax)).find("reduce='amax'"), std::string::npos);
}

TEST(Lowering, ReturnedViewsAndViewsReadByAtenBecomeAtenItems) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2, 3}))
                .call("y", "aten.add.Tensor", {ref("x"), 1.0}, tensor("float32", {2, 3}))
                .call("t", "aten.t.default", {ref("y")}, tensor("float32", {3, 2}, {1, 3}))
                .call("mm", "aten.mm.default", {ref("t"), ref("y")}, tensor("float32", {3, 3}))
                .call("xt", "aten.permute.default", {ref("x"), Desc::List{1, 0}}, tensor("float32", {3, 2}, {1, 3}))
                .output({ref("mm"), ref("xt")});
  auto l = lower(g);
  ASSERT_EQ(l.lowered.program.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[0]));
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);  // t, for mm
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);  // mm
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[3]).graph_node, 4);  // xt, returned
  EXPECT_TRUE(fallbacks(l).empty());
}

TEST(Lowering, CudaNodesHaveNoCodegenYet) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {2}, {}, "cuda:0"))
                .call("y", "aten.add.Tensor", {ref("x"), 1.0}, tensor("float32", {2}, {}, "cuda:0"))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->reason, "no codegen for cuda");
}

TEST(Lowering, CudaOpReadingACpuScalarTensorTakesItByValue) {
  // A lifted Python float arrives as a 0-d CPU tensor, which eager lets CUDA
  // ops read. A CUDA kernel loads it as a host scalar: its argument is the
  // value, copied from CPU memory at launch.
  LoweringOptions o;
  o.cuda = true;
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}, {}, "cuda:0"))
                .input("s", tensor("float32", {}, {}, "cpu"))
                .call("y", "aten.mul.Tensor", {ref("x"), ref("s")}, tensor("float32", {4}, {}, "cuda:0"))
                .call("z", "aten.relu.default", {ref("y")}, tensor("float32", {4}, {}, "cuda:0"))
                .output({ref("z")});
  auto l = lower(g, o);
  expect_all_lowered(l);
  const auto& mul = std::get<ir::PointwiseNodePtr>(std::get<ir::ComputeNode>(l.lowered.program[0]));
  EXPECT_EQ(mul->store.buffer->device, ir::Device::CUDA);
  bool reads_s = false;
  for (const auto& a : ir::reads(ir::ComputeNode(mul))) {
    if (a.buffer->device == ir::Device::CPU) {
      reads_s = true;
      EXPECT_TRUE(ir::is_host_scalar(*a.buffer, ir::Device::CUDA)) << a.buffer->name;
    }
  }
  EXPECT_TRUE(reads_s);
}

TEST(Lowering, CudaOpReadingCpuMemoryAsATensorFallsBackAlone) {
  // A 0-d view into a CPU tensor of several elements is no host scalar, and
  // a CPU tensor with dims is no argument a CUDA kernel can take: only those
  // nodes go to ATen.
  LoweringOptions o;
  o.cuda = true;
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}, {}, "cuda:0"))
                .input("t", tensor("float32", {3}, {}, "cpu"))
                .call("e", "aten.select.int", {ref("t"), 0, 1}, tensor("float32", {}, {}, "cpu"))
                .call("y", "aten.mul.Tensor", {ref("x"), ref("e")}, tensor("float32", {4}, {}, "cuda:0"))
                .call("z", "aten.relu.default", {ref("y")}, tensor("float32", {4}, {}, "cuda:0"))
                .output({ref("z")});
  auto l = lower(g, o);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "y");
  EXPECT_NE(fb[0]->reason.find("another device"), std::string::npos) << fb[0]->reason;
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program.back()));  // relu still lowers
}

TEST(Lowering, PromotionMismatchWithMetaFallsBackInsteadOfLying) {
  Graph g = GraphBuilder()
                .input("x", tensor("int32", {2}))
                .call("y", "aten.add.Tensor", {ref("x"), 1.5}, tensor("int32", {2}))  // eager would say float32
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_NE(fb[0]->reason.find("type promotion"), std::string::npos) << fb[0]->reason;
  EXPECT_EQ(l.lowered.program.size(), 1u);
}

TEST(TypePromotion, FollowsTorch) {
  using K = PromotionOperand::Kind;
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::Scalar, DType::Int64}}), DType::Int32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::Scalar, DType::Float64}}), DType::Float32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Float16}, {K::Scalar, DType::Float64}}), DType::Float16);
  EXPECT_EQ(result_type({{K::Tensor, DType::Float32}, {K::ZeroDimTensor, DType::Float64}}), DType::Float32);
  EXPECT_EQ(result_type({{K::Tensor, DType::Int32}, {K::ZeroDimTensor, DType::Float64}}), DType::Float64);
  EXPECT_EQ(result_type({{K::Tensor, DType::Bool}, {K::Scalar, DType::Int64}}), DType::Int64);
  auto t = elementwise_dtypes({{K::Tensor, DType::Int32}}, Promotion::IntToFloat);
  EXPECT_EQ(t.result, DType::Float32);
  t = elementwise_dtypes({{K::Tensor, DType::BFloat16}, {K::Tensor, DType::BFloat16}}, Promotion::AlwaysBool);
  EXPECT_EQ(t.compute, DType::Float32);
  EXPECT_EQ(t.result, DType::Bool);
}

TEST(Registry, CoversTheCoreOpsAndExplainsTheRest) {
  const Registry& r = builtin_lowerings();
  for (const char* op : {"aten.add.Tensor", "aten.sum.dim_IntList", "aten.view.default", "aten.var_mean.correction",
                         "aten.cat.default", "aten.where.self", "aten._to_copy.default", "aten.copy_.default"}) {
    const Lowering* l = r.find(op);
    ASSERT_NE(l, nullptr) << op;
    EXPECT_TRUE(l->fn) << op;
  }
  const Lowering* g = r.find("aten.scatter.reduce");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->fn);
  EXPECT_FALSE(g->fallback_reason.empty());
  for (const char* op : {"aten.gather.default", "aten.index_select.default", "aten.embedding.default",
                         "aten.index.Tensor", "aten._unsafe_index.Tensor", "aten.index_put.default",
                         "aten.scatter.src", "aten.scatter.value", "aten.max_pool2d_with_indices.default",
                         "aten.max_pool2d_with_indices_backward.default", "aten.avg_pool2d.default",
                         "aten.avg_pool2d_backward.default", "aten._adaptive_avg_pool2d.default",
                         "aten._adaptive_avg_pool2d_backward.default", "aten.adaptive_max_pool2d.default",
                         "aten.adaptive_max_pool2d_backward.default", "aten.linalg_vector_norm.default",
                         "aten.repeat.default", "aten.scatter_add.default", "aten.scatter_reduce.two"}) {
    const Lowering* l = r.find(op);
    ASSERT_NE(l, nullptr) << op;
    EXPECT_TRUE(l->fn) << op;
  }
}

TEST(Lowering, SymFloatScalarsFallBackRatherThanBakingInAHint) {
  GraphBuilder b;
  b.symbols = {"s0"};
  Graph g = b.input("x", tensor("float32", {tag("sym", "s0")}, {1}))
                .call("n", "aten.sym_size.int", {ref("x"), 0}, tag("symint", tag("sym", "s0")))
                .call("f", "operator.truediv", {1.0, ref("n")}, tag("symfloat", 0.25))
                .call("y", "aten.mul.Tensor", {ref("x"), ref("f")}, tensor("float32", {tag("sym", "s0")}, {1}))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->node, "y");
  // The runtime computes n and f before running y through ATen.
  ASSERT_EQ(l.lowered.program.size(), 3u);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[0]).graph_node, 1);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);
}

TEST(Lowering, SymFloatsWithAnExpressionComputeFromTheSizes) {
  // f = 2 / (float(n) - 1), var's backward scale, with the expression export
  // gives, read by `op`.
  auto graph_reading_f = [](const std::string& op) {
    GraphBuilder b;
    b.symbols = {"s0"};
    Desc expr = tag("fdiv", Desc::List{tag("f", 2.0), tag("fadd", Desc::List{tag("f", -1.0),
                                                                             tag("to_float", tag("sym", "s0"))})});
    return b.input("x", tensor("float32", {tag("sym", "s0")}, {1}))
        .call("n", "aten.sym_size.int", {ref("x"), 0}, tag("symint", tag("sym", "s0")))
        .call("f", "operator.truediv", {2.0, ref("n")}, tag("symfloat", Desc::Dict{{"hint", 0.5}, {"expr", expr}}))
        .call("y", op, {ref("x"), ref("f")}, tensor("float32", {tag("sym", "s0")}, {1}))
        .output({ref("y")});
  };
  // x * f lowers and reads n at run time, not the hint 0.5 (n = 5 then).
  auto l = lower(graph_reading_f("aten.mul.Tensor"));
  expect_all_lowered(l);
  Memory m(l.lowered, {{"s0", 3}});
  m.set("x", {1, 2, 3});
  m.run();
  expect_near(m.get("y"), {1, 2, 3});  // 2 / (3 - 1) = 1
  // Where a lowering needs the constant itself (a random op's p), it still falls back.
  auto l2 = lower(graph_reading_f("aten.bernoulli.p"));
  ASSERT_EQ(fallbacks(l2).size(), 1u);
  EXPECT_NE(fallbacks(l2)[0]->reason.find("symbolic float"), std::string::npos) << fallbacks(l2)[0]->reason;
}

TEST(Lowering, TupleFallbackItemsAreReadThroughGetitemSlots) {
  Graph g = GraphBuilder()
                .input("x", tensor("float32", {4}))
                .call("e", "aten.exp.default", {ref("x")}, tensor("float32", {4}))
                .call("v", "aten.view.default", {ref("e"), Desc::List{2, 2}}, tensor("float32", {2, 2}))
                .call("sv", "aten.slice.Tensor", {ref("v"), 1, 0, 1}, tensor("float32", {2, 1}, {2, 1}))
                .call("srt", "aten.sort.default", {ref("sv")},
                      tag("tuple", Desc::List{tensor("float32", {2, 1}), tensor("int64", {2, 1})}))
                .call("vals", "getitem", {ref("srt"), 0}, tensor("float32", {2, 1}))
                .call("y", "aten.add.Tensor", {ref("vals"), 1.0}, tensor("float32", {2, 1}))
                .output({ref("y")});
  auto l = lower(g);
  auto fb = fallbacks(l);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0]->op, "aten.sort.default");
  // exp (kernel), v and sv (views ATen needs), sort, getitem, add (kernel).
  ASSERT_EQ(l.lowered.program.size(), 6u);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[0]));
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[1]).graph_node, 2);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[2]).graph_node, 3);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[3]).graph_node, 4);
  EXPECT_EQ(std::get<AtenItem>(l.lowered.program[4]).graph_node, 5);
  EXPECT_TRUE(std::holds_alternative<ir::ComputeNode>(l.lowered.program[5]));
  bool found = false;
  for (const auto& b : l.lowered.buffers)
    if (b.buffer->name == "vals") {
      found = true;
      EXPECT_EQ(b.graph_node, 5);
      EXPECT_EQ(b.buffer->kind, ir::BufferKind::GraphInput);
    }
  EXPECT_TRUE(found);
}


}  // namespace
}  // namespace cppi::lowering
