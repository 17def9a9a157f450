#include "test_util.h"

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <fstream>

namespace cppi::cpu::test {

namespace {
std::string g_temp_cache_dir;

void remove_temp_cache_dir() {
  nftw(g_temp_cache_dir.c_str(),
       [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
       FTW_DEPTH | FTW_PHYS);
}
}  // namespace

const std::string& use_temp_cache_dir() {
  static const bool once = [] {
    char pattern[] = "/tmp/cppi-cache-test-XXXXXX";  // mkdtemp makes it 0700
    g_temp_cache_dir = mkdtemp(pattern);
    setenv("CPPINDUCTOR_CACHE_DIR", g_temp_cache_dir.c_str(), 1);
    std::atexit(remove_temp_cache_dir);
    return true;
  }();
  (void)once;
  return g_temp_cache_dir;
}

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * size_t(sysconf(_SC_PAGESIZE));
}

std::vector<CompileOptions::Compiler> available_compilers() {
  std::vector<CompileOptions::Compiler> out;
  if (has_clang_jit()) out.push_back(CompileOptions::Compiler::ClangJit);
  out.push_back(CompileOptions::Compiler::Gxx);
  return out;
}

const char* name(CompileOptions::Compiler c) {
  return c == CompileOptions::Compiler::ClangJit ? "ClangJit" : "Gxx";
}

CompileOptions options_for(CompileOptions::Compiler c) {
  CompileOptions o;
  o.compiler = c;
  return o;
}

}  // namespace cppi::cpu::test
