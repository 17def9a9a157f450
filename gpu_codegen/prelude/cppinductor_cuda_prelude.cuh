/// \file
/// The prelude every generated CUDA kernel includes. It is embedded into the
/// library as text (NVRTC cannot be relied on to find system headers) and
/// served to NVRTC from memory under the name cppinductor_cuda_prelude.cuh.
///
/// Self-contained on purpose: no <stdint.h>, no cuda_fp16.h. It also compiles
/// as plain host C++ (g++/clang), which is how the half/bf16 conversions are
/// tested bit for bit on machines without a GPU.
///
/// Semantics the printer relies on:
/// - cppi_half / cppi_bf16 are 16-bit storage types (the names support/dtype.h
///   gives them). Arithmetic happens in float: cppi_to_float on load,
///   cppi_float_to_half / cppi_float_to_bf16 (round to nearest even, as torch
///   rounds) on store.
/// - cppi_max / cppi_min propagate NaN as torch.maximum / torch.max do: if
///   either operand is NaN the result is NaN. On the device, float ones
///   order signed zeros as eager's CUDA kernels do (-0 < +0).
/// - Warp and block reductions run over every thread of the warp / block, so
///   the block's thread count must be a multiple of 32 and every thread must
///   call them (no early return before a reduction).
/// - Welford partials are {mean, m2, weight}; weight is a float count, so
///   partials from masked-out lanes are {0, 0, 0} and combine to a no-op.
/// - argmax/argmin keep torch's answer: the first index of the extreme value,
///   and NaN counts as the extreme (the first NaN wins). Masked-out lanes
///   contribute {value, index = -1}, which never wins.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CPPI_HOST_DEVICE __host__ __device__ __forceinline__
#define CPPI_DEVICE __device__ __forceinline__
#define CPPI_ON_DEVICE 1
#else
#define CPPI_HOST_DEVICE inline
#define CPPI_ON_DEVICE 0
#endif

// ---------------------------------------------------------------------------
// Fixed-width integers. NVRTC has no <stdint.h>; these match the LP64 ABI the
// host side uses for the same buffers (int64_t is 64 bits either way).
#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

static_assert(sizeof(int64_t) == 8 && sizeof(int32_t) == 4 && sizeof(int16_t) == 2 &&
                  sizeof(int8_t) == 1,
              "fixed-width integers have the wrong size");

// ---------------------------------------------------------------------------
// float -> int32/int64 as a CUDA cast gives it, and so eager on CUDA (cvt.rzi:
// truncate, clamp to the type's range, NaN -> 0), through the intrinsics,
// which are defined for every input where a C cast of an out-of-range float
// is not (the CPU's cppi_float_to_int follows x86 instead, as eager there).
template <class I, class F>
CPPI_HOST_DEVICE I cppi_float_to_int(F x) {
#if defined(__CUDA_ARCH__)
  if (sizeof(I) == 4) return (I)(sizeof(F) == 4 ? __float2int_rz((float)x) : __double2int_rz((double)x));
  return (I)(sizeof(F) == 4 ? __float2ll_rz((float)x) : __double2ll_rz((double)x));
#else
  const F limit = (F)((uint64_t)1 << (sizeof(I) * 8 - 1));
  if (x != x) return 0;
  if (x <= -limit) return (I)((uint64_t)1 << (sizeof(I) * 8 - 1));
  if (x >= limit) return (I)(((uint64_t)1 << (sizeof(I) * 8 - 1)) - 1);
  return (I)x;
#endif
}

// ---------------------------------------------------------------------------
// Bit casts that compile on host and device without <string.h>.
CPPI_HOST_DEVICE uint32_t cppi_float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CPPI_HOST_DEVICE float cppi_bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---------------------------------------------------------------------------
// 16-bit floats as storage.
struct cppi_half {
  uint16_t bits;
};
struct cppi_bf16 {
  uint16_t bits;
};

// IEEE half → float, exact. The host path is the branch-free conversion
// c10::Half uses (fp16_ieee_to_fp32_value); the device path is one cvt.
CPPI_HOST_DEVICE float cppi_half_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = cppi_bits_float((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = cppi_bits_float((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  return cppi_bits_float(sign | (two_w < denormalized_cutoff ? cppi_float_bits(denormalized)
                                                             : cppi_float_bits(normalized)));
#endif
}

// float → IEEE half, round to nearest even; overflow → inf, NaN stays NaN.
CPPI_HOST_DEVICE uint16_t cppi_float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  // The packed form (f in the low half): ptxas makes it one F2FP, where the
  // scalar cvt.rn.f16.f32 is an F2F of a quarter of its throughput.
  uint32_t packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(f));
  return (uint16_t)packed;
#else
  // c10's fp16_ieee_from_fp32_value: let float arithmetic do the rounding.
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const uint32_t w = cppi_float_bits(f);
  float base = (cppi_bits_float(w & 0x7FFFFFFFu) * scale_to_inf) * scale_to_zero;
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = cppi_bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = cppi_float_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
#endif
}

CPPI_HOST_DEVICE float cppi_bf16_bits_to_float(uint16_t b) {
  return cppi_bits_float((uint32_t)b << 16);
}

// float → bfloat16, round to nearest even; NaN stays NaN (0x7FC0 off the
// device, c10::BFloat16's rule).
CPPI_HOST_DEVICE uint16_t cppi_float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // Packed, as for half: one F2FP, not an F2F. A fused bf16 chain rounds
  // each intermediate as eager does (GPT-2's gelu_new: seven per element),
  // and F2F's throughput bound such kernels (docs/benchmark-notes.md).
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(f));
  return (uint16_t)packed;
#else
  const uint32_t u = cppi_float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  const uint32_t rounding_bias = ((u >> 16) & 1u) + 0x7FFFu;
  return (uint16_t)((u + rounding_bias) >> 16);
#endif
}

CPPI_HOST_DEVICE float cppi_to_float(cppi_half h) { return cppi_half_bits_to_float(h.bits); }
CPPI_HOST_DEVICE float cppi_to_float(cppi_bf16 b) { return cppi_bf16_bits_to_float(b.bits); }
CPPI_HOST_DEVICE cppi_half cppi_float_to_half(float f) {
  cppi_half h;
  h.bits = cppi_float_to_half_bits(f);
  return h;
}
CPPI_HOST_DEVICE cppi_bf16 cppi_float_to_bf16(float f) {
  cppi_bf16 b;
  b.bits = cppi_float_to_bf16_bits(f);
  return b;
}

// Two floats rounded at once, as cppi_float_to_half / cppi_float_to_bf16
// round each: on the device one packed cvt (one F2FP) for both. The printer
// pairs the roundings of two neighbouring lanes of a vectorised kernel
// (GPT-2's gelu_new rounds seven intermediates per element, as eager does).
CPPI_HOST_DEVICE void cppi_float2_to_half(float a, float b, cppi_half& ra, cppi_half& rb) {
#if defined(__CUDA_ARCH__)
  uint32_t packed;  // {high, low} = {b, a}
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(b), "f"(a));
  ra.bits = (uint16_t)packed;
  rb.bits = (uint16_t)(packed >> 16);
#else
  ra = cppi_float_to_half(a);
  rb = cppi_float_to_half(b);
#endif
}
CPPI_HOST_DEVICE void cppi_float2_to_bf16(float a, float b, cppi_bf16& ra, cppi_bf16& rb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t packed;  // {high, low} = {b, a}
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(b), "f"(a));
  ra.bits = (uint16_t)packed;
  rb.bits = (uint16_t)(packed >> 16);
#else
  ra = cppi_float_to_bf16(a);
  rb = cppi_float_to_bf16(b);
#endif
}

// Two lanes' sum, difference or product of 16-bit values, rounded once to
// their type: one packed instruction where the float path widens four
// values, runs two float operations and rounds the pair. Float's 24 bits are
// at least twice half's 11 plus 2, so rounding the float result of one of
// these operations on two 16-bit values gives the correctly rounded 16-bit
// result (double rounding is innocuous there): the packed instruction rounds
// as eager's float math and its rounding do. Packed: {high, low} = {lane 1,
// lane 0}, as cvt.rn.*x2 packs them.
enum cppi_pair_op { cppi_pair_add, cppi_pair_sub, cppi_pair_mul };
template <cppi_pair_op op>
CPPI_HOST_DEVICE float cppi_pair_apply(float a, float b) {
  return op == cppi_pair_add ? a + b : op == cppi_pair_sub ? a - b : a * b;
}
template <cppi_pair_op op>
CPPI_HOST_DEVICE void cppi_bf16x2_op(cppi_bf16 a0, cppi_bf16 a1, cppi_bf16 b0, cppi_bf16 b1, cppi_bf16& r0,
                                     cppi_bf16& r1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t a = a0.bits | (uint32_t)a1.bits << 16, b = b0.bits | (uint32_t)b1.bits << 16;
  uint32_t r;
#if __CUDA_ARCH__ >= 900
  if (op == cppi_pair_add) asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  if (op == cppi_pair_sub) asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  if (op == cppi_pair_mul) asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
#else
  // sm_80 has the packed fma only: a * b = fma(a, b, -0), a +- b = fma(b, +-1, a).
  const uint32_t sign = op == cppi_pair_add ? 0x3f803f80u : 0xbf80bf80u;
  if (op == cppi_pair_mul) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
  if (op != cppi_pair_mul) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(b), "r"(sign), "r"(a));
#endif
  r0.bits = (uint16_t)r;
  r1.bits = (uint16_t)(r >> 16);
#else
  cppi_float2_to_bf16(cppi_pair_apply<op>(cppi_to_float(a0), cppi_to_float(b0)),
                      cppi_pair_apply<op>(cppi_to_float(a1), cppi_to_float(b1)), r0, r1);
#endif
}
template <cppi_pair_op op>
CPPI_HOST_DEVICE void cppi_halfx2_op(cppi_half a0, cppi_half a1, cppi_half b0, cppi_half b1, cppi_half& r0,
                                     cppi_half& r1) {
#if defined(__CUDA_ARCH__)
  const uint32_t a = a0.bits | (uint32_t)a1.bits << 16, b = b0.bits | (uint32_t)b1.bits << 16;
  uint32_t r;
  if (op == cppi_pair_add) asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  if (op == cppi_pair_sub) asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  if (op == cppi_pair_mul) asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  r0.bits = (uint16_t)r;
  r1.bits = (uint16_t)(r >> 16);
#else
  cppi_float2_to_half(cppi_pair_apply<op>(cppi_to_float(a0), cppi_to_float(b0)),
                      cppi_pair_apply<op>(cppi_to_float(a1), cppi_to_float(b1)), r0, r1);
#endif
}

// ---------------------------------------------------------------------------
// Combine operations, NaN-propagating like torch. For integers `a != a` is
// false and folds away.
// Max / min reductions fold with these: one compare and one select on the
// accumulator's chain, shorter than the zero-ordering pointwise versions
// below (softmax over 16384 x 4096 is faster with them).
template <typename T>
CPPI_HOST_DEVICE T cppi_fold_max(T a, T b) {
  return (a != a || a > b) ? a : b;
}
template <typename T>
CPPI_HOST_DEVICE T cppi_fold_min(T a, T b) {
  return (a != a || a < b) ? a : b;
}
// Pointwise torch.maximum / minimum (clamp, relu, fmax): the same for
// integers and on the host.
template <typename T>
CPPI_HOST_DEVICE T cppi_max(T a, T b) {
  return cppi_fold_max(a, b);
}
template <typename T>
CPPI_HOST_DEVICE T cppi_min(T a, T b) {
  return cppi_fold_min(a, b);
}
#if CPPI_ON_DEVICE
// Floats on the device: once NaN is ruled out, eager's CUDA kernels take
// ::fmax / ::fmin (torch.maximum, clamp, relu, fmax), which order the zeros:
// max(-0, +0) = +0 and min(-0, +0) = -0 whichever operand comes first.
CPPI_DEVICE float cppi_max(float a, float b) { return (a != a) ? a : (b != b) ? b : fmaxf(a, b); }
CPPI_DEVICE float cppi_min(float a, float b) { return (a != a) ? a : (b != b) ? b : fminf(a, b); }
CPPI_DEVICE double cppi_max(double a, double b) { return (a != a) ? a : (b != b) ? b : fmax(a, b); }
CPPI_DEVICE double cppi_min(double a, double b) { return (a != a) ? a : (b != b) ? b : fmin(a, b); }
#endif

struct cppi_sum_op {
  template <typename T>
  CPPI_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct cppi_max_op {
  template <typename T>
  CPPI_HOST_DEVICE T operator()(T a, T b) const { return cppi_fold_max(a, b); }
};
struct cppi_min_op {
  template <typename T>
  CPPI_HOST_DEVICE T operator()(T a, T b) const { return cppi_fold_min(a, b); }
};

// Welford partial state (Chan et al.'s parallel combine). `weight` is the
// number of elements folded in, as a T so it shuffles like the rest (as
// Inductor's Triton welford does); a float weight counts exactly to 2^24.
template <typename T>
struct cppi_welford {
  T mean;
  T m2;
  T weight;
};

template <typename T>
CPPI_HOST_DEVICE cppi_welford<T> cppi_welford_init() {
  cppi_welford<T> w;
  w.mean = T(0);
  w.m2 = T(0);
  w.weight = T(0);
  return w;
}

template <typename T>
CPPI_HOST_DEVICE cppi_welford<T> cppi_welford_update(cppi_welford<T> acc, T x) {
  acc.weight = acc.weight + T(1);
  const T delta = x - acc.mean;
  acc.mean = acc.mean + delta / acc.weight;
  acc.m2 = acc.m2 + delta * (x - acc.mean);
  return acc;
}

template <typename T>
CPPI_HOST_DEVICE cppi_welford<T> cppi_welford_combine(cppi_welford<T> a, cppi_welford<T> b) {
  const T weight = a.weight + b.weight;
  const T delta = b.mean - a.mean;
  const T b_share = weight == T(0) ? T(0) : b.weight / weight;
  cppi_welford<T> out;
  out.mean = a.mean + delta * b_share;
  out.m2 = a.m2 + b.m2 + delta * delta * a.weight * b_share;
  out.weight = weight;
  return out;
}

struct cppi_welford_op {
  template <typename T>
  CPPI_HOST_DEVICE cppi_welford<T> operator()(cppi_welford<T> a, cppi_welford<T> b) const {
    return cppi_welford_combine(a, b);
  }
};

// argmax / argmin partial state: a value and the flat index it came from.
template <typename T>
struct cppi_arg {
  T value;
  int64_t index;
};

template <typename T>
CPPI_HOST_DEVICE cppi_arg<T> cppi_arg_make(T value, int64_t index) {
  cppi_arg<T> a;
  a.value = value;
  a.index = index;
  return a;
}

/// The partial torch.argmax would pick: NaN first, then the larger value,
/// then the smaller index; index -1 (no element) always loses.
template <typename T>
CPPI_HOST_DEVICE cppi_arg<T> cppi_argmax_combine(cppi_arg<T> a, cppi_arg<T> b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
  return a.index <= b.index ? a : b;
}

template <typename T>
CPPI_HOST_DEVICE cppi_arg<T> cppi_argmin_combine(cppi_arg<T> a, cppi_arg<T> b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan && a.value != b.value) return a.value < b.value ? a : b;
  return a.index <= b.index ? a : b;
}

struct cppi_argmax_op {
  template <typename T>
  CPPI_HOST_DEVICE cppi_arg<T> operator()(cppi_arg<T> a, cppi_arg<T> b) const {
    return cppi_argmax_combine(a, b);
  }
};
struct cppi_argmin_op {
  template <typename T>
  CPPI_HOST_DEVICE cppi_arg<T> operator()(cppi_arg<T> a, cppi_arg<T> b) const {
    return cppi_argmin_combine(a, b);
  }
};

#if CPPI_ON_DEVICE
// ---------------------------------------------------------------------------
// Warp and block reductions. Every lane of a full warp takes part
// (mask 0xffffffff), so all 32 lanes must be present and reach the call.

#define CPPI_FULL_WARP_MASK 0xffffffffu

template <typename T>
CPPI_DEVICE T cppi_shfl_xor(T v, int lane_mask) {
  return __shfl_xor_sync(CPPI_FULL_WARP_MASK, v, lane_mask);
}
template <typename T>
CPPI_DEVICE cppi_welford<T> cppi_shfl_xor(cppi_welford<T> v, int lane_mask) {
  cppi_welford<T> out;
  out.mean = __shfl_xor_sync(CPPI_FULL_WARP_MASK, v.mean, lane_mask);
  out.m2 = __shfl_xor_sync(CPPI_FULL_WARP_MASK, v.m2, lane_mask);
  out.weight = __shfl_xor_sync(CPPI_FULL_WARP_MASK, v.weight, lane_mask);
  return out;
}

template <typename T>
CPPI_DEVICE cppi_arg<T> cppi_shfl_xor(cppi_arg<T> v, int lane_mask) {
  cppi_arg<T> out;
  out.value = __shfl_xor_sync(CPPI_FULL_WARP_MASK, v.value, lane_mask);
  out.index = __shfl_xor_sync(CPPI_FULL_WARP_MASK, v.index, lane_mask);
  return out;
}

/// Whether op(a, b) and op(b, a) are equal bit for bit: true for sums (IEEE
/// addition commutes), not for max/min (which zero of +0 and -0 comes back
/// depends on the order) nor Welford's merge.
template <typename Op>
struct cppi_commutes { static constexpr bool value = false; };
template <>
struct cppi_commutes<cppi_sum_op> { static constexpr bool value = true; };

/// Butterfly reduction: every lane ends with the warp's result, bit for bit.
/// Each pair combines as op(lower lane's value, higher lane's value), so both
/// partners compute the same thing even for an op that is not commutative in
/// floating point (Welford's merge): a normalisation reading the result on
/// every thread then sees one mean, not per-lane variants an ulp apart. A sum
/// needs no swap; leaving it out also shortens NVVM's work per reduction
/// (layer_norm over 16384 columns compiles to PTX faster).
template <typename T, typename Op>
CPPI_DEVICE T cppi_warp_reduce(T v, Op op) {
  if constexpr (cppi_commutes<Op>::value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, cppi_shfl_xor(v, offset));
    return v;
  } else {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const T other = cppi_shfl_xor(v, offset);
      const bool upper = (lane & unsigned(offset)) != 0;
      // Swap the operands, then one op: selecting between two op results
      // would evaluate both (a Welford merge costs a division).
      v = op(upper ? other : v, upper ? v : other);
    }
    return v;
  }
}

template <typename T>
CPPI_DEVICE T cppi_warp_reduce_sum(T v) { return cppi_warp_reduce(v, cppi_sum_op()); }
template <typename T>
CPPI_DEVICE T cppi_warp_reduce_max(T v) { return cppi_warp_reduce(v, cppi_max_op()); }
template <typename T>
CPPI_DEVICE T cppi_warp_reduce_min(T v) { return cppi_warp_reduce(v, cppi_min_op()); }
template <typename T>
CPPI_DEVICE cppi_welford<T> cppi_warp_reduce_welford(cppi_welford<T> v) {
  return cppi_warp_reduce(v, cppi_welford_op());
}

/// Reduction over all threads of a 1-d block; every thread gets the result.
/// `scratch` is caller-provided __shared__ storage of 32 elements; it may be
/// reused by the next block reduction (this ends with a barrier).
/// `identity` fills the slots of warps the block does not have.
template <typename T, typename Op>
CPPI_DEVICE T cppi_block_reduce(T v, Op op, T identity, T* scratch) {
  const unsigned tid = threadIdx.x;  // generated kernels launch 1-d blocks
  const unsigned lane = tid % 32u;
  const unsigned warp = tid / 32u;
  const unsigned warps = (blockDim.x + 31u) / 32u;
  v = cppi_warp_reduce(v, op);
  if (warps == 1) return v;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  v = cppi_warp_reduce(v, op);  // every warp reduces the partials: no second broadcast
  __syncthreads();              // scratch is free again when we return
  return v;
}

/// Two sums over a 1-d block at once (the corrected two-pass variance's sum
/// of deviations and of their squares): one barrier pair instead of two.
/// `scratch` holds 64 elements; the same order of operations per sum as
/// cppi_block_reduce, so each result is bit for bit the single reduction's.
template <typename T>
CPPI_DEVICE void cppi_block_reduce_sum2(T& a, T& b, T* scratch) {
  const unsigned tid = threadIdx.x;
  const unsigned lane = tid % 32u;
  const unsigned warp = tid / 32u;
  const unsigned warps = (blockDim.x + 31u) / 32u;
  a = cppi_warp_reduce(a, cppi_sum_op());
  b = cppi_warp_reduce(b, cppi_sum_op());
  if (warps == 1) return;
  if (lane == 0) {
    scratch[warp] = a;
    scratch[32 + warp] = b;
  }
  __syncthreads();
  a = lane < warps ? scratch[lane] : T(0);
  b = lane < warps ? scratch[32 + lane] : T(0);
  a = cppi_warp_reduce(a, cppi_sum_op());
  b = cppi_warp_reduce(b, cppi_sum_op());
  __syncthreads();
}

template <typename T>
CPPI_DEVICE T cppi_block_reduce_sum(T v, T* scratch) {
  return cppi_block_reduce(v, cppi_sum_op(), T(0), scratch);
}
/// Identities for max/min are the caller's (-inf / +inf for floats, the
/// type's limits for integers): the prelude has no <limits>.
template <typename T>
CPPI_DEVICE T cppi_block_reduce_max(T v, T lowest, T* scratch) {
  return cppi_block_reduce(v, cppi_max_op(), lowest, scratch);
}
template <typename T>
CPPI_DEVICE T cppi_block_reduce_min(T v, T highest, T* scratch) {
  return cppi_block_reduce(v, cppi_min_op(), highest, scratch);
}
template <typename T>
CPPI_DEVICE cppi_welford<T> cppi_block_reduce_welford(cppi_welford<T> v,
                                                      cppi_welford<T>* scratch) {
  return cppi_block_reduce(v, cppi_welford_op(), cppi_welford_init<T>(), scratch);
}
template <typename T>
CPPI_DEVICE cppi_arg<T> cppi_block_reduce_argmax(cppi_arg<T> v, cppi_arg<T>* scratch) {
  return cppi_block_reduce(v, cppi_argmax_op(), cppi_arg_make(T(0), (int64_t)-1), scratch);
}
template <typename T>
CPPI_DEVICE cppi_arg<T> cppi_block_reduce_argmin(cppi_arg<T> v, cppi_arg<T>* scratch) {
  return cppi_block_reduce(v, cppi_argmin_op(), cppi_arg_make(T(0), (int64_t)-1), scratch);
}

/// Exclusive scan over the threads of a 1-d block (scan rows, ir::ScanStage):
/// thread t gets op over the `v` of threads 0..t-1 (`identity` for thread
/// 0), and every thread the block's total in *total. Lanes combine with
/// shuffles in a warp (Hillis-Steele), then the warps' totals the same way
/// in warp 0, in a fixed order (deterministic). `scratch`: caller-provided
/// __shared__ storage of 32 elements, free again when this returns.
template <typename T, typename Op>
CPPI_DEVICE T cppi_block_exclusive_scan(T v, Op op, T identity, T* scratch, T* total) {
  const unsigned lane = threadIdx.x % 32u;
  const unsigned warp = threadIdx.x / 32u;
  const unsigned warps = (blockDim.x + 31u) / 32u;
  T inclusive = v;
#pragma unroll
  for (unsigned offset = 1; offset < 32u; offset <<= 1) {
    const T below = __shfl_up_sync(CPPI_FULL_WARP_MASK, inclusive, offset);
    if (lane >= offset) inclusive = op(below, inclusive);
  }
  T exclusive = __shfl_up_sync(CPPI_FULL_WARP_MASK, inclusive, 1);
  if (lane == 0) exclusive = identity;
  if (lane == 31u) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : identity;
#pragma unroll
    for (unsigned offset = 1; offset < 32u; offset <<= 1) {
      const T below = __shfl_up_sync(CPPI_FULL_WARP_MASK, w, offset);
      if (lane >= offset) w = op(below, w);
    }
    scratch[lane] = w;  // the warps' inclusive prefixes
  }
  __syncthreads();
  const T before = warp > 0 ? scratch[warp - 1] : identity;
  *total = scratch[warps - 1];
  __syncthreads();
  return op(before, exclusive);
}

/// Combines the partials of the column groups of a block of 32 x S threads
/// (S = blockDim.x / 32, a power of two): thread t holds a partial of column
/// lane t % 32, slice t / 32. A fixed tree over the slices (deterministic);
/// every thread gets its column's result. `scratch` is caller-provided
/// __shared__ storage of blockDim.x elements; it may be reused by the next
/// column reduction (this ends with a barrier). Every thread must call it.
template <typename T, typename Op>
CPPI_DEVICE T cppi_column_reduce(T v, Op op, T* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned half = blockDim.x >> 6; half > 0; half >>= 1) {
    if ((t >> 5) < half) scratch[t] = op(scratch[t], scratch[t + 32u * half]);
    __syncthreads();
  }
  v = scratch[t & 31u];
  __syncthreads();
  return v;
}

#endif  // CPPI_ON_DEVICE
