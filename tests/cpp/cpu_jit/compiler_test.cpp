// compile_cpp end to end, for each compiler this build has: kernels run and
// agree, errors come back as values with diagnostics, caches hit, the cache
// directory policy holds.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "cpu_codegen/jit/compiler.h"
#include "support/cpu_isa.h"
#include "cpu_codegen/jit/prefault.h"
#include "support/disk_cache.h"
#include "cpu_codegen/jit/runtime.h"
#include "test_util.h"

namespace cppi::cpu {
namespace {

using Compiler = CompileOptions::Compiler;

const char* k_pointwise = R"(
#include "cppinductor_prelude.h"
extern "C" void gelu_like(const float* x, float* out, int64_t n) {
  cppi_parallel_for(0, n, 256, [&](int64_t b, int64_t e) {
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {
      cppi_f32x16 v = cppi_vload<cppi_f32x16>(x + i);
      cppi_f32x16 r = v * 0.5f * (1.0f + cppi_erf(v * 0.70710678f)) + cppi_tanh(v) * cppi_exp(-v * v);
      cppi_vstore(out + i, cppi_max(r, cppi_vsplat<cppi_f32x16>(-1.0f)));
    }
    CPPI_NO_AUTOVEC for (; i < e; ++i) {
      float v = x[i];
      float r = v * 0.5f * (1.0f + cppi_erf(v * 0.70710678f)) + cppi_tanh(v) * cppi_exp(-v * v);
      out[i] = cppi_max(r, -1.0f);
    }
  });
}
extern "C" float sum(const float* x, int64_t n) {
  return cppi_parallel_reduce(0, n, 1024, 0.0f,
      [&](int64_t b, int64_t e, float acc) { for (int64_t i = b; i < e; ++i) acc += x[i]; return acc; },
      [](float a, float b) { return a + b; });
}
extern "C" void bf16_roundtrip(const float* x, cppi_bf16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = cppi_float_to_bf16(x[i]);
}
extern "C" int64_t answer = 42;
)";

class CompilerTest : public ::testing::TestWithParam<Compiler> {
 protected:
  void SetUp() override { test::use_temp_cache_dir(); }
  CompileOptions options() const { return test::options_for(GetParam()); }
};

std::vector<float> test_inputs(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(int(i % 97) - 48) * 0.1f;
  x[5] = NAN, x[6] = INFINITY, x[7] = -INFINITY;
  return x;
}

TEST_P(CompilerTest, CompilesAndRunsAKernel) {
  auto m = compile_cpp(k_pointwise, options());
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto* gelu = reinterpret_cast<void (*)(const float*, float*, int64_t)>((*m)->lookup("gelu_like"));
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ((*m)->lookup("no_such_kernel"), nullptr);
  EXPECT_EQ(*static_cast<int64_t*>((*m)->lookup("answer")), 42);
  EXPECT_EQ((*m)->compiler(), GetParam());
  EXPECT_EQ((*m)->key().size(), 64u);

  std::vector<float> x = test_inputs(10007), out(x.size());
  gelu(x.data(), out.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    float v = x[i];
    float want = std::max(v * 0.5f * (1.0f + std::erf(v * 0.70710678f)) + std::tanh(v) * std::exp(-v * v), -1.0f);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(out[i])) << i;
    } else if (std::isinf(v)) {
      EXPECT_TRUE(std::isnan(out[i]) || out[i] == want) << i;  // inf * 0 terms
    } else {
      EXPECT_NEAR(out[i], want, 1e-5f + 1e-5f * std::fabs(want)) << "x=" << v;
    }
  }
}

// Same bits from both compilers (NaN sign/payload aside, which IEEE leaves open).
TEST_P(CompilerTest, CompilersAgreeBitForBit) {
  if (!has_clang_jit()) GTEST_SKIP() << "only g++ in this build";
  CompileOptions jit = options(), gxx = options();
  jit.compiler = Compiler::ClangJit;
  gxx.compiler = Compiler::Gxx;
  auto a = compile_cpp(k_pointwise, jit);
  auto b = compile_cpp(k_pointwise, gxx);
  ASSERT_TRUE(a.ok() && b.ok());
  using Fn = void (*)(const float*, float*, int64_t);
  std::vector<float> x = test_inputs(4099), out_a(x.size()), out_b(x.size());
  reinterpret_cast<Fn>((*a)->lookup("gelu_like"))(x.data(), out_a.data(), int64_t(x.size()));
  reinterpret_cast<Fn>((*b)->lookup("gelu_like"))(x.data(), out_b.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&out_a[i], &out_b[i], 4) != 0 && !(std::isnan(out_a[i]) && std::isnan(out_b[i]))) {
      ADD_FAILURE() << "first difference at " << i << ": x=" << x[i] << " jit=" << out_a[i]
                    << " g++=" << out_b[i];
      break;
    }
  using Sum = float (*)(const float*, int64_t);
  float sa = reinterpret_cast<Sum>((*a)->lookup("sum"))(x.data() + 8, 4000);
  float sb = reinterpret_cast<Sum>((*b)->lookup("sum"))(x.data() + 8, 4000);
  EXPECT_EQ(sa, sb);
  using Bf = void (*)(const float*, uint16_t*, int64_t);
  std::vector<uint16_t> bf_a(x.size()), bf_b(x.size());
  reinterpret_cast<Bf>((*a)->lookup("bf16_roundtrip"))(x.data(), bf_a.data(), int64_t(x.size()));
  reinterpret_cast<Bf>((*b)->lookup("bf16_roundtrip"))(x.data(), bf_b.data(), int64_t(x.size()));
  EXPECT_EQ(bf_a, bf_b);
}

// LLVM 16's loop vectoriser turned these loops into stride-3 load groups
// that ignore the wrap at 64 (lanes read in[66], in[69] for in[2], in[5]);
// the JIT forms no interleave groups.
TEST_P(CompilerTest, WrappingStridedIndexIsNotVectorisedWrongly) {
  auto m = compile_cpp(R"(
#include "cppinductor_prelude.h"
extern "C" void wrap(const float* in, float* out) {
  for (int64_t i = 0; i < 64; ++i) out[i] = in[(i * 3) % 64];
}
extern "C" void wrap_positive(const float* in, bool* out) {
  for (int64_t i = 0; i < 64; ++i) out[i] = in[(i * 3) % 64] > 0.0f;
}
)", options());
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto* wrap = reinterpret_cast<void (*)(const float*, float*)>((*m)->lookup("wrap"));
  auto* positive = reinterpret_cast<void (*)(const float*, bool*)>((*m)->lookup("wrap_positive"));
  std::vector<float> in(256), out(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  wrap(in.data(), out.data());
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(out[i], float((i * 3) % 64)) << i;
  for (size_t i = 0; i < in.size(); ++i) in[i] = i < 64 ? -1.0f : 1.0f;  // past the wrap: positive
  bool flags[64];
  positive(in.data(), flags);
  for (int64_t i = 0; i < 64; ++i) EXPECT_FALSE(flags[i]) << i;
}

TEST_P(CompilerTest, ParallelKernelCoversEveryIndexOnce) {
  const char* src = R"(
#include "cppinductor_prelude.h"
extern "C" void count(int32_t* hits, int64_t n, int64_t grain) {
  cppi_parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
  });
}
)";
  auto m = compile_cpp(src, options());
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto* count = reinterpret_cast<void (*)(int32_t*, int64_t, int64_t)>((*m)->lookup("count"));
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    for (int64_t n : {1, 100, 12345}) {
      std::vector<int32_t> hits(size_t(n), 0);
      count(hits.data(), n, 7);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << threads << " " << n << " " << i;
    }
  }
  set_num_threads(0);
}

/// Compiles, with `o`, a probe of the prelude's natural float width and
/// its exp over 16 lanes: 8 lanes (the AVX2 paths), and exp's values.
/// Returns the module's cache key (empty when it did not compile).
std::string expect_avx2_prelude(const CompileOptions& o) {
  auto m = compile_cpp("#include \"cppinductor_prelude.h\"\n"
                       "extern \"C\" int lanes() { return CPPI_VF32_LANES; }\n"
                       "extern \"C\" void e(float* x) { cppi_vstore(x, cppi_exp(cppi_vload<cppi_f32x16>(x))); }\n",
                       o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return "";
  EXPECT_EQ(reinterpret_cast<int (*)()>((*m)->lookup("lanes"))(), 8);
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = float(i) - 8;
  reinterpret_cast<void (*)(float*)>((*m)->lookup("e"))(x);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(x[i], std::exp(float(i) - 8), 1e-6f * std::exp(float(i) - 8));
  return (*m)->key();
}

TEST_P(CompilerTest, Avx512OffCompilesTheHostsAvx2Paths) {
  // cpu_isa="avx2": on an AVX-512 host the prelude's 8-lane paths, which
  // must run there; on an AVX2 host the same code as without.
  if (host_cpu_isas().empty()) GTEST_SKIP() << "the host's CPU runs no AVX2";
  CompileOptions o = options();
  o.avx512_off = true;
  const std::string avx2_key = expect_avx2_prelude(o);
  o.avx512_off = false;
  auto native = compile_cpp("#include \"cppinductor_prelude.h\"\n"
                            "extern \"C\" int lanes() { return CPPI_VF32_LANES; }\n", o);
  ASSERT_TRUE(native.ok()) << native.error().message;
  EXPECT_EQ(reinterpret_cast<int (*)()>((*native)->lookup("lanes"))(),
            host_cpu_isas().front() == CpuIsa::Avx512 ? 16 : 8);
  EXPECT_NE((*native)->key(), avx2_key);
}

TEST_P(CompilerTest, CompileErrorsComeBackWithDiagnostics) {
  auto m = compile_cpp("#include \"cppinductor_prelude.h\"\n"
                       "extern \"C\" void k(float* x) { x[0] = undeclared_thing + 1; }\n",
                       options());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::CompileFailed);
  EXPECT_NE(m.error().message.find("undeclared_thing"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("error"), std::string::npos) << m.error().message;
  EXPECT_GE(compiler_stats().compile_errors, 1u);
}

TEST_P(CompilerTest, MissingFunctionIsALinkError) {
  auto m = compile_cpp("extern \"C\" void not_defined_anywhere_xyz(float*);\n"
                       "extern \"C\" void k(float* x) { not_defined_anywhere_xyz(x); }\n",
                       options());
  // g++ -shared allows undefined symbols and dlopen(RTLD_NOW) refuses them;
  // the JIT resolves every symbol before compile_cpp returns.
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("not_defined_anywhere_xyz"), std::string::npos) << m.error().message;
}

TEST_P(CompilerTest, SameSourceCompilesOnceWhileAlive) {
  const std::string src = std::string(k_pointwise) + "// memory cache test\n";
  reset_compiler_stats();
  auto a = compile_cpp(src, options());
  ASSERT_TRUE(a.ok());
  auto b = compile_cpp(src, options());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  CompilerStats s = compiler_stats();
  EXPECT_EQ(s.memory_cache_hits, 1u);
  EXPECT_EQ(s.modules_compiled + s.disk_cache_hits, 1u);

  CompileOptions other = options();
  other.defines = {"SOMETHING=1"};
  auto c = compile_cpp(src, other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_NE((*a)->key(), (*c)->key());
}

TEST_P(CompilerTest, FirstHeaderIsServedAndKeysTheModule) {
  // A source including a header of its own first, which includes the
  // prelude (generated modules do this with their support functions): the
  // header comes from memory, and two texts of it are two modules.
  const std::string src = "#include \"test_first_header.h\"\n"
                          "extern \"C\" float twice_exp(float x) { return times(cppi_exp(x)); }\n";
  auto with = [&](const char* factor) {
    CompileOptions o = options();
    o.first_header = SourceHeader{"test_first_header.h",
                                  cat("#pragma once\n#include \"cppinductor_prelude.h\"\n"
                                      "static inline float times(float x) { return x * ", factor, ".0f; }\n")};
    return o;
  };
  auto a = compile_cpp(src, with("2"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = compile_cpp(src, with("3"));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_NE((*a)->key(), (*b)->key());
  auto fa = reinterpret_cast<float (*)(float)>((*a)->lookup("twice_exp"));
  auto fb = reinterpret_cast<float (*)(float)>((*b)->lookup("twice_exp"));
  ASSERT_TRUE(fa && fb);
  EXPECT_FLOAT_EQ(fa(1.0f), 2.0f * std::exp(1.0f));
  EXPECT_FLOAT_EQ(fb(1.0f), 3.0f * std::exp(1.0f));
  // Without it the include is an error, not a silent fallback.
  EXPECT_FALSE(compile_cpp(src, options()).ok());
}

TEST_P(CompilerTest, DiskCacheHitAfterModuleDies) {
  const std::string src = std::string(k_pointwise) + "// disk cache test\n";
  CompileOptions o = options();
  o.memory_cache = false;
  {
    auto a = compile_cpp(src, o);
    ASSERT_TRUE(a.ok());
  }
  reset_compiler_stats();
  auto b = compile_cpp(src, o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->origin(), CompiledModule::Origin::DiskCache);
  EXPECT_EQ(compiler_stats().disk_cache_hits, 1u);
  EXPECT_EQ(compiler_stats().modules_compiled, 0u);
  auto* gelu = reinterpret_cast<void (*)(const float*, float*, int64_t)>((*b)->lookup("gelu_like"));
  ASSERT_NE(gelu, nullptr);
  float x[3] = {0.0f, 1.0f, -1.0f}, y[3];
  gelu(x, y, 3);
  EXPECT_EQ(y[0], 0.0f);
}

TEST_P(CompilerTest, CorruptDiskEntryIsRebuilt) {
  const std::string src = std::string(k_pointwise) + "// corrupt entry test\n";
  CompileOptions o = options();
  o.memory_cache = false;
  std::string key;
  {
    auto a = compile_cpp(src, o);
    ASSERT_TRUE(a.ok());
    key = (*a)->key();
  }
  const std::string path = test::use_temp_cache_dir() + "/" + key + (GetParam() == Compiler::Gxx ? ".so" : ".o");
  ASSERT_EQ(access(path.c_str(), F_OK), 0) << path;
  {  // flip a byte in the middle
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  reset_compiler_stats();
  auto b = compile_cpp(src, o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ((*b)->origin(), CompiledModule::Origin::Compiled);
  EXPECT_EQ(compiler_stats().disk_cache_corrupt, 1u);
  EXPECT_NE((*b)->lookup("gelu_like"), nullptr);
  bool corrupt = true;
  EXPECT_TRUE(read_cache_entry(path, &corrupt).has_value());  // rewritten
  EXPECT_FALSE(corrupt);
}

TEST_P(CompilerTest, SystemHeadersAreNotAvailable) {
  // Kernels see the in-memory prelude only; this keeps compiles fast and
  // hermetic (the g++ path could find <cmath>, the JIT cannot).
  if (GetParam() == Compiler::Gxx) GTEST_SKIP();
  auto m = compile_cpp("#include <cmath>\nextern \"C\" float f(float x) { return std::exp(x); }\n", options());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("cmath"), std::string::npos) << m.error().message;
}

TEST_P(CompilerTest, ConcurrentCompiles) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        std::string src = "#include \"cppinductor_prelude.h\"\nextern \"C\" int f(int x) { return x + " +
                          std::to_string(t * 100 + i) + "; }\n";
        auto m = compile_cpp(src, options());
        if (m.ok() && reinterpret_cast<int (*)(int)>((*m)->lookup("f"))(1) == t * 100 + i + 1) ++ok;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 12);
}

TEST_P(CompilerTest, StageTimingsAreRecorded) {
  CompileOptions o = options();
  o.memory_cache = o.disk_cache = false;
  auto m = compile_cpp("extern \"C\" int f(int x) { return x * 3; }\n", o);
  ASSERT_TRUE(m.ok());
  const CompileTimings& t = (*m)->timings();
  EXPECT_GT(t.codegen_ms, 0.0);
  EXPECT_GT(t.total_ms, 0.0);
  if (GetParam() == Compiler::ClangJit) {
    EXPECT_GT(t.frontend_ms, 0.0);
    EXPECT_GT(t.optimize_ms, 0.0);
  }
}

TEST_P(CompilerTest, DebugAndUnoptimisedBuildsRun) {
  for (int level : {0, 1, 3}) {
    for (bool debug : {false, true}) {
      CompileOptions o = options();
      o.opt_level = level;
      o.debug_symbols = debug;
      o.disk_cache = false;
      auto m = compile_cpp(k_pointwise, o);
      ASSERT_TRUE(m.ok()) << "O" << level << " debug=" << debug << ": " << m.error().message;
      using Sum = float (*)(const float*, int64_t);
      std::vector<float> x(5000, 0.5f);
      EXPECT_EQ(reinterpret_cast<Sum>((*m)->lookup("sum"))(x.data(), 5000), 2500.0f);
    }
  }
}

TEST_P(CompilerTest, WithoutLoopUnrollingTheModuleRunsAndIsKeyedApart) {
  CompileOptions o = options();
  o.disk_cache = false;
  auto unrolled = compile_cpp(k_pointwise, o);
  o.unroll_loops = false;
  auto rolled = compile_cpp(k_pointwise, o);
  ASSERT_TRUE(unrolled.ok() && rolled.ok());
  EXPECT_NE((*rolled)->key(), (*unrolled)->key());
  using Sum = float (*)(const float*, int64_t);
  std::vector<float> x(5000, 0.5f);
  EXPECT_EQ(reinterpret_cast<Sum>((*rolled)->lookup("sum"))(x.data(), 5000), 2500.0f);
}

INSTANTIATE_TEST_SUITE_P(Compilers, CompilerTest, ::testing::ValuesIn(test::available_compilers()),
                         [](const auto& info) { return std::string(test::name(info.param)); });

TEST(CompilerOptions, DefaultCompilerMatchesBuild) {
#if defined(CPPINDUCTOR_CPU_JIT)
  EXPECT_EQ(default_compiler(), Compiler::ClangJit);
#else
  EXPECT_EQ(default_compiler(), Compiler::Gxx);
#endif
}

TEST(CompilerOptions, ClangJitWithoutTheJitIsUnsupported) {
  if (has_clang_jit()) GTEST_SKIP() << "this build has the JIT";
  CompileOptions o;
  EXPECT_EQ(o.compiler, Compiler::Gxx);  // the default follows the build
  o.compiler = Compiler::ClangJit;
  auto m = compile_cpp("extern \"C\" int f() { return 1; }\n", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::Unsupported);
}

#if defined(CPPINDUCTOR_CPU_JIT)
TEST(CompilerOptions, PerfMapNamesJitKernels) {
  setenv("CPPINDUCTOR_PERF_MAP", "1", 1);
  CompileOptions o;
  o.disk_cache = false;
  // A local function that stays one (its address escapes) is listed too, at
  // its own address: a parallel kernel's time is mostly in its loop body.
  auto m = compile_cpp("static __attribute__((noinline)) int perf_map_probe_body(int x) { return x * 7; }\n"
                       "extern \"C\" void* perf_map_probe_address() { return (void*)&perf_map_probe_body; }\n"
                       "extern \"C\" int perf_map_probe_kernel(int x) { return perf_map_probe_body(x) + 1; }\n",
                       o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::ifstream map("/tmp/perf-" + std::to_string(getpid()) + ".map");
  std::string text((std::istreambuf_iterator<char>(map)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(" perf_map_probe_kernel"), std::string::npos) << text;
  const void* body = reinterpret_cast<void* (*)()>((*m)->lookup("perf_map_probe_address"))();
  char line[64];
  std::snprintf(line, sizeof line, "%llx ", (unsigned long long)(uintptr_t)body);
  const size_t at = text.find(line);
  ASSERT_NE(at, std::string::npos) << line << "\n" << text;
  EXPECT_NE(text.find("perf_map_probe_body", at), std::string::npos) << text;
  unsetenv("CPPINDUCTOR_PERF_MAP");
  unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}
#endif

TEST(CompilerOptions, BadOptLevelIsRefused) {
  CompileOptions o;
  o.opt_level = 7;
  auto m = compile_cpp("", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::InvalidInput);
}

TEST(CompilerOptions, PreludeIsEmbedded) {
  EXPECT_NE(prelude_source().find("cppi_parallel_for"), std::string::npos);
  EXPECT_EQ(prelude_hash().size(), 64u);
}

#if defined(CPPINDUCTOR_CPU_JIT)
TEST(CompilerOptions, OtherTargetCpuCompiles) {
  // An AVX2-only target on any x86-64 host: the 8-wide paths of the prelude.
  CompileOptions o;
  o.target_cpu = "haswell";
  o.disk_cache = false;
  expect_avx2_prelude(o);

  o.target_cpu = "not-a-cpu";
  auto bad = compile_cpp("extern \"C\" int f() { return 1; }\n", o);
  ASSERT_FALSE(bad.ok());
}
#endif

class CacheDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cppi-cachedir-test-XXXXXX";
    root_ = mkdtemp(pattern);
    saved_ = getenv("CPPINDUCTOR_CACHE_DIR") ? getenv("CPPINDUCTOR_CACHE_DIR") : "";
  }
  void TearDown() override {
    if (saved_.empty()) unsetenv("CPPINDUCTOR_CACHE_DIR");
    else setenv("CPPINDUCTOR_CACHE_DIR", saved_.c_str(), 1);
    std::string cmd = "chmod -R u+rwx '" + root_ + "' 2>/dev/null; rm -rf '" + root_ + "'";
    (void)!std::system(cmd.c_str());
  }
  std::string root_, saved_;
};

TEST_F(CacheDirTest, CreatesPrivateDirectory) {
  std::string dir = root_ + "/a/b/cache";
  setenv("CPPINDUCTOR_CACHE_DIR", dir.c_str(), 1);
  auto d = cache_dir();
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(*d, dir);
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CacheDirTest, RefusesWorldWritableDirectory) {
  std::string dir = root_ + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  setenv("CPPINDUCTOR_CACHE_DIR", dir.c_str(), 1);
  auto d = cache_dir();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("writable by group or others"), std::string::npos);
  // compile_cpp reports it instead of loading code from there.
  CompileOptions o;
  o.compiler = Compiler::Gxx;
  auto m = compile_cpp("extern \"C\" int f() { return 1; }\n", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::InvalidInput);
  // ... unless the disk cache is off.
  o.disk_cache = false;
  EXPECT_TRUE(compile_cpp("extern \"C\" int f() { return 1; }\n", o).ok());
}

TEST_F(CacheDirTest, RefusesDirectoryOwnedByAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  std::string dir = root_ + "/theirs";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
  setenv("CPPINDUCTOR_CACHE_DIR", dir.c_str(), 1);
  auto d = cache_dir();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("owned by uid 65534"), std::string::npos) << d.error().message;
}

TEST_F(CacheDirTest, RefusesSymlinkAndRelativePath) {
  std::string real = root_ + "/real", link = root_ + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ensure_private_dir(link).ok());
  EXPECT_FALSE(ensure_private_dir("relative/dir").ok());
}

TEST(DiskCacheEntry, RoundTripAndTruncation) {
  std::string dir = test::use_temp_cache_dir();
  std::string path = dir + "/entry-test.bin";
  std::string payload(10000, 'x');
  payload[123] = '\0';
  ASSERT_TRUE(write_cache_entry(path, payload).ok());
  bool corrupt = true;
  auto back = read_cache_entry(path, &corrupt);
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(corrupt);
  EXPECT_EQ(*back, payload);
  ASSERT_EQ(truncate(path.c_str(), 5000), 0);
  EXPECT_FALSE(read_cache_entry(path, &corrupt).has_value());
  EXPECT_TRUE(corrupt);
  EXPECT_FALSE(read_cache_entry(dir + "/missing", &corrupt).has_value());
  EXPECT_FALSE(corrupt);
}

}  // namespace
}  // namespace cppi::cpu

namespace cppi::cpu {
namespace {

TEST(ParallelRuntime, RefusesLibrariesThatAreNotLibgomp) {
  Status missing = set_openmp_library("/nonexistent/libgomp.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot load"), std::string::npos);
  Status not_gomp = set_openmp_library("libm.so.6");
  ASSERT_FALSE(not_gomp.ok());
  EXPECT_NE(not_gomp.error().message.find("not a libgomp"), std::string::npos);
}

TEST(ParallelRuntime, ThreadCountIsSettable) {
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(0);
  EXPECT_GE(get_num_threads(), 1);  // the OpenMP default (or 1 without libgomp)
  if (!openmp_library().empty()) {
    // Naming the library already in use is accepted even after loops ran.
    EXPECT_TRUE(set_openmp_library(openmp_library()).ok());
  }
}

// Pages of [p, p + bytes) that are resident.
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  EXPECT_EQ(mincore(p, bytes, v.data()), 0);
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(Prefault, FaultsInAFreshMappingAndLeavesContentsAlone) {
  const size_t bytes = 8u << 20, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(resident_pages(p, bytes), 0u);
  prefault_for_write(p, kMinPrefaultBytes - 1);  // too small to be worth it
  EXPECT_EQ(resident_pages(p, bytes), 0u);
  // An unaligned range: only the whole pages inside it.
  prefault_for_write(p + 100, static_cast<int64_t>(bytes / 2));
  const size_t expected = (bytes / 2 + 100) / page - 1;
  if (resident_pages(p, bytes) == 0) {
    munmap(p, bytes);
    GTEST_SKIP() << "MADV_POPULATE_WRITE unsupported by this kernel (< 5.14): prefaulting is a no-op";
  }
  EXPECT_EQ(resident_pages(p, bytes), expected);
  EXPECT_EQ(resident_pages(p, page), 0u);  // the partial first page is left alone
  for (size_t i = 0; i < bytes; i += page) EXPECT_EQ(p[i], 0) << i;
  // Resident memory (recycled by an allocator) keeps its contents and is skipped.
  std::memset(p + bytes / 2, 7, bytes / 2);
  prefault_for_write(p + bytes / 2, static_cast<int64_t>(bytes / 2));
  for (size_t i = bytes / 2; i < bytes; i += page) EXPECT_EQ(p[i], 7) << i;
  munmap(p, bytes);
}

}  // namespace
}  // namespace cppi::cpu
