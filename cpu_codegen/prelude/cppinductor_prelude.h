/// \file
/// The runtime prelude every generated CPU kernel includes
/// (`#include "cppinductor_prelude.h"`). It is embedded into the library at
/// build time and handed to the compiler from memory, so a kernel compile
/// parses this file and nothing else: no system header is included here
/// (parsing <math.h> alone would cost more than a small kernel's compile,
/// see DESIGN "CPU codegen").
///
/// What it gives the C++ printer:
///   - fixed-width integer typedefs, `cppi_half` / `cppi_bf16` storage types
///     with conversions that match c10::Half / c10::BFloat16 bit for bit;
///   - scalar math (`cppi_exp(float)`, ...) on compiler builtins;
///   - vector types of every width (`cppi_f32x16`, ...) plus `cppi_vf32`,
///     sized to the host ISA (CPPI_VEC_BYTES: 64 on AVX-512, 32 on AVX/AVX2);
///   - vector math from SLEEF (1.0 ULP variants), lane loops where SLEEF or
///     the ISA is missing;
///   - NaN-propagating max/min as PyTorch defines them;
///   - `cppi_parallel_for` / `cppi_parallel_reduce` running on the process's
///     OpenMP (libgomp) thread pool, the one torch itself uses.
///
/// Semantics: no fast-math is assumed. NaN and inf propagate as in eager
/// PyTorch; kernels are compiled without -ffinite-math-only and with
/// -ffp-contract=off.
///
/// The file compiles with clang and g++ (C++17, GNU vector extensions) and is
/// also included directly by the unit tests, after the standard headers.
/// Vector types and vector math live in two parts of it
/// (prelude_vector_types.h, prelude_vector_math.h), which embed_prelude.cmake
/// pastes in where they are included.
#pragma once

#define CPPI_PRELUDE_VERSION 1

// Static inline helpers over vectors wider than the ISA are fine (they are
// inlined or split), so GCC's ABI note about them is noise.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// ---------------------------------------------------------------------------
// Integer types. The compiler-predefined macros name exactly the types glibc's
// <stdint.h> uses, so these typedefs agree with it when both are seen.
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;

#define CPPI_INLINE static inline __attribute__((always_inline))

// Put before a loop the printer has already vectorised by hand, or before a
// scalar tail (fewer iterations than a vector): it keeps the compiler from
// vectorising/unrolling it again. On a tail with a libm call (expf...) the
// loop vectoriser otherwise builds 16-wide calls that are scalarised into
// dozens of calls, a large part of a small kernel's compile time.
#if defined(__clang__)
#define CPPI_NO_AUTOVEC _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#elif defined(__GNUC__)
#define CPPI_NO_AUTOVEC _Pragma("GCC unroll 1")
#else
#define CPPI_NO_AUTOVEC
#endif

// Before a loop that encloses another loop: no unrolling. Unrolling an
// outer loop copies the whole nest under it and buys nothing the inner
// loop's own unrolling does not (SourceWriter in codegen/c_printer.h).
#if defined(__clang__)
#define CPPI_ROLLED _Pragma("clang loop unroll(disable)")
#elif defined(__GNUC__)
#define CPPI_ROLLED _Pragma("GCC unroll 1")
#else
#define CPPI_ROLLED
#endif

// ---------------------------------------------------------------------------
// Runtime interface. The library (cpu_codegen/jit/runtime.cpp) fills a table
// of function pointers; kernels reach the thread pool only through it.
//
// In-process JIT: `cppi_runtime` is resolved by the JIT to the library's
// table. g++ shared objects: the kernel .so defines its own `cppi_runtime_slot`
// and the loader copies the table into it right after dlopen, because a
// kernel .so loaded RTLD_LOCAL from a Python extension that was itself loaded
// RTLD_LOCAL cannot see the library's symbols.
extern "C" {
typedef void (*cppi_parallel_body_fn)(void* ctx, int32_t thread, int32_t num_threads);

struct cppi_runtime_abi {
  uint32_t abi_version;  // CPPI_RUNTIME_ABI_VERSION
  uint32_t size;         // sizeof(cppi_runtime_abi), checked by the loader
  // Runs fn(ctx, t, n) on a team of n <= num_threads workers of the shared
  // OpenMP pool (t in [0, n)) and returns when all are done. Runs inline with
  // n == 1 when already inside a parallel region or when no pool is loaded.
  void (*parallel)(cppi_parallel_body_fn fn, void* ctx, int32_t num_threads);
  // The number of threads kernels should split work for (set_num_threads).
  int32_t (*max_threads)(void);
  // Records an index outside its range for the caller of the kernel,
  // which raises IndexError once the kernel returns (cpu::run_checked).
  void (*index_error)(int64_t value, int64_t size);
  // Faults in the pages of [p, p + bytes) for writing in one batch when they
  // are fresh (cpu_codegen/jit/prefault.h); best effort, contents unchanged.
  void (*prefault_for_write)(void* p, int64_t bytes);
  // Records an integer division or remainder by zero, for the caller to raise
  // ZeroDivisionError once the kernel returns (as eager does).
  void (*zero_division)(void);
};

#define CPPI_RUNTIME_ABI_VERSION 2

#if defined(CPPI_PRELUDE_DEFINES_RUNTIME)
__attribute__((visibility("default"))) struct cppi_runtime_abi cppi_runtime_slot = {0, 0, 0, 0, 0, 0, 0};
#define CPPI_RT cppi_runtime_slot
#else
extern const struct cppi_runtime_abi cppi_runtime;
#define CPPI_RT cppi_runtime
#endif
}  // extern "C"

// ---------------------------------------------------------------------------
// Bit casts and small helpers.
template <class To, class From>
CPPI_INLINE To cppi_bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "cppi_bit_cast: size mismatch");
  return __builtin_bit_cast(To, from);
}

// An index eager would reject (outside [lowest, size): lowest is -size where
// negative indices count from the end, else 0) is reported; the kernel goes
// on with it clamped into range, so it never touches memory outside a
// buffer, and its caller raises IndexError when it returns.
CPPI_INLINE void cppi_check_index(int64_t value, int64_t lowest, int64_t size) {
  if (__builtin_expect(value < lowest || value >= size, 0)) CPPI_RT.index_error(value, size);
}

// An integer divisor of 0 is reported (the call raises ZeroDivisionError, as
// eager does) and taken as 1 meanwhile (ir nonzero_divisor).
template <class T>
CPPI_INLINE T cppi_nonzero_divisor(T x) {
  if (__builtin_expect(x == 0, 0)) {
    CPPI_RT.zero_division();
    return (T)1;
  }
  return x;
}

// float -> int32/int64 as x86's truncating conversions give it, and so eager
// on x86: NaN and values out of range become the most negative value. A C
// cast is undefined there, and clang folded (int32_t)-INFINITY (a
// masked_fill's -inf cast to int) to an arbitrary number.
template <class I, class F>
CPPI_INLINE I cppi_float_to_int(F x) {
  const F limit = (F)((uint64_t)1 << (sizeof(I) * 8 - 1));  // 2^31 or 2^63, exact in float
  if (x >= -limit && x < limit) return (I)x;                  // false for NaN
  return (I)((uint64_t)1 << (sizeof(I) * 8 - 1));
}

template <class T>
CPPI_INLINE T cppi_min_i(T a, T b) { return a < b ? a : b; }
template <class T>
CPPI_INLINE T cppi_max_i(T a, T b) { return a > b ? a : b; }
CPPI_INLINE int64_t cppi_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------
// Reduced-precision storage types. Arithmetic happens in float; these only
// store bits, so they are structs (no accidental integer arithmetic).
struct cppi_half { uint16_t bits; };
struct cppi_bf16 { uint16_t bits; };

// IEEE binary16 <-> binary32 without F16C, exact and branch-free; the same
// algorithm as c10/util/Half.h (fp16_ieee_{to,from}_fp32_value), so results
// match eager bit for bit (NaN becomes the quiet NaN 0x7E00 with sign).
CPPI_INLINE float cppi_half_to_float(cppi_half h) {
  const uint32_t w = (uint32_t)h.bits << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = cppi_bit_cast<float>((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = cppi_bit_cast<float>((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? cppi_bit_cast<uint32_t>(denormalized)
                                          : cppi_bit_cast<uint32_t>(normalized));
  return cppi_bit_cast<float>(result);
}

CPPI_INLINE cppi_half cppi_float_to_half(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const uint32_t w = cppi_bit_cast<uint32_t>(f);
  const float abs_f = cppi_bit_cast<float>(w & 0x7FFFFFFFu);
  float base = (abs_f * scale_to_inf) * scale_to_zero;
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = cppi_bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = cppi_bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  cppi_half h;
  h.bits = (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
  return h;
}

CPPI_INLINE float cppi_bf16_to_float(cppi_bf16 b) {
  return cppi_bit_cast<float>((uint32_t)b.bits << 16);
}

// Round to nearest even; NaN becomes 0x7FC0 as in c10::BFloat16.
CPPI_INLINE cppi_bf16 cppi_float_to_bf16(float f) {
  cppi_bf16 b;
  if (f != f) {
    b.bits = 0x7FC0u;
    return b;
  }
  const uint32_t u = cppi_bit_cast<uint32_t>(f);
  const uint32_t rounding_bias = ((u >> 16) & 1u) + 0x7FFFu;
  b.bits = (uint16_t)((u + rounding_bias) >> 16);
  return b;
}

// ---------------------------------------------------------------------------
// Scalar math. Builtins lower to LLVM/GCC intrinsics or libm calls; with
// -fno-math-errno they stay pure. Overloaded for float and double.
#define CPPI_SCALAR_UNARY(name, builtin)                                   \
  CPPI_INLINE float cppi_##name(float x) { return __builtin_##builtin##f(x); } \
  CPPI_INLINE double cppi_##name(double x) { return __builtin_##builtin(x); }
#define CPPI_SCALAR_BINARY(name, builtin)                                            \
  CPPI_INLINE float cppi_##name(float x, float y) { return __builtin_##builtin##f(x, y); } \
  CPPI_INLINE double cppi_##name(double x, double y) { return __builtin_##builtin(x, y); }

// name, builtin, SLEEF base name, SLEEF accuracy suffix
#define CPPI_FOR_EACH_UNARY_MATH(X) \
  X(exp_sleef, exp, exp, u10)       \
  X(exp2, exp2, exp2, u10)          \
  X(expm1_sleef, expm1, expm1, u10) \
  X(log, log, log, u10)             \
  X(log2, log2, log2, u10)          \
  X(log10, log10, log10, u10)       \
  X(log1p_unguarded, log1p, log1p, u10) \
  X(sin_sleef, sin, sin, u10)       \
  X(cos_sleef, cos, cos, u10)       \
  X(tan, tan, tan, u10)             \
  X(asin, asin, asin, u10)          \
  X(acos, acos, acos, u10)          \
  X(atan, atan, atan, u10)          \
  X(sinh_unguarded, sinh, sinh, u10) \
  X(cosh_unguarded, cosh, cosh, u10) \
  X(tanh_sleef, tanh, tanh, u10)    \
  X(asinh, asinh, asinh, u10)       \
  X(acosh, acosh, acosh, u10)       \
  X(atanh, atanh, atanh, u10)       \
  X(erf_sleef, erf, erf, u10)       \
  X(erfc, erfc, erfc, u15)          \
  X(lgamma, lgamma, lgamma, u10)    \
  X(cbrt, cbrt, cbrt, u10)

#define CPPI_FOR_EACH_BINARY_MATH(X) \
  X(pow, pow, pow, u10)              \
  X(atan2, atan2, atan2, u10)        \
  X(hypot, hypot, hypot, u05)

#define CPPI_SCALAR_UNARY_X(name, builtin, sleef, acc) CPPI_SCALAR_UNARY(name, builtin)
#define CPPI_SCALAR_BINARY_X(name, builtin, sleef, acc) CPPI_SCALAR_BINARY(name, builtin)
CPPI_FOR_EACH_UNARY_MATH(CPPI_SCALAR_UNARY_X)
CPPI_FOR_EACH_BINARY_MATH(CPPI_SCALAR_BINARY_X)
CPPI_SCALAR_UNARY(exp, exp)
CPPI_SCALAR_UNARY(erf, erf)
CPPI_SCALAR_UNARY(sin, sin)
CPPI_SCALAR_UNARY(cos, cos)
CPPI_SCALAR_UNARY(tanh, tanh)
CPPI_SCALAR_UNARY(expm1, expm1)
CPPI_SCALAR_UNARY(sqrt, sqrt)
CPPI_SCALAR_UNARY(floor, floor)
CPPI_SCALAR_UNARY(ceil, ceil)
CPPI_SCALAR_UNARY(trunc, trunc)
CPPI_SCALAR_UNARY(round, rint)  // torch.round: half to even (default rounding mode)
CPPI_SCALAR_BINARY(fmod, fmod)
#undef CPPI_SCALAR_UNARY_X
#undef CPPI_SCALAR_BINARY_X

CPPI_INLINE float cppi_abs(float x) { return __builtin_fabsf(x); }
CPPI_INLINE double cppi_abs(double x) { return __builtin_fabs(x); }
CPPI_INLINE bool cppi_isnan(float x) { return x != x; }
CPPI_INLINE bool cppi_isnan(double x) { return x != x; }

// torch.maximum / torch.minimum / max reductions: NaN wins.
template <class T>
CPPI_INLINE T cppi_max(T a, T b) {
  return (a != a) ? a : (b != b) ? b : (a > b ? a : b);
}
template <class T>
CPPI_INLINE T cppi_min(T a, T b) {
  return (a != a) ? a : (b != b) ? b : (a < b ? a : b);
}

CPPI_INLINE float cppi_inf_f32() { return __builtin_inff(); }
CPPI_INLINE float cppi_nan_f32() { return __builtin_nanf(""); }
CPPI_INLINE double cppi_inf_f64() { return __builtin_inf(); }
CPPI_INLINE double cppi_nan_f64() { return __builtin_nan(""); }

#include "cpu_codegen/prelude/prelude_vector_types.h"
#include "cpu_codegen/prelude/prelude_vector_math.h"

// ---------------------------------------------------------------------------
// Parallel loops on the shared OpenMP pool.
//
// cppi_parallel_for(begin, end, grain, body) calls body(b, e) on disjoint
// chunks covering [begin, end) exactly once, like at::parallel_for: the range
// is split into min(threads, ceil(n / grain)) equal chunks. A range of at most
// `grain` iterations (or a single thread) runs inline on the caller.
//
// Kernels pass bodies that capture by value, and each chunk runs a copy of
// the body that nothing else can reach: its buffer pointers then live in
// registers. A body capturing by reference reads them from the kernel's
// frame, whose address the thread pool has; every vector store (memcpy, so
// it may alias anything) made the compiler load them again: four loads per
// vector of relu(x), slower than eager on 100000 x 16 floats.
template <class F>
struct cppi_parallel_ctx {
  const F* body;
  int64_t begin, end, chunk, num_chunks;
};

template <class F>
static void cppi_parallel_trampoline(void* p, int32_t thread, int32_t num_threads) {
  const cppi_parallel_ctx<F>* c = (const cppi_parallel_ctx<F>*)p;
  // The team may be smaller than asked for (nested regions get one thread),
  // so each thread strides over the chunks instead of owning exactly one.
  const F body = *c->body;
  for (int64_t k = thread; k < c->num_chunks; k += num_threads) {
    const int64_t b = c->begin + k * c->chunk;
    const int64_t e = cppi_min_i(b + c->chunk, c->end);
    body(b, e);
  }
}

// How many chunks a range is split into (1 means run inline).
CPPI_INLINE int64_t cppi_parallel_num_chunks(int64_t begin, int64_t end, int64_t grain) {
  const int64_t n = end - begin;
  if (n <= 0) return 0;
  if (grain < 1) grain = 1;
  if (n <= grain) return 1;
  const int64_t threads = CPPI_RT.max_threads ? CPPI_RT.max_threads() : 1;
  return cppi_max_i<int64_t>(1, cppi_min_i<int64_t>(threads, cppi_div_up(n, grain)));
}

// A parallel chunk's dense output range, faulted in before the chunk writes
// it (the schedule's prefault_outputs).
CPPI_INLINE void cppi_prefault_for_write(void* p, int64_t bytes) {
  if (CPPI_RT.prefault_for_write) CPPI_RT.prefault_for_write(p, bytes);
}

template <class F>
static inline void cppi_parallel_for(int64_t begin, int64_t end, int64_t grain, const F& body) {
  const int64_t num_chunks = cppi_parallel_num_chunks(begin, end, grain);
  if (num_chunks == 0) return;
  if (num_chunks == 1 || !CPPI_RT.parallel) {
    const F inline_body = body;
    inline_body(begin, end);
    return;
  }
  cppi_parallel_ctx<F> ctx = {&body, begin, end, cppi_div_up(end - begin, num_chunks), 0};
  ctx.num_chunks = cppi_div_up(end - begin, ctx.chunk);
  CPPI_RT.parallel(&cppi_parallel_trampoline<F>, &ctx, (int32_t)ctx.num_chunks);
}

// Deterministic parallel reduction: partial(b, e, identity) -> T reduces one
// chunk, combine(T, T) -> T merges partials, always in chunk order, so the
// result depends only on the thread count setting, not on scheduling.
// T must be trivially copyable (scalars, small structs such as Welford state).
template <class T, class Partial>
struct cppi_reduce_ctx {
  const Partial* partial;
  T* partials;
  T identity;
};

template <class T, class Partial, class Combine>
static inline T cppi_parallel_reduce(int64_t begin, int64_t end, int64_t grain, T identity,
                                     const Partial& partial, const Combine& combine) {
  static_assert(__is_trivially_copyable(T), "cppi_parallel_reduce: T must be trivially copyable");
  const int64_t num_chunks = cppi_parallel_num_chunks(begin, end, grain);
  if (num_chunks == 0) return identity;
  if (num_chunks == 1 || !CPPI_RT.parallel) {
    const Partial inline_partial = partial;
    return inline_partial(begin, end, identity);
  }
  const int64_t chunk = cppi_div_up(end - begin, num_chunks);
  const int64_t used_chunks = cppi_div_up(end - begin, chunk);
  // Aligned for T: a vector state (a column reduction's lanes) is stored
  // with aligned moves, and plain alloca aligns to 16 bytes only.
  T* partials = (T*)__builtin_alloca_with_align(sizeof(T) * (size_t)used_chunks, 8 * alignof(T));
  const int64_t begin0 = begin;
  auto body = [=](int64_t b, int64_t e) { partials[(b - begin0) / chunk] = partial(b, e, identity); };
  cppi_parallel_ctx<decltype(body)> ctx = {&body, begin, end, chunk, used_chunks};
  CPPI_RT.parallel(&cppi_parallel_trampoline<decltype(body)>, &ctx, (int32_t)used_chunks);
  T acc = partials[0];
  for (int64_t k = 1; k < used_chunks; ++k) acc = combine(acc, partials[k]);
  return acc;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
