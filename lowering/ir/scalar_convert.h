/// \file
/// Scalar conversions with the IR's cast rules (expr.h): rounding a double to
/// a float dtype (float16/bfloat16 round-to-nearest-even, NaN preserved),
/// wrapping an int64 to an integral dtype, and the bit-level float16/bfloat16
/// encodings the interpreter reads and writes. Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "support/dtype.h"

namespace cppi::ir {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

/// Round-to-nearest-even float -> IEEE binary16.
inline uint16_t float_to_half(float f) {
  uint32_t x = float_to_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | (abs > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds to >= 65520: inf
  int exp = static_cast<int>(abs >> 23) - 127;
  if (exp < -25) return sign;  // below half the smallest subnormal
  uint32_t mant = (abs & 0x7fffff) | 0x800000;
  int shift = exp >= -14 ? 13 : 13 + (-14 - exp);  // subnormals lose more bits
  uint32_t rounded = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (rounded & 1))) ++rounded;
  if (exp >= -14) {
    // rounded carries the implicit bit at 1<<10; a carry into 1<<11 bumps the exponent.
    uint32_t e = static_cast<uint32_t>(exp + 15);
    uint32_t bits = (e << 10) + (rounded - 0x400);
    return sign | static_cast<uint16_t>(bits);
  }
  return sign | static_cast<uint16_t>(rounded);
}

inline float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

/// Round-to-nearest-even float -> bfloat16 (NaN stays NaN).
inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  return static_cast<uint16_t>((x + 0x7fff + lsb) >> 16);
}

/// `v` rounded to the float dtype `t` and widened back to double.
inline double round_to_float_dtype(double v, DType t) {
  switch (t) {
    case DType::Float64: return v;
    case DType::Float32: return static_cast<float>(v);
    case DType::Float16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BFloat16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

/// `v` wrapped to the integral dtype `t` (bool: v != 0).
inline int64_t wrap_to_int_dtype(int64_t v, DType t) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::UInt8: return static_cast<uint8_t>(v);
    case DType::Int8: return static_cast<int8_t>(v);
    case DType::Int16: return static_cast<int16_t>(v);
    case DType::Int32: return static_cast<int32_t>(v);
    default: return v;
  }
}

/// Float -> int64 toward zero; out-of-range and NaN give 0 here (undefined in the IR).
inline int64_t float_to_int64(double v) {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return 0;
  return static_cast<int64_t>(v);
}

}  // namespace cppi::ir
