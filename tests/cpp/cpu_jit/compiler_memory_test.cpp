// Memory stays flat over many compile/free cycles: every module's code, its
// JITDylib (or dlopen handle) and the compiler's per-compile state are freed.
#include <gtest/gtest.h>

#include <cstdio>

#include "cpu_codegen/jit/compiler.h"
#include "test_util.h"

namespace cppi::cpu {
namespace {

std::string unique_kernel(int i) {
  // Unique names and constants: no cache hits, new symbols every time.
  return "#include \"cppinductor_prelude.h\"\n"
         "extern \"C\" void kernel_" + std::to_string(i) + "(const float* x, float* y, int64_t n) {\n"
         "  cppi_parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {\n"
         "    for (int64_t j = b; j < e; ++j) y[j] = cppi_exp(x[j]) + " + std::to_string(i) + ".0f;\n"
         "  });\n}\n";
}

void compile_and_free(CompileOptions::Compiler compiler, int first, int count) {
  CompileOptions o;
  o.compiler = compiler;
  o.disk_cache = false;
  for (int i = first; i < first + count; ++i) {
    auto m = compile_cpp(unique_kernel(i), o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto* k = reinterpret_cast<void (*)(const float*, float*, int64_t)>(
        (*m)->lookup("kernel_" + std::to_string(i)));
    ASSERT_NE(k, nullptr);
    float x[4] = {0, 0, 0, 0}, y[4];
    k(x, y, 4);
    ASSERT_EQ(y[3], 1.0f + float(i));
  }
}

TEST(CompilerMemory, JitStaysFlatOver300Modules) {
  if (!has_clang_jit()) GTEST_SKIP();
  compile_and_free(CompileOptions::Compiler::ClangJit, 0, 40);  // warm up allocators
  const size_t before = test::rss_bytes();
  for (int batch = 0; batch < 3; ++batch) {
    const size_t b = test::rss_bytes();
    compile_and_free(CompileOptions::Compiler::ClangJit, 1000 + 100 * batch, 100);
    std::printf("  batch %d: +%.2f MB\n", batch, (double(test::rss_bytes()) - double(b)) / (1 << 20));
  }
  const size_t after = test::rss_bytes();
  const double growth_mb = (double(after) - double(before)) / (1 << 20);
  std::printf("RSS before %.1f MB, after 300 JIT modules %.1f MB (growth %.2f MB)\n",
              before / 1048576.0, after / 1048576.0, growth_mb);
  // LLVM 16 kept one page per removed module before ReleaseMemoryOnRemovePlugin
  // (clang_jit.cpp): 1.2 MB per 100 modules here. Now it is flat.
  EXPECT_LT(growth_mb, 1.5);
}

TEST(CompilerMemory, GxxStaysFlatOver40Modules) {
  compile_and_free(CompileOptions::Compiler::Gxx, 5000, 5);
  const size_t before = test::rss_bytes();
  compile_and_free(CompileOptions::Compiler::Gxx, 6000, 40);
  const size_t after = test::rss_bytes();
  const double growth_mb = (double(after) - double(before)) / (1 << 20);
  std::printf("RSS growth over 40 g++ modules: %.2f MB\n", growth_mb);
  EXPECT_LT(growth_mb, 4.0);
}

}  // namespace
}  // namespace cppi::cpu
