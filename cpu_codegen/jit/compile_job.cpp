#include "cpu_codegen/jit/compile_job.h"

#include <chrono>
#include <condition_variable>
#include <optional>

namespace cppi::cpu {
namespace {

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

}  // namespace cppi::cpu
