/// \file
/// Scheduled CPU kernels -> callable KernelHandles: prints the kernels of a
/// graph (print_cpu_module), compiles them with cpu::compile_cpp, as one
/// module or as several compiled at once on as many threads, in the
/// background or not, and wraps each extern "C" symbol in a handle that keeps
/// its compiled module alive.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/jit/runtime.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "lowering/ir/kernel.h"
#include "support/kernel_handle.h"
#include "support/pending_compile.h"
#include "support/status.h"

namespace cppi::cpu {

struct CpuKernelOptions {
  PrintOptions print;
  CompileOptions compile;
  /// Modules compiled at once, each on its own thread, the kernels dealt out
  /// among them by printed size: 0 = one per hardware thread (at most 8, at
  /// least two kernels each), 1 = the whole graph as one module. A module
  /// costs its own PCH load and pass set-up, so few kernels stay together.
  int compile_threads = 0;
};

/// The modules of one graph's CPU kernels, compiling on a thread of their
/// own (which starts one more per module after the first): the caller goes on
/// while clang and LLVM work, and whoever needs a kernel first waits. The
/// destructor waits too, so the thread never outlives what it compiles.
class CpuCompileJob final : public PendingCompile {
 public:
  /// Starts compiling `sources`, one module each; module m must define the
  /// extern "C" kernels `symbols[m]`.
  static std::shared_ptr<CpuCompileJob> start(std::vector<std::string> sources,
                                              std::vector<std::vector<std::string>> symbols, CompileOptions options);
  ~CpuCompileJob() override;

  Status wait() const override;
  double seconds() const override { return compile_ms_ / 1e3; }

  /// After a successful wait(): the modules, and the address of module m's
  /// j-th kernel.
  const std::vector<std::shared_ptr<CompiledModule>>& modules() const { return modules_; }
  void* symbol(size_t m, size_t j) const { return addresses_[m][j]; }

 private:
  CpuCompileJob(std::vector<std::string> sources, std::vector<std::vector<std::string>> symbols,
                CompileOptions options);
  void run();  // on thread_
  /// The modules' kernels into modules_ and addresses_; the first failure.
  Status collect(std::vector<std::optional<Expected<std::shared_ptr<CompiledModule>>>>& modules);

  std::vector<std::string> sources_;
  std::vector<std::vector<std::string>> symbols_;
  CompileOptions options_;
  // Written by thread_ before it ends; read after it is joined.
  std::vector<std::shared_ptr<CompiledModule>> modules_;
  std::vector<std::vector<void*>> addresses_;
  Status status_ = Status::success();
  double compile_ms_ = 0;
  mutable std::thread thread_;
  mutable std::once_flag joined_;
};

/// Blocks until every CpuCompileJob still running has finished: at process
/// exit, before the compilers' statics are destroyed under a running thread.
void wait_for_background_compiles();
/// How many CpuCompileJob threads are running now.
size_t background_compiles_running();

/// A compiled kernel: module m's j-th kernel of its job. The first run()
/// waits for the job (throwing CompilerError if it failed); later ones call
/// straight through. run() ignores the stream.
class CpuKernelHandle final : public KernelHandle {
 public:
  using Fn = void (*)(void* const* buffers, const int64_t* symbols);
  CpuKernelHandle(std::string name, std::shared_ptr<CpuCompileJob> job, size_t module, size_t index,
                  PrintedKernel info)
      : name_(std::move(name)), job_(std::move(job)), module_(module), index_(index), info_(std::move(info)) {}

  const std::string& name() const override { return name_; }
  const char* device() const override { return "cpu"; }
  void run(void* const* buffers, const int64_t* symbols, uintptr_t /*stream*/) const override {
    Fn fn = fn_.load(std::memory_order_acquire);
    if (fn == nullptr) fn = resolve();
    run_checked([&] { fn(buffers, symbols); });
  }

  const PrintedKernel& info() const { return info_; }
  /// The module holding the kernel (waits for the compile).
  const CompiledModule& module() const;

 private:
  Fn resolve() const;

  std::string name_;
  std::shared_ptr<CpuCompileJob> job_;
  size_t module_, index_;
  mutable std::atomic<Fn> fn_{nullptr};
  PrintedKernel info_;
};

struct CompiledCpuKernels {
  std::vector<std::shared_ptr<CpuKernelHandle>> kernels;  // in input order
  std::string source;  // every kernel in one translation unit (what dumps show)
  std::shared_ptr<CpuCompileJob> job;  // the modules, the compile's wall time
};

/// Prints `kernels` and starts compiling them (see CpuKernelOptions::compile_threads)
/// on a background thread. Print failures are Internal errors; compiler
/// failures come from job->wait() and from the kernels' first run.
Expected<CompiledCpuKernels> start_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                               const std::vector<std::string>& graph_symbols,
                                               const CpuKernelOptions& options = {});

/// start_cpu_kernels, then waits: compiler failures are CompileFailed with
/// the diagnostics.
Expected<CompiledCpuKernels> compile_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                 const std::vector<std::string>& graph_symbols,
                                                 const CpuKernelOptions& options = {});

}  // namespace cppi::cpu
