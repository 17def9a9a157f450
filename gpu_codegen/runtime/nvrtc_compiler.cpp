#include "gpu_codegen/runtime/nvrtc_compiler.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "gpu_codegen/prelude/cuda_prelude.h"
#include "gpu_codegen/runtime/cuda_api.h"
#include "support/disk_cache.h"
#include "support/sha256.h"

namespace cppi::gpu {
namespace {

struct PtxCache {
  std::mutex mutex;
  std::unordered_map<std::string, PtxProgram> programs;  // keyed by cache_key()
  NvrtcCounters counters;
};

PtxCache& ptx_cache() {
  static PtxCache* cache = new PtxCache();
  return *cache;
}

// The whole input, not a digest of it: a hash collision must not hand back
// another kernel's PTX. The map hashes this string.
std::string cache_key(const NvrtcApi& api, const std::vector<std::string>& flags,
                      const std::vector<CudaHeader>& headers, const std::string& name, const std::string& source) {
  std::string key = cat(api.library, ' ', api.version_major, '.', api.version_minor, '\n');
  for (const std::string& flag : flags) key += flag + '\n';
  for (const CudaHeader& h : headers) key += cat(h.name, ' ', h.text.size(), '\n', h.text, '\n');
  key += name + '\n';
  key += source;
  return key;
}

Expected<int> choose_arch(const NvrtcApi& api, int compute_capability) {
  int count = 0;
  if (api.nvrtcGetNumSupportedArchs(&count) != cu::NVRTC_SUCCESS || count <= 0)
    return Error::internal("nvrtcGetNumSupportedArchs failed");
  std::vector<int> archs(count);
  if (api.nvrtcGetSupportedArchs(archs.data()) != cu::NVRTC_SUCCESS)
    return Error::internal("nvrtcGetSupportedArchs failed");
  // PTX for an older virtual architecture runs on newer devices (the driver
  // JIT-compiles it), so an NVRTC older than the device still works.
  int best = 0;
  for (int arch : archs)
    if (arch <= compute_capability) best = std::max(best, arch);
  if (best == 0)
    return Error::unsupported(
        cat("NVRTC ", api.version_major, ".", api.version_minor,
            " cannot target compute capability ", compute_capability,
            " (oldest supported: ", *std::min_element(archs.begin(), archs.end()), ")"));
  return best;
}

/// Where a cubin compiled from `key` lives on disk; nullopt without a usable
/// cache directory (the compile then just runs).
std::optional<std::string> cubin_path(const std::string& key) {
  Expected<std::string> root = cache_dir();
  if (!root.ok()) return std::nullopt;
  const std::string dir = root.value() + "/cuda";
  if (!ensure_private_dir(dir)) return std::nullopt;
  return cat(dir, "/", sha256_hex(key), ".cubin");
}

// An entry: the log's length (8 bytes, little-endian), the log, the cubin.
std::string cubin_entry(const PtxProgram& p) { return u64_le(p.log.size()) + p.log + p.cubin; }

std::optional<PtxProgram> from_cubin_entry(const std::string& entry, int arch) {
  if (entry.size() < 8) return std::nullopt;
  const uint64_t log_size = read_u64_le(entry.data());
  if (log_size > entry.size() - 8) return std::nullopt;
  PtxProgram p;
  p.log = entry.substr(8, log_size);
  p.cubin = entry.substr(8 + log_size);
  if (p.cubin.empty()) return std::nullopt;
  p.arch = arch;
  p.from_cache = true;
  return p;
}

/// The log without NVRTC's notes on the automatic precompiled header (made,
/// used, or not reusable under other flags): they say nothing about the
/// kernels, and an empty log means "no warnings" to callers.
std::string without_pch_notes(const std::string& log) {
  if (log.find("precompiled header file") == std::string::npos) return log;
  std::string out;
  bool dropped_warning = false;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    start = end + 1;
    if (line.find("precompiled header file") != std::string_view::npos) {
      dropped_warning |= line.find("Warning") != std::string_view::npos;
      continue;
    }
    if (dropped_warning && line.find("warnings can be suppressed") != std::string_view::npos) continue;
    if (line.empty() && (out.empty() || out.back() == '\n')) continue;  // no runs of blank lines
    out.append(line).push_back('\n');
  }
  return out;
}

std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(program, &size) != cu::NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(program, log.data()) != cu::NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  log = without_pch_notes(log);
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

// One NVRTC invocation; the program is destroyed on every path.
Expected<PtxProgram> run_nvrtc(const NvrtcApi& api, const std::string& source,
                               const std::string& name, int arch, bool cubin,
                               const std::vector<std::string>& flags, const std::vector<CudaHeader>& extra) {
  const std::string prelude_text(cuda_prelude_source());
  std::vector<const char*> headers = {prelude_text.c_str()};
  std::vector<const char*> include_names = {kCudaPreludeName};
  for (const CudaHeader& h : extra) {
    headers.push_back(h.text.c_str());
    include_names.push_back(h.name.c_str());
  }
  const std::string program_name = name + ".cu";

  nvrtcProgram program = nullptr;
  nvrtcResult r = api.nvrtcCreateProgram(&program, source.c_str(), program_name.c_str(),
                                         static_cast<int>(headers.size()), headers.data(), include_names.data());
  if (r != cu::NVRTC_SUCCESS)
    return Error::internal(nvrtc_error_text(api, r, "nvrtcCreateProgram"));
  struct Destroy {
    const NvrtcApi& api;
    nvrtcProgram& program;
    ~Destroy() { api.nvrtcDestroyProgram(&program); }
  } destroy{api, program};

  std::vector<const char*> argv;
  for (const std::string& flag : flags) argv.push_back(flag.c_str());
  r = api.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(api, program);
  if (r != cu::NVRTC_SUCCESS) {
    std::string flat_flags;
    for (const std::string& flag : flags) flat_flags += " " + flag;
    return Error::compile_failed(cat("NVRTC could not compile '", program_name, "' for ",
                                     cubin ? "sm_" : "compute_", arch, " (", nvrtc_error_text(api, r, "nvrtcCompileProgram"),
                                     "; flags:", flat_flags, "):\n",
                                     log.empty() ? "(empty log)" : log));
  }

  PtxProgram result;
  result.log = std::move(log);
  result.arch = arch;
  if (cubin) {
    size_t size = 0;
    r = api.nvrtcGetCUBINSize(program, &size);
    if (r != cu::NVRTC_SUCCESS) return Error::internal(nvrtc_error_text(api, r, "nvrtcGetCUBINSize"));
    result.cubin.resize(size);
    r = api.nvrtcGetCUBIN(program, result.cubin.data());
    if (r != cu::NVRTC_SUCCESS) return Error::internal(nvrtc_error_text(api, r, "nvrtcGetCUBIN"));
    return result;
  }
  size_t ptx_size = 0;
  r = api.nvrtcGetPTXSize(program, &ptx_size);
  if (r != cu::NVRTC_SUCCESS) return Error::internal(nvrtc_error_text(api, r, "nvrtcGetPTXSize"));
  result.ptx.resize(ptx_size);
  r = api.nvrtcGetPTX(program, result.ptx.data());
  if (r != cu::NVRTC_SUCCESS) return Error::internal(nvrtc_error_text(api, r, "nvrtcGetPTX"));
  if (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
  return result;
}

}  // namespace

const char* to_string(FastCompile level) {
  switch (level) {
    case FastCompile::Off: return "off";
    case FastCompile::Min: return "min";
    case FastCompile::Mid: return "mid";
    case FastCompile::Max: return "max";
  }
  return "off";
}

std::vector<std::string> nvrtc_flags(int arch, const NvrtcOptions& options, int nvrtc_version) {
  std::vector<std::string> flags = {
      cat(options.cubin ? "-arch=sm_" : "-arch=compute_", arch, options.arch_specific ? "a" : ""),
      "--std=c++17",
      "-default-device",
      // Spelled out although they are NVRTC's defaults, so no option added
      // to `extra` by accident (e.g. --use_fast_math) goes unnoticed in dumps.
      "--fmad=true",
      "--ftz=false",
      "--prec-div=true",
      "--prec-sqrt=true",
  };
  // Leaves out of NVRTC's built-in headers what generated code never uses
  // (textures, surfaces, cudadevrt, cooperative groups), which every module
  // would otherwise parse in its front end. NVRTC 12.4 and newer know the
  // flag.
  if (nvrtc_version >= 1204) flags.emplace_back("--minimal");
  // Every module includes the same prelude first: NVRTC 12.8 and newer parse
  // it once per process into a precompiled header and reuse it, so no
  // module parses it again. The header lives in a
  // per-process directory NVRTC removes at exit; where it cannot be written,
  // NVRTC compiles without it.
  if (nvrtc_version >= 1208) flags.emplace_back("-pch");
  // NVVM's optimiser is most of a module's compile, more than the front
  // end; "min" skips the optimisations that cost the most compile time for
  // the least run time (a transformer's backward compiles much faster).
  if (options.fast_compile != FastCompile::Off && nvrtc_version >= 1209) {
    flags.push_back(cat("--Ofast-compile=", to_string(options.fast_compile)));
  }
  if (options.line_info) flags.emplace_back("-lineinfo");
  if (options.max_registers > 0) flags.push_back(cat("--maxrregcount=", options.max_registers));
  flags.insert(flags.end(), options.extra.begin(), options.extra.end());
  return flags;
}

Expected<PtxProgram> compile_cuda(const std::string& source, const std::string& name,
                                  int compute_capability, const NvrtcOptions& options) {
  Expected<const NvrtcApi*> api = nvrtc();
  if (!api.ok()) return api.error();
  Expected<int> arch = choose_arch(*api.value(), compute_capability);
  if (!arch.ok()) return arch.error();
  if (options.arch_specific && arch.value() != compute_capability)
    return Error::unsupported(cat("NVRTC ", api.value()->version_major, ".", api.value()->version_minor,
                                  " cannot target compute_", compute_capability, "a"));
  // A cubin runs on its own architecture only: an NVRTC older than the
  // device makes PTX, which the driver compiles for it.
  NvrtcOptions chosen = options;
  chosen.cubin = options.cubin && arch.value() == compute_capability;
  const std::vector<std::string> flags =
      nvrtc_flags(arch.value(), chosen, api.value()->version_major * 100 + api.value()->version_minor);
  const std::string key = cache_key(*api.value(), flags, options.headers, name, source);

  PtxCache& cache = ptx_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.programs.find(key);
    if (it != cache.programs.end()) {
      ++cache.counters.cache_hits;
      PtxProgram hit = it->second;
      hit.from_cache = true;
      hit.compile_ms = 0.0;
      return hit;
    }
  }

  const std::optional<std::string> disk = chosen.cubin ? cubin_path(key) : std::nullopt;
  if (disk) {
    bool corrupt = false;
    std::optional<std::string> entry = read_cache_entry(*disk, &corrupt);
    std::optional<PtxProgram> hit = entry ? from_cubin_entry(*entry, arch.value()) : std::nullopt;
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (hit) {
      ++cache.counters.disk_cache_hits;
      cache.programs.emplace(key, *hit);
      return *hit;
    }
    if (corrupt || entry) ++cache.counters.disk_cache_corrupt;
  }

  // Compile outside the lock: NVRTC is thread-safe, and a compile takes long
  // enough that other threads' cache hits must not wait for it.
  const auto start = std::chrono::steady_clock::now();
  Expected<PtxProgram> compiled =
      run_nvrtc(*api.value(), source, name, arch.value(), chosen.cubin, flags, options.headers);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // An unwritable entry only means the next process compiles it again.
  if (disk && compiled.ok()) (void)write_cache_entry(*disk, cubin_entry(compiled.value()));

  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.counters.compile_ms += ms;
  if (!compiled.ok()) {
    ++cache.counters.failures;
    return compiled;
  }
  ++cache.counters.compiles;
  compiled->compile_ms = ms;
  cache.programs.emplace(key, compiled.value());
  return compiled;
}

Expected<std::string> compile_to_ptx(const std::string& source, const std::string& name,
                                     int compute_capability, const NvrtcOptions& options) {
  NvrtcOptions ptx_options = options;
  ptx_options.cubin = false;
  Expected<PtxProgram> program = compile_cuda(source, name, compute_capability, ptx_options);
  if (!program.ok()) return program.error();
  return std::move(program.value().ptx);
}

NvrtcCounters nvrtc_counters() {
  PtxCache& cache = ptx_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.counters;
}

void clear_ptx_cache() {
  PtxCache& cache = ptx_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.programs.clear();
}

}  // namespace cppi::gpu
