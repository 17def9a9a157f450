/// \file
/// Scheduled CPU kernels -> callable KernelHandles: prints the kernels of a
/// graph (print_cpu_module), compiles them with cpu::compile_cpp, as one
/// module or as several compiled at once on as many threads, and wraps each
/// extern "C" symbol in a handle that keeps its compiled module alive.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

/// A compiled kernel. run() ignores the stream.
class CpuKernelHandle final : public KernelHandle {
 public:
  using Fn = void (*)(void* const* buffers, const int64_t* symbols);
  CpuKernelHandle(std::string name, Fn fn, std::shared_ptr<CompiledModule> module, PrintedKernel info)
      : name_(std::move(name)), fn_(fn), module_(std::move(module)), info_(std::move(info)) {}

  const std::string& name() const override { return name_; }
  const char* device() const override { return "cpu"; }
  void run(void* const* buffers, const int64_t* symbols, uintptr_t /*stream*/) const override {
    run_checked([&] { fn_(buffers, symbols); });
  }

  const PrintedKernel& info() const { return info_; }
  const CompiledModule& module() const { return *module_; }

 private:
  std::string name_;
  Fn fn_;
  std::shared_ptr<CompiledModule> module_;
  PrintedKernel info_;
};

struct CompiledCpuKernels {
  std::vector<std::shared_ptr<CpuKernelHandle>> kernels;  // in input order
  std::string source;  // every kernel in one translation unit (what dumps show)
  std::vector<std::shared_ptr<CompiledModule>> modules;   // as compiled
  double compile_ms = 0;  // wall time of the compiles (parallel ones overlap)
};

/// Prints and compiles `kernels` (see CpuKernelOptions::compile_threads).
/// Print failures are Internal errors; compiler failures are CompileFailed
/// with the diagnostics.
Expected<CompiledCpuKernels> compile_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                 const std::vector<std::string>& graph_symbols,
                                                 const CpuKernelOptions& options = {});

}  // namespace cppi::cpu
