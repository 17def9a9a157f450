/// \file
/// Internal interface between compile_cpp (options, keys, caches, stats) and
/// the two compilers behind it. Not a public header.
#pragma once

#include <memory>
#include <string>

#include "cpu_codegen/jit/compiler.h"

namespace cppi::cpu {

/// Lets compile_cpp fill in the bookkeeping fields of a module.
struct ModuleAccess {
  static void set(CompiledModule& m, CompileOptions::Compiler compiler,
                  CompiledModule::Origin origin, const CompileTimings& timings, std::string key) {
    m.compiler_ = compiler;
    m.origin_ = origin;
    m.timings_ = timings;
    m.key_ = std::move(key);
  }
};

struct BackendRequest {
  const std::string& source;
  const CompileOptions& options;
  const std::string& key;
  std::string cache_dir;  // empty: no disk cache
};

struct BackendResult {
  std::shared_ptr<CompiledModule> module;
  CompileTimings timings;
  bool disk_hit = false;
  bool disk_corrupt = false;  // an entry existed but failed verification
};

Expected<BackendResult> compile_with_gxx(const BackendRequest& request);
/// What makes g++ output differ between machines: compiler version, target.
std::string gxx_target_id(const CompileOptions& options);

#if defined(CPPINDUCTOR_CPU_JIT)
Expected<BackendResult> compile_with_clang_jit(const BackendRequest& request);
std::string clang_jit_target_id(const CompileOptions& options);
#endif

/// Path of the loaded libsleef (empty if none), found once per process.
const std::string& sleef_library_path();

/// Milliseconds since an arbitrary epoch (steady clock).
double now_ms();
/// CPU time of the calling thread, in milliseconds.
double thread_cpu_ms();

}  // namespace cppi::cpu
