#include "cpu_codegen/printer/cpu_kernel.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
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

/// CpuCompileJob threads still running, for wait_for_background_compiles.
std::mutex g_running_mutex;
std::condition_variable g_running_changed;
size_t g_running = 0;

}  // namespace

CpuCompileJob::CpuCompileJob(std::vector<std::string> sources, std::vector<std::vector<std::string>> symbols,
                             CompileOptions options)
    : sources_(std::move(sources)), symbols_(std::move(symbols)), options_(std::move(options)) {}

std::shared_ptr<CpuCompileJob> CpuCompileJob::start(std::vector<std::string> sources,
                                                    std::vector<std::vector<std::string>> symbols,
                                                    CompileOptions options) {
  std::shared_ptr<CpuCompileJob> job(new CpuCompileJob(std::move(sources), std::move(symbols), std::move(options)));
  {
    std::lock_guard<std::mutex> lock(g_running_mutex);
    ++g_running;
  }
  try {
    job->thread_ = std::thread([raw = job.get()] { raw->run(); });  // the destructor joins before `raw` dies
  } catch (const std::system_error&) {  // no thread to be had: compile here
    job->run();
  }
  return job;
}

CpuCompileJob::~CpuCompileJob() { (void)wait(); }

Status CpuCompileJob::wait() const {
  std::call_once(joined_, [this] {
    if (thread_.joinable()) thread_.join();
  });
  return status_;
}

void CpuCompileJob::run() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::optional<Expected<std::shared_ptr<CompiledModule>>>> modules(sources_.size());
  auto compile_part = [&](size_t m) {
    try {
      modules[m] = compile_cpp(sources_[m], options_);
    } catch (const std::exception& e) {  // e.g. bad_alloc: never across the thread boundary
      modules[m] = Error::internal(cat("cpu codegen: compiling module ", m, " threw: ", e.what()));
    }
  };
  {
    std::vector<std::thread> threads;
    for (size_t m = 1; m < sources_.size(); ++m) {
      try {
        threads.emplace_back(compile_part, m);
      } catch (const std::system_error&) {
        compile_part(m);
      }
    }
    compile_part(0);
    for (auto& t : threads) t.join();
  }
  compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  try {
    status_ = collect(modules);
  } catch (const std::exception& e) {  // bad_alloc: an exception may not leave the thread
    status_ = Error::internal(cat("cpu codegen: collecting the compiled kernels threw: ", e.what()));
  }
  std::lock_guard<std::mutex> lock(g_running_mutex);
  --g_running;
  g_running_changed.notify_all();
}

Status CpuCompileJob::collect(std::vector<std::optional<Expected<std::shared_ptr<CompiledModule>>>>& modules) {
  for (size_t m = 0; m < modules.size(); ++m) {
    if (!modules[m]->ok()) return modules[m]->error();
    modules_.push_back(**modules[m]);
    std::vector<void*>& addresses = addresses_.emplace_back();
    for (const std::string& name : symbols_[m]) {
      void* sym = modules_.back()->lookup(name);
      if (!sym) return Error::internal("cpu codegen: compiled module lacks kernel symbol " + name);
      addresses.push_back(sym);
    }
  }
  return Status::success();
}

void wait_for_background_compiles() {
  std::unique_lock<std::mutex> lock(g_running_mutex);
  g_running_changed.wait(lock, [] { return g_running == 0; });
}

size_t background_compiles_running() {
  std::lock_guard<std::mutex> lock(g_running_mutex);
  return g_running;
}

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
