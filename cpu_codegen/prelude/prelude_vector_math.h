/// \file
/// Vector math (SLEEF, libmvec, lane loops) of the CPU runtime prelude: a part of cppinductor_prelude.h,
/// not a header of its own. The prelude includes it at one place, after what
/// it builds on, and embed_prelude.cmake pastes it there for the in-memory
/// copy the kernels compile against.

// ---------------------------------------------------------------------------
// Vector math. SLEEF's 1.0-ULP functions (what ATen's Vectorized uses), at the
// widths the ISA passes in registers; wider vectors are split in halves,
// narrower ISAs fall back to lane loops over the scalar builtins. Define
// CPPI_NO_SLEEF to use lane loops everywhere (the loader does when libsleef
// cannot be found).
#if !defined(CPPI_NO_SLEEF)
#define CPPI_SLEEF_DECL_UNARY(name, builtin, sleef, acc)                            \
  cppi_f32x4 Sleef_##sleef##f4_##acc(cppi_f32x4);                                   \
  cppi_f64x2 Sleef_##sleef##d2_##acc(cppi_f64x2);                                   \
  CPPI_SLEEF_DECL_AVX(cppi_f32x8 Sleef_##sleef##f8_##acc(cppi_f32x8);               \
                      cppi_f64x4 Sleef_##sleef##d4_##acc(cppi_f64x4);)              \
  CPPI_SLEEF_DECL_AVX512(cppi_f32x16 Sleef_##sleef##f16_##acc(cppi_f32x16);         \
                         cppi_f64x8 Sleef_##sleef##d8_##acc(cppi_f64x8);)
#define CPPI_SLEEF_DECL_BINARY(name, builtin, sleef, acc)                           \
  cppi_f32x4 Sleef_##sleef##f4_##acc(cppi_f32x4, cppi_f32x4);                       \
  cppi_f64x2 Sleef_##sleef##d2_##acc(cppi_f64x2, cppi_f64x2);                       \
  CPPI_SLEEF_DECL_AVX(cppi_f32x8 Sleef_##sleef##f8_##acc(cppi_f32x8, cppi_f32x8);   \
                      cppi_f64x4 Sleef_##sleef##d4_##acc(cppi_f64x4, cppi_f64x4);)  \
  CPPI_SLEEF_DECL_AVX512(cppi_f32x16 Sleef_##sleef##f16_##acc(cppi_f32x16, cppi_f32x16); \
                         cppi_f64x8 Sleef_##sleef##d8_##acc(cppi_f64x8, cppi_f64x8);)
#if defined(__AVX__)
#define CPPI_SLEEF_DECL_AVX(...) __VA_ARGS__
#else
#define CPPI_SLEEF_DECL_AVX(...)
#endif
#if defined(__AVX512F__)
#define CPPI_SLEEF_DECL_AVX512(...) __VA_ARGS__
#else
#define CPPI_SLEEF_DECL_AVX512(...)
#endif
extern "C" {
CPPI_FOR_EACH_UNARY_MATH(CPPI_SLEEF_DECL_UNARY)
CPPI_FOR_EACH_BINARY_MATH(CPPI_SLEEF_DECL_BINARY)
}
#undef CPPI_SLEEF_DECL_UNARY
#undef CPPI_SLEEF_DECL_BINARY
#undef CPPI_SLEEF_DECL_AVX
#undef CPPI_SLEEF_DECL_AVX512
#endif

// Splitting a vector into halves and joining them back.
template <class Half, class V>
CPPI_INLINE Half cppi_vlow(V v) {
  Half h;
  __builtin_memcpy(&h, &v, sizeof(Half));
  return h;
}
template <class Half, class V>
CPPI_INLINE Half cppi_vhigh(V v) {
  Half h;
  __builtin_memcpy(&h, (const char*)&v + sizeof(Half), sizeof(Half));
  return h;
}
template <class V, class Half>
CPPI_INLINE V cppi_vjoin(Half lo, Half hi) {
  V v;
  __builtin_memcpy(&v, &lo, sizeof(Half));
  __builtin_memcpy((char*)&v + sizeof(Half), &hi, sizeof(Half));
  return v;
}

#define CPPI_LANES_UNARY(V, name)                                                 \
  CPPI_INLINE V cppi_##name(V x) {                                                \
    V r;                                                                          \
    for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) r[i] = cppi_##name(x[i]); \
    return r;                                                                     \
  }
#define CPPI_LANES_BINARY(V, name)                                                        \
  CPPI_INLINE V cppi_##name(V x, V y) {                                                   \
    V r;                                                                                  \
    for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) r[i] = cppi_##name(x[i], y[i]); \
    return r;                                                                             \
  }
#define CPPI_SPLIT_UNARY(V, Half, name)                                                      \
  CPPI_INLINE V cppi_##name(V x) {                                                           \
    return cppi_vjoin<V>(cppi_##name(cppi_vlow<Half>(x)), cppi_##name(cppi_vhigh<Half>(x))); \
  }
#define CPPI_SPLIT_BINARY(V, Half, name)                                             \
  CPPI_INLINE V cppi_##name(V x, V y) {                                              \
    return cppi_vjoin<V>(cppi_##name(cppi_vlow<Half>(x), cppi_vlow<Half>(y)),        \
                         cppi_##name(cppi_vhigh<Half>(x), cppi_vhigh<Half>(y)));     \
  }

#if defined(CPPI_NO_SLEEF)
#define CPPI_VMATH_UNARY(name, builtin, sleef, acc)                      \
  CPPI_LANES_UNARY(cppi_f32x4, name) CPPI_LANES_UNARY(cppi_f32x8, name)  \
  CPPI_LANES_UNARY(cppi_f32x16, name) CPPI_LANES_UNARY(cppi_f64x2, name) \
  CPPI_LANES_UNARY(cppi_f64x4, name) CPPI_LANES_UNARY(cppi_f64x8, name)
#define CPPI_VMATH_BINARY(name, builtin, sleef, acc)                       \
  CPPI_LANES_BINARY(cppi_f32x4, name) CPPI_LANES_BINARY(cppi_f32x8, name)  \
  CPPI_LANES_BINARY(cppi_f32x16, name) CPPI_LANES_BINARY(cppi_f64x2, name) \
  CPPI_LANES_BINARY(cppi_f64x4, name) CPPI_LANES_BINARY(cppi_f64x8, name)
#else
#define CPPI_VMATH_UNARY(name, builtin, sleef, acc)                                          \
  CPPI_INLINE cppi_f32x4 cppi_##name(cppi_f32x4 x) { return Sleef_##sleef##f4_##acc(x); }    \
  CPPI_INLINE cppi_f64x2 cppi_##name(cppi_f64x2 x) { return Sleef_##sleef##d2_##acc(x); }    \
  CPPI_VMATH_AVX(                                                                            \
      CPPI_INLINE cppi_f32x8 cppi_##name(cppi_f32x8 x) { return Sleef_##sleef##f8_##acc(x); } \
      CPPI_INLINE cppi_f64x4 cppi_##name(cppi_f64x4 x) { return Sleef_##sleef##d4_##acc(x); }, \
      CPPI_SPLIT_UNARY(cppi_f32x8, cppi_f32x4, name) CPPI_SPLIT_UNARY(cppi_f64x4, cppi_f64x2, name)) \
  CPPI_VMATH_AVX512(                                                                         \
      CPPI_INLINE cppi_f32x16 cppi_##name(cppi_f32x16 x) { return Sleef_##sleef##f16_##acc(x); } \
      CPPI_INLINE cppi_f64x8 cppi_##name(cppi_f64x8 x) { return Sleef_##sleef##d8_##acc(x); }, \
      CPPI_SPLIT_UNARY(cppi_f32x16, cppi_f32x8, name) CPPI_SPLIT_UNARY(cppi_f64x8, cppi_f64x4, name))
#define CPPI_VMATH_BINARY(name, builtin, sleef, acc)                                               \
  CPPI_INLINE cppi_f32x4 cppi_##name(cppi_f32x4 x, cppi_f32x4 y) { return Sleef_##sleef##f4_##acc(x, y); } \
  CPPI_INLINE cppi_f64x2 cppi_##name(cppi_f64x2 x, cppi_f64x2 y) { return Sleef_##sleef##d2_##acc(x, y); } \
  CPPI_VMATH_AVX(                                                                                  \
      CPPI_INLINE cppi_f32x8 cppi_##name(cppi_f32x8 x, cppi_f32x8 y) { return Sleef_##sleef##f8_##acc(x, y); } \
      CPPI_INLINE cppi_f64x4 cppi_##name(cppi_f64x4 x, cppi_f64x4 y) { return Sleef_##sleef##d4_##acc(x, y); }, \
      CPPI_SPLIT_BINARY(cppi_f32x8, cppi_f32x4, name) CPPI_SPLIT_BINARY(cppi_f64x4, cppi_f64x2, name)) \
  CPPI_VMATH_AVX512(                                                                               \
      CPPI_INLINE cppi_f32x16 cppi_##name(cppi_f32x16 x, cppi_f32x16 y) { return Sleef_##sleef##f16_##acc(x, y); } \
      CPPI_INLINE cppi_f64x8 cppi_##name(cppi_f64x8 x, cppi_f64x8 y) { return Sleef_##sleef##d8_##acc(x, y); }, \
      CPPI_SPLIT_BINARY(cppi_f32x16, cppi_f32x8, name) CPPI_SPLIT_BINARY(cppi_f64x8, cppi_f64x4, name))
// CPPI_VMATH_AVX(native definitions, fallback definitions)
#if defined(__AVX__)
#define CPPI_VMATH_AVX(native, fallback) native
#else
#define CPPI_VMATH_AVX(native, fallback) fallback
#endif
#if defined(__AVX512F__)
#define CPPI_VMATH_AVX512(native, fallback) native
#else
#define CPPI_VMATH_AVX512(native, fallback) fallback
#endif
#endif

CPPI_FOR_EACH_UNARY_MATH(CPPI_VMATH_UNARY)
CPPI_FOR_EACH_BINARY_MATH(CPPI_VMATH_BINARY)
// SLEEF's log1p returns inf above 1e38 (float) / 1e307 (double), where
// log1p(x) == log(x) to working precision.
CPPI_SCALAR_UNARY(log1p, log1p)
#define CPPI_VEC_LOG1P(V, M, LIMIT)                                              \
  CPPI_INLINE V cppi_log1p(V x) {                                                \
    return cppi_vselect((M)(x > LIMIT), cppi_log(x), cppi_log1p_unguarded(x));   \
  }
CPPI_FOR_EACH_FLOAT_VECTOR(CPPI_VEC_LOG1P, 1e38f, 1e307)
#undef CPPI_VEC_LOG1P


// Float exp, erf, sin, cos, tanh, expm1: glibc's libmvec (GLIBC_2.35) when
// the process has it, else SLEEF: libmvec's are faster for each of these
// on AVX-512 and AVX2 cores (SLEEF's erf made gelu compute-bound, and exp
// is a large part of a softmax's time; log, where libmvec is slower, stays
// on SLEEF).
// libmvec's are within 4 ULP (erf: every float checked; relative error
// <= 2.4e-7) and exact at 0, +-inf and NaN. The symbols are weak: a process
// without libmvec loaded (the JIT resolves them from what the process has)
// takes the SLEEF branch, a predictable test the compiler hoists out of loops.
// Where the ISA has FMA, float erf is the prelude's own (below) instead.
#if defined(__FMA__)
#define CPPI_FOR_EACH_LIBMVEC_UNARY(X) X(exp) X(sin) X(cos) X(tanh) X(expm1)
#else
#define CPPI_FOR_EACH_LIBMVEC_UNARY(X) X(exp) X(erf) X(sin) X(cos) X(tanh) X(expm1)
#endif
#if defined(__AVX2__)
#define CPPI_MVEC_F32X8(name)                                                                       \
  extern "C" cppi_f32x8 _ZGVdN8v_##name##f(cppi_f32x8) __attribute__((weak));                      \
  CPPI_INLINE cppi_f32x8 cppi_##name(cppi_f32x8 x) {                                                \
    return _ZGVdN8v_##name##f ? _ZGVdN8v_##name##f(x) : cppi_##name##_sleef(x);                     \
  }
#else
#define CPPI_MVEC_F32X8(name) \
  CPPI_INLINE cppi_f32x8 cppi_##name(cppi_f32x8 x) { return cppi_##name##_sleef(x); }
#endif
#if defined(__AVX512F__)
#define CPPI_MVEC_F32X16(name)                                                                      \
  extern "C" cppi_f32x16 _ZGVeN16v_##name##f(cppi_f32x16) __attribute__((weak));                   \
  CPPI_INLINE cppi_f32x16 cppi_##name(cppi_f32x16 x) {                                              \
    return _ZGVeN16v_##name##f ? _ZGVeN16v_##name##f(x) : cppi_##name##_sleef(x);                   \
  }
#elif defined(__AVX2__)
#define CPPI_MVEC_F32X16(name) CPPI_SPLIT_UNARY(cppi_f32x16, cppi_f32x8, name)
#else
#define CPPI_MVEC_F32X16(name) \
  CPPI_INLINE cppi_f32x16 cppi_##name(cppi_f32x16 x) { return cppi_##name##_sleef(x); }
#endif
#define CPPI_MVEC_UNARY(name)                                                           \
  CPPI_INLINE cppi_f32x4 cppi_##name(cppi_f32x4 x) { return cppi_##name##_sleef(x); }   \
  CPPI_INLINE cppi_f64x2 cppi_##name(cppi_f64x2 x) { return cppi_##name##_sleef(x); }   \
  CPPI_INLINE cppi_f64x4 cppi_##name(cppi_f64x4 x) { return cppi_##name##_sleef(x); }   \
  CPPI_INLINE cppi_f64x8 cppi_##name(cppi_f64x8 x) { return cppi_##name##_sleef(x); }   \
  CPPI_MVEC_F32X8(name)                                                                 \
  CPPI_MVEC_F32X16(name)
CPPI_FOR_EACH_LIBMVEC_UNARY(CPPI_MVEC_UNARY)
#undef CPPI_MVEC_UNARY
#undef CPPI_MVEC_F32X8
#undef CPPI_MVEC_F32X16

// Float erf with FMA, inline: within 1.25 ULP of the exact erf over every
// float (checked exhaustively against double erf), about 1.5x faster than
// libmvec's erff and exact at +-0, +-inf and NaN. erf dominates gelu.
//   |a| < 0.921875: erf(a) = a + a * p(a^2), p a degree-5 fit of erf(a)/a - 1;
//   otherwise:      erf(|a|) = 1 - exp(q(|a|)), q a degree-6 fit of log(erfc)
//                   on [0.921875, 4], |a| clamped at 4 (erf is 1 in float
//                   from 3.92); exp by range reduction to |r| <= ln2/2 and
//                   a degree-6 polynomial, its argument within [-19, -1.7].
// Both halves are computed and the lane picks one. The fits are weighted so
// that each contributes under 0.3 ULP; the rest is float rounding.
#if defined(__FMA__)
CPPI_INLINE cppi_f32x8 cppi_fmadd(cppi_f32x8 a, cppi_f32x8 b, cppi_f32x8 c) {
  return __builtin_ia32_vfmaddps256(a, b, c);
}
#if defined(__AVX512F__)
CPPI_INLINE cppi_f32x16 cppi_fmadd(cppi_f32x16 a, cppi_f32x16 b, cppi_f32x16 c) {
  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, /*current rounding*/ 4);
}
#endif
template <class V, class I>
CPPI_INLINE V cppi_erf_fma(V a) {
  const V s = a * a;
  V p = cppi_vsplat<V>(-6.01339329e-4f);
  p = cppi_fmadd(p, s, cppi_vsplat<V>(4.99800064e-3f));
  p = cppi_fmadd(p, s, cppi_vsplat<V>(-2.67702314e-2f));
  p = cppi_fmadd(p, s, cppi_vsplat<V>(1.12819272e-1f));
  p = cppi_fmadd(p, s, cppi_vsplat<V>(-3.76125057e-1f));
  p = cppi_fmadd(p, s, cppi_vsplat<V>(1.28379152e-1f));
  const V near_zero = cppi_fmadd(p, a, a);

  const I sign = cppi_bit_cast<I>(a) & (int32_t)0x80000000;
  const V t = cppi_bit_cast<V>(cppi_bit_cast<I>(a) ^ sign);
  const V u = cppi_vselect(t > 4.0f, cppi_vsplat<V>(4.0f), t);  // NaN stays NaN
  V q = cppi_vsplat<V>(1.92469539e-4f);
  q = cppi_fmadd(q, u, cppi_vsplat<V>(-3.01129790e-3f));
  q = cppi_fmadd(q, u, cppi_vsplat<V>(2.21072696e-2f));
  q = cppi_fmadd(q, u, cppi_vsplat<V>(-1.03697695e-1f));
  q = cppi_fmadd(q, u, cppi_vsplat<V>(-6.37433887e-1f));
  q = cppi_fmadd(q, u, cppi_vsplat<V>(-1.12753427e+0f));
  q = cppi_fmadd(q, u, cppi_vsplat<V>(-2.28120450e-4f));
  // exp(q): q = n ln2 + r, with n rounded to an integer by the 1.5 * 2^23 shift.
  const V shifted = cppi_fmadd(q, cppi_vsplat<V>(1.44269504f), cppi_vsplat<V>(12582912.0f));
  const V n = shifted - 12582912.0f;
  V r = cppi_fmadd(n, cppi_vsplat<V>(-6.93145752e-1f), q);
  r = cppi_fmadd(n, cppi_vsplat<V>(-1.42860677e-6f), r);
  V e = cppi_vsplat<V>(1.38368341e-3f);
  e = cppi_fmadd(e, r, cppi_vsplat<V>(8.37482233e-3f));
  e = cppi_fmadd(e, r, cppi_vsplat<V>(4.16682251e-2f));
  e = cppi_fmadd(e, r, cppi_vsplat<V>(1.66664198e-1f));
  e = cppi_fmadd(e, r, cppi_vsplat<V>(4.99999911e-1f));
  e = cppi_fmadd(e, r, cppi_vsplat<V>(1.0f));
  e = cppi_fmadd(e, r, cppi_vsplat<V>(1.0f));
  const I two_to_n = (cppi_bit_cast<I>(shifted) - 0x4B400000 + 127) << 23;
  const V beyond = 1.0f - e * cppi_bit_cast<V>(two_to_n);
  const V far = cppi_bit_cast<V>(cppi_bit_cast<I>(beyond) | sign);
  return cppi_vselect(t < 0.921875f, near_zero, far);
}
CPPI_INLINE cppi_f32x8 cppi_erf(cppi_f32x8 x) { return cppi_erf_fma<cppi_f32x8, cppi_i32x8>(x); }
#if defined(__AVX512F__)
CPPI_INLINE cppi_f32x16 cppi_erf(cppi_f32x16 x) { return cppi_erf_fma<cppi_f32x16, cppi_i32x16>(x); }
#else
CPPI_SPLIT_UNARY(cppi_f32x16, cppi_f32x8, erf)
#endif
CPPI_INLINE cppi_f32x4 cppi_erf(cppi_f32x4 x) { return cppi_erf_sleef(x); }
CPPI_INLINE cppi_f64x2 cppi_erf(cppi_f64x2 x) { return cppi_erf_sleef(x); }
CPPI_INLINE cppi_f64x4 cppi_erf(cppi_f64x4 x) { return cppi_erf_sleef(x); }
CPPI_INLINE cppi_f64x8 cppi_erf(cppi_f64x8 x) { return cppi_erf_sleef(x); }
#endif

// SLEEF's sinhf/coshf overflow from |x| > 88.5 although the result is finite
// up to ~89.4; there sinh(x) = sign(x) * e^(|x|/2) * (e^(|x|/2) / 2), each
// factor exact to SLEEF's 1 ULP (|x|/2 and the halving are exact).
CPPI_SCALAR_UNARY(sinh, sinh)
CPPI_SCALAR_UNARY(cosh, cosh)
#define CPPI_VEC_SINH_COSH(V, M, LIMIT)                                                       \
  CPPI_INLINE V cppi_cosh(V x) {                                                              \
    const V half_exp = cppi_exp(cppi_abs(x) * 0.5f);                                          \
    const V big = half_exp * (half_exp * 0.5f);                                               \
    return cppi_vselect((M)(cppi_abs(x) > LIMIT), big, cppi_cosh_unguarded(x));               \
  }                                                                                           \
  CPPI_INLINE V cppi_sinh(V x) {                                                              \
    const V half_exp = cppi_exp(cppi_abs(x) * 0.5f);                                          \
    const V big = half_exp * (half_exp * 0.5f);                                               \
    const V signed_big = cppi_vselect((M)(x < 0), -big, big);                                 \
    return cppi_vselect((M)(cppi_abs(x) > LIMIT), signed_big, cppi_sinh_unguarded(x));        \
  }
CPPI_FOR_EACH_FLOAT_VECTOR(CPPI_VEC_SINH_COSH, 88.0f, 709.0)
#undef CPPI_VEC_SINH_COSH

// sin and cos of one float argument, for kernels that take both (the printer
// calls cppi_sincos then): SLEEF's sincosf_u35 shares one argument reduction
// and is faster than libmvec's sin plus cos, libmvec's vector sincos (it
// takes vectors of pointers) and SLEEF's sincosf_u10. SLEEF documents 3.5 ULP
// over the whole range (Payne-Hanek reduction for large arguments); 2^26
// random floats of every magnitude gave at most 2.4 ULP, inside the 4 ULP of
// the libmvec sin and cos it replaces. NaN and +-inf give NaN, sin(-0) = -0.
// Without SLEEF it is the two separate calls.
#if !defined(CPPI_NO_SLEEF)
#define CPPI_SLEEF_SINCOS(V, sleef)                                 \
  struct V##_pair { V x, y; };                                      \
  extern "C" V##_pair sleef(V);                                     \
  CPPI_INLINE void cppi_sincos(V x, V* s, V* c) {                   \
    const V##_pair r = sleef(x);                                    \
    *s = r.x;                                                       \
    *c = r.y;                                                       \
  }
#define CPPI_SPLIT_SINCOS(V, Half)                                  \
  CPPI_INLINE void cppi_sincos(V x, V* s, V* c) {                   \
    Half s0, c0, s1, c1;                                            \
    cppi_sincos(cppi_vlow<Half>(x), &s0, &c0);                      \
    cppi_sincos(cppi_vhigh<Half>(x), &s1, &c1);                     \
    *s = cppi_vjoin<V>(s0, s1);                                     \
    *c = cppi_vjoin<V>(c0, c1);                                     \
  }
CPPI_SLEEF_SINCOS(cppi_f32x4, Sleef_sincosf4_u35)
#if defined(__AVX__)
CPPI_SLEEF_SINCOS(cppi_f32x8, Sleef_sincosf8_u35)
#else
CPPI_SPLIT_SINCOS(cppi_f32x8, cppi_f32x4)
#endif
#if defined(__AVX512F__)
CPPI_SLEEF_SINCOS(cppi_f32x16, Sleef_sincosf16_u35)
#else
CPPI_SPLIT_SINCOS(cppi_f32x16, cppi_f32x8)
#endif
#undef CPPI_SLEEF_SINCOS
#undef CPPI_SPLIT_SINCOS
#else
template <class V> CPPI_INLINE void cppi_sincos(V x, V* s, V* c) {
  *s = cppi_sin(x);
  *c = cppi_cos(x);
}
#endif

CPPI_LANES_BINARY(cppi_f32x4, fmod)
CPPI_LANES_BINARY(cppi_f32x8, fmod)
CPPI_LANES_BINARY(cppi_f32x16, fmod)
CPPI_LANES_BINARY(cppi_f64x2, fmod)
CPPI_LANES_BINARY(cppi_f64x4, fmod)
CPPI_LANES_BINARY(cppi_f64x8, fmod)
