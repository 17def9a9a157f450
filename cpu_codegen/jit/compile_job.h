/// \file
/// Generated C++ modules compiled on background threads (cpu::compile_cpp),
/// one thread per module, and the addresses of their extern "C" kernels: the
/// job a graph's CpuKernelHandles wait on at their first run.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cpu_codegen/jit/compiler.h"
#include "support/pending_compile.h"
#include "support/status.h"

namespace cppi::cpu {

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

}  // namespace cppi::cpu
