// The pipeline driver: plan steps, remarks, memory plan, fallback policy.
#include <gtest/gtest.h>

#include "backend/pipeline.h"

namespace cppi {
namespace {

Desc tag(const std::string& t, Desc v) { return Desc(Desc::Dict{{t, std::move(v)}}); }

Desc tensor2d() {
  return tag("tensor", Desc::Dict{{"dtype", "float32"},
                                  {"sizes", Desc::List{8, 8}},
                                  {"strides", Desc::List{8, 1}},
                                  {"offset", 0},
                                  {"device", "cpu"}});
}

Desc node(const std::string& name, const std::string& op, const std::string& target, Desc::List args) {
  return Desc(Desc::Dict{
      {"name", name}, {"op", op}, {"target", target}, {"args", args}, {"kwargs", Desc::Dict{}}, {"val", tensor2d()}});
}

/// a, b -> mm(a, b) -> sort -> output (mm, relu(a))
Graph small_graph() {
  Desc::List nodes{
      node("a", "placeholder", "placeholder", {}),
      node("b", "placeholder", "placeholder", {}),
      node("mm", "call_function", "aten.mm.default", {tag("node", "a"), tag("node", "b")}),
      node("r", "call_function", "aten.sort.default", {tag("node", "mm")}),
      node("output", "output", "output", {Desc::List{tag("node", "r"), tag("node", "mm")}}),
  };
  auto g = import_graph(Desc(Desc::Dict{{"nodes", nodes}}));
  EXPECT_TRUE(g.ok());
  return *g;
}

TEST(Pipeline, PlansExternAndFallbackWithReasons) {
  auto cg = compile_graph(small_graph(), Options{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  ASSERT_EQ(cg->steps.size(), 2u);
  EXPECT_TRUE(cg->steps[0].is_extern);
  EXPECT_FALSE(cg->steps[1].is_extern);
  const auto& remarks = cg->remarks.all();
  ASSERT_EQ(remarks.size(), 2u);
  EXPECT_EQ(remarks[0].kind, Remark::Kind::Extern);
  EXPECT_EQ(remarks[0].op, "aten.mm.default");
  EXPECT_EQ(remarks[1].kind, Remark::Kind::Fallback);
  EXPECT_EQ(remarks[1].node, "r");
  EXPECT_EQ(remarks[1].op, "aten.sort.default");
  EXPECT_FALSE(remarks[1].reason.empty());
}

TEST(Pipeline, FreesInputsAfterLastUseButNeverOutputs) {
  auto cg = compile_graph(small_graph(), Options{});
  ASSERT_TRUE(cg.ok());
  // a and b die after mm (step 0); mm is an output, so it is never freed.
  EXPECT_EQ(cg->steps[0].free_after, (std::vector<int>{0, 1}));
  EXPECT_TRUE(cg->steps[1].free_after.empty());
}

TEST(Pipeline, FallbackPolicyErrorNamesTheNode) {
  Options o;
  o.fallback = Options::FallbackPolicy::Error;
  auto cg = compile_graph(small_graph(), o);
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(cg.error().message.find("'r'"), std::string::npos) << cg.error().message;
}

TEST(Pipeline, RecordsStageTimesEndingWithTotal) {
  auto cg = compile_graph(small_graph(), Options{});
  ASSERT_TRUE(cg.ok());
  ASSERT_FALSE(cg->stage_times.empty());
  EXPECT_EQ(cg->stage_times.back().stage, "total");
}

/// a -> relu(a) -> output: one CPU kernel.
Graph relu_graph() {
  Desc::List nodes{
      node("a", "placeholder", "placeholder", {}),
      node("r", "call_function", "aten.relu.default", {tag("node", "a")}),
      node("output", "output", "output", {Desc::List{tag("node", "r")}}),
  };
  auto g = import_graph(Desc(Desc::Dict{{"nodes", nodes}}));
  EXPECT_TRUE(g.ok());
  return *g;
}

std::vector<std::string> stage_names(const CompiledGraph& cg) {
  std::vector<std::string> out;
  for (const auto& t : cg.stage_times) out.push_back(t.stage);
  return out;
}

TEST(Pipeline, StagesDoNotNestAndAddUpToTheTotal) {
  auto cg = compile_graph(relu_graph(), Options{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  EXPECT_EQ(cg->pending_compile, nullptr);
  const std::vector<std::string> want = {"lower", "fuse", "schedule", "cpu_compile", "codegen", "wrapper", "total"};
  EXPECT_EQ(stage_names(*cg), want);
  double sum = 0;
  for (size_t i = 0; i + 1 < cg->stage_times.size(); ++i) sum += cg->stage_times[i].seconds;
  EXPECT_DOUBLE_EQ(cg->stage_times.back().seconds, sum);
}

TEST(Pipeline, BackgroundCompileFinishesOnDemandWithTheSameStages) {
  Options o;
  o.background_compile = true;
  auto cg = compile_graph(relu_graph(), o);
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  ASSERT_NE(cg->pending_compile, nullptr);
  const std::vector<std::string> before = {"lower", "fuse", "schedule", "codegen", "wrapper", "total"};
  EXPECT_EQ(stage_names(*cg), before);
  const double total_before = cg->stage_times.back().seconds;
  ASSERT_TRUE(finish_compile(*cg).ok());
  EXPECT_EQ(cg->pending_compile, nullptr);
  const std::vector<std::string> after = {"lower", "fuse", "schedule", "cpu_compile", "codegen", "wrapper", "total"};
  ASSERT_EQ(stage_names(*cg), after);
  EXPECT_GT(cg->stage_times[3].seconds, 0.0);
  EXPECT_DOUBLE_EQ(cg->stage_times.back().seconds, total_before + cg->stage_times[3].seconds);
  ASSERT_TRUE(finish_compile(*cg).ok());  // nothing left: no second record
  EXPECT_EQ(stage_names(*cg), after);
}

TEST(Options, CpuIsaNamesEveryChoice) {
  auto o = Options::from_desc(Desc(Desc::Dict{{"cpu_isa", "avx2"}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cpu_isa, CpuIsa::Avx2);
  o = Options::from_desc(Desc(Desc::Dict{{"cpu_isa", "sse"}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("'native', 'avx2' or 'avx512'"), std::string::npos) << o.error().message;
}

TEST(CpuIsa, NativeIsTheHostsWidestAndAnIsaItLacksIsAnError) {
  const std::vector<CpuIsa> host = host_cpu_isas();
  auto native = resolve_cpu_isa(CpuIsa::Native);
#if defined(__x86_64__)
  ASSERT_TRUE(native.ok()) << native.error().message;
  if (host.empty()) GTEST_SKIP() << "an x86-64 CPU without AVX2";
  EXPECT_EQ(native->name, to_string(host.front()));
  EXPECT_EQ(native->vector_bytes, host.front() == CpuIsa::Avx512 ? 64 : 32);
  EXPECT_FALSE(native->avx512_off);
  auto avx2 = resolve_cpu_isa(CpuIsa::Avx2);  // every AVX2 host, AVX-512 ones too
  ASSERT_TRUE(avx2.ok());
  EXPECT_EQ(avx2->vector_bytes, 32);
  EXPECT_EQ(avx2->avx512_off, host.front() == CpuIsa::Avx512);
  if (host.front() != CpuIsa::Avx512) {
    auto avx512 = resolve_cpu_isa(CpuIsa::Avx512);
    ASSERT_FALSE(avx512.ok());
    EXPECT_EQ(avx512.error().kind, Error::Kind::InvalidInput);
    EXPECT_NE(avx512.error().message.find("this host's CPU runs 'avx2'"), std::string::npos)
        << avx512.error().message;
  }
#else
  ASSERT_FALSE(native.ok());
  EXPECT_EQ(native.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(native.error().message.find("x86-64"), std::string::npos);
  EXPECT_TRUE(host.empty());
#endif
}

TEST(Options, RejectsBadValues) {
  auto o = Options::from_desc(Desc(Desc::Dict{{"fallback", "sometimes"}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("option 'fallback' must be 'eager' or 'error', not 'sometimes'"), std::string::npos)
      << o.error().message;
  o = Options::from_desc(Desc(Desc::Dict{{"cpu_compiler", "icc"}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("option 'cpu_compiler' must be 'default', 'clang' or 'gxx', not 'icc'"),
            std::string::npos)
      << o.error().message;
  o = Options::from_desc(Desc(Desc::Dict{{"cuda_fast_compile", 3}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("option 'cuda_fast_compile' must be a string"), std::string::npos);
  o = Options::from_desc(Desc(Desc::Dict{{"cuda_fast_compile", "mid"}, {"fallback", "error"}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cuda_fast_compile, Options::CudaFastCompile::Mid);
  EXPECT_EQ(o->fallback, Options::FallbackPolicy::Error);
  o = Options::from_desc(Desc(Desc::Dict{{"cpu_compiler", "gxx"}, {"fuse", false}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cpu_compiler, Options::CpuCompiler::Gxx);
  EXPECT_FALSE(o->fuse);
  EXPECT_FALSE(o->background_compile);
  o = Options::from_desc(Desc(Desc::Dict{{"background_compile", true}}));
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->background_compile);
  o = Options::from_desc(Desc(Desc::Dict{{"background_compile", "yes"}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("option 'background_compile' must be a bool"), std::string::npos);
}

}  // namespace
}  // namespace cppi
