/// \file
/// Helpers that generated kernels need and the prelude (owned by the JIT
/// side, cppinductor_prelude.h) does not have yet: wrapping integer
/// arithmetic, Python-style integer division, float floordiv/remainder as
/// ATen defines them, erfinv, Philox random numbers, argmax/argmin and Welford
/// states with their fixed-order combines, lane-wise gathers, and horizontal
/// reductions the prelude lacks. The printer pastes this text into every
/// module right after `#include "cppinductor_prelude.h"` (the JIT serves only
/// the prelude from memory, so a second header cannot be included). Meant to
/// move into the prelude once its owner takes it.
#pragma once

namespace cppi::cpu {

/// The helper definitions as C++ source (compiles with clang and g++ after
/// the prelude; no system headers).
const char* codegen_support_source();

}  // namespace cppi::cpu
