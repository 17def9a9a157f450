/// \file
/// Compiler options as the C++ core sees them. Python validates names and
/// values against the same table (python/cppinductor/options.py) so a typo is
/// a ValueError naming the valid options before anything reaches C++.
#pragma once

#include <string>

#include "lowering/graph/desc.h"
#include "support/cpu_isa.h"
#include "support/status.h"

namespace cppi {

struct Options {
  enum class FallbackPolicy { Eager, Error };
  enum class CpuCompiler { Default, ClangJit, Gxx };
  enum class CudaFastCompile { Default, Off, Min, Mid, Max };

  std::string mode = "default";  // default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs
  FallbackPolicy fallback = FallbackPolicy::Eager;
  CpuCompiler cpu_compiler = CpuCompiler::Default;
  /// The vector ISA CPU kernels are scheduled and compiled for (support/cpu_isa.h).
  CpuIsa cpu_isa = CpuIsa::Native;
  std::string debug_dir;        // where to dump this graph's stages; empty: no dump
  bool fuse = true;             // off: one kernel per lowered node (for debugging fusion)
  bool reuse_buffers = true;    // off: every kernel buffer is a fresh allocation (for debugging reuse)
  /// CPU kernels compile on a background thread and compile_graph returns
  /// before they are done (CompiledGraph::pending_compile); finish_compile
  /// or a kernel's first run waits for them. Off here; on by default in
  /// Python, where Dynamo and AOTAutograd still have work left per graph
  /// (guards, runtime wrappers) to overlap with the compile.
  bool background_compile = false;
  /// LLVM's loop unroller on CPU kernels (CompileOptions::unroll_loops).
  bool cpu_unroll_loops = true;
  /// NVRTC's --Ofast-compile level for CUDA kernels; Default: Min, and Off in
  /// the max-autotune modes.
  CudaFastCompile cuda_fast_compile = CudaFastCompile::Default;
  /// NVRTC compiles CUDA modules to the device's machine code (a cubin for
  /// sm_XX) instead of PTX, so loading a module runs no driver JIT
  /// (gpu::NvrtcOptions::cubin). The default; false hands the driver PTX.
  bool cuda_cubin = true;
  /// max-autotune: each CPU kernel also compiles with its alternative
  /// schedules (cpu::cpu_schedule_candidates), which the runtime times on
  /// the first call. Set by the Python side from the mode and the
  /// max_autotune option.
  bool autotune = false;
  /// Fault injection for tests of the accuracy checks: makes relu codegen
  /// wrong on purpose (Inductor's inject_relu_bug_TESTING_ONLY).
  bool inject_relu_bug_testing_only = false;
  /// torch.are_deterministic_algorithms_enabled() at compile time (set by
  /// the Python side, not a user option): see LoweringOptions::deterministic.
  bool deterministic = false;

  /// Options from a dict of already-validated values (see options.py).
  static Expected<Options> from_desc(const Desc& d);
};

}  // namespace cppi
