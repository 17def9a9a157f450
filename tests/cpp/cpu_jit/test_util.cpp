#include "test_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

namespace cppi::cpu::test {

const std::string& use_temp_cache_dir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/cppi-cache-test-XXXXXX";  // mkdtemp makes it 0700
    std::string d = mkdtemp(pattern);
    setenv("CPPINDUCTOR_CACHE_DIR", d.c_str(), 1);
    return d;
  }();
  return dir;
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
