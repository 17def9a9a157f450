#include "cpu_codegen/cpu_kernels.h"

#include <algorithm>
#include <thread>

#include "cpu_codegen/printer/codegen_support.h"

namespace cppi::cpu {
namespace {

/// How many modules to compile `kernels` kernels in: `threads` (> 0), else
/// one per hardware thread (at most 8), and never fewer than two kernels a
/// module: below that a module's fixed cost (the precompiled header's load,
/// the passes' set-up) outweighs the overlap. (NVRTC gains nothing from the
/// same split: it runs concurrent compiles in one process mostly one after
/// another, so CUDA graphs stay one program; see the README.)
size_t module_count(int threads, size_t kernels) {
  const size_t t = threads > 0 ? static_cast<size_t>(threads)
                               : std::min<size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
  return std::max<size_t>(1, std::min(t, kernels / 2));
}

/// Kernel indices per module: the largest printed kernel first into the
/// lightest module (printed size stands in for compile time), each module's
/// kernels in input order. Deterministic, so a graph compiled twice hits the
/// module caches.
std::vector<std::vector<size_t>> deal_by_size(const std::vector<std::string>& sources, size_t modules) {
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::vector<size_t>> parts(modules);
  std::vector<size_t> weight(modules, 0);
  for (size_t i : order) {
    const size_t m = static_cast<size_t>(std::min_element(weight.begin(), weight.end()) - weight.begin());
    parts[m].push_back(i);
    weight[m] += sources[i].size();
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

}  // namespace

CpuKernelHandle::Fn CpuKernelHandle::resolve() const {
  if (Status s = job_->wait(); !s) throw CompilerError(s.error());
  Fn fn = reinterpret_cast<Fn>(job_->symbol(module_, index_));
  fn_.store(fn, std::memory_order_release);
  return fn;
}

const CompiledModule& CpuKernelHandle::module() const {
  resolve();
  return *job_->modules()[module_];
}

Expected<CompiledCpuKernels> start_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                               const std::vector<std::string>& graph_symbols,
                                               const CpuKernelOptions& options) {
  auto printed = print_cpu_module(kernels, graph_symbols, options.print);
  if (!printed.ok()) return printed.error();
  CompileOptions compile = options.compile;
  compile.first_header = cpu_codegen_header();

  const auto parts = deal_by_size(printed->kernel_sources, module_count(options.compile_threads, kernels.size()));
  std::vector<std::string> sources;
  std::vector<std::vector<std::string>> symbols;
  for (const auto& part : parts) {
    std::vector<const std::string*> texts;
    std::vector<std::string>& names = symbols.emplace_back();
    for (size_t i : part) {
      texts.push_back(&printed->kernel_sources[i]);
      names.push_back(printed->kernels[i].name);
    }
    sources.push_back(parts.size() == 1 ? printed->source : cpu_module_source(texts));
  }
  CompiledCpuKernels out;
  out.job = CpuCompileJob::start(std::move(sources), std::move(symbols), std::move(compile));
  out.kernels.resize(kernels.size());
  for (size_t m = 0; m < parts.size(); ++m)
    for (size_t j = 0; j < parts[m].size(); ++j) {
      const PrintedKernel& info = printed->kernels[parts[m][j]];
      out.kernels[parts[m][j]] = std::make_shared<CpuKernelHandle>(info.name, out.job, m, j, info);
    }
  out.source = std::move(printed->source);
  return out;
}

Expected<CompiledCpuKernels> compile_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                 const std::vector<std::string>& graph_symbols,
                                                 const CpuKernelOptions& options) {
  auto started = start_cpu_kernels(kernels, graph_symbols, options);
  if (!started) return started.error();
  if (Status s = started->job->wait(); !s) return s.error();
  return started;
}

}  // namespace cppi::cpu
