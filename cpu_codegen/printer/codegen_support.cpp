#include "cpu_codegen/printer/codegen_support.h"

#include <string>

#include "codegen/c_printer.h"

namespace cppi::cpu {

namespace {

/// The block's header: loops vectorised by hand stay so, scratch from the C heap.
constexpr char kHeader[] = R"cppi_support(
// ---- cppinductor codegen support (cpu_codegen/printer/codegen_support.cpp) ----
// Loops the printer vectorised by hand (and their scalar tails) must not be
// vectorised again; older preludes lack the macro.
#ifndef CPPI_NO_AUTOVEC
#define CPPI_NO_AUTOVEC
#endif
// Kernel-local scratch buffers come from the C heap.
extern "C" void* malloc(size_t) noexcept;
extern "C" void free(void*) noexcept;
)cppi_support";

/// What the shared float division needs of this target besides the prelude.
constexpr char kCopysign[] = R"cppi_support(

CPPI_INLINE float cppi_copysign(float a, float b) { return __builtin_copysignf(a, b); }
CPPI_INLINE double cppi_copysign(double a, double b) { return __builtin_copysign(a, b); }
)cppi_support";

/// Float tests, erfinv, scalar math through the vector code, and what Philox needs.
constexpr char kScalarMath[] = R"cppi_support(
CPPI_INLINE bool cppi_signbit(float a) { return __builtin_signbit(a); }
CPPI_INLINE bool cppi_signbit(double a) { return __builtin_signbit(a); }
CPPI_INLINE bool cppi_isinf(float a) { return __builtin_fabsf(a) == __builtin_inff(); }
CPPI_INLINE bool cppi_isinf(double a) { return __builtin_fabs(a) == __builtin_inf(); }
CPPI_INLINE bool cppi_isfinite(float a) { return __builtin_fabsf(a) < __builtin_inff(); }
CPPI_INLINE bool cppi_isfinite(double a) { return __builtin_fabs(a) < __builtin_inf(); }

// erfinv: Giles' approximation refined by Newton steps on erf, in double
// (the reference interpreter's algorithm).
CPPI_INLINE double cppi_erfinv(double y) {
  if (y != y || y < -1 || y > 1) return __builtin_nan("");
  if (y == 1) return __builtin_inf();
  if (y == -1) return -__builtin_inf();
  double w = -__builtin_log((1.0 - y) * (1.0 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = __builtin_sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 3; ++i) {
    const double err = __builtin_erf(x) - y;
    x -= err / (1.1283791670955126 * __builtin_exp(-x * x));
  }
  return x;
}
CPPI_INLINE float cppi_erfinv(float y) { return (float)cppi_erfinv((double)y); }

CPPI_INLINE void cppi_mul_hilo(uint32_t m, uint32_t a, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = (uint64_t)m * a;
  hi = (uint32_t)(p >> 32);
  lo = (uint32_t)p;
}
// The same on every lane of a vector: even lanes multiply in place and odd
// lanes shifted down (x86's 32x32->64 multiply, vpmuludq, reads the low half
// of each 64-bit pair), then the halves go back in lane order.
template <class U> struct cppi_u32_pairs;
template <> struct cppi_u32_pairs<cppi_u32x4> { typedef cppi_u64x2 type; };
template <> struct cppi_u32_pairs<cppi_u32x8> { typedef cppi_u64x4 type; };
template <> struct cppi_u32_pairs<cppi_u32x16> { typedef cppi_u64x8 type; };
template <class U>
CPPI_INLINE void cppi_mul_hilo(uint32_t m, U a, U& hi, U& lo) {
  typedef typename cppi_u32_pairs<U>::type W;
  const W pairs = (W)a, low = cppi_vsplat<W>(0xFFFFFFFFull);
  const W even = (pairs & low) * (uint64_t)m;
  const W odd = (pairs >> 32) * (uint64_t)m;
  hi = (U)((even >> 32) | (odd & ~low));
  lo = (U)((even & low) | (odd << 32));
}
// Box-Muller, 16 lanes at a time with the prelude's 16-lane math (SLEEF or
// libmvec; two 8-lane calls below AVX-512), on every CPU path: the scalar
// form uses lane 0 of a splat and narrower vectors pad to 16 lanes. A normal
// number then has the same bits wherever it is computed (scalar tail, any
// vector width), which a vector log beside a scalar libm log would not give.
// (It may differ from glibc's logf/cosf, so from the interpreter, in the last
// bits.) One thread, 2^24 floats: 16-lane calls cost about 1.8x rand, 4-lane
// calls 5x, libm per lane 10x.
CPPI_INLINE cppi_f32x16 cppi_box_muller16(cppi_f32x16 u1, cppi_f32x16 u2) {
  const cppi_f32x16 r1 = cppi_vselect(u1 < 1.0e-7f, cppi_vsplat<cppi_f32x16>(1.0e-7f), u1);
  return cppi_sqrt(cppi_vsplat<cppi_f32x16>(-2.0f) * cppi_log(r1)) *
         cppi_cos(cppi_vsplat<cppi_f32x16>(6.283185307179586f) * u2);
}
CPPI_INLINE float cppi_box_muller(float u1, float u2) {
  return cppi_box_muller16(cppi_vsplat<cppi_f32x16>(u1), cppi_vsplat<cppi_f32x16>(u2))[0];
}
)cppi_support";

/// Vector lanes: masked and repeated loads, lane generators, Philox across
/// lanes, the arg and Welford states, lane reductions.
constexpr char kVectorHelpers[] = R"cppi_support(
// Philox across the lanes of a vector: lane l runs counter base + l * step.
// The printer uses it only when 0 <= step * (lanes - 1) < 2^32, so the lanes'
// low counter words are base's plus l * step (mod 2^32) and the high word
// carries at most once. Every lane computes exactly what cppi_philox would,
// so a value does not depend on the vector width or on landing in the tail.
template <class VF> struct cppi_philox_lanes;
#define CPPI_PHILOX_LANES(W)                              \
  template <> struct cppi_philox_lanes<cppi_f32x##W> {    \
    typedef cppi_u32x##W u32;                             \
    typedef cppi_i32x##W i32;                             \
  };
CPPI_PHILOX_LANES(4)
CPPI_PHILOX_LANES(8)
CPPI_PHILOX_LANES(16)
#undef CPPI_PHILOX_LANES
template <class VF>
CPPI_INLINE void cppi_vphilox(int64_t seed, int64_t base, uint32_t step, typename cppi_philox_lanes<VF>::u32& w0,
                              typename cppi_philox_lanes<VF>::u32& w1) {
  typedef typename cppi_philox_lanes<VF>::u32 U;
  const uint64_t s = (uint64_t)seed, o = (uint64_t)base;
  const uint32_t o_lo = (uint32_t)o;
  U c0 = cppi_viota<U>(0) * step + o_lo;
  U c1 = cppi_vsplat<U>((uint32_t)(o >> 32)) - (U)(c0 < o_lo);  // a wrapped low word carries 1
  U c2 = cppi_vsplat<U>(0), c3 = cppi_vsplat<U>(0);
  cppi_philox_rounds(c0, c1, c2, c3, (uint32_t)s, (uint32_t)(s >> 32));
  w0 = c0;
  w1 = c1;
}
template <class VF>
CPPI_INLINE VF cppi_vuint_to_uniform(typename cppi_philox_lanes<VF>::u32 u) {
  typedef typename cppi_philox_lanes<VF>::i32 I;
  const I i = (I)u;
  return __builtin_convertvector(i ^ (i >> 31), VF) * 4.6566127342e-10f;
}
template <class VF> CPPI_INLINE VF cppi_vrand(int64_t seed, int64_t base, uint32_t step) {
  typename cppi_philox_lanes<VF>::u32 w0, w1;
  cppi_vphilox<VF>(seed, base, step, w0, w1);
  return cppi_vuint_to_uniform<VF>(w0);
}
// Every lane equals cppi_randn bit for bit (cppi_box_muller16 above).
template <class VF> CPPI_INLINE VF cppi_vrandn(int64_t seed, int64_t base, uint32_t step) {
  typename cppi_philox_lanes<VF>::u32 w0, w1;
  cppi_vphilox<VF>(seed, base, step, w0, w1);
  const VF u1 = cppi_vuint_to_uniform<VF>(w0), u2 = cppi_vuint_to_uniform<VF>(w1);
  cppi_f32x16 a = cppi_vsplat<cppi_f32x16>(0.5f), b = a;
  __builtin_memcpy(&a, &u1, sizeof u1);
  __builtin_memcpy(&b, &u2, sizeof u2);
  const cppi_f32x16 n = cppi_box_muller16(a, b);
  VF r;
  __builtin_memcpy(&r, &n, sizeof r);
  return r;
}

// Lane-wise fallbacks: lane l gets f(base + l) (masked: only where m[l]).
template <class V, class F>
CPPI_INLINE V cppi_vgen(int64_t base, const F& f) {
  V r;
  for (int l = 0; l < cppi_vec_traits<V>::lanes_v; ++l) r[l] = f(base + l);
  return r;
}
template <class V, class M, class F>
CPPI_INLINE V cppi_vgen_masked(M m, int64_t base, const F& f) {
  V r = {};
  for (int l = 0; l < cppi_vec_traits<V>::lanes_v; ++l)
    if (m[l]) r[l] = f(base + l);
  return r;
}
// A masked load of consecutive or strided elements (a cat's inputs,
// padding, a padded pooling window): one vector load where every lane is on,
// zeros where none is, lane by lane only at the seams. `load` reads the whole vector; it runs only when every lane
// is on, since the elements of lanes that are off may lie outside the buffer.
template <class V, class M, class L, class F>
CPPI_INLINE V cppi_vload_masked(M m, const L& load, int64_t base, const F& f) {
  bool all = true, any = false;
  for (int l = 0; l < cppi_vec_traits<V>::lanes_v; ++l) {
    all = all && m[l];
    any = any || m[l];
  }
  if (all) return load();
  if (!any) return V{};
  return cppi_vgen_masked<V>(m, base, f);
}
// Repeated elements (nearest upsampling by R reads x[..., i // R]): lanes
// p[0] R times, p[1] R times, ...: W / R elements loaded, each spread over
// R lanes. The pattern holds for a vector that starts at a multiple of R;
// one that does not (after a split loop) takes its lanes one by one.
template <int R, class V, class H, int... J>
CPPI_INLINE V cppi_repeat_lanes(H h, cppi_ints<J...>) {
  return __builtin_shufflevector(h, h, (J / R)...);
}
template <class V, int R, class F>
CPPI_INLINE V cppi_vload_repeat(const void* p, int64_t base, const F& f) {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  static_assert(W % R == 0, "cppi_vload_repeat: R must divide the vector");
  if (base % R != 0) return cppi_vgen<V>(base, f);
  typedef E H __attribute__((vector_size(sizeof(E) * (W / R))));
  H h;
  __builtin_memcpy(&h, p, sizeof(H));
  return cppi_repeat_lanes<R, V>(h, typename cppi_make_ints<W>::type());
}
template <class V, class F>
CPPI_INLINE V cppi_vmap1(V a, const F& f) {
  V r;
  for (int l = 0; l < cppi_vec_traits<V>::lanes_v; ++l) r[l] = f(a[l]);
  return r;
}
template <class V, class F>
CPPI_INLINE V cppi_vmap2(V a, V b, const F& f) {
  V r;
  for (int l = 0; l < cppi_vec_traits<V>::lanes_v; ++l) r[l] = f(a[l], b[l]);
  return r;
}
// Integer vector max/min (float vectors use the prelude's NaN-aware ones).
template <class V> CPPI_INLINE V cppi_vmax_int(V a, V b) { return cppi_vselect(a > b, a, b); }
template <class V> CPPI_INLINE V cppi_vmin_int(V a, V b) { return cppi_vselect(a < b, a, b); }
// Horizontal reductions in lane order.
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_mul(V v) {
  typename cppi_vec_traits<V>::element_type acc = v[0];
  for (int i = 1; i < cppi_vec_traits<V>::lanes_v; ++i) acc = acc * v[i];
  return acc;
}
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_wadd(V v) {
  typedef typename cppi_vec_traits<V>::element_type E;
  E acc = v[0];
  for (int i = 1; i < cppi_vec_traits<V>::lanes_v; ++i) acc = cppi_wadd<E>(acc, v[i]);
  return acc;
}
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_wmul(V v) {
  typedef typename cppi_vec_traits<V>::element_type E;
  E acc = v[0];
  for (int i = 1; i < cppi_vec_traits<V>::lanes_v; ++i) acc = cppi_wmul<E>(acc, v[i]);
  return acc;
}
template <class V> CPPI_INLINE bool cppi_vreduce_any(V m) {
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i)
    if (m[i]) return true;
  return false;
}
template <class V> CPPI_INLINE bool cppi_vreduce_all(V m) {
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i)
    if (!m[i]) return false;
  return true;
}

// argmax / argmin: the first position of the max (min); NaN beats every
// number, the first NaN wins. The combines are order-free on ties (smaller
// index wins), so partials may be merged in any fixed order.
template <class T> struct cppi_arg { T value; int64_t index; };
template <class T> CPPI_INLINE cppi_arg<T> cppi_argmax_combine(cppi_arg<T> a, cppi_arg<T> b) {
  const bool an = a.value != a.value, bn = b.value != b.value;
  if (an || bn) {
    if (an && bn) return a.index <= b.index ? a : b;
    return an ? a : b;
  }
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index <= b.index ? a : b;
}
template <class T> CPPI_INLINE cppi_arg<T> cppi_argmin_combine(cppi_arg<T> a, cppi_arg<T> b) {
  const bool an = a.value != a.value, bn = b.value != b.value;
  if (an || bn) {
    if (an && bn) return a.index <= b.index ? a : b;
    return an ? a : b;
  }
  if (a.value != b.value) return a.value < b.value ? a : b;
  return a.index <= b.index ? a : b;
}
// Per-lane states; each lane sees increasing positions, so strict
// comparisons keep the first occurrence.
template <class V, class I> struct cppi_varg { V value; I index; };
template <class V, class I>
CPPI_INLINE cppi_varg<V, I> cppi_vargmax_update(cppi_varg<V, I> a, V v, I pos) {
  const auto take = (v > a.value) | ((v != v) & (a.value == a.value));
  a.value = cppi_vselect(take, v, a.value);
  a.index = cppi_vselect(cppi_vconvert<I>(take), pos, a.index);
  return a;
}
template <class V, class I>
CPPI_INLINE cppi_varg<V, I> cppi_vargmin_update(cppi_varg<V, I> a, V v, I pos) {
  const auto take = (v < a.value) | ((v != v) & (a.value == a.value));
  a.value = cppi_vselect(take, v, a.value);
  a.index = cppi_vselect(cppi_vconvert<I>(take), pos, a.index);
  return a;
}
template <class V, class I>
CPPI_INLINE cppi_arg<typename cppi_vec_traits<V>::element_type> cppi_vargmax_reduce(cppi_varg<V, I> a) {
  typedef typename cppi_vec_traits<V>::element_type E;
  cppi_arg<E> r = {a.value[0], a.index[0]};
  for (int l = 1; l < cppi_vec_traits<V>::lanes_v; ++l) r = cppi_argmax_combine(r, cppi_arg<E>{a.value[l], a.index[l]});
  return r;
}
template <class V, class I>
CPPI_INLINE cppi_arg<typename cppi_vec_traits<V>::element_type> cppi_vargmin_reduce(cppi_varg<V, I> a) {
  typedef typename cppi_vec_traits<V>::element_type E;
  cppi_arg<E> r = {a.value[0], a.index[0]};
  for (int l = 1; l < cppi_vec_traits<V>::lanes_v; ++l) r = cppi_argmin_combine(r, cppi_arg<E>{a.value[l], a.index[l]});
  return r;
}

// Welford (mean, m2, weight); partials merge with Chan et al.'s formula.
template <class T> struct cppi_welford { T mean, m2, weight; };
template <class T> CPPI_INLINE cppi_welford<T> cppi_welford_add(cppi_welford<T> a, T v) {
  a.weight = a.weight + (T)1;
  const T delta = v - a.mean;
  a.mean = a.mean + delta / a.weight;
  a.m2 = a.m2 + delta * (v - a.mean);
  return a;
}
template <class T> CPPI_INLINE cppi_welford<T> cppi_welford_combine(cppi_welford<T> a, cppi_welford<T> b) {
  if (a.weight == 0) return b;
  if (b.weight == 0) return a;
  const T w = a.weight + b.weight;
  const T delta = b.mean - a.mean;
  const T nb = b.weight / w;
  cppi_welford<T> r;
  r.mean = a.mean + delta * nb;
  r.m2 = a.m2 + b.m2 + delta * delta * a.weight * nb;
  r.weight = w;
  return r;
}
template <class V> struct cppi_vwelford { V mean, m2, weight; };
// Every add counts one element into every lane, so the lanes' weights are
// equal: one scalar reciprocal per add, off the mean's dependency chain,
// instead of a vector division on it, whose latency would bound a long
// var_mean (4096x4096 floats). Inductor multiplies by reciprocal weights too.
template <class V> CPPI_INLINE cppi_vwelford<V> cppi_vwelford_add(cppi_vwelford<V> a, V v) {
  typedef typename cppi_vec_traits<V>::element_type E;
  a.weight = a.weight + cppi_vsplat<V>((E)1);
  const E recip = (E)1 / a.weight[0];
  const V delta = v - a.mean;
  a.mean = a.mean + delta * cppi_vsplat<V>(recip);
  a.m2 = a.m2 + delta * (v - a.mean);
  return a;
}
// Lane-wise Chan merge of two vector states (cascaded accumulation). Within
// a state all lanes carry the same weight (see cppi_vwelford_add).
template <class V> CPPI_INLINE cppi_vwelford<V> cppi_vwelford_combine(cppi_vwelford<V> a, cppi_vwelford<V> b) {
  if (a.weight[0] == 0) return b;
  if (b.weight[0] == 0) return a;
  const V w = a.weight + b.weight;
  const V delta = b.mean - a.mean;
  const V nb = b.weight / w;
  cppi_vwelford<V> r;
  r.mean = a.mean + delta * nb;
  r.m2 = a.m2 + b.m2 + delta * delta * a.weight * nb;
  r.weight = w;
  return r;
}
template <class V>
CPPI_INLINE cppi_welford<typename cppi_vec_traits<V>::element_type> cppi_vwelford_reduce(cppi_vwelford<V> a) {
  typedef typename cppi_vec_traits<V>::element_type E;
  cppi_welford<E> r = {a.mean[0], a.m2[0], a.weight[0]};
  for (int l = 1; l < cppi_vec_traits<V>::lanes_v; ++l)
    r = cppi_welford_combine(r, cppi_welford<E>{a.mean[l], a.m2[l], a.weight[l]});
  return r;
}
// ---- end of codegen support ----
)cppi_support";

}  // namespace

const char* codegen_support_source() {
  static const std::string text = std::string(kHeader) + codegen::c_integer_support_source() + kCopysign +
                                  codegen::c_float_division_support_source() + kScalarMath +
                                  codegen::c_philox_support_source() + kVectorHelpers;
  return text.c_str();
}

const SourceHeader& cpu_codegen_header() {
  static const SourceHeader header{kCpuCodegenHeaderName,
                                   std::string("// cppinductor: what generated CPU modules include.\n"
                                               "#pragma once\n#include \"cppinductor_prelude.h\"\n") +
                                       codegen_support_source()};
  return header;
}

}  // namespace cppi::cpu
