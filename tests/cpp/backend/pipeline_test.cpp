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
}

}  // namespace
}  // namespace cppi
