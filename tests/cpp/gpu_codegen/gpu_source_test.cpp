// The GPU schedule's decisions and FileCheck-style checks on the CUDA
// source the printer generates: no GPU and no NVRTC needed (compiling and
// running the kernels is gpu_codegen_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "gpu_codegen/cuda_kernels.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_test_kernels.h"
#include "source_checks.h"

namespace cppi::gpu {
namespace {

using namespace ir;
using namespace testing;

std::string source_of(const KernelPtr& k) {
  auto m = print_cuda_module({k}, kSymbols);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m->source : "";
}

// --- schedule -------------------------------------------------------------------------------

TEST(GpuSchedule, PointwiseVectorWidthFollowsDtype) {
  auto f32 = scheduled(add_relu_mul(sym("s0"), 1024));
  EXPECT_EQ(f32->schedule.gpu.mapping, GpuMapping::GridStridePointwise);
  EXPECT_EQ(f32->schedule.gpu.elements_per_thread, 4);
  EXPECT_EQ(scheduled(add_relu_mul(sym("s0"), 1024, DType::Float16))->schedule.gpu.elements_per_thread, 8);
  EXPECT_EQ(scheduled(add_relu_mul(sym("s0"), 1024, DType::BFloat16))->schedule.gpu.elements_per_thread, 8);
  // A constant innermost extent that is not a multiple of the width: the
  // vectors run over the flattened loops (the count is checked at launch) ...
  auto flat = scheduled(add_relu_mul(sym("s0"), 1001));
  EXPECT_EQ(flat->schedule.gpu.elements_per_thread, 4);
  EXPECT_TRUE(flat->schedule.gpu.flat_vector);
  EXPECT_FALSE(f32->schedule.gpu.flat_vector);
  // ... unless that count is a constant that is not a multiple either: scalar.
  EXPECT_EQ(scheduled(add_relu_mul(3, 1001))->schedule.gpu.elements_per_thread, 1);
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

TEST(GpuSchedule, PerRowValuesReadInTheLoopsDoNotMakeAColumnKernel) {
  // Two loads run along the row, five are the same for the whole row (a
  // row's scale, maximum and log-sum): still rows, not columns.
  auto k = scheduled(log_softmax_backward(4096, 8192));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_GT(k->schedule.gpu.elements_per_thread, 0);  // the row is cached
  EXPECT_EQ(scheduled(column_sum(4096, 8192))->schedule.gpu.mapping, GpuMapping::ColumnReduction);
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
  EXPECT_EQ(resident_blocks_assumed(*k, k->schedule.gpu), 2);
  expect_in_order(m->source, {"__device__ float row_sum_partials[36];", "__device__ unsigned int row_sum_arrivals[2];",
                              "__launch_bounds__(1024, 2)", "const int64_t row = cppi_udiv_magic((int64_t)blockIdx.x, 14347467612885206813ull, 4);",
                              "for (int64_t pos = split * 1024 + tid; pos < 300000; pos += 18432)",
                              "atomicAdd(&row_sum_arrivals[row], 1u) == 17u", "if (!row_sum_last) return;",
                              "row_sum_arrivals[row] = 0u;"});
}

TEST(GpuSchedule, FewLongScansSplitAcrossBlocks) {
  // One row of 4M: a block of 512 threads alone would walk it.
  auto row = scheduled(cumsum(1, 1 << 22, 1));
  EXPECT_EQ(row->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  EXPECT_EQ(row->schedule.gpu.row_splits, 512);  // min(132 x 2048 / 512, 4M / (4 chunks x 2048))
  // 64 columns of 65536: two groups of 32 columns x 32 slices.
  auto columns = scheduled(cumsum(65536, 64, 0));
  EXPECT_EQ(columns->schedule.gpu.mapping, GpuMapping::ColumnReduction);
  EXPECT_EQ(columns->schedule.gpu.row_splits, 128);  // min(132 x 2048 / 2048, 65536 / (4 x 128))
  // Enough rows or groups already, too short a scan, or symbolic rows: no split.
  EXPECT_EQ(scheduled(cumsum(256, 65536, 1))->schedule.gpu.row_splits, 1);  // 2 would not pay
  EXPECT_EQ(scheduled(cumsum(4096, 4096, 0))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(cumsum(1, 4096, 1))->schedule.gpu.row_splits, 1);
  EXPECT_EQ(scheduled(cumsum(sym("s0"), 1 << 22, 1))->schedule.gpu.row_splits, 1);
  EXPECT_TRUE(has_module_state(row->schedule.gpu));
  expect_in_order(source_of(row), {"__device__ unsigned long long cumsum_tickets;",
                                   "__device__ unsigned long long cumsum_ready[512];", "__device__ float cumsum_totals[512];",
                                   "ticket = atomicAdd(&cumsum_tickets, 1ull);", "const unsigned long long epoch = ((int64_t)((uint64_t)(int64_t)ticket >> 9));",
                                   "if (split + 1 < 512)", "cumsum_totals[tile] = carry;", "= epoch + 1;",
                                   "for (int64_t part = threadIdx.x; part < split; part += 512)", "<= epoch) {}",
                                   "cppi_block_exclusive_scan(earlier,", "cppi_store_vec(out_out + r0 + 4194304*x0,"});
  expect_in_order(source_of(columns), {"__device__ float cumsum_totals[8192];", "const int64_t group = ((int64_t)((uint64_t)tile >> 7));",
                                       "cumsum_totals[tile * 32 + lane] = carry;",
                                       "for (int64_t part = tid; part < split; part += 32)",
                                       "scan_scratch[tid * 32 + lane] = earlier;", "out_out[64*r0 + x0] ="});
}

TEST(CudaPrinter, RowScansMoveVectorsWithAScalarTwin) {
  // Rows of 4096 floats: blocks of 128 threads x 4 positions, each thread's
  // four loaded and stored as one 16-byte vector.
  auto k = scheduled(cumsum(4096, 4096, 1));
  EXPECT_EQ(k->schedule.gpu.block_size, 128);
  EXPECT_EQ(k->schedule.gpu.cache_vector, 4);
  auto m = print_cuda_module({k}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  expect_in_order(m->source, {"cppi_vec<float, 4> v0[1] = {};", "v0[group] = *(const cppi_vec<float, 4>*)(in_x + r0 + 4096*x0);",
                              "own = own + (float)v0[slot / 4].v[slot % 4];", "cppi_store_vec(out_out + r0 + 4096*x0, sv"});
  // The launch checks the length and the accesses' alignment, else runs the
  // scalar twin.
  const auto& info = m->kernels[0];
  EXPECT_EQ(info.scalar_twin, "cumsum_scalar");
  EXPECT_EQ(info.scalar_twin_source.find("cppi_vec<float, 4> v0"), std::string::npos);
  EXPECT_EQ(info.vector_checks.size(), 3u);  // the length, the load, the store
  // Few rows widen the block; columns and strided rows move no vectors.
  EXPECT_EQ(scheduled(cumsum(1024, 16384, 1))->schedule.gpu.block_size, 512);
  EXPECT_EQ(scheduled(cumsum(4096, 4096, 0))->schedule.gpu.cache_vector, 1);
}

TEST(CudaPrinter, SinAndCosOfOneValueAreOneSincos) {
  auto m = print_cuda_module({scheduled(sin_plus_cos(sym("s0")))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NE(m->source.find("cppi_sincos("), std::string::npos) << m->source;
  EXPECT_EQ(m->source.find("cppi_sin("), std::string::npos) << m->source;
  EXPECT_EQ(m->source.find("cppi_cos("), std::string::npos) << m->source;
  EXPECT_NE(m->kernels[0].scalar_twin_source.find("cppi_sincos("), std::string::npos);
}

TEST(CudaPrinter, ModulesIncludeTheCodegenHeaderWhichIncludesThePrelude) {
  // The support functions are parsed once per process, in NVRTC's
  // precompiled header of the first include, not once per module.
  const std::string src = source_of(scheduled(add_relu_mul(sym("s0"), sym("s1"))));
  EXPECT_NE(src.find("#include \"cppinductor_cuda_codegen.cuh\""), std::string::npos);
  EXPECT_EQ(src.find("cppinductor_cuda_prelude.cuh"), std::string::npos);
  EXPECT_EQ(src.find("cppi_udiv_magic(int64_t x"), std::string::npos);
  const CudaHeader& h = cuda_codegen_header();
  EXPECT_EQ(h.name, "cppinductor_cuda_codegen.cuh");
  expect_in_order(h.text, {"#pragma once", "#include \"cppinductor_cuda_prelude.cuh\"", "cppi_udiv_magic(int64_t x"});
  NvrtcOptions o = with_codegen_header(with_codegen_header({}));
  EXPECT_EQ(o.headers.size(), 1u);
}

TEST(CudaPrinter, PointwiseGridStrideVectorised) {
  auto m = print_cuda_module({scheduled(add_relu_mul(sym("s0"), sym("s1")))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->vectorized_kernel_count(), 1);
  ASSERT_EQ(m->kernels.size(), 1u);
  EXPECT_EQ(m->kernels[0].scalar_twin, "add_relu_mul_scalar");
  expect_in_order(m->source, {"#include \"cppinductor_cuda_codegen.cuh\"",
                              "extern \"C\" __global__ void __launch_bounds__(128)",
                              "add_relu_mul(const float* in_b, float* out_out, const float* in_x, int64_t s0, int64_t s1)",
                              "for (int64_t idx = ((int64_t)blockIdx.x * 128 + threadIdx.x) * 4; idx < n;",
                              "idx += (int64_t)gridDim.x * 512",
                              "cppi_vec<float, 4>", "#pragma unroll", "for (int vl = 0; vl < 4; ++vl)",
                              "cppi_store_vec(out_out + "});
  // The scalar twin is a translation unit of its own, compiled only on demand.
  EXPECT_EQ(m->source.find("add_relu_mul_scalar"), std::string::npos);
  expect_in_order(m->kernels[0].scalar_twin_source,
                  {"#include \"cppinductor_cuda_codegen.cuh\"", "add_relu_mul_scalar(",
                   "idx += (int64_t)gridDim.x * 128"});
  // The bias, broadcast over rows, is contiguous along the columns: a vector too.
  EXPECT_NE(m->source.find("*(const cppi_vec<float, 4>*)(in_b + x1)"), std::string::npos);
  // Launch checks: the extent, then out/x alignment.
  EXPECT_GE(m->kernels[0].vector_checks.size(), 3u);
}

TEST(CudaPrinter, HostScalarsAreArgumentsByValue) {
  // A one-element CPU buffer (a lifted Python float) is a parameter of its
  // dtype; loads read it through a pointer to the parameter.
  auto m = print_cuda_module({scheduled(host_scalar_scale(sym("s0"), sym("s1")))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->kernels.size(), 1u);
  expect_in_order(m->source, {"host_scalar_scale(float* out_out, const double in_s_value, const float* in_x,",
                              "const double* in_s = &in_s_value;", "in_s[0]"});
  EXPECT_EQ(m->kernels[0].by_value, (std::vector<bool>{false, true, false}));
  for (const auto& c : m->kernels[0].vector_checks) EXPECT_NE(c.buffer_arg, 1);  // no alignment to check
  expect_in_order(m->kernels[0].scalar_twin_source, {"const double in_s_value", "= &in_s_value;"});
  auto rows = print_cuda_module({scheduled(host_scalar_row_sum(sym("s0"), sym("s1")))}, kSymbols);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  expect_in_order(rows->source, {"const float in_s_value", "const float* in_s = &in_s_value;"});
}

/// The condition of the where() that kernel `k`'s one store writes.
Expr where_condition(const KernelPtr& k) {
  const auto* w = std::get<PointwiseStage>(k->stages[0]).stores[0].value.as<Where>();
  EXPECT_NE(w, nullptr);
  return w ? w->cond : Expr();
}

TEST(GpuSchedule, MasksTheSameForEveryLane) {
  // cat's halves at 64: a lane group from a multiple of 4 is on one side.
  auto cat = cat_columns(sym("s0"), 64, 36);
  auto bounds = uniform_mask_bounds(*cat, where_condition(cat), 4);
  ASSERT_TRUE(bounds.has_value());
  EXPECT_TRUE(bounds->empty());
  auto uneven = cat_columns(sym("s0"), 6, 10);
  EXPECT_FALSE(uniform_mask_bounds(*uneven, where_condition(uneven), 4).has_value());
  EXPECT_TRUE(uniform_mask_bounds(*uneven, where_condition(uneven), 2).has_value());
  // A symbolic bound is the launch's to check.
  auto symbolic = cat_columns(sym("s0"), sym("s1"), sym("s1"));
  bounds = uniform_mask_bounds(*symbolic, where_condition(symbolic), 4);
  ASSERT_TRUE(bounds.has_value());
  ASSERT_EQ(bounds->size(), 1u);
  EXPECT_EQ((*bounds)[0], sym("s1"));
  // pad's 3 <= x1 < 1004 changes at 3 and 1004: not at multiples of 4.
  auto pad = pad_columns(sym("s0"), 1001, 3, 4);
  EXPECT_FALSE(uniform_mask_bounds(*pad, where_condition(pad), 4).has_value());
  auto even_pad = pad_columns(sym("s0"), 1000, 4, 4);
  EXPECT_TRUE(uniform_mask_bounds(*even_pad, where_condition(even_pad), 4).has_value());
}

TEST(CudaPrinter, UniformMasksLoadVectors) {
  const std::string vector_load = "? *(const cppi_vec<float, 4>*)(";
  auto m = print_cuda_module({scheduled(cat_columns(sym("s0"), 64, 36))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(occurrences(m->source, vector_load), 2u) << m->source;
  EXPECT_EQ(occurrences(m->source, " : cppi_vec<float, 4>{};"), 2u);
  // Lanes that straddle the bound load one by one.
  std::string uneven = source_of(scheduled(cat_columns(sym("s0"), 6, 10)));
  EXPECT_EQ(occurrences(uneven, vector_load), 0u);
  expect_in_order(uneven, {"for (int vl = 0; vl < 4; ++vl)", "? in_a[", "cppi_store_vec(out_out + "});
  // A symbolic bound becomes a launch check.
  auto sym_m = print_cuda_module({scheduled(cat_columns(sym("s0"), sym("s1"), sym("s1")))}, kSymbols);
  ASSERT_TRUE(sym_m.ok()) << sym_m.error().message;
  EXPECT_EQ(occurrences(sym_m->source, vector_load), 2u);
  bool bound_checked = false;
  for (const auto& c : sym_m->kernels[0].vector_checks) {
    bound_checked |= c.buffer_arg < 0 && c.multiples.size() == 1 && c.multiples[0] == sym("s1");
  }
  EXPECT_TRUE(bound_checked);
}

TEST(CudaPrinter, FlatVectorsCarryAcrossRows) {
  auto k = scheduled(pad_columns(sym("s0"), 1001, 3, 5));
  ASSERT_TRUE(k->schedule.gpu.flat_vector);
  auto m = print_cuda_module({k}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  expect_in_order(m->source, {"flat_vector=true", "int64_t fx0 = x0;", "int64_t fx1 = x1;",
                              "for (int vl = 0; vl < 4; ++vl)", "in_x[1001*fx0 + fx1 - 3]",
                              "if (++fx1 == 1009)", "fx1 = 0;", "++fx0;", "cppi_store_vec(out_out + 1009*x0 + x1"});
  // The launch checks the count of elements, not the row: 8 rows of 1009
  // pass every check, 7 do not.
  bool count_checked = false;
  for (const auto& c : m->kernels[0].vector_checks) {
    count_checked |= c.buffer_arg < 0 && c.multiples.size() == 1 && c.multiples[0] == simplify(sym("s0") * 1009);
  }
  EXPECT_TRUE(count_checked);
  auto passes = [&](int64_t rows) {
    bool all = true;
    for (const auto& c : m->kernels[0].vector_checks) {
      for (const auto& e : c.multiples) all = all && evaluate(e, {{"s0", rows}}) % c.divisor == 0;
    }
    return all;
  };
  EXPECT_TRUE(passes(8));
  EXPECT_FALSE(passes(7));
  expect_in_order(m->kernels[0].scalar_twin_source, {"pad_columns_scalar(", "idx += (int64_t)gridDim.x * 128"});
  // A second store's lane loop starts its copies again.
  expect_in_order(source_of(scheduled(pad_columns(sym("s0"), 1001, 3, 5, /*halved=*/true))),
                  {"int64_t fx1 = x1;", "cppi_store_vec(out_out + ", "fx1 = x1;", "for (int vl = 0; vl < 4; ++vl)",
                   "cppi_store_vec(out_half + "});
}

TEST(CudaPrinter, HalfLoadsComputeInFloat) {
  std::string src = source_of(scheduled(add_relu_mul(sym("s0"), sym("s1"), DType::Float16)));
  expect_in_order(src, {"cppi_vec<cppi_half, 8>", "cppi_half_to_float(", "cppi_float2_to_half("});
}

TEST(CudaPrinter, NeighbouringLanesRoundInPairs) {
  // Four roundings per element, each one packed instruction for two lanes:
  // x * 0.5 and the last product are bf16 operations (bf16 operands, 0.5
  // exact), the cube and the tanh packed conversions; the scalar twin (no
  // vectors) rounds one at a time.
  auto m = print_cuda_module({scheduled(rounded_chain(sym("s0"), sym("s1"), DType::BFloat16))}, kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string& vector = m->source;
  expect_in_order(vector, {"for (int vl = 0; vl < 8; vl += 2)", "cppi_bf16x2_op<cppi_pair_mul>(", "cppi_float2_to_bf16(",
                           "cppi_tanh(", "cppi_tanh(", "cppi_float2_to_bf16(", "cppi_bf16x2_op<cppi_pair_mul>(",
                           ".v[vl] = ", ".v[vl + 1] = "});
  EXPECT_EQ(occurrences(vector, "cppi_float2_to_bf16("), 2u);
  EXPECT_EQ(occurrences(vector, "cppi_bf16x2_op<cppi_pair_mul>("), 2u);
  EXPECT_EQ(occurrences(vector, "cppi_float_to_bf16("), 0u);
  EXPECT_EQ(occurrences(m->kernels[0].scalar_twin_source, "cppi_float_to_bf16("), 4u);
  // Without a rounding the lanes go one at a time.
  EXPECT_EQ(source_of(scheduled(add_relu_mul(sym("s0"), sym("s1")))).find("vl += 2"), std::string::npos);
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
  const KernelPtr k = scheduled(layer_norm(sym("s0"), sym("s1")));
  // Symbolic sizes keep their registers (their extents live in registers too).
  EXPECT_EQ(resident_blocks_assumed(*k, k->schedule.gpu), 0);
  // Rows too long to cache, of constant size, ask for 2048 resident threads.
  const KernelPtr long_rows = with_gpu(layer_norm(16384, 16384), GpuMapping::RowPerBlock, 256, 0);
  EXPECT_EQ(resident_blocks_assumed(*long_rows, long_rows->schedule.gpu), 8);
  EXPECT_NE(source_of(long_rows).find("__launch_bounds__(256, 8)"), std::string::npos);
  std::string src = source_of(k);
  // The row loops unroll by 4 at every NVRTC level (--Ofast-compile does not
  // unroll on its own), so four loads are in flight per thread.
  expect_in_order(src, {"__launch_bounds__(256)", "for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)", "#pragma unroll 4",
                        "for (int64_t pos = tid; pos < s1; pos += 256)", "cppi_welford_add(red_mean_acc, ", "cppi_welford_rcp(red_mean_acc.weight",
                        "cppi_block_reduce(red_mean_acc, cppi_welford_op()", "#pragma unroll 4", "for (int64_t pos = tid; pos < s1;"});
}

TEST(CudaPrinter, ColumnReductionSplitsRowsAcrossSlices) {
  std::string src = source_of(scheduled(column_sum(sym("s0"), sym("s1"))));
  // 32 slices of 32 columns: two blocks of 1024 resident per multiprocessor
  // when the sizes are constants; symbolic ones keep their registers.
  const KernelPtr fixed = scheduled(column_sum(4096, 64));
  EXPECT_EQ(fixed->schedule.gpu.threads_per_column, 32);
  EXPECT_EQ(resident_blocks_assumed(*fixed, fixed->schedule.gpu), 2);
  const KernelPtr symbolic = scheduled(column_sum(sym("s0"), sym("s1")));
  EXPECT_EQ(resident_blocks_assumed(*symbolic, symbolic->schedule.gpu), 0);
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

TEST(GpuSchedule, ValuesSeveralStagesComputeAreCachedOnce) {
  // Five bf16 loads summed, each add rounded, read by three stages: one
  // float array of 24 per lane instead of five, so a warp caches the row.
  auto k = scheduled(residual_layer_norm(16384, 768, DType::BFloat16, 5, false));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  EXPECT_EQ(k->schedule.gpu.elements_per_thread, 24);
  EXPECT_NE(k->schedule.why.find("1 value computed from 5 loads"), std::string::npos) << k->schedule.why;
  const std::string src = source_of(k);
  // Each group of 8 positions computes its values right after its loads,
  // two positions at a time, each rounded add one packed bf16 add.
  expect_in_order(src, {"cppi_bf16 cache4[24];", "cppi_bf16 vcache0[24];", "for (int slot = 0; slot < 24; slot += 8)",
                        "(in_a4 + ", "for (int vl = 0; vl < 8; vl += 2)", "cppi_bf16x2_op<cppi_pair_add>(",
                        "vcache0[slot + vl] = ", "vcache0[slot + vl + 1] = ",
                        "cppi_bf16_to_float(vcache0[slot])", "cppi_warp_reduce(", "cppi_bf16_to_float(vcache0[slot])",
                        "cppi_warp_reduce(", "cppi_bf16_to_float(vcache0[slot])"});
  // The four rounded adds happen once per element, in the prologue; the
  // normalised output rounds once more.
  EXPECT_EQ(occurrences(src, "cppi_bf16x2_op<cppi_pair_add>("), 4u);
  EXPECT_EQ(occurrences(src, "cppi_float2_to_bf16("), 0u);
  EXPECT_EQ(occurrences(src, "cppi_float_to_bf16("), 1u);
}

TEST(GpuSchedule, StoredRowValuesAreNotReadBack) {
  // The stored sum is computed once into the cache and stored from it; no
  // later stage reads "sum" back from global memory.
  auto k = scheduled(residual_layer_norm(16384, 768, DType::BFloat16, 4, true));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  EXPECT_NE(k->schedule.why.find("later stages compute rather than read back"), std::string::npos) << k->schedule.why;
  const std::string src = source_of(k);
  expect_in_order(src, {"vcache0[slot + vl] = ", ".v[vl] = vcache0[slot];", "cppi_store_vec(out_sum + ",
                        "cppi_store_vec(out_out + "});
  EXPECT_EQ(src.find("out_sum["), std::string::npos) << src;
}

TEST(GpuSchedule, StoredValuesAreForwardedDownAChainOfStages) {
  // t = a * 2 reads nothing the kernel writes: u's stage computes it; then
  // u = a * 2 + b is pure too, and the sum computes it. The stores stay.
  const KernelPtr k = chained_stores(64, 256);
  const KernelPtr forwarded = forward_row_stores(k);
  auto loads = [](const Stage& s, const std::string& buffer) {
    for (const Expr& x : post_order(stage_values(s))) {
      const auto* l = x.as<Load>();
      if (l && l->buffer->name == buffer) return true;
    }
    return false;
  };
  EXPECT_TRUE(loads(k->stages[1], "t"));
  EXPECT_TRUE(loads(k->stages[2], "u"));
  EXPECT_FALSE(loads(forwarded->stages[1], "t"));
  EXPECT_FALSE(loads(forwarded->stages[2], "u"));
  EXPECT_TRUE(loads(forwarded->stages[2], "a") && loads(forwarded->stages[2], "b"));
  EXPECT_EQ(std::get<PointwiseStage>(forwarded->stages[1]).stores[0].buffer->name, "u");
  EXPECT_EQ(forward_row_stores(forwarded), forwarded);  // nothing left to forward
  // The row is cached: every stage reads registers.
  const KernelPtr s = scheduled(k);
  EXPECT_GT(s->schedule.gpu.elements_per_thread, 0);
  EXPECT_NE(s->schedule.why.find("rather than read back"), std::string::npos) << s->schedule.why;
  const std::string src = source_of(s);
  expect_in_order(src, {"vcache0[slot + vl] = ", "cppi_store_vec(out_t + ", "cppi_store_vec(out_u + ", "red_sum_acc"});
  EXPECT_EQ(src.find("out_t["), std::string::npos) << src;
  EXPECT_EQ(src.find("out_u["), std::string::npos) << src;
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
                        "const int64_t group = ((int64_t)((uint64_t)(int64_t)blockIdx.x >> 3));",
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
                        "#pragma unroll 4", "for (int64_t r0 = 0; r0 < s0; ++r0)", "out_out[x0] = red_acc;"});
  EXPECT_EQ(src.find("cppi_warp_reduce"), std::string::npos);
  // A short constant loop unrolls whole.
  std::string few = source_of(with_gpu(column_sum(16, sym("s1")), GpuMapping::ColumnReduction, 128, 1));
  expect_in_order(few, {"#pragma unroll\n", "for (int64_t r0 = 0; r0 < 16; ++r0)"});
}

TEST(CudaPrinter, RandomDrawsPhiloxPerElement) {
  auto k = scheduled(dropout_noise(sym("s0"), sym("s1")));
  // Counters are per element: no 16-byte vector accesses for random kernels.
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::GridStridePointwise);
  const std::string src = source_of(k);
  // The helpers live in the header every module includes, the draws in the kernel.
  expect_in_order(cuda_codegen_header().text, {"cppi_philox_rounds(", "cppi_mul_hilo(0xD2511F53u, c0, hi0, lo0)",
                                               "CPPI_INLINE void cppi_philox("});
  expect_in_order(src, {"__global__", "cppi_rand(", "cppi_randn("});
  EXPECT_EQ(src.find("cppi_vec<float, 4>"), std::string::npos);
}

TEST(CudaPrinter, AccumulatingStoresAddAtomicallyOneElementPerThread) {
  // Contiguous along x1, so a plain store would take 4 floats per thread;
  // adds that threads share go one by one through atomicAdd.
  auto k = scheduled(scatter_add_rows(sym("s0"), 7, 64));
  EXPECT_EQ(k->schedule.gpu.mapping, GpuMapping::GridStridePointwise);
  EXPECT_EQ(k->schedule.gpu.elements_per_thread, 1);
  const std::string src = source_of(k);
  expect_in_order(src, {"scatter_add_rows(", "cppi_atomic_add(&out_out[", "], tmp1);"});
  EXPECT_EQ(src.find("cppi_store_vec(out_out"), std::string::npos) << src;
  // No whole atomic add for a half: the printer refuses it.
  auto half = scheduled(scatter_add_rows(sym("s0"), 7, 64, DType::Float16));
  auto m = print_cuda_module({half}, kSymbols);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("no atomic add for float16"), std::string::npos) << m.error().message;
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

// --- index division ------------------------------------------------------------------------

/// cppi_udiv_magic's arithmetic on the host (__umul64hi as a 128-bit product).
int64_t udiv_magic(int64_t x, const DivisionMagic& m) {
  const uint64_t n = static_cast<uint64_t>(x);
  const uint64_t t = static_cast<uint64_t>((static_cast<unsigned __int128>(m.magic) * n) >> 64);
  return static_cast<int64_t>((t + ((n - t) >> 1)) >> m.shift);
}

TEST(IndexDivision, MagicNumbersDivideEveryNonnegativeIndex) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> divisors = {3, 5, 6, 7, 10, 12, 24, 25, 41, 100, 641, 1000, 3000, 4101, 12289, 50257,
                                   (int64_t{1} << 31) - 1, (int64_t{1} << 32) + 1, 3 * (int64_t{1} << 40),
                                   (int64_t{1} << 62) + 1, INT64_MAX};
  for (int i = 0; i < 200; ++i) divisors.push_back(3 + static_cast<int64_t>(rng() % 1000000));
  for (int64_t d : divisors) {
    if ((d & (d - 1)) == 0) continue;  // powers of two print as shifts
    const DivisionMagic m = division_magic(d);
    std::vector<int64_t> xs = {0, 1, d - 1, d, d + 1, 2 * (d / 2) + 1, INT64_MAX, INT64_MAX - 1, INT64_MAX / d * d,
                               INT64_MAX / d * d - 1};
    for (int j = 0; j < 300; ++j) {
      xs.push_back(static_cast<int64_t>(rng() >> 1));
      xs.push_back(static_cast<int64_t>(rng() % (uint64_t{1} << 32)));
      const int64_t q = static_cast<int64_t>(rng() % static_cast<uint64_t>(INT64_MAX / d));
      xs.push_back(q * d);
      xs.push_back(q * d + d - 1);
    }
    for (int64_t x : xs) {
      if (x < 0) continue;
      ASSERT_EQ(udiv_magic(x, m), x / d) << x << " / " << d << " magic " << m.magic << " shift " << m.shift;
    }
  }
}

TEST(IndexDivision, UnravelledIndicesDivideByShiftsOrMagicNumbers) {
  // gelu(x + b) over 64 x 16384: the bias's column is the flat index mod
  // 16384, a mask; over 64 x 4101 a multiply-high. No 64-bit division left
  // for NVVM to strength-reduce.
  const std::string pow2 = source_of(scheduled(gelu_bias(64, 16384)));
  EXPECT_NE(pow2.find(" >> 14))"), std::string::npos) << pow2;
  EXPECT_EQ(pow2.find(" / 16384"), std::string::npos) << pow2;
  const std::string odd = source_of(scheduled(gelu_bias(64, 4101)));
  const DivisionMagic m = division_magic(4101);
  EXPECT_NE(odd.find(cat("cppi_udiv_magic(idx, ", m.magic, "ull, ", m.shift, ")")), std::string::npos) << odd;
  EXPECT_EQ(odd.find(" / 4101"), std::string::npos) << odd;
  // A symbolic extent divides at run time.
  const std::string symbolic = source_of(scheduled(gelu_bias(64, sym("s1"))));
  EXPECT_NE(symbolic.find(" / s1"), std::string::npos) << symbolic;
}

}  // namespace
}  // namespace cppi::gpu
