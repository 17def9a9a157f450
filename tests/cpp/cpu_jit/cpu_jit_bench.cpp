// Prints how long compile_cpp takes for a small kernel: cold (first in the
// process) and warm, for each compiler, plus a JIT object-cache hit.
// Not a test; run by hand: ./cpu_jit_bench [iterations]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/jit/runtime.h"

using namespace cppi::cpu;

namespace {

// A typical fused pointwise kernel: vector body with SLEEF exp, scalar tail,
// outer parallel loop. `salt` makes each source unique (no cache hits).
std::string kernel_source(int salt) {
  return "#include \"cppinductor_prelude.h\"\n"
         "extern \"C\" void kernel_" + std::to_string(salt) +
         "(const float* in0, const float* in1, float* out0, int64_t n) {\n"
         "  cppi_parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {\n"
         "    int64_t i = b;\n"
         "    for (; i + CPPI_VF32_LANES <= e; i += CPPI_VF32_LANES) {\n"
         "      cppi_vf32 x = cppi_vload<cppi_vf32>(in0 + i), y = cppi_vload<cppi_vf32>(in1 + i);\n"
         "      cppi_vstore(out0 + i, cppi_max(cppi_exp(x) * y, cppi_vsplat<cppi_vf32>(0.0f)) + " +
         std::to_string(salt) + ".0f);\n"
         "    }\n"
         "    CPPI_NO_AUTOVEC for (; i < e; ++i) out0[i] = cppi_max(cppi_exp(in0[i]) * in1[i], 0.0f) + " +
         std::to_string(salt) + ".0f;\n"
         "  });\n"
         "}\n";
}

// A trivial function, with or without the prelude: what parsing it costs.
std::string trivial_source(int salt, bool prelude) {
  return std::string(prelude ? "#include \"cppinductor_prelude.h\"\n" : "") +
         "extern \"C\" int f_" + std::to_string(salt) + "(int x) { return x + " + std::to_string(salt) + "; }\n";
}

struct Result {
  double total = 0, cpu = 0, frontend = 0, optimize = 0, codegen = 0, link = 0;
};

Result time_compile(CompileOptions options, int salt, int kind = 0) {
  auto m = compile_cpp(kind == 0 ? kernel_source(salt) : trivial_source(salt, kind == 2), options);
  if (!m) {
    std::fprintf(stderr, "compile failed: %s\n", m.error().message.c_str());
    std::exit(1);
  }
  const CompileTimings& t = (*m)->timings();
  return {t.total_ms, t.cpu_ms, t.frontend_ms, t.optimize_ms, t.codegen_ms, t.link_ms};
}

void report(const char* label, const std::vector<Result>& rs) {
  Result avg;
  for (const auto& r : rs) {
    avg.total += r.total / rs.size(), avg.cpu += r.cpu / rs.size(), avg.frontend += r.frontend / rs.size();
    avg.optimize += r.optimize / rs.size(), avg.codegen += r.codegen / rs.size();
    avg.link += r.link / rs.size();
  }
  std::printf("%-24s %7.2f ms wall %7.2f ms cpu  (frontend %.2f, optimize %.2f, codegen %.2f, link/load %.2f)  n=%zu\n",
              label, avg.total, avg.cpu, avg.frontend, avg.optimize, avg.codegen, avg.link, rs.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
  char dir[] = "/tmp/cppi-bench-cache-XXXXXX";
  setenv("CPPINDUCTOR_CACHE_DIR", mkdtemp(dir), 1);
  std::printf("target: %s\nopenmp: %s, threads %d\n", host_target_description().c_str(),
              openmp_library().c_str(), get_num_threads());
  int salt = 0;
  for (auto compiler : {CompileOptions::Compiler::ClangJit, CompileOptions::Compiler::Gxx}) {
    if (compiler == CompileOptions::Compiler::ClangJit && !has_clang_jit()) continue;
    const char* name = compiler == CompileOptions::Compiler::ClangJit ? "clang-jit" : "g++";
    CompileOptions fresh;
    fresh.compiler = compiler;
    fresh.memory_cache = false;
    fresh.disk_cache = false;
    std::printf("\n%s\n", name);
    report("  cold (first compile)", {time_compile(fresh, salt++)});
    std::vector<Result> warm;
    const int n = compiler == CompileOptions::Compiler::Gxx ? std::max(1, iterations / 4) : iterations;
    for (int i = 0; i < n; ++i) warm.push_back(time_compile(fresh, salt++));
    report("  warm, no cache", warm);
    for (int kind : {1, 2}) {
      std::vector<Result> trivial;
      for (int i = 0; i < n; ++i) trivial.push_back(time_compile(fresh, salt++, kind));
      report(kind == 1 ? "  trivial, no prelude" : "  trivial, with prelude", trivial);
    }

    CompileOptions cached = fresh;
    cached.disk_cache = true;
    std::vector<Result> hits;
    const int first = salt;
    for (int i = 0; i < n; ++i) time_compile(cached, salt++);  // populate
    const uint64_t disk_hits_before = compiler_stats().disk_cache_hits;
    for (int i = 0; i < n; ++i) hits.push_back(time_compile(cached, first + i));
    report("  disk cache hit", hits);
    if (compiler_stats().disk_cache_hits - disk_hits_before != uint64_t(n))
      std::printf("  (warning: only %llu of %d were disk hits)\n",
                  (unsigned long long)(compiler_stats().disk_cache_hits - disk_hits_before), n);
  }
  std::string cleanup = std::string("rm -rf '") + dir + "'";
  (void)!std::system(cleanup.c_str());
  return 0;
}
