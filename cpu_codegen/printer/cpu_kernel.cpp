#include "cpu_codegen/printer/cpu_kernel.h"

#include <algorithm>
#include <chrono>
#include <optional>
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

Expected<CompiledCpuKernels> compile_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                 const std::vector<std::string>& graph_symbols,
                                                 const CpuKernelOptions& options) {
  auto printed = print_cpu_module(kernels, graph_symbols, options.print);
  if (!printed.ok()) return printed.error();
  CompileOptions compile = options.compile;
  compile.first_header = cpu_codegen_header();

  const auto parts = deal_by_size(printed->kernel_sources, module_count(options.compile_threads, kernels.size()));
  std::vector<std::string> sources;
  for (const auto& part : parts) {
    std::vector<const std::string*> texts;
    for (size_t i : part) texts.push_back(&printed->kernel_sources[i]);
    sources.push_back(parts.size() == 1 ? printed->source : cpu_module_source(texts));
  }
  std::vector<std::optional<Expected<std::shared_ptr<CompiledModule>>>> modules(parts.size());
  auto compile_part = [&](size_t m) {
    try {
      modules[m] = compile_cpp(sources[m], compile);
    } catch (const std::exception& e) {  // e.g. bad_alloc: never across the thread boundary
      modules[m] = Error::internal(cat("cpu codegen: compiling module ", m, " threw: ", e.what()));
    }
  };
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> threads;
    for (size_t m = 1; m < parts.size(); ++m) threads.emplace_back(compile_part, m);
    compile_part(0);
    for (auto& t : threads) t.join();
  }
  CompiledCpuKernels out;
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::shared_ptr<CpuKernelHandle>> handles(kernels.size());
  for (size_t m = 0; m < parts.size(); ++m) {
    if (!modules[m]->ok()) return modules[m]->error();
    std::shared_ptr<CompiledModule> module = **modules[m];
    out.modules.push_back(module);
    for (size_t i : parts[m]) {
      const PrintedKernel& info = printed->kernels[i];
      void* sym = module->lookup(info.name);
      if (!sym) return Error::internal("cpu codegen: compiled module lacks kernel symbol " + info.name);
      handles[i] = std::make_shared<CpuKernelHandle>(info.name, reinterpret_cast<CpuKernelHandle::Fn>(sym), module,
                                                     info);
    }
  }
  out.kernels = std::move(handles);
  out.source = std::move(printed->source);
  return out;
}

}  // namespace cppi::cpu
