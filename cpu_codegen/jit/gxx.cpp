/// \file
/// The g++ fallback: write the source and the prelude to a temp dir, run
/// `g++ -O3 -march=native -shared -fPIC`, dlopen the result RTLD_LOCAL.
///
/// Runtime wiring: the prelude, compiled with CPPI_PRELUDE_DEFINES_RUNTIME,
/// gives each .so its own `cppi_runtime_slot` table, which we fill from
/// cppi_runtime_table() right after dlopen. We do not let the .so resolve
/// cppi_runtime against our library: the library lives inside a Python
/// extension loaded RTLD_LOCAL, whose symbols a later dlopen cannot see.
/// -Wl,-Bsymbolic makes the .so bind to its own slot even if another object
/// in the global scope defines the same name.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "cpu_codegen/jit/backends.h"
#include "support/disk_cache.h"
#include "cpu_codegen/jit/runtime.h"
#include "cpu_codegen/prelude/cppinductor_prelude.h"

extern char** environ;

namespace cppi::cpu {
namespace {

class GxxModule final : public CompiledModule {
 public:
  explicit GxxModule(void* handle) : handle_(handle) {}
  ~GxxModule() override { dlclose(handle_); }
  void* lookup(const std::string& name) const override { return dlsym(handle_, name.c_str()); }

 private:
  void* handle_;
};

std::string gxx_executable() {
  const char* env = std::getenv("CPPINDUCTOR_CXX");
  return env && *env ? env : "g++";
}

/// Runs argv, stdout+stderr into `log_path`; returns the exit status (-1 if
/// it could not start). Adds the child's CPU time to *child_cpu_ms if given.
int run_process(const std::vector<std::string>& argv, const std::string& log_path,
                double* child_cpu_ms = nullptr) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return -1;
  }
  if (child_cpu_ms) {
    auto ms = [](const timeval& t) { return double(t.tv_sec) * 1e3 + double(t.tv_usec) * 1e-3; };
    *child_cpu_ms += ms(usage.ru_utime) + ms(usage.ru_stime);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// One line identifying the compiler and host CPU, computed once.
const std::string& gxx_host_id() {
  static const std::string id = [] {
    std::string out;
    char dir_template[] = "/tmp/cppi-gxx-version-XXXXXX";
    if (char* dir = mkdtemp(dir_template)) {
      std::string log = std::string(dir) + "/version.txt";
      if (run_process({gxx_executable(), "--version"}, log) == 0) {
        if (auto text = read_file(log)) out = text->substr(0, text->find('\n'));
      }
      unlink(log.c_str());
      rmdir(dir);
    }
    // -march=native depends on the CPU: key on its model and flags.
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) out += "|" + line;
      if (line.empty()) break;  // first processor only
    }
    return out;
  }();
  return id;
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return Error::internal(cat("cannot write ", path));
  return Status::success();
}

class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cppi-gxx-XXXXXX";
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    for (const char* f : {"kernel.cpp", "cppinductor_prelude.h", "kernel.so", "diagnostics.txt"})
      unlink((path_ + "/" + f).c_str());
    for (const std::string& f : others_) unlink((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  /// Another file in the directory, removed with it.
  std::string other(const std::string& name) {
    others_.push_back(name);
    return path_ + "/" + name;
  }

 private:
  std::string path_;
  std::vector<std::string> others_;
};

Expected<std::shared_ptr<CompiledModule>> load(const std::string& so_path) {
  void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error::compile_failed(cat("dlopen failed: ", dlerror()));
  if (auto* slot = static_cast<cppi_runtime_abi*>(dlsym(handle, "cppi_runtime_slot")))
    *slot = *cppi_runtime_table();
  return std::shared_ptr<CompiledModule>(new GxxModule(handle));
}

}  // namespace

std::string gxx_target_id(const CompileOptions& options) {
  // Bump the version when the command line in compile_with_gxx changes.
  return cat(gxx_host_id(), "|gxx-v1|sleef=", sleef_library_path());
}

Expected<BackendResult> compile_with_gxx(const BackendRequest& request) {
  const CompileOptions& o = request.options;
  BackendResult result;
  const std::string cache_path =
      request.cache_dir.empty() ? "" : request.cache_dir + "/" + request.key + ".so";
  if (!cache_path.empty()) {
    if (read_cache_entry(cache_path, &result.disk_corrupt)) {
      const double t0 = now_ms();
      auto module = load(cache_path);
      if (module) {
        result.module = std::move(*module);
        result.timings.link_ms = now_ms() - t0;
        result.disk_hit = true;
        return result;
      }
      result.disk_corrupt = true;  // verified bytes that do not load: rebuild
    }
  }

  TempDir dir;
  if (dir.path().empty()) return Error::internal("cannot create a temporary directory for g++");
  const std::string src = dir.path() + "/kernel.cpp", so = dir.path() + "/kernel.so",
                    log = dir.path() + "/diagnostics.txt";
  if (Status s = write_text(src, request.source); !s) return s.error();
  if (Status s = write_text(dir.path() + "/cppinductor_prelude.h", prelude_source()); !s)
    return s.error();
  if (o.first_header) {
    if (Status s = write_text(dir.other(o.first_header->name), o.first_header->text); !s) return s.error();
  }

  std::vector<std::string> argv = {gxx_executable(), "-std=c++17", cat("-O", o.opt_level),
                                   o.target_cpu.empty() ? "-march=native" : "-march=" + o.target_cpu,
                                   "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off",
                                   "-fno-exceptions", "-fno-rtti", "-Wl,-Bsymbolic",
                                   "-DCPPI_PRELUDE_DEFINES_RUNTIME", "-I", dir.path()};
  if (o.target_cpu.empty() && o.avx512_off) argv.push_back("-mno-avx512f");  // and every AVX-512 part after it
  if (o.debug_symbols) argv.insert(argv.end(), {"-g", "-fno-omit-frame-pointer"});
  if (!o.unroll_loops) argv.push_back("-fno-unroll-loops");
  for (const auto& d : o.defines) argv.push_back("-D" + d);
  if (sleef_library_path().empty()) argv.push_back("-DCPPI_NO_SLEEF");
  argv.insert(argv.end(), {"-o", so, src});
  if (!sleef_library_path().empty()) argv.push_back(sleef_library_path());

  const double t0 = now_ms();
  const int rc = run_process(argv, log, &result.timings.cpu_ms);
  result.timings.codegen_ms = now_ms() - t0;
  if (rc != 0) {
    auto diagnostics = read_file(log);
    if (rc < 0) return Error::internal(cat("cannot run ", argv[0], ": ", std::strerror(errno)));
    return Error::compile_failed(cat(argv[0], " failed (exit ", rc, "):\n",
                                     diagnostics ? *diagnostics : std::string("(no output)")));
  }

  std::string load_path = so;
  if (!cache_path.empty()) {
    auto bytes = read_file(so);
    if (bytes && write_cache_entry(cache_path, *bytes)) load_path = cache_path;
  }
  const double t1 = now_ms();
  auto module = load(load_path);
  if (!module) return module.error();
  result.timings.link_ms = now_ms() - t1;
  result.module = std::move(*module);
  return result;
}

}  // namespace cppi::cpu
