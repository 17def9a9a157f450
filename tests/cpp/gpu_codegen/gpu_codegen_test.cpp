// Tests for the GPU schedule and the CUDA printer, in three layers:
// - schedule decisions and FileCheck-style checks on the generated source
//   (no GPU, no NVRTC needed);
// - NVRTC compiles every generated test kernel (skips without NVRTC);
// - on a GPU, kernels run on random data (odd sizes, NaN and inf) under every
//   mapping the printer supports and are compared with the IR reference
//   interpreter run on the host (skips without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "gpu_codegen/codegen/cuda_kernel.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "gpu_test_kernels.h"
#include "lowering/ir/scalar_convert.h"

namespace cppi::gpu {
namespace {

using namespace ir;
using namespace testing;

bool have_nvrtc() {
  static const bool available = [] {
    const char* env = std::getenv("CPPINDUCTOR_NVRTC_LIBRARY");
    if ((!env || !*env) && *CPPI_TEST_NVRTC_LIBRARY) (void)set_nvrtc_library(CPPI_TEST_NVRTC_LIBRARY);
    return nvrtc_available();
  }();
  return available;
}

#define REQUIRE_NVRTC() \
  if (!have_nvrtc()) GTEST_SKIP() << "no NVRTC: " << nvrtc().error().message
#define REQUIRE_GPU()                                                                \
  REQUIRE_NVRTC();                                                                   \
  if (!cuda_driver_available()) GTEST_SKIP() << "no GPU: " << cuda_driver().error().message

const std::vector<std::string> kSymbols = {"s0", "s1"};

KernelPtr scheduled(const KernelPtr& k) { return schedule_for_gpu(k, GpuTarget{}); }

KernelPtr with_gpu(const KernelPtr& k, GpuMapping m, int block, int ept) {
  Schedule s = k->schedule;
  s.gpu = GpuSchedule{m, block, 0, ept};
  return k->with_schedule(s);
}

KernelPtr with_column_groups(const KernelPtr& k, int threads_per_column) {
  Schedule s = k->schedule;
  s.gpu = GpuSchedule{GpuMapping::ColumnReduction, 32 * threads_per_column, 0, 1, threads_per_column};
  return k->with_schedule(s);
}

std::string source_of(const KernelPtr& k) {
  auto m = print_cuda_module({k}, kSymbols);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m->source : "";
}

/// FileCheck-style: each pattern occurs, in order.
void expect_in_order(const std::string& text, const std::vector<std::string>& patterns) {
  size_t at = 0;
  for (const auto& p : patterns) {
    size_t found = text.find(p, at);
    ASSERT_NE(found, std::string::npos) << "missing (in order): " << p << "\n--- source ---\n" << text;
    at = found + p.size();
  }
}

/// How many times `what` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// --- schedule -------------------------------------------------------------------------------

TEST(GpuSchedule, PointwiseVectorWidthFollowsDtype) {
  auto f32 = scheduled(add_relu_mul(sym("s0"), 1024));
  EXPECT_EQ(f32->schedule.gpu.mapping, GpuMapping::GridStridePointwise);
  EXPECT_EQ(f32->schedule.gpu.elements_per_thread, 4);
  EXPECT_EQ(scheduled(add_relu_mul(sym("s0"), 1024, DType::Float16))->schedule.gpu.elements_per_thread, 8);
  EXPECT_EQ(scheduled(add_relu_mul(sym("s0"), 1024, DType::BFloat16))->schedule.gpu.elements_per_thread, 8);
  // A constant innermost extent that is not a multiple of the width: scalar.
  EXPECT_EQ(scheduled(add_relu_mul(sym("s0"), 1001))->schedule.gpu.elements_per_thread, 1);
  // Symbolic: vectorised, checked at launch.
  EXPECT_EQ(scheduled(sin_plus_cos(sym("s0")))->schedule.gpu.elements_per_thread, 4);
}

TEST(GpuSchedule, RowsAndColumns) {
  auto warp = scheduled(softmax(sym("s0"), 1000));
  EXPECT_EQ(warp->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  EXPECT_EQ(warp->schedule.gpu.elements_per_thread, 32);  // 1000 <= 32 x 32, one cached load
  auto block = scheduled(softmax(16384, 4096));
  EXPECT_EQ(block->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(block->schedule.gpu.block_size, 256);
  EXPECT_EQ(block->schedule.gpu.elements_per_thread, 16);
  auto ln = scheduled(layer_norm(16384, 4096));
  EXPECT_EQ(ln->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(ln->schedule.gpu.elements_per_thread, 16);  // x cached; w and b are the same for every row
  EXPECT_EQ(row_cached_loads(*ln).size(), 1u);
  // 16384-long cached rows: 512 threads x 32 registers, not 1024 x 16.
  auto long_ln = scheduled(layer_norm(16384, 16384));
  EXPECT_EQ(long_ln->schedule.gpu.block_size, 512);
  EXPECT_EQ(long_ln->schedule.gpu.elements_per_thread, 32);
  // var_mean only reduces the row (no looped store): 256 threads x 64
  // registers, three blocks per SM; layer_norm's looped store keeps 512.
  auto long_vm = scheduled(var_mean(16384, 16384));
  EXPECT_EQ(long_vm->schedule.gpu.block_size, 256);
  EXPECT_EQ(long_vm->schedule.gpu.elements_per_thread, 64);
  // Rows of 32000 (a vocabulary): at 512 threads the cache would take 63
  // registers and leave one block per SM; 1024 threads cache 32 each.
  auto vocab = scheduled(softmax(8192, 32000));
  EXPECT_EQ(vocab->schedule.gpu.block_size, 1024);
  EXPECT_EQ(vocab->schedule.gpu.elements_per_thread, 32);
  auto symbolic = scheduled(softmax(sym("s0"), sym("s1")));
  EXPECT_EQ(symbolic->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(symbolic->schedule.gpu.elements_per_thread, 0);
  auto col = scheduled(column_sum(sym("s0"), sym("s1")));
  EXPECT_EQ(col->schedule.gpu.mapping, GpuMapping::ColumnReduction);
  EXPECT_EQ(col->schedule.gpu.threads_per_column, 32);
  EXPECT_EQ(col->schedule.gpu.block_size, 1024);
  // 16384 columns x 16 slices fill 132 SMs x 2048 threads once.
  auto wide = scheduled(column_sum(16384, 16384));
  EXPECT_EQ(wide->schedule.gpu.threads_per_column, 16);
  EXPECT_EQ(wide->schedule.gpu.block_size, 512);
  // Rows of at most 16 over many outputs (pooling windows): a thread per row.
  auto tiny = scheduled(row_reduce(ReductionKind::Sum, 1 << 20, 4));
  EXPECT_EQ(tiny->schedule.gpu.mapping, GpuMapping::ColumnReduction);
  EXPECT_EQ(tiny->schedule.gpu.threads_per_column, 1);
  EXPECT_EQ(scheduled(row_reduce(ReductionKind::Sum, 1000, 4))->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  // Short columns: one thread per column.
  auto shallow = scheduled(column_sum(20, 100000));
  EXPECT_EQ(shallow->schedule.gpu.threads_per_column, 1);
  EXPECT_EQ(shallow->schedule.gpu.block_size, 128);
  EXPECT_NE(explain_gpu_schedule(*softmax(16384, 4096), GpuTarget{}).find("cached in registers"), std::string::npos);
}

// --- generated source -------------------------------------------------------------------------

TEST(GpuSchedule, FewLongRowsSplitAcrossBlocks) {
  // 2 rows of 300000: a block per row would use 2 of 132 multiprocessors.
  auto k = scheduled(row_reduce(ReductionKind::Sum, 2, 300000));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(k->schedule.gpu.row_splits, 18);  // min(2 x 132 / 2, 300000 / (16 x 1024))
  // Many rows, short rows, or a Welford partial: no split.
  EXPECT_EQ(scheduled(row_reduce(ReductionKind::Sum, 4096, 300000))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(row_reduce(ReductionKind::Sum, 2, 4096))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(var_mean(2, 300000))->schedule.gpu.row_splits, 1);
  // The partials are module state: the runtime must serialise its launches.
  EXPECT_TRUE(has_module_state(k->schedule.gpu));
  EXPECT_FALSE(has_module_state(scheduled(row_reduce(ReductionKind::Sum, 4096, 300000))->schedule.gpu));
  auto m = print_cuda_module({k}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // The grid is one wave of two blocks per multiprocessor: the compiler must
  // keep two 1024-thread blocks resident (32 registers a thread).
  EXPECT_EQ(resident_blocks_assumed(k->schedule.gpu), 2);
  expect_in_order(m->source, {"__device__ float row_sum_partials[36];", "__device__ unsigned int row_sum_arrivals[2];",
                              "__launch_bounds__(1024, 2)", "const int64_t row = (int64_t)blockIdx.x / 18;",
                              "for (int64_t pos = split * 1024 + tid; pos < 300000; pos += 18432)",
                              "atomicAdd(&row_sum_arrivals[row], 1u) == 17u", "if (!row_sum_last) return;",
                              "row_sum_arrivals[row] = 0u;"});
}

TEST(CudaPrinter, SinAndCosOfOneValueAreOneSincos) {
  auto m = print_cuda_module({scheduled(sin_plus_cos(sym("s0")))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NE(m->source.find("cppi_sincos("), std::string::npos) << m->source;
  EXPECT_EQ(m->source.find("cppi_sin("), std::string::npos) << m->source;
  EXPECT_EQ(m->source.find("cppi_cos("), std::string::npos) << m->source;
  EXPECT_NE(m->kernels[0].scalar_twin_source.find("cppi_sincos("), std::string::npos);
}

TEST(CudaPrinter, PointwiseGridStrideVectorised) {
  auto m = print_cuda_module({scheduled(add_relu_mul(sym("s0"), sym("s1")))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->vectorized_kernel_count(), 1);
  ASSERT_EQ(m->kernels.size(), 1u);
  EXPECT_EQ(m->kernels[0].scalar_twin, "add_relu_mul_scalar");
  expect_in_order(m->source, {"#include \"cppinductor_cuda_prelude.cuh\"",
                              "extern \"C\" __global__ void __launch_bounds__(128)",
                              "add_relu_mul(const float* in_b, float* out_out, const float* in_x, int64_t s0, int64_t s1)",
                              "for (int64_t idx = ((int64_t)blockIdx.x * 128 + threadIdx.x) * 4; idx < n;",
                              "idx += (int64_t)gridDim.x * 512",
                              "cppi_vec<float, 4>", "#pragma unroll", "for (int vl = 0; vl < 4; ++vl)",
                              "cppi_store_vec(out_out + "});
  // The scalar twin is a translation unit of its own, compiled only on demand.
  EXPECT_EQ(m->source.find("add_relu_mul_scalar"), std::string::npos);
  expect_in_order(m->kernels[0].scalar_twin_source,
                  {"#include \"cppinductor_cuda_prelude.cuh\"", "add_relu_mul_scalar(",
                   "idx += (int64_t)gridDim.x * 128"});
  // The bias, broadcast over rows, is contiguous along the columns: a vector too.
  EXPECT_NE(m->source.find("*(const cppi_vec<float, 4>*)(in_b + x1)"), std::string::npos);
  // Launch checks: the extent, then out/x alignment.
  EXPECT_GE(m->kernels[0].vector_checks.size(), 3u);
}

TEST(CudaPrinter, HalfLoadsComputeInFloat) {
  std::string src = source_of(scheduled(add_relu_mul(sym("s0"), sym("s1"), DType::Float16)));
  expect_in_order(src, {"cppi_vec<cppi_half, 8>", "cppi_half_to_float(", "cppi_float_to_half("});
}

TEST(CudaPrinter, RowPerWarpUsesShuffles) {
  auto m = print_cuda_module({scheduled(row_reduce(ReductionKind::Sum, sym("s0"), 512))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->kernels[0].warp_reduction);
  EXPECT_FALSE(m->kernels[0].block_reduction);
  expect_in_order(m->source, {"__launch_bounds__(128)", "const int tid = threadIdx.x & 31;",
                              "row += (int64_t)gridDim.x * 4", "cppi_warp_reduce(red_acc_acc, cppi_sum_op())",
                              "if (tid == 0)", "out_out[x0] = red_acc;"});
}

TEST(CudaPrinter, SoftmaxSinglePassFromRegisters) {
  auto m = print_cuda_module({scheduled(softmax(16384, 4096))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->kernels[0].row_cached);
  EXPECT_TRUE(m->kernels[0].block_reduction);
  expect_in_order(m->source, {"__launch_bounds__(256)", "float cache0[16];", "*(const cppi_vec<float, 4>*)(in_x + ",
                              "cache0[slot + vl] = v0.v[vl];", "cppi_fold_max(red_amax_acc",
                              "cppi_block_reduce(red_amax_acc, cppi_max_op()", "cppi_exp(",
                              "cppi_block_reduce(red_denom_acc, cppi_sum_op()", "cppi_store_vec(out_out + "});
  // The row is read from global memory once.
  const std::string fill = "(in_x + ";
  EXPECT_EQ(m->source.find("in_x", m->source.find(fill) + fill.size()), std::string::npos);
}

TEST(CudaPrinter, SymbolicRowsStream) {
  std::string src = source_of(scheduled(layer_norm(sym("s0"), sym("s1"))));
  expect_in_order(src, {"for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)",
                        "for (int64_t pos = tid; pos < s1; pos += 256)", "cppi_welford_add(red_mean_acc, ", "cppi_welford_rcp(red_mean_acc.weight",
                        "cppi_block_reduce(red_mean_acc, cppi_welford_op()", "for (int64_t pos = tid; pos < s1;"});
}

TEST(CudaPrinter, ColumnReductionSplitsRowsAcrossSlices) {
  std::string src = source_of(scheduled(column_sum(sym("s0"), sym("s1"))));
  expect_in_order(src, {"threads_per_column=32", "__launch_bounds__(1024)", "const int lane = threadIdx.x & 31;", "const int tid = threadIdx.x >> 5;",
                        "for (int64_t base = (int64_t)blockIdx.x * 32; base < n;", "const bool valid = idx < n;",
                        "#pragma unroll 4", "for (int64_t pos = valid ? tid : s0; pos < s0; pos += 32)",
                        "__shared__ float red_acc_scratch[1024];", "cppi_column_reduce(red_acc_acc, cppi_sum_op(), red_acc_scratch)",
                        "if (tid == 0 && valid)", "out_out[x0] = red_acc;"});
  // threads_per_column must match the block and be a power of two.
  Schedule bad = column_sum(sym("s0"), sym("s1"))->schedule;
  bad.gpu = GpuSchedule{GpuMapping::ColumnReduction, 256, 0, 1, 6};
  EXPECT_FALSE(print_cuda_module({column_sum(sym("s0"), sym("s1"))->with_schedule(bad)}, kSymbols).ok());
}

TEST(GpuSchedule, ReducedRowsLoadIn16ByteVectors) {
  EXPECT_EQ(scheduled(var_mean(16384, 4096))->schedule.gpu.cache_vector, 4);
  EXPECT_EQ(scheduled(var_mean(16384, 1024))->schedule.gpu.cache_vector, 4);
  EXPECT_EQ(scheduled(row_reduce(ReductionKind::Sum, 64, 1000))->schedule.gpu.cache_vector, 4);
  // Rows written back too (softmax, layer_norm: vector stores).
  EXPECT_EQ(scheduled(softmax(16384, 4096))->schedule.gpu.cache_vector, 4);
  EXPECT_EQ(scheduled(layer_norm(16384, 1024))->schedule.gpu.cache_vector, 4);
  // A length 4 does not divide, or a row not cached: scalar slots.
  EXPECT_EQ(scheduled(var_mean(17, 5000))->schedule.gpu.cache_vector, 1);
  EXPECT_EQ(scheduled(row_reduce(ReductionKind::Sum, 64, 1001))->schedule.gpu.cache_vector, 1);
  EXPECT_EQ(scheduled(var_mean(sym("s0"), sym("s1")))->schedule.gpu.cache_vector, 1);
  EXPECT_NE(explain_gpu_schedule(*var_mean(16384, 4096), GpuTarget{}).find("4-element vector loads"), std::string::npos);
  // The printer: one vector load per slot group, a scalar twin for misaligned rows.
  auto m = print_cuda_module({scheduled(var_mean(16384, 4096))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  expect_in_order(m->source, {"cache_vector=4", "for (int slot = 0; slot < 16; slot += 4)",
                              "const int64_t pos = (int64_t)(slot / 4) * 1024 + tid * 4;",
                              "= *(const cppi_vec<float, 4>*)(in_x + ", "cache0[slot + vl] = v0.v[vl];",
                              "cppi_welford_add(red_mean_acc, cache0[slot]"});
  EXPECT_EQ(m->kernels[0].scalar_twin, "var_mean_scalar");
  EXPECT_NE(m->kernels[0].scalar_twin_source.find("cache0[slot] = in_x["), std::string::npos);
  EXPECT_EQ(m->kernels[0].vector_checks.size(), 1u);
  // A forced vector cache the row length does not divide is refused.
  Schedule bad = scheduled(row_reduce(ReductionKind::Sum, 64, 1001))->schedule;
  bad.gpu.cache_vector = 4;
  EXPECT_FALSE(print_cuda_module({row_reduce(ReductionKind::Sum, 64, 1001)->with_schedule(bad)}, kSymbols).ok());
}

TEST(CudaPrinter, CachedRowsStoreVectors) {
  // layer_norm over rows of 1024, a warp per row: each group of 4 slots
  // reads the weight and bias as vectors and stores one vector; every
  // vector access is checked at launch (x, weight, bias, out).
  auto k = scheduled(layer_norm(16384, 1024));
  ASSERT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  auto m = print_cuda_module({k}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  expect_in_order(m->source, {"for (int group = 0; group < 32; group += 4)",
                              "const int64_t first = (int64_t)(group / 4) * 128 + tid * 4;",
                              "= *(const cppi_vec<float, 4>*)(in_w + ", "for (int vl = 0; vl < 4; ++vl)",
                              "if (vl == 0) at", "cppi_store_vec(out_out + "});
  EXPECT_EQ(m->kernels[0].vector_checks.size(), 4u);
  EXPECT_EQ(m->kernels[0].scalar_twin, "layer_norm_scalar");
}

TEST(GpuSchedule, ShortRowsAWarpCannotCacheGoToABlock) {
  // Four row loads x 1024 / 32 lanes = 128 registers: a warp would re-read
  // global memory; 128 threads cache 4 x 8.
  auto k = scheduled(four_load_row_sums(16384, 1024));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(k->schedule.gpu.block_size, 128);
  EXPECT_EQ(k->schedule.gpu.elements_per_thread, 8);
  // One row load: a warp caches it.
  EXPECT_EQ(scheduled(softmax(16384, 1024))->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  // Rows no block can cache either (64 loads): a warp, multi-pass.
  auto wide = scheduled(four_load_row_sums(16384, 1024, 64));
  EXPECT_EQ(wide->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  EXPECT_EQ(wide->schedule.gpu.elements_per_thread, 0);
}

TEST(GpuSchedule, FewColumnsSplitTheirRowsAcrossBlocks) {
  // 1024 columns: 32 groups of 1024 threads would leave 100 of 132 SMs idle.
  auto k = scheduled(two_column_reductions(16384, 1024));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::ColumnReduction);
  EXPECT_EQ(k->schedule.gpu.threads_per_column, 32);
  EXPECT_EQ(k->schedule.gpu.row_splits, 8);  // 132 x 2048 / 1024 threads / 32 groups
  EXPECT_TRUE(has_module_state(k->schedule.gpu));
  // Many columns, symbolic columns, short columns, a Welford partial, or a
  // looped stage after the reduction: no split.
  EXPECT_EQ(scheduled(column_sum(16384, 65536))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(column_sum(sym("s0"), sym("s1")))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(column_sum(600, 1024))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(column_reduce(ReductionKind::Welford, 16384, 1024))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(middle_sum_scale(2, 16384, 512))->schedule.gpu.row_splits, 1);
  EXPECT_NE(explain_gpu_schedule(*two_column_reductions(16384, 1024), GpuTarget{}).find("split across 8 blocks"),
            std::string::npos);
}

TEST(CudaPrinter, IndependentReductionsFoldInOnePass) {
  // Both sums read g: one loop, one load of g per position, then each partial
  // goes to its own module array and the group's last block folds them.
  const std::string src = source_of(scheduled(two_column_reductions(16384, 1024)));
  expect_in_order(src, {"__device__ float two_column_reductions_partials0[8192];",
                        "__device__ float two_column_reductions_partials1[8192];",
                        "__device__ unsigned int two_column_reductions_arrivals[32];",
                        "const int64_t group = (int64_t)blockIdx.x / 8;",
                        "for (int64_t pos = valid ? split * 32 + tid : 16384; pos < 16384; pos += 256)",
                        "red_gw_acc = red_gw_acc + ", "red_gmax_acc = cppi_fold_max(red_gmax_acc, ",
                        "cppi_column_reduce(red_gw_acc", "cppi_column_reduce(red_gmax_acc",
                        "two_column_reductions_partials0[split * n + idx] = red_gw_acc;",
                        "atomicAdd(&two_column_reductions_arrivals[group], 1u) == 7u",
                        "__ldcg(&two_column_reductions_partials1[part * n + idx])",
                        "two_column_reductions_arrivals[group] = 0u;", "out_gw[x0] = red_gw;"});
  EXPECT_EQ(occurrences(src, "for (int64_t pos"), 1u);
  EXPECT_EQ(occurrences(src, "in_g["), 1u);
  // Unsplit row mappings fold the run in one pass too.
  const std::string rows = source_of(with_gpu(two_column_reductions(sym("s0"), sym("s1")), GpuMapping::RowPerBlock, 128, 0));
  EXPECT_EQ(rows.find("for (int64_t pos"), rows.rfind("for (int64_t pos"));
}

TEST(CudaPrinter, SplitFullReductionStoresItsIndependentPointwiseInThePass) {
  // mse_loss's forward shape over 16 x 65536: the row is split across
  // blocks, and each thread stores the halved difference of the positions
  // it folds, so x and y are read once.
  auto k = scheduled(sum_and_halved_difference(16, 65536));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(k->schedule.gpu.row_splits, 64);  // min(2 x 132, 1024, 2^20 / (16 x 1024))
  const std::string src = source_of(k);
  expect_in_order(src, {"for (int64_t pos = split * 1024 + tid; pos < 1048576; pos += 65536)",
                        "red_total_acc = red_total_acc + ", "out_half[", "cppi_block_reduce(red_total_acc",
                        "if (!sum_and_halved_difference_last) return;", "out_mean[0] = "});
  EXPECT_EQ(occurrences(src, "for (int64_t pos"), 1u);
  EXPECT_EQ(occurrences(src, "in_x["), 1u);
}

TEST(CudaPrinter, ColumnReductionIsSerialPerThread) {
  std::string src = source_of(with_gpu(column_sum(sym("s0"), sym("s1")), GpuMapping::ColumnReduction, 128, 1));
  expect_in_order(src, {"__launch_bounds__(128)", "for (int64_t idx = (int64_t)blockIdx.x * 128 + threadIdx.x;",
                        "for (int64_t r0 = 0; r0 < s0; ++r0)", "out_out[x0] = red_acc;"});
  EXPECT_EQ(src.find("cppi_warp_reduce"), std::string::npos);
}

TEST(CudaPrinter, RandomDrawsPhiloxPerElement) {
  auto k = scheduled(dropout_noise(sym("s0"), sym("s1")));
  // Counters are per element: no 16-byte vector accesses for random kernels.
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::GridStridePointwise);
  const std::string src = source_of(k);
  expect_in_order(src, {"cppi_philox_rounds(", "cppi_mul_hilo(0xD2511F53u, c0, hi0, lo0)",
                        "CPPI_INLINE void cppi_philox(", "__global__", "cppi_rand(", "cppi_randn("});
  EXPECT_EQ(src.find("cppi_vec<float, 4>"), std::string::npos);
}

TEST(CudaPrinter, RefusesWhatItCannotPrint) {
  auto bad = with_gpu(softmax(sym("s0"), sym("s1")), GpuMapping::RowPerBlock, 256, 4);  // cache needs constant rows
  auto m = print_cuda_module({bad}, kSymbols);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::Internal);
  auto none = print_cuda_module({softmax(sym("s0"), sym("s1"))}, kSymbols);  // unscheduled
  ASSERT_FALSE(none.ok());
  auto missing = print_cuda_module({scheduled(softmax(sym("s0"), sym("s1")))}, {"s0"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, Error::Kind::InvalidInput);
}

// --- every kernel under every mapping it supports ------------------------------------------------

struct Case {
  std::string label;
  KernelPtr kernel;
  std::vector<int64_t> symbols;  // s0, s1
};

/// Forced schedules: each mapping the printer supports for the kernel.
std::vector<KernelPtr> mapping_variants(const KernelPtr& k) {
  std::vector<KernelPtr> out = {scheduled(k)};
  bool loops = false;
  for (const auto& s : k->stages) loops |= !std::visit([](const auto& st) { return st.loops.empty(); }, s);
  if (!loops) {
    out.push_back(with_gpu(k, GpuMapping::GridStridePointwise, 128, 1));
    return out;
  }
  out.push_back(with_gpu(k, GpuMapping::ColumnReduction, 64, 1));
  out.push_back(with_column_groups(k, 4));
  out.push_back(with_column_groups(k, 32));
  out.push_back(with_gpu(k, GpuMapping::RowPerWarp, 64, 0));
  out.push_back(with_gpu(k, GpuMapping::RowPerBlock, 128, 0));
  out.push_back(with_gpu(k, GpuMapping::RowPerBlock, 1024, 0));
  return out;
}

std::vector<Case> all_cases() {
  const IndexExpr s0 = sym("s0"), s1 = sym("s1");
  std::vector<Case> c = {
      {"add_relu_mul_f32", add_relu_mul(s0, s1), {37, 1004}},
      {"add_relu_mul_f32_odd", add_relu_mul(s0, s1), {5, 1001}},
      {"add_relu_mul_f16", add_relu_mul(s0, s1, DType::Float16), {9, 520}},
      {"add_relu_mul_bf16", add_relu_mul(s0, s1, DType::BFloat16), {9, 520}},
      {"sin_plus_cos", sin_plus_cos(s0), {100003, 1}},
      {"gelu_bias", gelu_bias(s0, s1), {33, 256}},
      {"nan_to_index", nan_to_index(s0, s1), {7, 129}},
      {"row_sum", row_reduce(ReductionKind::Sum, s0, s1), {67, 1003}},
      {"row_max", row_reduce(ReductionKind::Max, s0, s1), {67, 77}},
      {"row_min", row_reduce(ReductionKind::Min, s0, s1), {13, 3000}},
      {"row_argmax", row_reduce(ReductionKind::ArgMax, s0, s1), {67, 999}},
      {"row_argmin", row_reduce(ReductionKind::ArgMin, s0, s1), {31, 2050}},
      {"row_any", row_any_positive(s0, s1), {40, 33}},
      {"column_sum", column_sum(s0, s1), {1001, 67}},
      {"softmax_sym", softmax(s0, s1), {37, 1500}},
      {"softmax_f16_sym", softmax(s0, s1, DType::Float16), {37, 700}},
      {"layer_norm_sym", layer_norm(s0, s1), {21, 4099}},
      {"var_mean_sym", var_mean(s0, s1), {29, 2047}},
      // Constant shapes: the schedule caches rows in registers.
      {"softmax_warp_cached", softmax(45, 1000), {}},
      {"dropout_noise", dropout_noise(s0, s1), {33, 257}},
      {"softmax_block_cached", softmax(19, 4096), {}},
      {"softmax_block_cached_odd", softmax(19, 3001), {}},
      {"layer_norm_cached", layer_norm(23, 1537), {}},
      {"layer_norm_bf16_cached", layer_norm(23, 768, DType::BFloat16), {}},
      {"var_mean_cached", var_mean(17, 5000), {}},
      {"row_argmax_cached", row_reduce(ReductionKind::ArgMax, 33, 129), {}},
      {"column_sum_const", column_sum(300, 1000), {}},
      {"column_welford", column_reduce(ReductionKind::Welford, s0, s1), {1003, 45}},
      {"column_argmax", column_reduce(ReductionKind::ArgMax, s0, s1), {517, 70}},
      {"column_min", column_reduce(ReductionKind::Min, s0, s1), {64, 33}},
      {"middle_sum_scale", middle_sum_scale(s0, 301, s1), {3, 37}},
      {"two_column_reductions", two_column_reductions(s0, s1), {1003, 70}},
      {"four_load_row_sums_cached", four_load_row_sums(37, 1000), {}},
      {"sum_and_halved_difference", sum_and_halved_difference(s0, s1), {7, 300}},
      {"add_relu_mul_const", add_relu_mul(64, 1024), {}},
  };
  return c;
}

TEST(CudaNvrtc, EveryTestKernelCompiles) {
  REQUIRE_NVRTC();
  std::vector<KernelPtr> kernels;
  int n = 0;
  for (const auto& c : all_cases()) {
    for (const auto& k : mapping_variants(c.kernel)) {
      Schedule s = k->schedule;
      kernels.push_back(Kernel::make(cat(k->name, "_", n++), k->device, k->outer, k->stages, s, k->origins));
    }
  }
  auto m = print_cuda_module(kernels, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto ptx = compile_cuda(m->source, "gpu_codegen_test.cu", 90);
  ASSERT_TRUE(ptx.ok()) << ptx.error().message;
  EXPECT_NE(ptx->ptx.find(".entry softmax"), std::string::npos);
  // 128-bit vector loads made it into the PTX, and shuffles for warp reductions.
  EXPECT_NE(ptx->ptx.find("ld.global.v4.f32"), std::string::npos);
  EXPECT_NE(ptx->ptx.find("shfl.sync.bfly"), std::string::npos);
  // Philox rounds: 32x32 -> high word multiplies.
  EXPECT_NE(ptx->ptx.find(".entry dropout_noise"), std::string::npos);
  EXPECT_NE(ptx->ptx.find("mul.hi.u32"), std::string::npos);
  // No fast math (libdevice's expf still uses ex2.approx inside its accurate
  // range reduction, so the PTX alone cannot show it).
  for (const auto& flag : nvrtc_flags(ptx->arch, {})) EXPECT_EQ(flag.find("fast_math"), std::string::npos) << flag;
  EXPECT_EQ(ptx->log.find("warning"), std::string::npos) << ptx->log.substr(0, 2000);
}

TEST(CudaNvrtc, VectorStoresAreOneInstruction) {
  REQUIRE_NVRTC();
  // A store of a lane-by-lane filled cppi_vec came out as four st.global.f32
  // when copied as a struct (or as float4/uint4) to an unravelled 3-d index;
  // through cppi_store_vec it is one st.global.v4. The f16 kernel stores 8
  // halves: one 16-byte store too.
  const std::vector<KernelPtr> kernels = {gelu_backward_3d(16, 1024, 4096), gelu_bias(4096, 4096, DType::Float16)};
  for (const auto& k : kernels) {
    auto m = print_cuda_module({scheduled(k)}, kSymbols);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto ptx = compile_cuda(m->source, "vector_stores.cu", 90);
    ASSERT_TRUE(ptx.ok()) << ptx.error().message;
    const std::string& text = ptx->ptx;
    EXPECT_NE(text.find("st.global.v4."), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.f32"), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.b16"), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.u16"), std::string::npos) << k->name;
  }
}

// --- on a GPU: compare with the reference interpreter ----------------------------------------------

struct HostBuffer {
  BufferPtr buffer;
  std::vector<unsigned char> bytes;
  size_t count = 0;
};

float random_float(std::mt19937& rng, bool specials) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  if (specials) {
    const unsigned r = rng() % 1000;
    if (r == 0) return std::nanf("");
    if (r == 1) return INFINITY;
    if (r == 2) return -INFINITY;
  }
  return u(rng);
}

void fill_random(HostBuffer& h, std::mt19937& rng, bool specials) {
  unsigned char* p = h.bytes.data();
  for (size_t i = 0; i < h.count; ++i) {
    const float f = random_float(rng, specials);
    switch (h.buffer->dtype) {
      case DType::Float32: std::memcpy(p + 4 * i, &f, 4); break;
      case DType::Float16: {
        uint16_t b = float_to_half(f);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::BFloat16: {
        uint16_t b = float_to_bf16(f);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::Int64: {  // a random seed
        const int64_t v = (static_cast<int64_t>(rng()) << 32) | rng();
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      default: FAIL() << "no random fill for " << dtype_name(h.buffer->dtype);
    }
  }
}

double element(const HostBuffer& h, size_t i) {
  const unsigned char* p = h.bytes.data();
  switch (h.buffer->dtype) {
    case DType::Float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::Float64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case DType::Float16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return half_to_float(b);
    }
    case DType::BFloat16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return bf16_to_float(b);
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
    case DType::Bool: return p[i];
    default: return NAN;
  }
}

/// Runs `k` on the GPU and in the interpreter on the same random inputs.
/// Runs `k` on random inputs (`launches` times in a row, which must give the
/// same result: module state resets) and compares with the interpreter.
/// `eighths`: float inputs are multiples of 1/8, so sums of their products
/// below 2^18 are exact in float32 in any order and the comparison checks
/// which elements were summed, not the interpreter's sequential rounding.
void run_and_compare(const std::string& label, const KernelPtr& k, const std::vector<int64_t>& symbol_values,
                     bool specials, unsigned seed, int launches = 1, bool eighths = false) {
  SCOPED_TRACE(label + " [" + to_string(k->schedule.gpu.mapping) + " block " +
               std::to_string(k->schedule.gpu.block_size) + " ept " +
               std::to_string(k->schedule.gpu.elements_per_thread) + " tpc " +
               std::to_string(k->schedule.gpu.threads_per_column) + "]");
  IndexBindings bindings;
  std::vector<int64_t> syms = symbol_values;
  syms.resize(kSymbols.size(), 1);
  for (size_t i = 0; i < kSymbols.size(); ++i) bindings[kSymbols[i]] = syms[i];
  auto sig = signature(*k);
  std::mt19937 rng(seed);
  std::vector<HostBuffer> host, ref;
  for (const auto& a : sig.buffers) {
    HostBuffer h;
    h.buffer = a.buffer;
    h.count = static_cast<size_t>(evaluate(a.buffer->layout.storage_size(), bindings));
    h.bytes.assign(h.count * dtype_size(a.buffer->dtype), 0x7F);  // poison: unwritten outputs show
    if (!a.written) fill_random(h, rng, specials);
    if (!a.written && eighths && h.buffer->dtype == DType::Float32) {
      for (size_t i = 0; i < h.count; ++i) {
        float f;
        std::memcpy(&f, h.bytes.data() + 4 * i, 4);
        f = std::round(f * 8.0f) / 8.0f;
        std::memcpy(h.bytes.data() + 4 * i, &f, 4);
      }
    }
    host.push_back(std::move(h));
  }
  ref = host;
  InterpreterArgs args;
  args.symbols = bindings;
  for (auto& r : ref) args.buffers[r.buffer->name] = r.bytes.data();
  Status st = interpret(*k, args);
  ASSERT_TRUE(st.ok()) << st.error().message;

  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  std::vector<DeviceBuffer> dev;
  std::vector<void*> ptrs;
  for (auto& h : host) {
    auto b = DeviceBuffer::allocate(h.bytes.size());
    ASSERT_TRUE(b.ok()) << b.error().message;
    ASSERT_TRUE(b->upload(h.bytes.data(), h.bytes.size()).ok());
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(b->ptr())));
    dev.push_back(std::move(*b));
  }
  for (int i = 0; i < launches; ++i) compiled->kernels[0]->run(ptrs.data(), syms.data(), 0);
  Status sync = synchronize_context();
  ASSERT_TRUE(sync.ok()) << sync.error().message;
  const bool reduction = k->stages.size() > 1 || std::holds_alternative<ReductionStage>(k->stages[0]);
  for (size_t b = 0; b < host.size(); ++b) {
    if (!sig.buffers[b].written) continue;
    ASSERT_TRUE(dev[b].download(host[b].bytes.data(), host[b].bytes.size()).ok());
    const DType t = host[b].buffer->dtype;
    const double rtol = t == DType::Float16 ? 2e-3 : t == DType::BFloat16 ? 1.6e-2 : reduction ? 1e-4 : 1.3e-5;
    const double atol = t == DType::Float16 ? 1e-3 : t == DType::BFloat16 ? 1e-2 : reduction ? 1e-4 : 1.5e-5;
    int bad = 0;
    for (size_t i = 0; i < host[b].count && bad < 5; ++i) {
      const double got = element(host[b], i), want = element(ref[b], i);
      const bool ok = (std::isnan(got) && std::isnan(want)) || got == want ||
                      (std::isfinite(want) && std::abs(got - want) <= atol + rtol * std::abs(want));
      if (!ok) {
        ++bad;
        ADD_FAILURE() << host[b].buffer->name << "[" << i << "]: gpu " << got << " vs reference " << want;
      }
    }
  }
}

TEST(CudaRun, EveryMappingMatchesTheInterpreter) {
  REQUIRE_GPU();
  unsigned seed = 1;
  for (const auto& c : all_cases()) {
    for (const auto& k : mapping_variants(c.kernel)) {
      run_and_compare(c.label, k, c.symbols, /*specials=*/false, seed++);
      run_and_compare(c.label + " (NaN/inf)", k, c.symbols, /*specials=*/true, seed++);
    }
  }
}

TEST(CudaRun, SplitRowsMatchTheInterpreterLaunchAfterLaunch) {
  REQUIRE_GPU();
  for (ReductionKind kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min}) {
    auto k = scheduled(row_reduce(kind, 3, 100003));
    ASSERT_GT(k->schedule.gpu.row_splits, 1) << to_string(kind);
    run_and_compare(cat("split ", to_string(kind)), k, {}, /*specials=*/false, 7);
    run_and_compare(cat("split ", to_string(kind), " (NaN/inf)"), k, {}, /*specials=*/true, 8);
  }
  // One module launched again and again: the arrival counters reset.
  auto k = scheduled(row_reduce(ReductionKind::Sum, 1, 1 << 20));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const KernelSignature sig = signature(*k);
  auto x = DeviceBuffer::allocate(sizeof(float) << 20), out = DeviceBuffer::allocate(sizeof(float));
  ASSERT_TRUE(x.ok() && out.ok());
  void* ptrs[2];
  for (size_t i = 0; i < 2; ++i) {
    const bool is_out = sig.buffers[i].buffer->name == "out";
    ptrs[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(is_out ? out->ptr() : x->ptr()));
  }
  for (int launch = 1; launch <= 3; ++launch) {
    std::vector<float> ones(1 << 20, static_cast<float>(launch));
    ASSERT_TRUE(x->upload(ones.data(), ones.size() * sizeof(float)).ok());
    compiled->kernels[0]->run(ptrs, nullptr, 0);
    float sum = 0;
    ASSERT_TRUE(synchronize_context().ok());
    ASSERT_TRUE(out->download(&sum, sizeof sum).ok());
    EXPECT_EQ(sum, static_cast<float>(launch) * (1 << 20)) << "launch " << launch;
  }
}

TEST(CudaRun, SplitReductionWithPointwiseInItsPassMatchesTheInterpreter) {
  REQUIRE_GPU();
  // Exact sums (eighths): 40000 differences up to 6 stay below 2^18.
  auto k = scheduled(sum_and_halved_difference(8, 5000));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  run_and_compare("split sum + pointwise", k, {}, /*specials=*/false, 31, /*launches=*/3, /*eighths=*/true);
  run_and_compare("split sum + pointwise (NaN/inf)", k, {}, /*specials=*/true, 32);
}

TEST(CudaRun, SplitColumnGroupsMatchTheInterpreterLaunchAfterLaunch) {
  REQUIRE_GPU();
  // 1000 columns (a partial group of 8) over 20000 rows, split; three
  // launches of one module: each resets the arrival counters for the next.
  // Exact sums (eighths): 20000 rows of products up to 9 stay below 2^18.
  auto k = scheduled(two_column_reductions(20000, 1000));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  run_and_compare("split columns", k, {}, /*specials=*/false, 11, /*launches=*/3, /*eighths=*/true);
  run_and_compare("split columns (NaN/inf)", k, {}, /*specials=*/true, 12, /*launches=*/3, /*eighths=*/true);
  auto sum = scheduled(column_sum(30000, 96));
  ASSERT_GT(sum->schedule.gpu.row_splits, 1);
  run_and_compare("split column sum", sum, {}, /*specials=*/false, 13, /*launches=*/2, /*eighths=*/true);
}

TEST(CudaRun, MisalignedCachedRowsTakeTheScalarTwin) {
  REQUIRE_GPU();
  auto k = scheduled(var_mean(8, 1000));
  ASSERT_EQ(k->schedule.gpu.cache_vector, 4);
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const auto& h = *compiled->kernels[0];
  auto x = DeviceBuffer::allocate(8 * 1001 * 4), out = DeviceBuffer::allocate(8 * 1001 * 4);
  ASSERT_TRUE(x.ok() && out.ok());
  const KernelSignature sig = signature(*k);
  auto args = [&](int64_t shift) {
    std::vector<void*> p;
    for (const auto& a : sig.buffers) {
      const CUdeviceptr base = a.written ? (a.buffer->name == "var" ? out->ptr() : out->ptr() + 4096) : x->ptr() + shift;
      p.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(base)));
    }
    return p;
  };
  auto aligned = args(0), shifted = args(4);
  EXPECT_TRUE(h.plan(aligned.data(), nullptr).vectorized);
  EXPECT_FALSE(h.plan(shifted.data(), nullptr).vectorized);
  h.run(shifted.data(), nullptr, 0);
  ASSERT_TRUE(synchronize_context().ok());
  EXPECT_TRUE(h.scalar_twin_compiled());
  // Both variants against the interpreter (run_and_compare's buffers are aligned).
  run_and_compare("var_mean cached vectors", k, {}, /*specials=*/true, 21);
  run_and_compare("row sum cached vectors", scheduled(row_reduce(ReductionKind::Sum, 40, 2048)), {}, false, 23);
  // Rows stored as vectors: a warp per row and a block per row, and the
  // scalar twin forced (an output shifted by one element).
  for (const auto& ln : {scheduled(layer_norm(64, 1024)), scheduled(layer_norm(6, 4096)), scheduled(softmax(40, 2048))}) {
    ASSERT_GT(ln->schedule.gpu.cache_vector, 1) << ln->name;
    run_and_compare(ln->name + " cached vector stores", ln, {}, /*specials=*/true, 25);
  }
  auto ln = scheduled(layer_norm(64, 1024));
  auto ln_compiled = compile_cuda_kernels({ln}, kSymbols);
  ASSERT_TRUE(ln_compiled.ok()) << ln_compiled.error().message;
  const KernelSignature ln_sig = signature(*ln);
  auto buf = DeviceBuffer::allocate(ln_sig.buffers.size() * 64 * 1025 * 4);
  ASSERT_TRUE(buf.ok());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < ln_sig.buffers.size(); ++i) {
    const bool out = ln_sig.buffers[i].written;
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(buf->ptr() + i * 64 * 1025 * 4 + (out ? 4 : 0))));
  }
  EXPECT_FALSE(ln_compiled->kernels[0]->plan(ptrs.data(), nullptr).vectorized);
}

TEST(CudaRun, MisalignedViewsTakeTheScalarTwin) {
  REQUIRE_GPU();
  auto k = scheduled(sin_plus_cos(sym("s0")));
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const auto& h = *compiled->kernels[0];
  auto x = DeviceBuffer::allocate(4096 * 4), out = DeviceBuffer::allocate(4096 * 4);
  ASSERT_TRUE(x.ok() && out.ok());
  void* aligned[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(out->ptr())),
                     reinterpret_cast<void*>(static_cast<uintptr_t>(x->ptr()))};
  void* shifted[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(out->ptr() + 4)), aligned[1]};
  int64_t n_even[] = {4000, 1}, n_odd[] = {4001, 1};
  EXPECT_TRUE(h.plan(aligned, n_even).vectorized);
  EXPECT_FALSE(h.plan(shifted, n_even).vectorized);
  EXPECT_FALSE(h.plan(aligned, n_odd).vectorized);
  // Aligned launches never compile the twin; the first misaligned one does.
  h.run(aligned, n_even, 0);
  EXPECT_FALSE(h.scalar_twin_compiled());
  h.run(shifted, n_even, 0);
  EXPECT_TRUE(h.scalar_twin_compiled());
  ASSERT_TRUE(synchronize_context().ok());
  // And the scalar twin computes the right thing on the shifted view.
  run_and_compare("sin_plus_cos odd", k, {4001}, true, 99);
}

}  // namespace
}  // namespace cppi::gpu
