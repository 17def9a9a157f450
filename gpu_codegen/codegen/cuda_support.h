/// \file
/// Device helpers that generated CUDA kernels need beyond the CUDA prelude
/// (gpu_codegen/prelude/cppinductor_cuda_prelude.cuh): the functions the
/// shared scalar op table (codegen/op_tables.h) names — cppi_exp,
/// cppi_wadd, cppi_int_floordiv, ... — mapped to CUDA's libdevice math
/// (expf, not the __expf intrinsics: accuracy first), Python-style index
/// division, Philox random numbers, the reduction ops the prelude lacks
/// (prod, any/all) and the aligned vector type behind 16-byte loads.
///
/// Generated modules include it as a header of its own,
/// cppinductor_cuda_codegen.cuh, which includes the prelude first; compile_cuda
/// serves it from memory (NvrtcOptions::headers) and NVRTC precompiles it with
/// the prelude once per process, so no module parses it (parsing it would
/// be a noticeable part of NVRTC's front end per module). Meant to move
/// into the prelude once its owner takes it.
#pragma once

#include <cstdint>
#include <string>

#include "gpu_codegen/runtime/nvrtc_compiler.h"

namespace cppi::gpu {

/// The helper definitions as CUDA C++ source (NVRTC, no system headers).
const char* cuda_codegen_support_source();

/// The header generated modules include: the prelude, then the support.
inline constexpr const char* kCudaCodegenHeaderName = "cppinductor_cuda_codegen.cuh";
const CudaHeader& cuda_codegen_header();

/// `options` serving cuda_codegen_header() (once).
NvrtcOptions with_codegen_header(NvrtcOptions options);

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
