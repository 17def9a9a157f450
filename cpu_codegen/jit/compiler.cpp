/// \file
/// compile_cpp: option checks, cache keys, the in-memory and on-disk caches,
/// process-wide statistics; the compilers themselves live in gxx.cpp and
/// clang_jit.cpp.
#include "cpu_codegen/jit/compiler.h"

#include <dlfcn.h>
#include <link.h>

#include <time.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "cpu_codegen/jit/backends.h"
#include "support/sha256.h"

namespace cppi::cpu {

// Defined in the file CMake generates from cppinductor_prelude.h.
extern const char* const k_prelude_text;

CompiledModule::~CompiledModule() = default;

namespace {

std::mutex g_stats_mutex;
CompilerStats g_stats;

std::mutex g_cache_mutex;
std::unordered_map<std::string, std::weak_ptr<CompiledModule>> g_live_modules;
size_t g_prune_at = 64;

const char* compiler_name(CompileOptions::Compiler c) {
  return c == CompileOptions::Compiler::ClangJit ? "clang-jit" : "g++";
}

std::string module_key(const std::string& source, const CompileOptions& o,
                       const std::string& target_id) {
  Sha256 h;
  h.field("cppinductor-cpu-module-v1").field(compiler_name(o.compiler));
  h.field(std::to_string(o.opt_level)).field(o.debug_symbols ? "g" : "").field(o.unroll_loops ? "" : "no-unroll");
  h.field(o.target_cpu).field(o.avx512_off ? "-avx512" : "").field(std::to_string(o.defines.size()));
  for (const auto& d : o.defines) h.field(d);
  h.field(prelude_hash()).field(target_id).field(source);
  if (o.first_header) h.field(o.first_header->name).field(o.first_header->text);
  return h.hex_digest();
}

void prune_expired_locked() {
  if (g_live_modules.size() < g_prune_at) return;
  for (auto it = g_live_modules.begin(); it != g_live_modules.end();)
    it = it->second.expired() ? g_live_modules.erase(it) : std::next(it);
  g_prune_at = std::max<size_t>(64, 2 * g_live_modules.size());
}

}  // namespace

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

const std::string& prelude_source() {
  static const std::string text = k_prelude_text;
  return text;
}

const std::string& prelude_hash() {
  static const std::string hash = sha256_hex(prelude_source());
  return hash;
}

const std::string& sleef_library_path() {
  static const std::string path = [] {
    void* handle = dlopen("libsleef.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!handle) return std::string();
    struct link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return std::string();
    return std::string(map->l_name);  // handle stays open: JIT'd code calls into it
  }();
  return path;
}

Compiler default_compiler() {
  return has_clang_jit() ? CompileOptions::Compiler::ClangJit : CompileOptions::Compiler::Gxx;
}

bool has_clang_jit() {
#if defined(CPPINDUCTOR_CPU_JIT)
  return true;
#else
  return false;
#endif
}

std::string host_target_description() {
#if defined(CPPINDUCTOR_CPU_JIT)
  return clang_jit_target_id(CompileOptions{});
#else
  return gxx_target_id(CompileOptions{});
#endif
}

Expected<std::shared_ptr<CompiledModule>> compile_cpp(const std::string& source,
                                                      const CompileOptions& options) {
  const double start = now_ms(), start_cpu = thread_cpu_ms();
  if (options.opt_level < 0 || options.opt_level > 3)
    return Error::invalid_input(cat("opt_level must be 0..3, got ", options.opt_level));

  std::string target_id;
  if (options.compiler == CompileOptions::Compiler::ClangJit) {
#if defined(CPPINDUCTOR_CPU_JIT)
    target_id = clang_jit_target_id(options);
#else
    return Error::unsupported(
        "the in-process CPU compiler is not in this build (CPPINDUCTOR_CPU_JIT=OFF); use Gxx");
#endif
  } else {
    target_id = gxx_target_id(options);
  }
  const std::string key = module_key(source, options, target_id);

  if (options.memory_cache) {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_live_modules.find(key);
    if (it != g_live_modules.end()) {
      if (auto live = it->second.lock()) {
        std::lock_guard<std::mutex> stats_lock(g_stats_mutex);
        ++g_stats.memory_cache_hits;
        return live;
      }
    }
  }

  BackendRequest request{source, options, key, ""};
  if (options.disk_cache) {
    auto dir = cache_dir();
    if (!dir) return dir.error();
    request.cache_dir = *dir;
  }

  Expected<BackendResult> result = Error::internal("no compiler ran");
#if defined(CPPINDUCTOR_CPU_JIT)
  if (options.compiler == CompileOptions::Compiler::ClangJit) result = compile_with_clang_jit(request);
#endif
  if (options.compiler == CompileOptions::Compiler::Gxx) result = compile_with_gxx(request);

  {
    std::lock_guard<std::mutex> lock(g_stats_mutex);
    if (!result) {
      if (result.error().kind == Error::Kind::CompileFailed) ++g_stats.compile_errors;
      return result.error();
    }
    const CompileTimings& t = result->timings;
    if (result->disk_corrupt) ++g_stats.disk_cache_corrupt;
    if (result->disk_hit) {
      ++g_stats.disk_cache_hits;
    } else {
      ++g_stats.modules_compiled;
      g_stats.frontend_ms += t.frontend_ms;
      g_stats.optimize_ms += t.optimize_ms;
      g_stats.codegen_ms += t.codegen_ms;
    }
    g_stats.link_ms += t.link_ms;
  }

  CompileTimings timings = result->timings;
  timings.total_ms = now_ms() - start;
  timings.cpu_ms += thread_cpu_ms() - start_cpu;  // backends add child processes' time
  std::shared_ptr<CompiledModule> module = std::move(result->module);
  ModuleAccess::set(*module, options.compiler,
                    result->disk_hit ? CompiledModule::Origin::DiskCache
                                     : CompiledModule::Origin::Compiled,
                    timings, key);
  if (options.memory_cache) {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    prune_expired_locked();
    g_live_modules[key] = module;
  }
  return module;
}

CompilerStats compiler_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_stats;
}

void reset_compiler_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats = CompilerStats{};
}

}  // namespace cppi::cpu
