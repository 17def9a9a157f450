#include "gpu_codegen/codegen/cuda_support.h"

#include <string>

#include "codegen/c_printer.h"

namespace cppi::gpu {

namespace {

/// The block's header and the 8- and 16-byte vector loads and stores.
constexpr char kVectorAccesses[] = R"cppi_support(
// ---- cppinductor CUDA codegen support (gpu_codegen/codegen/cuda_support.cpp) ----
#define CPPI_INLINE __device__ __forceinline__

// 16-byte (or narrower) vector accesses: a struct as aligned as it is wide,
// which NVVM loads with one ld.global.v* instruction.
template <class T, int N>
struct alignas(sizeof(T) * N) cppi_vec {
  T v[N];
};
// Stores of 8 and 16 bytes go out as one st.global.v2/v4 through inline
// PTX: NVVM split the store of a lane-by-lane filled cppi_vec (as a struct,
// float4 or uint4 alike) into scalar stores once the address came from an
// unravelled index (the transformer's gelu backward: four st.global.f32 per
// thread, slower than one st.global.v4).
template <class T, int N> CPPI_INLINE void cppi_store_vec(T* p, const cppi_vec<T, N>& v) {
  constexpr int bytes = sizeof(T) * N;
  const unsigned int* w = reinterpret_cast<const unsigned int*>(&v);
  if constexpr (bytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < bytes / 16; ++i) {
      asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %0; st.global.v4.b32 [g], {%1, %2, %3, %4}; }"
                   : : "l"(reinterpret_cast<char*>(p) + 16 * i), "r"(w[4 * i]), "r"(w[4 * i + 1]),
                       "r"(w[4 * i + 2]), "r"(w[4 * i + 3]) : "memory");
    }
  } else if constexpr (bytes == 8) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %0; st.global.v2.b32 [g], {%1, %2}; }"
                 : : "l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    *reinterpret_cast<cppi_vec<T, N>*>(p) = v;  // one scalar store anyway
  }
}

)cppi_support";

/// Integer min and max, division by a constant (magic numbers), atomics, float tests, sincos.
constexpr char kIndexAndFloatTests[] = R"cppi_support(
template <class T> CPPI_INLINE T cppi_max_i(T a, T b) { return a > b ? a : b; }
// x / d of an index x >= 0 by a constant d (not a power of two, which
// prints as a shift) as a multiply-high: gpu::division_magic gives magic and
// shift. NVVM does this itself at full optimisation, but under
// --Ofast-compile it leaves div.s64, a loop of ~70 instructions, in every
// unravelled index (gelu(x + b) is measurably slower with it).
CPPI_INLINE int64_t cppi_udiv_magic(int64_t x, uint64_t magic, int shift) {
  const uint64_t n = (uint64_t)x, t = __umul64hi(magic, n);
  return (int64_t)((t + ((n - t) >> 1)) >> shift);
}
// ir nonzero_divisor: CUDA eager does not raise on an integer division by
// zero, so neither do we; the divisor is taken as 1.
template <class T> CPPI_INLINE T cppi_nonzero_divisor(T x) { return x == 0 ? (T)1 : x; }

// An accumulating store (index_put(accumulate=True), scatter_add): threads
// may add into one element, so each add is atomic. int64 adds as unsigned
// (the same two's-complement bits, and the wrap the loop IR defines).
CPPI_INLINE void cppi_atomic_add(float* p, float v) { atomicAdd(p, v); }
CPPI_INLINE void cppi_atomic_add(double* p, double v) { atomicAdd(p, v); }
CPPI_INLINE void cppi_atomic_add(int32_t* p, int32_t v) { atomicAdd(reinterpret_cast<int*>(p), (int)v); }
CPPI_INLINE void cppi_atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}

// An index outside its dimension (one eager rejects) fails the kernel with a
// device-side assert, as eager's CUDA kernels do: the next synchronisation
// raises "device-side assert triggered" and the context is lost. The index
// is clamped as well, so no thread reads outside the buffer meanwhile.
extern "C" __device__ void __assertfail(const char* message, const char* file, unsigned line, const char* function,
                                        size_t char_size);
__device__ __noinline__ void cppi_index_assert(int64_t value, int64_t size) {
  printf("cppinductor: index %lld is out of bounds for dimension with size %lld\n", (long long)value, (long long)size);
  __assertfail("index out of bounds", "cppinductor CUDA kernel", 0, "cppi_index_assert", 1);
}
template <class T> CPPI_INLINE T cppi_min_i(T a, T b) { return a < b ? a : b; }

// Float math: CUDA's accurate libdevice functions (no fast-math intrinsics).
#define CPPI_MATH1(name, f32, f64)                          \
  CPPI_INLINE float name(float x) { return f32(x); }       \
  CPPI_INLINE double name(double x) { return f64(x); }
#define CPPI_MATH2(name, f32, f64)                                   \
  CPPI_INLINE float name(float x, float y) { return f32(x, y); }    \
  CPPI_INLINE double name(double x, double y) { return f64(x, y); }
CPPI_MATH1(cppi_abs, fabsf, fabs)
CPPI_MATH1(cppi_exp, expf, exp)
CPPI_MATH1(cppi_exp2, exp2f, exp2)
CPPI_MATH1(cppi_expm1, expm1f, expm1)
CPPI_MATH1(cppi_log, logf, log)
CPPI_MATH1(cppi_log2, log2f, log2)
CPPI_MATH1(cppi_log10, log10f, log10)
CPPI_MATH1(cppi_log1p, log1pf, log1p)
CPPI_MATH1(cppi_sqrt, sqrtf, sqrt)
CPPI_MATH1(cppi_sin, sinf, sin)
CPPI_MATH1(cppi_cos, cosf, cos)
CPPI_MATH1(cppi_tan, tanf, tan)
CPPI_MATH1(cppi_asin, asinf, asin)
CPPI_MATH1(cppi_acos, acosf, acos)
CPPI_MATH1(cppi_atan, atanf, atan)
CPPI_MATH1(cppi_sinh, sinhf, sinh)
CPPI_MATH1(cppi_cosh, coshf, cosh)
CPPI_MATH1(cppi_tanh, tanhf, tanh)
CPPI_MATH1(cppi_asinh, asinhf, asinh)
CPPI_MATH1(cppi_acosh, acoshf, acosh)
CPPI_MATH1(cppi_atanh, atanhf, atanh)
CPPI_MATH1(cppi_erf, erff, erf)
CPPI_MATH1(cppi_erfc, erfcf, erfc)
CPPI_MATH1(cppi_erfinv, erfinvf, erfinv)
CPPI_MATH1(cppi_lgamma, lgammaf, lgamma)
CPPI_MATH1(cppi_floor, floorf, floor)
CPPI_MATH1(cppi_ceil, ceilf, ceil)
CPPI_MATH1(cppi_round, rintf, rint)  // half to even
CPPI_MATH1(cppi_trunc, truncf, trunc)
CPPI_MATH2(cppi_fmod, fmodf, fmod)
CPPI_MATH2(cppi_pow, powf, pow)
CPPI_MATH2(cppi_atan2, atan2f, atan2)
CPPI_MATH2(cppi_hypot, hypotf, hypot)
CPPI_MATH2(cppi_copysign, copysignf, copysign)
#undef CPPI_MATH1
#undef CPPI_MATH2
CPPI_INLINE void cppi_sincos(float x, float* s, float* c) { sincosf(x, s, c); }
CPPI_INLINE void cppi_sincos(double x, double* s, double* c) { sincos(x, s, c); }
CPPI_INLINE bool cppi_isnan(float a) { return a != a; }
CPPI_INLINE bool cppi_isnan(double a) { return a != a; }
CPPI_INLINE bool cppi_isinf(float a) { return fabsf(a) == __int_as_float(0x7f800000); }
CPPI_INLINE bool cppi_isinf(double a) { return fabs(a) == __longlong_as_double(0x7ff0000000000000LL); }
CPPI_INLINE bool cppi_isfinite(float a) { return fabsf(a) < __int_as_float(0x7f800000); }
CPPI_INLINE bool cppi_isfinite(double a) { return fabs(a) < __longlong_as_double(0x7ff0000000000000LL); }
CPPI_INLINE bool cppi_signbit(float a) { return (__float_as_uint(a) >> 31) != 0; }
CPPI_INLINE bool cppi_signbit(double a) { return __double_as_longlong(a) < 0; }

)cppi_support";

/// Reduced-float casts by the shared table's names, and what Philox needs of this target.
constexpr char kPhiloxPrimitives[] = R"cppi_support(

// Reduced floats: the names the shared scalar table's casts use.
CPPI_INLINE float cppi_half_to_float(cppi_half h) { return cppi_to_float(h); }
CPPI_INLINE float cppi_bf16_to_float(cppi_bf16 b) { return cppi_to_float(b); }

CPPI_INLINE void cppi_mul_hilo(uint32_t m, uint32_t a, uint32_t& hi, uint32_t& lo) {
  hi = __umulhi(m, a);
  lo = m * a;
}
CPPI_INLINE float cppi_box_muller(float u1, float u2) {
  return sqrtf(-2.0f * logf(fmaxf(u1, 1.0e-7f))) * cosf(6.283185307179586f * u2);
}
)cppi_support";

/// Welford steps and the combine ops of the reductions' states.
constexpr char kReductionStates[] = R"cppi_support(

// A Welford step given 1 / (weight + 1): row kernels pass a constant (cached
// rows: the slot decides the weight) or cppi_welford_rcp, so the serial chain
// has no IEEE division. NaN and inf behave as in cppi_welford_update; the mean
// differs from it by at most an ulp per step.
template <class T> CPPI_INLINE cppi_welford<T> cppi_welford_add(cppi_welford<T> acc, T x, T inv_weight) {
  acc.weight = acc.weight + T(1);
  const T delta = x - acc.mean;
  acc.mean = acc.mean + delta * inv_weight;
  acc.m2 = acc.m2 + delta * (x - acc.mean);
  return acc;
}
// 1 / w for a Welford weight w >= 1 (a count): the hardware's approximate
// reciprocal and one Newton step, within an ulp of the correctly rounded one
// and exact for powers of two. __frcp_rn's special-case path made a column
// variance over 8192 rows instruction-bound; with this it is as fast as a
// column sum.
CPPI_INLINE float cppi_welford_rcp(float w) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(w));
  return r * (2.0f - w * r);
}
CPPI_INLINE double cppi_welford_rcp(double w) { return __drcp_rn(w); }

// Reduction ops the prelude lacks (it has sum, max, min, welford, argmax/min).
struct cppi_prod_op {
  template <typename T>
  CPPI_INLINE T operator()(T a, T b) const { return a * b; }
};
struct cppi_any_op {
  template <typename T>
  CPPI_INLINE T operator()(T a, T b) const { return (T)(a || b); }
};
struct cppi_all_op {
  template <typename T>
  CPPI_INLINE T operator()(T a, T b) const { return (T)(a && b); }
};
// ---- end of codegen support ----
)cppi_support";

}  // namespace

const char* cuda_codegen_support_source() {
  static const std::string text = std::string(kVectorAccesses) + codegen::c_integer_support_source() +
                                  kIndexAndFloatTests + codegen::c_float_division_support_source() +
                                  kPhiloxPrimitives + codegen::c_philox_support_source() + kReductionStates;
  return text.c_str();
}

const CudaHeader& cuda_codegen_header() {
  static const CudaHeader header{kCudaCodegenHeaderName,
                                 std::string("// cppinductor: what generated CUDA modules include.\n"
                                             "#pragma once\n#include \"cppinductor_cuda_prelude.cuh\"\n") +
                                     cuda_codegen_support_source()};
  return header;
}

NvrtcOptions with_codegen_header(NvrtcOptions options) {
  for (const CudaHeader& h : options.headers)
    if (h.name == kCudaCodegenHeaderName) return options;
  options.headers.push_back(cuda_codegen_header());
  return options;
}

DivisionMagic division_magic(int64_t d) {
  const uint64_t u = static_cast<uint64_t>(d);
  int l = 0;
  while (l < 64 && (uint64_t{1} << l) < u) ++l;  // 2^(l-1) < d <= 2^l
  const unsigned __int128 numerator = static_cast<unsigned __int128>((uint64_t{1} << l) - u) << 64;
  return DivisionMagic{static_cast<uint64_t>(numerator / u) + 1, l - 1};
}

}  // namespace cppi::gpu
