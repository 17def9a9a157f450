// Helpers shared by the compiler tests.
#pragma once

#include <string>
#include <vector>

#include "cpu_codegen/jit/compiler.h"

namespace cppi::cpu::test {

/// Points CPPINDUCTOR_CACHE_DIR at a fresh private temp dir for the process,
/// so tests never touch the user's cache. Returns the dir.
const std::string& use_temp_cache_dir();

/// Resident set size of this process in bytes (from /proc/self/statm).
size_t rss_bytes();

/// The compilers this build can run (ClangJit only with CPPINDUCTOR_CPU_JIT).
std::vector<CompileOptions::Compiler> available_compilers();
const char* name(CompileOptions::Compiler c);

CompileOptions options_for(CompileOptions::Compiler c);

}  // namespace cppi::cpu::test
