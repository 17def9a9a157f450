/// \file
/// Device helpers that generated CUDA kernels need beyond the CUDA prelude
/// (gpu_codegen/prelude/cppinductor_cuda_prelude.cuh): the functions the
/// shared scalar op table (cpu_codegen/printer/op_tables.h) names — cppi_exp,
/// cppi_wadd, cppi_int_floordiv, ... — mapped to CUDA's libdevice math
/// (expf, not the __expf intrinsics: accuracy first), Python-style index
/// division, Philox random numbers, the reduction ops the prelude lacks
/// (prod, any/all) and the aligned vector type behind 16-byte loads.
///
/// The printer pastes this text after `#include "cppinductor_cuda_prelude.cuh"`
/// (compile_cuda serves only the prelude from memory). Meant to move into the
/// prelude once its owner takes it.
#pragma once

#include <cstdint>

namespace cppi::gpu {

/// The helper definitions as CUDA C++ source (NVRTC, no system headers).
const char* cuda_codegen_support_source();

/// The constants of cppi_udiv_magic(x, magic, shift), which is x / d for
/// every 64-bit x >= 0, for a divisor d >= 3 that is not a power of two
/// (Granlund and Montgomery, "Division by invariant integers using
/// multiplication", 1994, fig. 4.1): with l = ceil(log2(d)),
/// magic = floor(2^64 * (2^l - d) / d) + 1 and shift = l - 1.
struct DivisionMagic {
  uint64_t magic = 0;
  int shift = 0;
};
DivisionMagic division_magic(int64_t d);

}  // namespace cppi::gpu
