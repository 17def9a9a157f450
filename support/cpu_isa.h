/// \file
/// The x86-64 vector ISAs CPU kernels are generated for (the `cpu_isa`
/// option) and what the host can run.
///
/// `native` is the host's widest: AVX-512 (F, BW, VL and DQ: 64-byte
/// vectors, masked moves) or AVX2. `avx2` on an AVX-512 host compiles for the
/// host CPU with every AVX-512 feature off, so an AVX-512 machine runs (and
/// its tests check) the 32-byte paths an AVX2-only machine takes. An ISA the
/// host cannot run is an InvalidInput error naming what it has. CPU code
/// generation assumes x86-64: on another architecture every ISA, `native`
/// included, is an Unsupported error, and the graph runs in eager.
#pragma once

#include <sys/utsname.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace cppi {

enum class CpuIsa : uint8_t { Native, Avx2, Avx512 };

inline const char* to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Native: return "native";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

/// The host's architecture as uname reports it ("x86_64", "aarch64").
inline std::string host_machine() {
  struct utsname u {};
  return uname(&u) == 0 ? std::string(u.machine) : std::string("unknown");
}

/// The ISAs of CpuIsa this host runs, widest first: {Avx512, Avx2}, {Avx2},
/// or none (an x86-64 CPU older than AVX2, or another architecture).
inline std::vector<CpuIsa> host_cpu_isas() {
  std::vector<CpuIsa> out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    out.push_back(CpuIsa::Avx512);
  if (avx2) out.push_back(CpuIsa::Avx2);
#endif
  return out;
}

/// What the CPU codegen targets once `requested` is made concrete for this
/// host.
struct CpuIsaTarget {
  /// The ISA's name for reports: "avx512", "avx2", or for `native` on an
  /// x86-64 CPU without AVX2, "avx" or "sse".
  std::string name;
  /// Bytes per vector register the schedule sizes vectors by.
  int vector_bytes = 32;
  /// Compile for the host CPU with its AVX-512 features turned off.
  bool avx512_off = false;
};

inline Expected<CpuIsaTarget> resolve_cpu_isa(CpuIsa requested) {
#if !defined(__x86_64__)
  return Error::unsupported(cat("CPU kernels are generated for x86-64 (AVX2 or AVX-512) only; this host is ",
                                host_machine(), ", so CPU graphs run in eager PyTorch"));
#else
  const std::vector<CpuIsa> host = host_cpu_isas();
  auto runs = [&](CpuIsa isa) {
    for (CpuIsa h : host)
      if (h == isa) return true;
    return false;
  };
  if (requested == CpuIsa::Native) {
    if (!host.empty()) requested = host.front();
    else if (__builtin_cpu_supports("avx")) return CpuIsaTarget{"avx", 32, false};
    else return CpuIsaTarget{"sse", 16, false};
  }
  if (!runs(requested)) {
    std::string has;
    for (CpuIsa h : host) has += cat(has.empty() ? "" : ", ", "'", to_string(h), "'");
    return Error::invalid_input(cat("cpu_isa '", to_string(requested), "' is not available: this host's CPU runs ",
                                    has.empty() ? std::string("neither 'avx2' nor 'avx512'") : has,
                                    " (use 'native' for the host's widest)"));
  }
  if (requested == CpuIsa::Avx512) return CpuIsaTarget{"avx512", 64, false};
  return CpuIsaTarget{"avx2", 32, bool(__builtin_cpu_supports("avx512f"))};
#endif
}

}  // namespace cppi
