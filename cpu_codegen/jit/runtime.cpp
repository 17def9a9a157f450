/// \file
/// libgomp-backed implementation of the kernel runtime table.
#include "cpu_codegen/jit/runtime.h"

#include "cpu_codegen/jit/prefault.h"

#include <dlfcn.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "cpu_codegen/prelude/cppinductor_prelude.h"

namespace cppi::cpu {
namespace {

/// The entry points we use from libgomp's C ABI (stable since GCC 4.9).
struct Gomp {
  void (*parallel)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;
  int (*max_threads)() = nullptr;
  int (*in_parallel)() = nullptr;
  std::string path;
};

std::mutex g_mutex;                      // guards loading / switching
std::atomic<const Gomp*> g_gomp{nullptr};  // set once loaded, never freed
std::atomic<bool> g_load_attempted{false};  // the default load ran (maybe failed)
std::atomic<bool> g_used{false};         // a parallel loop has run
std::atomic<int> g_num_threads{0};       // 0: runtime default

std::string library_path(void* handle) {
  Dl_info info;
  void* sym = dlsym(handle, "GOMP_parallel");
  if (sym && dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
  return "";
}

Expected<const Gomp*> open_gomp(void* handle, const std::string& what) {
  auto g = std::make_unique<Gomp>();
  g->parallel = reinterpret_cast<decltype(g->parallel)>(dlsym(handle, "GOMP_parallel"));
  g->thread_num = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_thread_num"));
  g->num_threads = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_num_threads"));
  g->max_threads = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_max_threads"));
  g->in_parallel = reinterpret_cast<int (*)()>(dlsym(handle, "omp_in_parallel"));
  if (!g->parallel || !g->thread_num || !g->num_threads || !g->max_threads || !g->in_parallel)
    return Error::invalid_input(cat(what, " is not a libgomp (GOMP_parallel/omp_* missing)"));
  g->path = library_path(handle);
  return g.release();  // lives for the process: worker threads may still reference it
}

/// Loads the default libgomp once. Caller holds g_mutex.
const Gomp* load_default_locked() {
  if (const Gomp* g = g_gomp.load()) return g;
  if (g_load_attempted.load()) return nullptr;
  // Prefer the one already in the process (torch's), then the system one.
  void* handle = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!handle) handle = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle) {
    if (auto g = open_gomp(handle, "libgomp.so.1")) g_gomp.store(*g, std::memory_order_release);
  }
  // Published after g_gomp, so a reader that sees it set and no library
  // knows there is none.
  g_load_attempted.store(true, std::memory_order_release);
  return g_gomp.load();
}

const Gomp* gomp() {
  if (const Gomp* g = g_gomp.load(std::memory_order_acquire)) return g;
  if (g_load_attempted.load(std::memory_order_acquire)) return g_gomp.load();  // null: serial
  std::lock_guard<std::mutex> lock(g_mutex);
  return load_default_locked();
}

/// What went wrong in the kernel a thread runs (run_checked): the first
/// out-of-range index, and whether it divided an integer by zero. The pool's
/// workers see the launching thread's while they run that kernel's loop.
struct KernelErrors {
  std::atomic<bool> bad_index{false};
  int64_t value = 0, size = 0;  // the first bad index and its dimension's size
  std::atomic<bool> zero_division{false};
};
thread_local KernelErrors* t_kernel_errors = nullptr;

struct Trampoline {
  cppi_parallel_body_fn fn;
  void* ctx;
  const Gomp* gomp;
  KernelErrors* errors;  // the launching thread's
};

void gomp_entry(void* p) {
  auto* t = static_cast<Trampoline*>(p);
  KernelErrors* saved = t_kernel_errors;
  t_kernel_errors = t->errors;
  t->fn(t->ctx, t->gomp->thread_num(), t->gomp->num_threads());
  t_kernel_errors = saved;
}

void rt_parallel(cppi_parallel_body_fn fn, void* ctx, int32_t num_threads) {
  const Gomp* g = gomp();
  if (num_threads <= 1 || !g || g->in_parallel()) {
    fn(ctx, 0, 1);
    return;
  }
  g_used.store(true, std::memory_order_relaxed);
  Trampoline t{fn, ctx, g, t_kernel_errors};
  g->parallel(&gomp_entry, &t, static_cast<unsigned>(num_threads), 0);
}

int32_t rt_max_threads() { return get_num_threads(); }

void rt_zero_division() {
  if (KernelErrors* slot = t_kernel_errors) slot->zero_division.store(true, std::memory_order_relaxed);
}

void rt_index_error(int64_t value, int64_t size) {
  KernelErrors* slot = t_kernel_errors;
  bool expected = false;
  if (!slot || !slot->bad_index.compare_exchange_strong(expected, true)) return;  // keep the first
  slot->value = value;
  slot->size = size;
}

}  // namespace

Status set_openmp_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Gomp* current = g_gomp.load();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error::invalid_input(cat("cannot load OpenMP library ", path, ": ", dlerror()));
  if (current && current->path == library_path(handle)) return Status::success();
  if (current && g_used.load())
    return Error::invalid_input(cat("OpenMP library already in use (", current->path,
                                    "); set_openmp_library must come before the first parallel loop"));
  auto g = open_gomp(handle, path);
  if (!g) return g.error();
  g_gomp.store(*g, std::memory_order_release);
  g_load_attempted = true;
  return Status::success();
}

std::string openmp_library() {
  const Gomp* g = gomp();
  return g ? g->path : "";
}

void set_num_threads(int n) { g_num_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

int get_num_threads() {
  if (int n = g_num_threads.load(std::memory_order_relaxed); n > 0) return n;
  const Gomp* g = gomp();
  return g ? g->max_threads() : 1;
}

void run_checked(const std::function<void()>& kernel) {
  KernelErrors slot;
  {
    struct Install {  // the slot is this thread's while the kernel runs, even if it throws
      KernelErrors* saved = t_kernel_errors;
      explicit Install(KernelErrors* s) { t_kernel_errors = s; }
      ~Install() { t_kernel_errors = saved; }
    } install(&slot);
    kernel();
  }
  if (slot.bad_index.load()) {
    throw CompilerError(Error::index_out_of_range(
        cat("index ", slot.value, " is out of bounds for dimension with size ", slot.size)));
  }
  if (slot.zero_division.load()) throw CompilerError(Error::invalid_input("ZeroDivisionError"));
}

}  // namespace cppi::cpu

extern "C" {
// The JIT resolves kernels' `cppi_runtime` to this object.
const cppi_runtime_abi cppi_runtime = {CPPI_RUNTIME_ABI_VERSION, sizeof(cppi_runtime_abi), &cppi::cpu::rt_parallel,
                                       &cppi::cpu::rt_max_threads, &cppi::cpu::rt_index_error,
                                       &cppi::cpu::prefault_for_write, &cppi::cpu::rt_zero_division};
const cppi_runtime_abi* cppi_runtime_table() { return &cppi_runtime; }
}
