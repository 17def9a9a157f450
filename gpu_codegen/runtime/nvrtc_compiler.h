/// \file
/// CUDA C source → PTX with NVRTC, cached in memory. The flags are fixed here
/// (not by callers) so every kernel gets the same numerics: no fast math,
/// IEEE division and square root, denormals kept, only FMA contraction on
/// (what nvcc and Triton do by default; within eager's tolerances).
///
/// The prelude (gpu_codegen/prelude/cppinductor_cuda_prelude.cuh) is always
/// offered to NVRTC as an in-memory header, so generated source starts with
/// `#include "cppinductor_cuda_prelude.cuh"` and needs no file system.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace cppi::gpu {

/// NVRTC's -Ofast-compile levels: how many of NVVM's optimisations to skip
/// for a faster compile. None of them changes numerics (the IEEE flags stay).
enum class FastCompile { Off, Min, Mid, Max };

/// "off", "min", "mid" or "max".
const char* to_string(FastCompile level);

/// An in-memory header a source may #include by `name`.
struct CudaHeader {
  std::string name, text;
};

/// What a caller may vary; everything that affects numerics is not here.
struct NvrtcOptions {
  bool line_info = false;          ///< -lineinfo, so profilers map SASS to source lines
  int max_registers = 0;           ///< --maxrregcount=N when > 0
  /// --Ofast-compile=<level> where NVRTC knows it (seen in 12.9 and 13.0).
  /// Min: much less NVRTC time and, for our memory-bound kernels, the same
  /// run time, since the printer spells out what the skipped passes did for
  /// them (loop unrolling, constant index division). Off: every
  /// optimisation, the pipeline's choice in the max-autotune modes.
  FastCompile fast_compile = FastCompile::Min;
  /// Targets the device's own architecture with its arch-specific features
  /// (compute_90a: wgmma, setmaxnreg), whose PTX runs on that compute
  /// capability alone. An error where NVRTC cannot target exactly the device.
  bool arch_specific = false;
  /// Compiles to the device's machine code (-arch=sm_XX: a cubin) instead
  /// of PTX: NVRTC's own ptxas does the work the driver's JIT would do when
  /// the module loads. Where NVRTC cannot target exactly the device (it is
  /// older), PTX as without it. Cubins are also kept in the on-disk cache
  /// (support/disk_cache.h, under cuda/), as the driver keeps what it JIT-
  /// compiled from PTX, so a later process compiles nothing.
  bool cubin = false;
  std::vector<std::string> extra;  ///< appended verbatim, e.g. "-DBLOCK=256"
  /// Served from memory beside the prelude (cppinductor_cuda_prelude.cuh).
  /// NVRTC precompiles the first header a source includes once per process
  /// and matches it by name, not text: one name must always carry one text.
  std::vector<CudaHeader> headers;
};

struct PtxProgram {
  std::string ptx;          ///< empty when `cubin` holds the module
  std::string cubin;        ///< the machine code, under NvrtcOptions::cubin
  std::string log;          ///< NVRTC's warnings; empty for a clean compile
  int arch = 0;             ///< the compute_XX targeted; below the device's when NVRTC is older
  double compile_ms = 0.0;  ///< time NVRTC took; 0 for a cache hit
  bool from_cache = false;  ///< from memory, or (a cubin) from the disk
};

/// Compiles `source` (one translation unit; `name` is what NVRTC's messages
/// call it) for the highest virtual architecture NVRTC supports that does
/// not exceed `compute_capability` (major*10+minor, e.g. 90). Errors:
/// Unsupported when NVRTC cannot be loaded or the device is older than NVRTC
/// supports; CompileFailed with NVRTC's log when the source does not compile.
Expected<PtxProgram> compile_cuda(const std::string& source, const std::string& name,
                                  int compute_capability, const NvrtcOptions& options = {});

/// The PTX of compile_cuda.
Expected<std::string> compile_to_ptx(const std::string& source, const std::string& name,
                                     int compute_capability, const NvrtcOptions& options = {});

/// The exact flags compile_cuda passes for `arch` (for dumps and tests) with
/// an NVRTC of version `nvrtc_version` (major * 100 + minor; 0: unknown, no
/// version-dependent flags).
std::vector<std::string> nvrtc_flags(int arch, const NvrtcOptions& options, int nvrtc_version = 0);

/// Process-wide counters, so tests and compile-time reports can prove what
/// was compiled and what came from the cache.
struct NvrtcCounters {
  uint64_t compiles = 0;  ///< NVRTC invocations that produced PTX
  uint64_t failures = 0;  ///< NVRTC invocations that did not
  uint64_t cache_hits = 0;
  uint64_t disk_cache_hits = 0;     ///< cubins read from the on-disk cache
  uint64_t disk_cache_corrupt = 0;  ///< cubin entries that failed verification and were compiled again
  double compile_ms = 0.0;  ///< total over `compiles` and `failures`
};
NvrtcCounters nvrtc_counters();

/// Drops every cached PTX (the counters stay).
void clear_ptx_cache();

}  // namespace cppi::gpu
