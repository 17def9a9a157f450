/// \file
/// Scheduled CPU kernels -> callable KernelHandles: prints the kernels of a
/// graph (print_cpu_module), compiles them (jit/compile_job.h), as one
/// module or as several compiled at once on as many threads, in the
/// background or not, and wraps each extern "C" symbol in a handle that keeps
/// its compiled module alive.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cpu_codegen/jit/compile_job.h"
#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/jit/runtime.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "lowering/ir/kernel.h"
#include "support/kernel_handle.h"
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
