/// \file
/// Compiles generated C++ kernel sources into callable code, in process.
///
/// A source includes "cppinductor_prelude.h" (served from memory, never from
/// disk) and defines `extern "C"` kernels. `compile_cpp` returns a module whose
/// code stays mapped while any shared_ptr to it lives. Two compilers:
///   - ClangJit: libclang-cpp 16 -> LLVM module -> O3 -> ORC LLJIT, all in
///     process; only in builds with CPPINDUCTOR_CPU_JIT.
///   - Gxx: a g++ subprocess writing a shared object (fallback; much slower:
///     a process per module),
///     cached on disk.
/// Both compile for the host CPU (or `target_cpu`) with IEEE semantics kept:
/// -fno-math-errno and -ffp-contract=off, never -ffinite-math-only.
///
/// Thread safety: every function here may be called from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/disk_cache.h"  // cache_dir()
#include "support/status.h"

namespace cppi::cpu {

enum class Compiler { ClangJit, Gxx };

/// ClangJit when built with CPPINDUCTOR_CPU_JIT, else Gxx.
Compiler default_compiler();
/// Whether this build has the in-process compiler.
bool has_clang_jit();

/// A header served from memory beside the prelude, by name.
struct SourceHeader {
  std::string name, text;
};

struct CompileOptions {
  using Compiler = cpu::Compiler;
  /// Asking for ClangJit in a build without it is an Error (Unsupported).
  Compiler compiler = default_compiler();
  int opt_level = 3;           // 0..3
  /// LLVM's loop unrolling (full and partial) on top of the printer's own
  /// (vector accumulators, explicit vector widths).
  bool unroll_loops = true;
  /// DWARF + frame pointers. JIT code is not registered with gdb yet (use Gxx
  /// to step into kernels); for perf, set CPPINDUCTOR_PERF_MAP=1 and JIT'd
  /// kernels are listed in /tmp/perf-<pid>.map.
  bool debug_symbols = false;
  /// CPU to compile for, as clang -target-cpu / g++ -march take it ("skylake",
  /// "haswell"); empty means the host, with its exact feature set.
  std::string target_cpu;
  /// With the host's CPU (target_cpu empty): every AVX-512 feature off, so
  /// the code runs on the host and the prelude takes its AVX2 paths
  /// (cpu_isa="avx2" on an AVX-512 host: support/cpu_isa.h).
  bool avx512_off = false;
  /// Extra macro definitions, "NAME" or "NAME=VALUE".
  std::vector<std::string> defines;
  /// Reuse a live module compiled from the same source and options.
  bool memory_cache = true;
  /// Reuse / store compiled code under cache_dir() (g++: the .so; JIT: the
  /// object file).
  bool disk_cache = true;
  /// The header the source includes first, in place of the prelude (which it
  /// includes itself): served from memory and, for ClangJit, precompiled
  /// once per text and flags instead of the prelude alone, so what it adds
  /// is parsed once per process, not once per module. Its text is part of
  /// the module's cache key. Unset: the prelude alone is precompiled.
  std::optional<SourceHeader> first_header;
};

/// Where the time of one compile went (milliseconds).
struct CompileTimings {
  double frontend_ms = 0;  // parse + clang codegen to LLVM IR (JIT)
  double optimize_ms = 0;  // LLVM O3 pipeline (JIT)
  double codegen_ms = 0;   // machine code generation (JIT) / whole g++ run (Gxx)
  double link_ms = 0;      // JIT link / dlopen
  double total_ms = 0;     // wall time of compile_cpp, cache lookups included
  double cpu_ms = 0;       // CPU time of compile_cpp: the calling thread plus, for
                           // Gxx, the g++ processes (the number to compare on a
                           // loaded machine, where wall time is inflated)
};

/// Compiled code. Lookups are cheap (a hash map) and thread-safe.
class CompiledModule {
 public:
  enum class Origin { Compiled, MemoryCache, DiskCache };

  virtual ~CompiledModule();
  /// Address of an `extern "C"` function or variable, or nullptr.
  virtual void* lookup(const std::string& extern_c_symbol) const = 0;

  CompileOptions::Compiler compiler() const { return compiler_; }
  /// How the module was produced when it was first returned. A later
  /// compile_cpp that hits the memory cache returns this same object.
  Origin origin() const { return origin_; }
  const CompileTimings& timings() const { return timings_; }
  /// The cache key (hex SHA-256 of source, options, prelude and target).
  const std::string& key() const { return key_; }

 protected:
  CompiledModule() = default;
  CompileOptions::Compiler compiler_ = CompileOptions::Compiler::ClangJit;
  Origin origin_ = Origin::Compiled;
  CompileTimings timings_;
  std::string key_;
  friend struct ModuleAccess;
};

/// Compiles `source`. Compile errors come back as Error::Kind::CompileFailed
/// whose message holds the compiler's diagnostics.
Expected<std::shared_ptr<CompiledModule>> compile_cpp(const std::string& source,
                                                      const CompileOptions& options);

/// Process-wide counters (since start or the last reset).
struct CompilerStats {
  uint64_t modules_compiled = 0;    // compiles that ran a compiler
  uint64_t compile_errors = 0;
  uint64_t memory_cache_hits = 0;
  uint64_t disk_cache_hits = 0;
  uint64_t disk_cache_corrupt = 0;  // entries that failed verification and were rebuilt
  // Sums over modules_compiled (plus link_ms for disk hits).
  double frontend_ms = 0;
  double optimize_ms = 0;
  double codegen_ms = 0;
  double link_ms = 0;
};
CompilerStats compiler_stats();
void reset_compiler_stats();

/// The prelude text compiled into the library, and a hash of it (part of
/// every cache key), for dumps and reports.
const std::string& prelude_source();
const std::string& prelude_hash();

/// The target kernels are compiled for by default: "x86_64-... cpu +feat,...".
std::string host_target_description();

}  // namespace cppi::cpu
