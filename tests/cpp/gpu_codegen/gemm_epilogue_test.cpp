// The GEMM epilogue (gpu_codegen/codegen/gemm_epilogue.h): which kernels can
// be a matmul's epilogue, which matmuls the small-M kernels take, and the
// source printed for one. No GPU and no NVRTC needed; the kernels run
// against eager in tests/python/test_gemm_epilogue.py on a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gemm_epilogue.h"
#include "gpu_codegen/prelude/cuda_gemm.h"
#include "gpu_test_kernels.h"
#include "source_checks.h"

namespace cppi::gpu {
namespace {

using namespace ir;
using namespace testing;

// C = A @ B with A [16, 128] and B [128, 64] K-contiguous: the result gelu_bias reads as `x`.
GemmProblem problem(int64_t m = 16) { return {m, 64, 128, 128, 128, DType::BFloat16}; }

TEST(GemmEpilogue, SmallMatmulsOnly) {
  EXPECT_EQ(gemm_tiles(problem(), 80).size(), 3u);
  EXPECT_EQ(gemm_tiles(problem(1), 80).size(), 3u);
  EXPECT_TRUE(gemm_tiles(problem(17), 80).empty());  // one 16-row MMA tile
  EXPECT_EQ(gemm_tiles(problem(), 90).size(), 6u);   // and the wgmma kernel's
  const std::vector<GemmTile> sm90 = gemm_tiles(problem(64), 90);
  ASSERT_EQ(sm90.size(), 3u);
  for (const GemmTile& t : sm90) EXPECT_EQ(t.kind, GemmTile::Kind::Tma);
  EXPECT_EQ(sm90[0].mn, 64);
  EXPECT_EQ(gemm_tiles(problem(17), 90)[0].mn, 32);
  EXPECT_TRUE(gemm_tiles(problem(65), 90).empty());
  GemmProblem odd = problem();
  odd.k = odd.lda = odd.ldb = 100;  // 16-byte loads need K and the row strides in multiples of 8
  EXPECT_TRUE(gemm_tiles(odd, 90).empty());
  GemmProblem f32 = problem();
  f32.dtype = DType::Float32;
  EXPECT_TRUE(gemm_tiles(f32, 90).empty());
  GemmProblem f16 = problem();
  f16.dtype = DType::Float16;
  EXPECT_FALSE(gemm_tiles(f16, 80).empty());
}

TEST(GemmEpilogue, WhichKernelsQualify) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  EXPECT_EQ(why_not_gemm_epilogue(*k, "x", problem()), std::nullopt);
  // Its iterations must be the result's elements, at their own element.
  EXPECT_NE(why_not_gemm_epilogue(*k, "x", problem(8)), std::nullopt);
  const auto reads_bias = why_not_gemm_epilogue(*k, "b", problem());
  ASSERT_TRUE(reads_bias.has_value());  // b is read along the columns only: not element for element
  EXPECT_NE(reads_bias->find("out of order"), std::string::npos) << *reads_bias;
  EXPECT_NE(why_not_gemm_epilogue(*k, "out", problem()), std::nullopt);  // written, not read
  const auto symbolic = why_not_gemm_epilogue(*scheduled(gelu_bias(sym("s0"), 64, DType::BFloat16)), "x", problem());
  ASSERT_TRUE(symbolic.has_value());
  EXPECT_NE(symbolic->find("symbolic"), std::string::npos);
  const auto reduction = why_not_gemm_epilogue(*scheduled(softmax(16, 64)), "x", problem());
  ASSERT_TRUE(reduction.has_value());
  EXPECT_NE(reduction->find("pointwise"), std::string::npos);
}

TEST(GemmEpilogue, PrintsTheKernelAsTheTemplatesFunctor) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  const GemmTile tile = gemm_tiles(problem(), 80)[0];
  auto text = print_gemm_epilogue_kernel(*k, "x", problem(), tile, "gemm_test_0");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {
      "// kernel: gemm_test_0",
      "// why: max-autotune's candidate",
      "extern \"C\" __global__ void __launch_bounds__(256, 2)",
      "gemm_test_0(const cppi_bf16* in_b, cppi_bf16* out_out, const cppi_bf16* gemm_result_unread, "
      "const uint16_t* gemm_a, const uint16_t* gemm_b)",
      // The element's values (its loads and arithmetic), then its stores: the
      // template computes every value of a thread before its first store.
      "const auto epilogue_value = [&](int64_t gemm_m, int64_t gemm_n, float gemm_acc) {",
      "(gemm_m * 64 + gemm_n)",
      "gemm_value = ",
      "cppi_erf(",
      "struct Values { cppi_bf16 v0; };",
      "return Values{tmp",
      "};",
      "const auto epilogue_store = [&](int64_t gemm_m, int64_t gemm_n, const auto& gemm_values) {",
      "out_out[64*x0 + x1] = gemm_values.v0;",
      "};",
      "cppi_gemm::SplitEpilogue<decltype(epilogue_value), decltype(epilogue_store)> epilogue{",
      "cppi_gemm::gemm_skinny<cppi_gemm::SkinnyConfig<1, 2, 8, 4, 1, false, true>>(gemm_a, gemm_b, 16, 64, 128, 128, "
      "128, epilogue, nullptr, nullptr);",
  });
  EXPECT_EQ(text->find("in_b[", text->find("epilogue_store")), std::string::npos);  // the store part loads nothing
  // The result is never loaded: the accumulator stands for each read of it.
  EXPECT_EQ(text->find("gemm_result_unread["), std::string::npos);
  EXPECT_EQ(tile.blocks(problem()), 4);
  EXPECT_EQ(tile.describe(), "gemm_skinny nw=2 warps=8 unroll=4 prefetch 2/SM");
  EXPECT_EQ(tile.shared_bytes(), 8 * 2 * 4 * 32 * 4);

  // A module of it, for a compile by hand:
  //   nvcc -arch=sm_90 -std=c++17 -include cstdio -I<dir> -I gpu_codegen/prelude -c <dir>/gemm.cu
  if (const char* dir = std::getenv("CPPI_GEMM_EPILOGUE_DUMP")) {
    std::ofstream(std::string(dir) + "/gemm.cu") << gemm_module_preamble() << "\n" << *text;
    std::ofstream(std::string(dir) + "/" + kCudaCodegenHeaderName) << cuda_codegen_header().text;
  }
  EXPECT_NE(gemm_module_preamble().find(kCudaGemmName), std::string::npos);
}

TEST(GemmEpilogue, TwoOutputsOfAnElementAreTwoValuesThenTwoStores) {
  const KernelPtr k = scheduled(bias_then_gelu(16, 64, DType::BFloat16));
  ASSERT_EQ(why_not_gemm_epilogue(*k, "x", problem()), std::nullopt);
  auto text = print_gemm_epilogue_kernel(*k, "x", problem(), gemm_tiles(problem(), 90)[3], "gemm_test_8");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {"const auto epilogue_value", "cppi_erf(", "struct Values { cppi_bf16 v0; cppi_bf16 v1; };",
                          "const auto epilogue_store", "out_pre[", "= gemm_values.v0;", "out_post[",
                          "= gemm_values.v1;", "SplitEpilogue", "gemm_tma_swapped"});
  if (const char* dir = std::getenv("CPPI_GEMM_EPILOGUE_DUMP"))
    std::ofstream(std::string(dir) + "/gemm_two_outputs.cu") << gemm_module_preamble() << "\n" << *text;
}

TEST(GemmEpilogue, AKernelUpdatingABufferInPlaceKeepsEachElementsLoadsAndStoresTogether) {
  // s = s + x, s read and written. A kernel that reads a buffer it writes may
  // load what it stored, so its loads and stores keep the kernel's order: one
  // functor, element by element.
  const KernelPtr k = scheduled(add_in_place(16, 64, DType::BFloat16));
  auto text = print_gemm_epilogue_kernel(*k, "x", problem(), gemm_tiles(problem(), 80)[0], "gemm_test_7");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->find("SplitEpilogue"), std::string::npos);
  expect_in_order(*text, {"const auto epilogue = [&](int64_t gemm_m, int64_t gemm_n, float gemm_acc) {", "gemm_value",
                          "out_s[", "};", "epilogue, nullptr, nullptr);"});
}

TEST(GemmEpilogue, AddmmAddsItsBiasInFloatBeforeTheRounding) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  GemmProblem p = problem();
  p.bias = true;
  auto text = print_gemm_epilogue_kernel(*k, "x", p, gemm_tiles(p, 80)[1], "gemm_test_1");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {"const uint16_t* gemm_a, const uint16_t* gemm_b, const cppi_bf16* gemm_bias)",
                          "gemm_value = cppi_float_to_bf16((gemm_acc + cppi_bf16_to_float(gemm_bias[gemm_n])))",
                          "SkinnyConfig<1, 4, 8, 4, 1, false, true>"});
}

TEST(GemmEpilogue, NContiguousB) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  GemmProblem p = problem();
  p.b_k_contiguous = false, p.ldb = 64;  // B stored K x N
  const std::vector<GemmTile> tiles = gemm_tiles(p, 90);
  ASSERT_EQ(tiles.size(), 6u);  // the wgmma kernel's three after them
  EXPECT_EQ(tiles[3].kind, GemmTile::Kind::Tma);
  EXPECT_EQ(tiles[0].vec, 4);
  EXPECT_EQ(tiles[0].blocks(p), 2);  // 32 columns a block
  auto text = print_gemm_epilogue_kernel(*k, "x", p, tiles[0], "gemm_test_2");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {"cppi_gemm::gemm_skinny_n<cppi_gemm::SkinnyNConfig<4, 8, 4, false>>(gemm_a, gemm_b, 16, 64, "
                          "128, 128, 64, epilogue);"});
  // The wgmma kernel reads it as its transposed operand.
  auto tma = print_gemm_epilogue_kernel(*k, "x", p, tiles[3], "gemm_test_4");
  ASSERT_TRUE(tma.ok()) << tma.error().message;
  expect_in_order(*tma, {"SwappedConfig<16, 1, 4, 1, 2, 2, false, false, false>>(gemm_a_map, gemm_b_map, 16, 64, "});
  EXPECT_EQ(gemm_tiles(GemmProblem{64, 64, 128, 128, 64, DType::BFloat16, false, false}, 90).size(), 3u);
  // A K-contiguous skinny tile does not print for it, nor an N-contiguous B whose N is not a multiple of 8.
  EXPECT_FALSE(print_gemm_epilogue_kernel(*k, "x", p, gemm_tiles(problem(), 90)[0], "g").ok());
  p.n = 60;
  EXPECT_TRUE(gemm_tiles(p, 90).empty());
}

TEST(GemmEpilogue, TheWgmmaKernelTakesTensorMaps) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  GemmProblem p = problem();
  p.bias = true;
  const GemmTile tile = gemm_tiles(p, 90)[3];
  ASSERT_EQ(tile.kind, GemmTile::Kind::Tma);
  auto text = print_gemm_epilogue_kernel(*k, "x", p, tile, "gemm_test_3");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {
      "extern \"C\" __global__ void __launch_bounds__(256) __cluster_dims__(1, 2, 1)",
      "gemm_test_3(const cppi_bf16* in_b, cppi_bf16* out_out, const cppi_bf16* gemm_result_unread, "
      "const __grid_constant__ cppi_gemm::TensorMap gemm_a_map, const __grid_constant__ cppi_gemm::TensorMap "
      "gemm_b_map, const cppi_bf16* gemm_bias)",
      "gemm_value = cppi_float_to_bf16((gemm_acc + cppi_bf16_to_float(gemm_bias[gemm_n])))",
      "cppi_gemm::gemm_tma_swapped<cppi_gemm::SwappedConfig<16, 1, 4, 1, 2, 2, false, true, false>>(gemm_a_map, "
      "gemm_b_map, 16, 64, 128, epilogue, nullptr, nullptr);",
  });
  EXPECT_EQ(tile.describe(), "gemm_tma_swapped n=16 warpgroups=1 stages=4x2 cluster=2");
  EXPECT_EQ(tile.blocks(p), 1);
  EXPECT_EQ(tile.grid_y(), 2);
  EXPECT_EQ(tile.threads(), 256);
  EXPECT_EQ(tile.shared_bytes(), 4 * 2 * (64 + 16) * 128 + 64 + 1024);
  // Rows beyond the padded n of the tile do not print.
  EXPECT_FALSE(print_gemm_epilogue_kernel(*k, "x", problem(17), tile, "g").ok());

  // A module of it, for a compile by hand (sm_90a: wgmma):
  //   nvcc -arch=sm_90a -std=c++17 -include cstdio -I<dir> -I gpu_codegen/prelude -cubin <dir>/gemm_tma.cu
  if (const char* dir = std::getenv("CPPI_GEMM_EPILOGUE_DUMP"))
    std::ofstream(std::string(dir) + "/gemm_tma.cu") << gemm_module_preamble() << "\n" << *text;
}

TEST(GemmEpilogue, Float8OperandsScaleTheSumBeforeTheBias) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  GemmProblem p = problem();
  p.fp8 = true, p.bias = true, p.scale_b = GemmProblem::Scale::PerRow;
  EXPECT_TRUE(gemm_tiles(p, 80).empty());
  const std::vector<GemmTile> tiles = gemm_tiles(p, 90);
  ASSERT_EQ(tiles.size(), 3u);  // the wgmma kernel's alone
  auto text = print_gemm_epilogue_kernel(*k, "x", p, tiles[0], "gemm_test_5");
  ASSERT_TRUE(text.ok()) << text.error().message;
  expect_in_order(*text, {
      "const cppi_bf16* gemm_bias, const float* gemm_scale_a, const float* gemm_scale_b)",
      "gemm_value = cppi_float_to_bf16((gemm_acc * (gemm_scale_a[0] * gemm_scale_b[gemm_n]) + "
      "cppi_bf16_to_float(gemm_bias[gemm_n])))",
      "SwappedConfig<16, 1, 4, 1, 2, 2, false, true, true>>(gemm_a_map, gemm_b_map, 16, 64, 128, epilogue",
  });
  GemmProblem odd = p;
  odd.lda = odd.ldb = odd.k = 136;  // the copy engine's row strides: multiples of 16 bytes
  EXPECT_TRUE(gemm_tiles(odd, 90).empty());
  // B of float8_e5m2 (a gradient's): wgmma's first operand, so its type comes first.
  GemmProblem e5m2 = p;
  e5m2.b_e5m2 = true;
  auto mixed = print_gemm_epilogue_kernel(*k, "x", e5m2, tiles[0], "gemm_test_6");
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  expect_in_order(*mixed, {"SwappedConfig<16, 1, 4, 1, 2, 2, false, true, true, false, true>>(gemm_a_map, "});
  if (const char* dir = std::getenv("CPPI_GEMM_EPILOGUE_DUMP"))
    std::ofstream(std::string(dir) + "/gemm_fp8.cu") << gemm_module_preamble() << "\n" << *text << "\n" << *mixed;
}

TEST(GemmEpilogue, RefusesToPrintAKernelThatDoesNotQualify) {
  const KernelPtr k = scheduled(gelu_bias(16, 64, DType::BFloat16));
  EXPECT_FALSE(print_gemm_epilogue_kernel(*k, "x", problem(8), gemm_tiles(problem(8), 80)[0], "g").ok());
}

}  // namespace
}  // namespace cppi::gpu
