// The CUDA prelude compiled as host C++: its half/bf16 conversions checked
// bit for bit, its combine rules checked against torch's semantics, and the
// embedded text checked against the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh"
#include "gpu_codegen/prelude/cuda_prelude.h"

namespace cppi::gpu {
namespace {

bool is_half_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }

TEST(CudaPreludeHost, HalfToFloatMatchesTheCompiler) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    _Float16 reference;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&reference, &bits, 2);
    const float got = cppi_half_bits_to_float(bits);
    if (is_half_nan(bits)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(cppi_float_bits(got), cppi_float_bits(static_cast<float>(reference)))
        << std::hex << h;
  }
}

TEST(CudaPreludeHost, HalfRoundTripIsExact) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if (is_half_nan(bits)) continue;
    ASSERT_EQ(cppi_float_to_half_bits(cppi_half_bits_to_float(bits)), bits) << std::hex << h;
  }
}

// Every float whose low 13 bits sit at, just below and just above the
// rounding point, for every exponent: ties, overflow, subnormals.
TEST(CudaPreludeHost, FloatToHalfRoundsToNearestEvenLikeTheCompiler) {
  for (uint32_t high = 0; high < (1u << 19); ++high) {
    for (uint32_t low : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) {
      const uint32_t u = (high << 13) | low;
      const float f = cppi_bits_float(u);
      const uint16_t got = cppi_float_to_half_bits(f);
      if (std::isnan(f)) {
        ASSERT_TRUE(is_half_nan(got)) << std::hex << u;
        continue;
      }
      const _Float16 reference = static_cast<_Float16>(f);
      uint16_t expected;
      std::memcpy(&expected, &reference, 2);
      ASSERT_EQ(got, expected) << "float bits 0x" << std::hex << u;
    }
  }
}

TEST(CudaPreludeHost, Bf16RoundsToNearestEven) {
  EXPECT_EQ(cppi_float_to_bf16_bits(1.0f), 0x3F80u);
  EXPECT_EQ(cppi_float_to_bf16_bits(-2.0f), 0xC000u);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa (1).
  EXPECT_EQ(cppi_float_to_bf16_bits(cppi_bits_float(0x3F808000u)), 0x3F80u);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (up).
  EXPECT_EQ(cppi_float_to_bf16_bits(cppi_bits_float(0x3F818000u)), 0x3F82u);
  EXPECT_EQ(cppi_float_to_bf16_bits(cppi_bits_float(0x3F808001u)), 0x3F81u);
  EXPECT_EQ(cppi_float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80u);
  EXPECT_EQ(cppi_float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80u);  // overflows
  EXPECT_EQ(cppi_float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()), 0x7FC0u);
  EXPECT_EQ(cppi_float_to_bf16_bits(-std::numeric_limits<float>::quiet_NaN()), 0x7FC0u);
  for (uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = cppi_bf16_bits_to_float(bits);
    ASSERT_EQ(cppi_float_bits(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(cppi_float_to_bf16_bits(f), bits) << std::hex << b;
    }
  }
}

TEST(CudaPreludeHost, MaxAndMinPropagateNanLikeTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(cppi_max(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(cppi_max(1.0f, nan)));
  EXPECT_TRUE(std::isnan(cppi_min(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(cppi_min(1.0f, nan)));
  EXPECT_EQ(cppi_max(-1.0f, 2.0f), 2.0f);
  EXPECT_EQ(cppi_min(-1.0f, 2.0f), -1.0f);
  EXPECT_EQ(cppi_max<int64_t>(-5, 3), 3);
  EXPECT_EQ(cppi_min<int64_t>(-5, 3), -5);
  // The reductions' folds too.
  EXPECT_TRUE(std::isnan(cppi_fold_max(1.0f, nan)));
  EXPECT_TRUE(std::isnan(cppi_fold_min(nan, 1.0f)));
  EXPECT_EQ(cppi_fold_max(-1.0f, 2.0f), 2.0f);
  EXPECT_EQ(cppi_fold_min<int64_t>(-5, 3), -5);
}

TEST(CudaPreludeHost, WelfordCombineMatchesTwoPass) {
  const double xs[] = {1.5, -2.0, 3.25, 8.0, 0.5, -7.75, 4.0};
  double mean = 0, m2 = 0;
  for (double x : xs) mean += x;
  mean /= 7;
  for (double x : xs) m2 += (x - mean) * (x - mean);

  // Fold in two uneven halves and combine, plus empty partials on both sides.
  cppi_welford<double> a = cppi_welford_init<double>(), b = cppi_welford_init<double>();
  for (int i = 0; i < 2; ++i) a = cppi_welford_update(a, xs[i]);
  for (int i = 2; i < 7; ++i) b = cppi_welford_update(b, xs[i]);
  cppi_welford<double> all = cppi_welford_combine(cppi_welford_init<double>(), a);
  all = cppi_welford_combine(all, b);
  all = cppi_welford_combine(all, cppi_welford_init<double>());
  EXPECT_DOUBLE_EQ(all.weight, 7.0);
  EXPECT_NEAR(all.mean, mean, 1e-12);
  EXPECT_NEAR(all.m2, m2, 1e-12);
  cppi_welford<double> none =
      cppi_welford_combine(cppi_welford_init<double>(), cppi_welford_init<double>());
  EXPECT_EQ(none.weight, 0.0);
  EXPECT_EQ(none.mean, 0.0);
}

// Folding left to right and folding as a tree agree with torch.argmax/argmin:
// first index of the extreme, NaN is the extreme, empty partials never win.
TEST(CudaPreludeHost, ArgmaxAndArgminPickTorchsIndex) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::vector<float> values;
    int64_t argmax, argmin;
  };
  const Case cases[] = {
      {{1, 5, 3, 5, -2, -2}, 1, 4},
      {{1, nan, 3, nan}, 1, 1},
      {{-std::numeric_limits<float>::infinity(), 0, 0}, 1, 0},
      {{7}, 0, 0},
  };
  for (const Case& c : cases) {
    const int n = static_cast<int>(c.values.size());
    cppi_arg<float> empty = cppi_arg_make(0.0f, -1);
    cppi_arg<float> mx = empty, mn = empty;
    for (int i = 0; i < n; ++i) {
      mx = cppi_argmax_combine(mx, cppi_arg_make(c.values[i], i));
      mn = cppi_argmin_combine(mn, cppi_arg_make(c.values[i], i));
    }
    EXPECT_EQ(mx.index, c.argmax);
    EXPECT_EQ(mn.index, c.argmin);
    // Tree order, with the later half on the left as a butterfly may combine it.
    std::vector<cppi_arg<float>> level;
    for (int i = 0; i < n; ++i) level.push_back(cppi_arg_make(c.values[i], i));
    while (level.size() < 8) level.push_back(empty);
    std::vector<cppi_arg<float>> max_level = level, min_level = level;
    while (max_level.size() > 1) {
      std::vector<cppi_arg<float>> next_max, next_min;
      const size_t half = max_level.size() / 2;
      for (size_t i = 0; i < half; ++i) {
        next_max.push_back(cppi_argmax_combine(max_level[i + half], max_level[i]));
        next_min.push_back(cppi_argmin_combine(min_level[i + half], min_level[i]));
      }
      max_level = next_max;
      min_level = next_min;
    }
    EXPECT_EQ(max_level[0].index, c.argmax);
    EXPECT_EQ(min_level[0].index, c.argmin);
  }
}

TEST(CudaPreludeHost, EmbeddedTextIsTheHeader) {
  std::ifstream file(CPPI_PRELUDE_PATH);
  ASSERT_TRUE(file) << CPPI_PRELUDE_PATH;
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(cuda_prelude_source(), text.str());
}

}  // namespace
}  // namespace cppi::gpu
