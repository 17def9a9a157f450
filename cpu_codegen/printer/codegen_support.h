/// \file
/// Helpers that generated kernels need and the prelude (owned by the JIT
/// side, cppinductor_prelude.h) does not have yet: wrapping integer
/// arithmetic, Python-style integer division, float floordiv/remainder as
/// ATen defines them, erfinv, Philox random numbers, argmax/argmin and Welford
/// states with their fixed-order combines, lane-wise gathers, and horizontal
/// reductions the prelude lacks. Generated modules include it as a header of
/// their own, cppinductor_cpu_codegen.h (the prelude, then this text), which
/// compile_cpp serves from memory and precompiles once per process
/// (CompileOptions::first_header), so no module parses it (parsing it would
/// be a noticeable part of clang's front end per module). Meant to move
/// into the prelude once its owner takes it.
#pragma once

#include "cpu_codegen/jit/compiler.h"

namespace cppi::cpu {

/// The helper definitions as C++ source (compiles with clang and g++ after
/// the prelude; no system headers).
const char* codegen_support_source();

/// The header generated modules include first: the prelude, then the support.
inline constexpr const char* kCpuCodegenHeaderName = "cppinductor_cpu_codegen.h";
const SourceHeader& cpu_codegen_header();

}  // namespace cppi::cpu
