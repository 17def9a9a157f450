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

namespace cppi::gpu {

/// The helper definitions as CUDA C++ source (NVRTC, no system headers).
const char* cuda_codegen_support_source();

}  // namespace cppi::gpu
