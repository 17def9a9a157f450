// The runtime prelude compiled on its own by the host compiler: conversions,
// vector math against std:: (NaN/inf included), NaN-propagating max/min,
// parallel loops on the shared OpenMP pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "cpu_codegen/jit/runtime.h"
#include "cpu_codegen/prelude/cppinductor_prelude.h"

namespace {

uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// c10::BFloat16's round_to_nearest_even, the reference we must match.
uint16_t reference_bf16(float f) {
  if (std::isnan(f)) return 0x7FC0;
  uint32_t u = bits_of(f);
  return uint16_t((u + ((u >> 16) & 1) + 0x7FFF) >> 16);
}

std::vector<float> interesting_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          65504.0f, 65520.0f, 6.0e-8f, 3.0e-8f, 1e-3f, 88.7f, 89.0f, -103.0f, 1e10f};
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> wide(-20.0f, 20.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(wide(rng));
  for (int i = 0; i < 2000; ++i) v.push_back(float_of(rng()));  // any bit pattern
  while (v.size() % 16) v.push_back(1.0f);
  return v;
}

TEST(PreludeBF16, ScalarMatchesC10) {
  for (float f : interesting_floats()) EXPECT_EQ(cppi_float_to_bf16(f).bits, reference_bf16(f)) << f;
  // Ties round to even: 1 + 2^-8 is halfway between two bf16 values.
  EXPECT_EQ(cppi_float_to_bf16(float_of(0x3F808000)).bits, 0x3F80);
  EXPECT_EQ(cppi_float_to_bf16(float_of(0x3F818000)).bits, 0x3F82);
}

TEST(PreludeBF16, EveryValueRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    cppi_bf16 x{uint16_t(b)};
    float f = cppi_bf16_to_float(x);
    EXPECT_EQ(bits_of(f), b << 16);
    if (!std::isnan(f)) EXPECT_EQ(cppi_float_to_bf16(f).bits, b);
    else EXPECT_EQ(cppi_float_to_bf16(f).bits, 0x7FC0);
  }
}

TEST(PreludeHalf, EveryValueMatchesFloat16) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t bits = uint16_t(b);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    float expected = float(h);
    float got = cppi_half_to_float(cppi_half{bits});
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(expected)) << b;
      EXPECT_EQ(cppi_float_to_half(got).bits, bits) << b;  // exact round trip
    }
  }
}

TEST(PreludeHalf, RoundingMatchesFloat16) {
  for (float f : interesting_floats()) {
    _Float16 h = _Float16(f);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    uint16_t got = cppi_float_to_half(f).bits;
    if (std::isnan(f)) EXPECT_EQ(got & 0x7E00, 0x7E00) << f;
    else EXPECT_EQ(got, expected) << f;
  }
}

TEST(PreludeReducedFloat, VectorsMatchScalars) {
  std::vector<float> v = interesting_floats();
  for (size_t i = 0; i < v.size(); i += 16) {
    auto f = cppi_vload<cppi_f32x16>(&v[i]);
    cppi_u16x16 bf = cppi_float_to_bf16(f), hf = cppi_float_to_half(f);
    cppi_f32x16 bf_back = cppi_bf16_to_float(bf), hf_back = cppi_half_to_float(hf);
    for (int l = 0; l < 16; ++l) {
      ASSERT_EQ(bf[l], cppi_float_to_bf16(v[i + l]).bits) << v[i + l];
      ASSERT_EQ(hf[l], cppi_float_to_half(v[i + l]).bits) << v[i + l];
      ASSERT_EQ(bits_of(bf_back[l]), bits_of(cppi_bf16_to_float(cppi_bf16{bf[l]})));
      ASSERT_EQ(bits_of(hf_back[l]), bits_of(cppi_half_to_float(cppi_half{hf[l]})));
    }
    cppi_f32x8 f8 = cppi_vlow<cppi_f32x8>(f);
    cppi_u16x8 bf8 = cppi_float_to_bf16(f8);
    for (int l = 0; l < 8; ++l) ASSERT_EQ(bf8[l], bf[l]);
  }
}

// Distance in units in the last place between two finite floats.
int64_t ulp_distance(float a, float b) {
  auto ordered = [](float x) {
    int32_t i = int32_t(bits_of(x));
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Vector result vs the std:: scalar result: same NaN-ness, same infinities,
// otherwise within `ulps` (SLEEF u10 and glibc are each within ~1 ULP).
void expect_close(float got, float want, int ulps, const char* fn, float x) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << fn << "(" << x << ") = " << got << ", want NaN";
  } else if (std::isinf(want) || want == 0.0f) {
    EXPECT_EQ(got, want) << fn << "(" << x << ")";
  } else {
    EXPECT_LE(ulp_distance(got, want), ulps) << fn << "(" << x << ") = " << got << ", want " << want;
  }
}

template <class V, class F, class G>
void check_unary(const char* name, F vector_fn, G std_fn, int ulps) {
  constexpr int lanes = cppi_vec_traits<V>::lanes_v;
  std::vector<float> v = interesting_floats();
  for (size_t i = 0; i + lanes <= v.size(); i += lanes) {
    V r = vector_fn(cppi_vload<V>(&v[i]));
    for (int l = 0; l < lanes; ++l) expect_close(r[l], std_fn(v[i + l]), ulps, name, v[i + l]);
  }
}

#define CHECK_UNARY(name, stdfn, ulps)                                                          \
  TEST(PreludeVectorMath, name) {                                                               \
    check_unary<cppi_f32x16>(#name "x16", [](cppi_f32x16 x) { return cppi_##name(x); },         \
                             [](float x) { return stdfn(x); }, ulps);                           \
    check_unary<cppi_f32x8>(#name "x8", [](cppi_f32x8 x) { return cppi_##name(x); },            \
                            [](float x) { return stdfn(x); }, ulps);                            \
    check_unary<cppi_f32x4>(#name "x4", [](cppi_f32x4 x) { return cppi_##name(x); },            \
                            [](float x) { return stdfn(x); }, ulps);                            \
    for (float x : interesting_floats()) expect_close(cppi_##name(x), stdfn(x), 0, #name, x);   \
  }

CHECK_UNARY(exp, std::exp, 2)
CHECK_UNARY(log, std::log, 2)
// libmvec's (taken when the process has libmvec, as this test does) are
// within 4 ULP; SLEEF's within 1; the prelude's own erf (with FMA) within 2
// of glibc's float erf (1.25 of the exact erf: ErfWithFmaIsWithinOneAndAQuarterUlp).
CHECK_UNARY(tanh, std::tanh, 4)
#if defined(__FMA__)
CHECK_UNARY(erf, std::erf, 2)
#else
CHECK_UNARY(erf, std::erf, 4)
#endif
CHECK_UNARY(sin, std::sin, 4)
CHECK_UNARY(cos, std::cos, 4)
CHECK_UNARY(expm1, std::expm1, 4)
CHECK_UNARY(tanh_sleef, std::tanh, 2)
CHECK_UNARY(erf_sleef, std::erf, 2)
CHECK_UNARY(sin_sleef, std::sin, 2)
CHECK_UNARY(cos_sleef, std::cos, 2)
CHECK_UNARY(expm1_sleef, std::expm1, 2)
CHECK_UNARY(log1p, std::log1p, 2)
CHECK_UNARY(log2, std::log2, 2)
CHECK_UNARY(exp2, std::exp2, 2)
CHECK_UNARY(atan, std::atan, 2)
CHECK_UNARY(sinh, std::sinh, 2)
CHECK_UNARY(cosh, std::cosh, 2)
CHECK_UNARY(cbrt, std::cbrt, 2)
CHECK_UNARY(erfc, std::erfc, 3)

// SLEEF's sincosf_u35 (3.5 ULP), or the separate sin and cos without SLEEF.
template <class V>
void check_sincos(const char* name) {
  constexpr int lanes = cppi_vec_traits<V>::lanes_v;
  std::vector<float> v = interesting_floats();
  for (float big : {1e30f, -1e30f, 3.4e38f, 39000.5f, 1e7f, 1e20f}) v.push_back(big);
  while (v.size() % 16) v.push_back(-0.0f);
  for (size_t i = 0; i + lanes <= v.size(); i += lanes) {
    V s, c;
    cppi_sincos(cppi_vload<V>(&v[i]), &s, &c);
    for (int l = 0; l < lanes; ++l) {
      expect_close(s[l], std::sin(v[i + l]), 4, name, v[i + l]);
      expect_close(c[l], std::cos(v[i + l]), 4, name, v[i + l]);
    }
  }
}
TEST(PreludeVectorMath, SincosMatchesSinAndCos) {
  check_sincos<cppi_f32x16>("sincos x16");
  check_sincos<cppi_f32x8>("sincos x8");
  check_sincos<cppi_f32x4>("sincos x4");
  cppi_f32x16 s, c;
  cppi_sincos(cppi_vsplat<cppi_f32x16>(-0.0f), &s, &c);
  EXPECT_TRUE(std::signbit(s[0]) && s[0] == 0.0f && c[0] == 1.0f);
}

#if defined(CPPI_TEST_HAS_LIBMVEC) && defined(__AVX512F__)
TEST(PreludeVectorMath, TakesLibmvecWhenTheProcessHasIt) {
  EXPECT_NE(&_ZGVeN16v_expf, nullptr);
  EXPECT_NE(&_ZGVeN16v_tanhf, nullptr);
}
#endif
#if defined(__FMA__)
// Every 61st float of [0, 5] and its negation (erf is 1 in float from 3.92),
// against double erf rounded once: the fits and the float rounding together
// stay within 1.25 ULP (every float checked when it was written).
TEST(PreludeVectorMath, ErfWithFmaIsWithinOneAndAQuarterUlp) {
  double worst = 0;
  float worst_at = 0;
  for (uint32_t b = 0; b <= 0x40A00000u; b += 61 * 16) {
    cppi_f32x16 x;
    for (int l = 0; l < 16; ++l) {
      float v;
      const uint32_t bits = b + 61 * uint32_t(l);
      std::memcpy(&v, &bits, 4);
      x[l] = (l & 1) ? -v : v;
    }
    cppi_f32x16 r16 = cppi_erf(x);
    cppi_f32x8 lo = cppi_erf(cppi_vlow<cppi_f32x8>(x)), hi = cppi_erf(cppi_vhigh<cppi_f32x8>(x));
    for (int l = 0; l < 16; ++l) {
      ASSERT_EQ(bits_of(r16[l]), bits_of(l < 8 ? lo[l] : hi[l - 8])) << x[l];
      const double want = std::erf(double(x[l]));
      const float rounded = float(want);
      const double ulp = double(std::nextafter(std::fabs(rounded), INFINITY)) - std::fabs(rounded);
      const double err = std::fabs(double(r16[l]) - want) / ulp;
      if (err > worst) worst = err, worst_at = x[l];
    }
  }
  EXPECT_LE(worst, 1.25) << "at " << worst_at;
  cppi_f32x8 special = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.95f, -0.921875f};
  cppi_f32x8 r = cppi_erf(special);
  EXPECT_EQ(bits_of(r[0]), bits_of(0.0f));
  EXPECT_EQ(bits_of(r[1]), bits_of(-0.0f));
  EXPECT_EQ(r[2], 1.0f);
  EXPECT_EQ(r[3], -1.0f);
  EXPECT_TRUE(std::isnan(r[4]));
  EXPECT_EQ(r[5], 1e-45f);  // 2/sqrt(pi) * the smallest denormal rounds back to it
  EXPECT_EQ(r[6], 1.0f);
  EXPECT_EQ(r[7], std::erf(-0.921875f));
}
#endif
CHECK_UNARY(sqrt, std::sqrt, 0)
CHECK_UNARY(floor, std::floor, 0)
CHECK_UNARY(round, std::nearbyint, 0)

TEST(PreludeVectorMath, PowMatchesStd) {
  std::vector<float> v = interesting_floats();
  std::vector<float> y(v.rbegin(), v.rend());
  for (size_t i = 0; i < v.size(); i += 16) {
    cppi_f32x16 r = cppi_pow(cppi_vload<cppi_f32x16>(&v[i]), cppi_vload<cppi_f32x16>(&y[i]));
    for (int l = 0; l < 16; ++l) expect_close(r[l], std::pow(v[i + l], y[i + l]), 2, "pow", v[i + l]);
  }
}

TEST(PreludeVectorMath, DoubleExpMatchesStd) {
  double xs[8] = {0.0, -1.5, 700.0, -800.0, std::nan(""), INFINITY, -INFINITY, 1e-300};
  cppi_f64x8 r = cppi_exp(cppi_vload<cppi_f64x8>(xs));
  for (int l = 0; l < 8; ++l) {
    double want = std::exp(xs[l]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(r[l]));
    else if (std::isinf(want) || want == 0.0) EXPECT_EQ(r[l], want);
    else EXPECT_NEAR(r[l], want, std::abs(want) * 1e-15) << xs[l];
  }
}

TEST(PreludeMaxMin, ABoundThatIsNeverNaNGivesCppiMaxsLanes) {
  // cppi_max/min against a constant bound, either side: the same lanes as
  // cppi_max/min (NaN in x wins; a tie keeps the second operand, so the
  // sign of a zero follows it), with one compare and a select.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const float xs[8] = {nan, inf, -inf, 0.0f, -0.0f, 0.5f, -0.5f, 2.0f};
  for (float bound : {0.0f, -0.0f, 0.5f, -inf}) {
    const cppi_f32x8 x = cppi_vload<cppi_f32x8>(xs), c = cppi_vsplat<cppi_f32x8>(bound);
    const cppi_f32x8 got[4] = {cppi_max_bound_first(c, x), cppi_max_bound_second(x, c), cppi_min_bound_first(c, x),
                               cppi_min_bound_second(x, c)};
    const cppi_f32x8 want[4] = {cppi_max(c, x), cppi_max(x, c), cppi_min(c, x), cppi_min(x, c)};
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 8; ++l) {
        EXPECT_EQ(std::isnan(got[k][l]), std::isnan(want[k][l])) << k << " " << l << " " << bound;
        if (std::isnan(want[k][l])) continue;
        EXPECT_EQ(got[k][l], want[k][l]) << k << " " << l << " " << bound;
        EXPECT_EQ(std::signbit(got[k][l]), std::signbit(want[k][l])) << k << " " << l << " " << bound;
      }
    }
  }
}

TEST(PreludeMaxMin, NaNPropagatesLikeTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  EXPECT_TRUE(std::isnan(cppi_max(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(cppi_max(1.0f, nan)));
  EXPECT_TRUE(std::isnan(cppi_min(nan, -inf)));
  EXPECT_TRUE(std::isnan(cppi_min(-inf, nan)));
  EXPECT_EQ(cppi_max(-inf, 3.0f), 3.0f);
  EXPECT_EQ(cppi_min(inf, 3.0f), 3.0f);

  float a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = float(i), b[i] = float(15 - i);
  a[3] = nan, b[7] = nan, a[9] = inf, b[10] = -inf;
  cppi_f32x16 mx = cppi_max(cppi_vload<cppi_f32x16>(a), cppi_vload<cppi_f32x16>(b));
  cppi_f32x16 mn = cppi_min(cppi_vload<cppi_f32x16>(a), cppi_vload<cppi_f32x16>(b));
  for (int i = 0; i < 16; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;
    } else {
      EXPECT_EQ(mx[i], std::max(a[i], b[i])) << i;
      EXPECT_EQ(mn[i], std::min(a[i], b[i])) << i;
    }
  }
  EXPECT_TRUE(std::isnan(cppi_vreduce_max(mx)));
  // A NaN in any one lane is the max and the min, beside infinities too.
  for (int at = 0; at < 16; ++at) {
    float e[16];
    for (int i = 0; i < 16; ++i) e[i] = i % 3 ? inf : -inf;
    e[at] = nan;
    EXPECT_TRUE(std::isnan(cppi_vreduce_max(cppi_vload<cppi_f32x16>(e)))) << at;
    EXPECT_TRUE(std::isnan(cppi_vreduce_min(cppi_vload<cppi_f32x16>(e)))) << at;
    if (at < 8) EXPECT_TRUE(std::isnan(cppi_vreduce_max(cppi_vload<cppi_f32x8>(e)))) << at;
  }
  float c[8] = {1, 5, -2, 4, 3, 0, 2, 1};
  EXPECT_EQ(cppi_vreduce_max(cppi_vload<cppi_f32x8>(c)), 5.0f);
  EXPECT_EQ(cppi_vreduce_min(cppi_vload<cppi_f32x8>(c)), -2.0f);
  EXPECT_EQ(cppi_vreduce_add(cppi_vload<cppi_f32x8>(c)), 14.0f);
  // The sum's fixed order, halves: lane i + lane i + 4 pairs 1e8 with -1e8
  // and keeps all six ones; lane by lane, the three ones after 1e8 would
  // be lost (3).
  float d[8] = {1e8f, 1, 1, 1, -1e8f, 1, 1, 1};
  EXPECT_EQ(cppi_vreduce_add(cppi_vload<cppi_f32x8>(d)), 6.0f);
}

// dst[j * W + i] = src[j + i * stride]: checked element by element for
// every width and element size the schedule uses, from a source whose rows
// are longer than the tile (stride > W) and do not start aligned.
template <int W, class T>
void check_transpose_tile() {
  const int64_t stride = W + 3;
  std::vector<T> src(static_cast<size_t>(stride * W + 1));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>(i * 7 + 1);
  std::vector<T> dst(W * W, T(0));
  cppi_transpose_tile<W, sizeof(T)>(src.data() + 1, stride, dst.data());
  for (int i = 0; i < W; ++i)
    for (int j = 0; j < W; ++j)
      ASSERT_EQ(dst[j * W + i], src[1 + j + i * stride]) << "W=" << W << " bytes=" << sizeof(T) << " i=" << i << " j=" << j;
}

TEST(PreludeVector, TransposeTile) {
  check_transpose_tile<4, uint8_t>();
  check_transpose_tile<16, uint8_t>();
  check_transpose_tile<8, uint16_t>();
  check_transpose_tile<16, uint16_t>();
  check_transpose_tile<4, float>();
  check_transpose_tile<8, float>();
  check_transpose_tile<16, float>();
  check_transpose_tile<2, double>();
  check_transpose_tile<8, double>();
  check_transpose_tile<8, int64_t>();
}

// Strided loads read lanes p[0], p[S], ... and nothing past the last one:
// the elements end exactly where a page with no access begins.
template <class V, int S>
void check_strided_load(char* page_end) {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  E* p = reinterpret_cast<E*>(page_end) - ((W - 1) * S + 1);
  for (int i = 0; i < (W - 1) * S + 1; ++i) p[i] = static_cast<E>(i * 3 + 1);
  const V v = cppi_vload_strided<V, S>(p);
  for (int i = 0; i < W; ++i) ASSERT_EQ(v[i], p[i * S]) << "W=" << W << " S=" << S << " lane " << i;
}

template <class V>
void check_strides(char* page_end) {
  check_strided_load<V, 2>(page_end);
  check_strided_load<V, 3>(page_end);
  check_strided_load<V, 4>(page_end);
}

/// A page that may be read and written followed by one with no access: a
/// load or store past `end` (the guard page's start) faults.
class GuardedPage {
 public:
  GuardedPage() : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    void* m = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    base_ = static_cast<char*>(m);
    if (mprotect(base_ + page_, page_, PROT_NONE) == 0) end = base_ + page_;
  }
  ~GuardedPage() {
    if (base_) munmap(base_, 2 * page_);
  }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;
  char* end = nullptr;  // null when the pages could not be set up

 private:
  size_t page_;
  char* base_ = nullptr;
};

TEST(PreludeVector, StridedLoadsStayInsideTheirElements) {
  GuardedPage g;
  ASSERT_NE(g.end, nullptr);
  char* guard = g.end;
  check_strides<cppi_f32x4>(guard);
  check_strides<cppi_f32x8>(guard);
  check_strides<cppi_f32x16>(guard);
  check_strides<cppi_f64x8>(guard);
  check_strides<cppi_i64x8>(guard);
  check_strides<cppi_u16x16>(guard);
  check_strides<cppi_u8x16>(guard);
}

// W rows of R elements as R vectors of element k of every row, and back;
// the partial forms touch only the first `rows` rows, which end exactly
// where a page with no access begins.
template <class V, int R>
void check_rows(char* page_end) {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  for (int rows = 1; rows <= W; ++rows) {
    E* p = reinterpret_cast<E*>(page_end) - rows * R;
    for (int i = 0; i < rows * R; ++i) p[i] = static_cast<E>(i * 3 + 1);
    V out[R];
    if (rows == W) {
      cppi_vload_rows<V, R>(p, out);
    } else {
      cppi_vload_rows_partial<V, R>(p, rows, out);
    }
    for (int k = 0; k < R; ++k) {
      for (int l = 0; l < W; ++l) {
        ASSERT_EQ(out[k][l], l < rows ? p[l * R + k] : E(0)) << "W=" << W << " R=" << R << " rows=" << rows;
      }
    }
    for (int k = 0; k < R; ++k) out[k] = out[k] + cppi_vsplat<V>(E(1));
    if (rows == W) {
      cppi_vstore_rows<V, R>(p, out);
    } else {
      cppi_vstore_rows_partial<V, R>(p, out, rows);
    }
    for (int i = 0; i < rows * R; ++i) ASSERT_EQ(p[i], static_cast<E>(i * 3 + 2)) << "W=" << W << " R=" << R << " rows=" << rows << " i=" << i;
  }
}

template <class V>
void check_row_lengths(char* page_end) {
  check_rows<V, 2>(page_end);
  check_rows<V, 3>(page_end);
  check_rows<V, 5>(page_end);
  check_rows<V, 7>(page_end);
  if constexpr (cppi_vec_traits<V>::lanes_v > 8) {
    check_rows<V, 8>(page_end);
    check_rows<V, 12>(page_end);
    check_rows<V, 15>(page_end);
  }
}

TEST(PreludeVector, RowsInLanesRoundTripAndStayInsideTheirRows) {
  GuardedPage g;
  ASSERT_NE(g.end, nullptr);
  char* guard = g.end;
  check_row_lengths<cppi_f32x4>(guard);
  check_row_lengths<cppi_f32x8>(guard);
  check_row_lengths<cppi_f32x16>(guard);
  check_row_lengths<cppi_f64x8>(guard);
  check_row_lengths<cppi_i64x8>(guard);
  check_row_lengths<cppi_i32x16>(guard);
}

// cppi_vtree_*: lane r is row r's sum, max or min (the sum a pairwise tree
// of the row's lanes, in this order: it must equal that exactly), NaN
// propagating through max and min wherever it sits.
template <class V>
void check_trees() {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  std::mt19937 rng(W);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 20; ++trial) {
    V rows[W];
    for (int r = 0; r < W; ++r) {
      for (int l = 0; l < W; ++l) rows[r][l] = static_cast<E>(normal(rng) * (1 + r));
    }
    if (trial == 1) rows[3][5] = static_cast<E>(NAN);
    if (trial == 2) rows[W - 1][0] = static_cast<E>(INFINITY);
    const V sum = cppi_vtree_add(rows), max = cppi_vtree_max(rows), min = cppi_vtree_min(rows);
    for (int r = 0; r < W; ++r) {
      std::vector<E> pairwise(W);
      for (int l = 0; l < W; ++l) pairwise[l] = rows[r][l];
      for (int n = W; n > 1; n /= 2) {
        for (int i = 0; i < n / 2; ++i) pairwise[i] = pairwise[2 * i] + pairwise[2 * i + 1];
      }
      E hi = rows[r][0], lo = rows[r][0];
      bool nan = false;
      for (int l = 0; l < W; ++l) {
        nan |= std::isnan(rows[r][l]);
        hi = std::max(hi, rows[r][l]);
        lo = std::min(lo, rows[r][l]);
      }
      if (std::isnan(pairwise[0])) {
        EXPECT_TRUE(std::isnan(sum[r])) << "W=" << W << " row " << r;
      } else {
        EXPECT_EQ(sum[r], pairwise[0]) << "W=" << W << " row " << r;
      }
      EXPECT_EQ(std::isnan(max[r]), nan) << "W=" << W << " row " << r;
      EXPECT_EQ(std::isnan(min[r]), nan) << "W=" << W << " row " << r;
      if (!nan) {
        EXPECT_EQ(max[r], hi) << "W=" << W << " row " << r;
        EXPECT_EQ(min[r], lo) << "W=" << W << " row " << r;
      }
    }
  }
}

TEST(PreludeVector, TreesReduceARowPerLane) {
  check_trees<cppi_f32x4>();
  check_trees<cppi_f32x8>();
  check_trees<cppi_f32x16>();
  check_trees<cppi_f64x2>();
  check_trees<cppi_f64x4>();
  check_trees<cppi_f64x8>();
}

TEST(PreludeVector, AbsSelectSplatPartial) {
  float a[8] = {-1.0f, -0.0f, 2.0f, -INFINITY, NAN, -3.5f, 0.0f, 7.0f};
  cppi_f32x8 r = cppi_abs(cppi_vload<cppi_f32x8>(a));
  for (int i = 0; i < 8; ++i) {
    if (std::isnan(a[i])) EXPECT_TRUE(std::isnan(r[i]));
    else EXPECT_EQ(bits_of(r[i]), bits_of(std::fabs(a[i])));
  }
  cppi_f32x8 s = cppi_vsplat<cppi_f32x8>(-0.0f);
  EXPECT_EQ(bits_of(s[5]), 0x80000000u);
  cppi_f32x8 p = cppi_vload_partial<cppi_f32x8>(a, 3);
  EXPECT_EQ(p[2], 2.0f);
  EXPECT_EQ(p[3], 0.0f);
  cppi_i32x8 iota = cppi_viota<cppi_i32x8>(10);
  EXPECT_EQ(iota[7], 17);
  cppi_f32x8 sel = cppi_vselect(iota > 13, cppi_vsplat<cppi_f32x8>(1.0f), cppi_vsplat<cppi_f32x8>(2.0f));
  EXPECT_EQ(sel[4], 1.0f);  // 14 > 13
  EXPECT_EQ(sel[3], 2.0f);
}

// Out of range, infinite and NaN floats convert to the most negative
// integer, as x86's truncating conversions (and so eager on x86) give them;
// in range they truncate toward zero. Scalars and vectors alike.
TEST(PreludeCasts, FloatToIntIsDefinedForEveryFloat) {
  const float f[8] = {2.9f, -2.9f, 3e9f, -3e9f, INFINITY, -INFINITY, NAN, -2147483648.0f};
  const int32_t i32[8] = {2, -2, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN};
  const int64_t i64[8] = {2, -2, 3000000000LL, -3000000000LL, INT64_MIN, INT64_MIN, INT64_MIN, -2147483648LL};
  const cppi_i32x8 v32 = cppi_vfloat_to_int<cppi_i32x8>(cppi_vload<cppi_f32x8>(f));
  const cppi_i64x8 v64 = cppi_vfloat_to_int<cppi_i64x8>(cppi_vload<cppi_f32x8>(f));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(cppi_float_to_int<int32_t>(f[i]), i32[i]) << f[i];
    EXPECT_EQ(cppi_float_to_int<int64_t>(f[i]), i64[i]) << f[i];
    EXPECT_EQ(cppi_float_to_int<int32_t>(static_cast<double>(f[i])), i32[i]) << f[i];
    EXPECT_EQ(v32[i], i32[i]) << f[i];
    EXPECT_EQ(v64[i], i64[i]) << f[i];
  }
  EXPECT_EQ(cppi_float_to_int<int32_t>(2147483520.0f), 2147483520);  // the largest float below 2^31
}

TEST(PreludeVector, HostWidth) {
#if defined(__AVX512F__)
  EXPECT_EQ(CPPI_VEC_BYTES, 64);
  EXPECT_EQ(CPPI_VF32_LANES, 16);
#elif defined(__AVX__)
  EXPECT_EQ(CPPI_VEC_BYTES, 32);
#endif
  EXPECT_EQ(sizeof(cppi_vf32), size_t(CPPI_VEC_BYTES));
}

class PreludeParallel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cppi::cpu::set_num_threads(GetParam()); }
  void TearDown() override { cppi::cpu::set_num_threads(0); }
};

TEST_P(PreludeParallel, ForCoversEveryIndexOnce) {
  for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 16, 1000, 100000}) {
      std::vector<std::atomic<int>> hits(size_t(n + 10));
      for (auto& h : hits) h = 0;
      std::atomic<int> calls{0};
      cppi_parallel_for(5, 5 + n, grain, [&](int64_t b, int64_t e) {
        ++calls;
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i) ++hits[size_t(i)];
      });
      for (int64_t i = 0; i < n + 10; ++i)
        ASSERT_EQ(hits[size_t(i)].load(), (i >= 5 && i < 5 + n) ? 1 : 0) << "n=" << n << " i=" << i;
      if (n > 0 && n <= grain) {
        EXPECT_EQ(calls.load(), 1);
      }
      EXPECT_LE(calls.load(), std::max(1, GetParam()));
    }
  }
}

TEST_P(PreludeParallel, RunsOnSeveralThreads) {
  if (cppi::cpu::openmp_library().empty()) GTEST_SKIP() << "no libgomp: loops run serially";
  std::mutex mutex;
  std::set<std::thread::id> threads;
  cppi_parallel_for(0, 1 << 16, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(int(threads.size()), GetParam());
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u);  // the caller works too
}

TEST_P(PreludeParallel, NestedLoopsStillCoverEverything) {
  std::vector<std::atomic<int>> hits(40 * 40);
  for (auto& h : hits) h = 0;
  cppi_parallel_for(0, 40, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      cppi_parallel_for(0, 40, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) ++hits[size_t(i * 40 + j)];
      });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST_P(PreludeParallel, ReduceIsDeterministic) {
  std::vector<float> x(100003);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  auto sum = [&] {
    return cppi_parallel_reduce(
        int64_t(0), int64_t(x.size()), int64_t(1000), 0.0f,
        [&](int64_t b, int64_t e, float acc) {
          for (int64_t i = b; i < e; ++i) acc += x[size_t(i)];
          return acc;
        },
        [](float a, float b) { return a + b; });
  };
  const float first = sum();
  for (int rep = 0; rep < 20; ++rep) ASSERT_EQ(bits_of(sum()), bits_of(first));
  // Same value as a serial loop over the same chunks in order.
  int64_t chunks = std::min<int64_t>(GetParam(), (int64_t(x.size()) + 999) / 1000);
  int64_t chunk = (int64_t(x.size()) + chunks - 1) / chunks;
  float expected = 0.0f;
  for (int64_t b = 0; b < int64_t(x.size()); b += chunk) {
    float acc = 0.0f;
    for (int64_t i = b; i < std::min<int64_t>(b + chunk, x.size()); ++i) acc += x[size_t(i)];
    expected = (b == 0) ? acc : expected + acc;
  }
  EXPECT_EQ(bits_of(first), bits_of(expected));
  // Max with NaN somewhere propagates through partials.
  x[77777] = NAN;
  float mx = cppi_parallel_reduce(
      int64_t(0), int64_t(x.size()), int64_t(1000), -INFINITY,
      [&](int64_t b, int64_t e, float acc) {
        for (int64_t i = b; i < e; ++i) acc = cppi_max(acc, x[size_t(i)]);
        return acc;
      },
      [](float a, float b) { return cppi_max(a, b); });
  EXPECT_TRUE(std::isnan(mx));
}

INSTANTIATE_TEST_SUITE_P(Threads, PreludeParallel, ::testing::Values(1, 2, 3, 4, 8));

}  // namespace
