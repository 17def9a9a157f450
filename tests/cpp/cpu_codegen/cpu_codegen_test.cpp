// CPU printer: FileCheck-style checks of the generated source and numerical
// runs against the reference interpreter (the schedule's decisions:
// cpu_schedule_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "cpu_codegen/printer/codegen_support.h"
#include "cpu_codegen/cpu_kernels.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

// --- generated source ---------------------------------------------------------------------------

TEST(CpuPrinter, PrefaultedOutputsAreFaultedInPerChunkBeforeTheLoops) {
  auto rows = print_one(schedule_for_cpu(broadcast_add_kernel(1024, 1100), avx512_target()));
  EXPECT_TRUE(file_check(kernel_text(rows),
                         {"prefault_outputs=yes", "[=](int64_t begin, int64_t end) {",
                          "cppi_prefault_for_write(&out_buf0[(1100) * (begin)], (1100) * ((end) - (begin)) * "
                          "(int64_t)sizeof(out_buf0[0]));",
                          "for (int64_t x0 = begin; x0 < end; ++x0) {"}));
  // One vectorised loop, parallel in blocks of 16: elements [begin * 16, min(end * 16, n)).
  auto flat = print_one(schedule_for_cpu(pointwise_kernel(1 << 21), avx512_target()));
  EXPECT_TRUE(file_check(kernel_text(flat), {"cppi_prefault_for_write(&out_buf0[1 * (begin * 16)], 1 * "
                                             "((cppi_min_i<int64_t>(end * 16, 2097152)) - (begin * 16))"}));
  auto softmax = print_one(schedule_for_cpu(softmax_kernel(1024, 1100), avx512_target()));
  EXPECT_TRUE(file_check(kernel_text(softmax), {"cppi_prefault_for_write(&out_buf0[(1) * 1100 * (begin)], (1) * 1100 * "
                                                "((end) - (begin))",
                                                "for (int64_t x0 = begin; x0 < end; ++x0) {"}));
  auto small = print_one(schedule_for_cpu(broadcast_add_kernel(64, 1100), avx512_target()));
  EXPECT_EQ(small.source.find("cppi_prefault_for_write("), std::string::npos);
}


/// `k` with the scalar tail loop a symbolic extent gets (the schedule
/// overlaps the last vector where the extent is a constant one).
KernelPtr with_scalar_tail(const KernelPtr& k) {
  Schedule s = k->schedule;
  s.cpu.tail = TailKind::ScalarLoop;
  return k->with_schedule(s);
}

TEST(CpuPrinter, PointwiseVectorLoopWithOverlappedTail) {
  auto k = schedule_for_cpu(pointwise_kernel(1000), avx512_target(1 << 20));
  EXPECT_EQ(k->schedule.cpu.tail, TailKind::Overlapped);
  EXPECT_TRUE(file_check(kernel_text(print_one(k)), {
                                                        "tail=overlapped",
                                                        "for (int64_t x0 = 0; x0 < 992; x0 += 16) {",
                                                        "cppi_vstore(&out_buf0[x0], ",
                                                        "// the rest: one vector ending at the loop's end",
                                                        "for (int64_t x0 = 984; x0 < 1000; x0 += 16) {",
                                                        "cppi_vstore(&out_buf0[x0], ",
                                                        "NOT:++x0",
                                                    }));
  EXPECT_EQ(run_and_compare(k, {}), "");
  // A kernel that writes what it reads (an in-place update) keeps the scalar tail.
  auto buf = output("buf0", DType::Float32, {IndexExpr(1000)});
  IndexExpr x0 = var("x0");
  auto in_place = Kernel::make("in_place_0", Device::CPU, {Loop{x0, 1000}},
                               {PointwiseStage{{}, {Store::make(buf, x0, binary(BinaryOp::Mul, load(buf, x0), const_float(2)))}}});
  EXPECT_EQ(schedule_for_cpu(in_place, avx512_target())->schedule.cpu.tail, TailKind::ScalarLoop);
}

TEST(CpuPrinter, ModulesIncludeTheCodegenHeaderWhichIncludesThePrelude) {
  // The support functions are parsed once per process, in the precompiled
  // header, not once per module.
  auto m = print_one(schedule_for_cpu(pointwise_kernel(1000), avx512_target(1 << 20)));
  EXPECT_NE(m.source.find("#include \"cppinductor_cpu_codegen.h\""), std::string::npos);
  EXPECT_EQ(m.source.find("cppinductor_prelude.h"), std::string::npos);
  EXPECT_EQ(m.source.find("cppi_float_floordiv"), std::string::npos);
  const SourceHeader& h = cpu_codegen_header();
  EXPECT_EQ(h.name, "cppinductor_cpu_codegen.h");
  EXPECT_TRUE(file_check(h.text, {"#pragma once", "#include \"cppinductor_prelude.h\"", "cppi_float_floordiv"}));
}

TEST(CpuPrinter, PointwiseVectorLoopWithScalarTail) {
  auto k = with_scalar_tail(schedule_for_cpu(pointwise_kernel(1000), avx512_target(1 << 20)));
  auto m = print_one(k);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_EQ(m.vectorized_kernel_count(), 1);
  EXPECT_TRUE(file_check(m.source, {
                                       "#include \"cppinductor_cpu_codegen.h\"",
                                       "// kernel: pointwise_0",
                                       "// origins: mul add relu neg exp mul_1",
                                       "extern \"C\" void pointwise_0(void* const* buffers, const int64_t* symbols) {",
                                       "const float* in_arg0 = (const float*)buffers[0];",
                                       "float* out_buf0 = (float*)buffers[1];",
                                       "for (int64_t x0 = 0; x0 < 992; x0 += 16) {",
                                       "const cppi_f32x16 tmp0 = cppi_vload<cppi_f32x16>(&in_arg0[x0]);",
                                       "cppi_max_bound_second(",
                                       "cppi_exp(",
                                       "cppi_vstore(&out_buf0[x0], ",
                                       "for (int64_t x0 = 992; x0 < 1000; ++x0) {",
                                       "const float tmp",
                                       "= in_arg0[x0];",
                                       "out_buf0[x0] = tmp",
                                       "NOT:cppi_parallel_for",
                                   }));
}

TEST(CpuPrinter, ParallelForWithGrain) {
  auto k = schedule_for_cpu(broadcast_add_kernel(512, 1000), avx512_target());
  auto m = print_one(k);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "cppi_parallel_for(0, 512, 5, [=](int64_t begin, int64_t end) {",
                                             "for (int64_t x0 = begin; x0 < end; ++x0) {",
                                             "for (int64_t x1 = 0; x1 < 992; x1 += 16) {",
                                             "cppi_vload<cppi_f32x16>(&in_arg0[1000*x0 + x1])",
                                             // the row-broadcast operand is contiguous in x1
                                             "cppi_vload<cppi_f32x16>(&in_arg1[x1])",
                                             "});",
                                         }));
  EXPECT_TRUE(m.kernels[0].parallel);
}

TEST(CpuPrinter, ProvenanceCommentsCarrySourceLines) {
  PrintOptions o;
  o.origin_source["relu"] = "model.py:12 | y = torch.relu(x)";
  auto m = print_one(schedule_for_cpu(pointwise_kernel(64), avx512_target()), {}, o);
  EXPECT_TRUE(file_check(m.source, {"// origins: mul add relu", "//   relu: model.py:12 | y = torch.relu(x)"}));
}

TEST(CpuPrinter, RowSumKeepsFourVectorAccumulatorsAndAMaskedTail) {
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 512, 1000), avx512_target());
  auto m = print_one(k);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "// stage 0: reduce sum over r0 -> red",
                                             // No scalar steps, so no scalar accumulator.
                                             "NOT:red_acc",
                                             "cppi_f32x16 red_vacc = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             "cppi_f32x16 red_vacc_3 = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             "for (int64_t r0_grp = 0; r0_grp < r0_grp_end; r0_grp += 64) {",
                                             "cppi_vload<cppi_f32x16>(&in_arg0[r0 + 1000*x0])",
                                             "red_vacc = red_vacc + tmp",
                                             "red_vacc_3 = red_vacc_3 + tmp",
                                             "for (int64_t r0 = r0_grp_end; r0 < 992; r0 += 16) {",
                                             "const int64_t r0 = 992;",
                                             "cppi_vload_partial<cppi_f32x16>(&in_arg0[r0 + 1000*x0], 8)",
                                             "red_vacc = red_vacc + cppi_vselect(cppi_vlanes_below<cppi_i32x16>(8), tmp",
                                             "red_vacc = red_vacc + red_vacc_1;",
                                             "red_vacc_2 = red_vacc_2 + red_vacc_3;",
                                             "red_vacc = red_vacc + red_vacc_2;",
                                             "const float red = cppi_vreduce_add(red_vacc);",
                                             "out_buf0[x0] = red;",
                                         }));
}

TEST(CpuPrinter, RowMaxKeepsFourAccumulatorsMergedBeforeTheHorizontalStep) {
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Max, 512, 1000), avx512_target());
  EXPECT_EQ(k->schedule.cpu.vector_accumulators, 4);
  auto m = print_one(k);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "cppi_f32x16 red_vacc = cppi_vsplat<cppi_f32x16>((-__builtin_inff()));",
                                             "cppi_f32x16 red_vacc_3 = cppi_vsplat<cppi_f32x16>((-__builtin_inff()));",
                                             "const int64_t r0_grp_end = 0 + (992 - 0) / 64 * 64;",
                                             "for (int64_t r0_grp = 0; r0_grp < r0_grp_end; r0_grp += 64) {",
                                             "const int64_t r0 = r0_grp + 0;",
                                             "red_vacc = cppi_max(red_vacc, tmp",
                                             "const int64_t r0 = r0_grp + 48;",
                                             "red_vacc_3 = cppi_max(red_vacc_3, tmp",
                                             "for (int64_t r0 = r0_grp_end; r0 < 992; r0 += 16) {",
                                             "const int64_t r0 = 992;",
                                             "red_vacc = cppi_max(red_vacc, red_vacc_1);",
                                             "red_vacc_2 = cppi_max(red_vacc_2, red_vacc_3);",
                                             "red_vacc = cppi_max(red_vacc, red_vacc_2);",
                                             "cppi_vreduce_max(red_vacc)",
                                         }));
  // Argmax keeps one: its updates must run in order (first index on ties).
  auto arg = schedule_for_cpu(row_reduction_kernel(ReductionKind::ArgMax, 512, 1000), avx512_target());
  EXPECT_EQ(kernel_text(print_one(arg)).find("red_vacc_1"), std::string::npos);
}

TEST(CpuPrinter, ColumnReductionVectorisesOverTheContiguousOutputs) {
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 1000, 512), avx512_target());
  auto m = print_one(k);
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "column_block=64 row_block=16",
                                             "cppi_parallel_for(0, 32, 1, [=](int64_t begin, int64_t end) {",
                                             "const int64_t x0_end = cppi_min_i<int64_t>(end * 16, 512);",
                                             // Blocks of 64 vectors; their accumulators in an array.
                                             "for (int64_t x0_blk = x0_lo; x0_blk < x0_vec_end; x0_blk += 1024) {",
                                             "cppi_f32x16 red_tile[64];",
                                             "red_tile[x0_i] = cppi_vsplat<cppi_f32x16>(0.0f);",
                                             // 16 rows at a time, interchanged with the vectors of the block.
                                             "for (int64_t r0_blk = 0; r0_blk < 1000; r0_blk += 16) {",
                                             "for (int64_t x0_i = 0; x0_i < x0_vectors; ++x0_i) {",
                                             "const int64_t x0 = x0_blk + 16 * x0_i;",
                                             "cppi_f32x16 red_vacc = red_tile[x0_i];",
                                             "for (int64_t r0 = r0_blk; r0 < r0_blk_end; ++r0) {",
                                             "cppi_vload<cppi_f32x16>(&in_arg0[512*r0 + x0])",
                                             "red_vacc = red_vacc + tmp",
                                             "red_tile[x0_i] = red_vacc;",
                                             // Then the rest of the stages per vector.
                                             "for (int64_t x0_i = 0; x0_i < x0_vectors; ++x0_i) {",
                                             "const int64_t x0 = x0_blk + 16 * x0_i;",
                                             "const cppi_f32x16 red = red_tile[x0_i];",
                                             "cppi_vstore(&out_buf0[x0], red);",
                                             "NOT:cppi_vreduce_add",
                                         }));
}

TEST(CpuPrinter, AMaskedTailIsOneVectorOfPartialLoadsAndStores) {
  // Rows of 23: a whole vector and one 16-lane vector whose last 9 lanes
  // are off. The max takes -inf there and the sum 0; nothing runs a scalar
  // tail. (Rows shorter than a vector go in lanes: row_blocks_test.cpp.)
  const std::string text = kernel_text(print_one(schedule_for_cpu(softmax_kernel(512, 23), avx512_target())));
  EXPECT_TRUE(file_check(text, {"cppi_vload_partial<cppi_f32x16>(&in_arg0[r0 + 23*x0], 7)",
                                "cppi_max(amax_vacc, cppi_vselect(cppi_vlanes_below<cppi_i32x16>(7), ",
                                "cppi_vsplat<cppi_f32x16>((-__builtin_inff()))", "cppi_exp(",
                                "cppi_vselect(cppi_vlanes_below<cppi_i32x16>(7), ", "cppi_vsplat<cppi_f32x16>(0.0f)",
                                "cppi_vstore_partial(&out_buf0[", ", 7);", "NOT:++r0"}))
      << text;
}

TEST(CpuPrinter, MathOnARowsOwnValuesCallsLibm) {
  // log of a row's sum runs once per row, the same way for every row: libm,
  // not lane 0 of a 16-lane SLEEF call. The stage loop's tail keeps the
  // vector form (its lanes are positions of the vector body). 9 rows are
  // fewer than a vector of them (many rows: epilogue_in_lanes_test.cpp).
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto in = input("arg0", DType::Float32, {9, 33});
  auto out = output("buf0", DType::Float32, {9});
  auto sum = ReductionStage::make({Loop{r0, 33}}, ReductionKind::Sum, load(in, x0 * 33 + r0), {"s"});
  auto k = Kernel::make("row_log_0", Device::CPU, {Loop{x0, 9}},
                        {sum, PointwiseStage{{}, {Store::make(out, x0, unary(UnaryOp::Log, sum.result()))}}}, {}, {});
  const std::string text = kernel_text(print_one(schedule_for_cpu(k, avx512_target())));
  EXPECT_TRUE(file_check(text, {"cppi_log(s)", "NOT:cppi_log(cppi_vsplat"})) << text;
  expect_matches(k, true);
}

TEST(CpuPrinter, MathOnARowsOwnValuesInsideAStageLoopRunsOnceBeforeIt) {
  // log_softmax's last stage: out = x - log(sum). log(sum) is the same in
  // every vector of the row: computed once before the loop, with libm.
  IndexExpr x0 = var("x0"), r0 = var("r0"), x1 = var("x1");
  auto in = input("arg0", DType::Float32, {512, 33});
  auto out = output("buf0", DType::Float32, {512, 33});
  auto sum = ReductionStage::make({Loop{r0, 33}}, ReductionKind::Sum, unary(UnaryOp::Exp, load(in, x0 * 33 + r0)), {"s"});
  const Expr shifted = binary(BinaryOp::Sub, load(in, x0 * 33 + x1), unary(UnaryOp::Log, sum.result()));
  auto k = Kernel::make("row_log_softmax_0", Device::CPU, {Loop{x0, 512}},
                        {sum, PointwiseStage{{Loop{x1, 33}}, {Store::make(out, x0 * 33 + x1, shifted)}}}, {}, {});
  const std::string text = kernel_text(print_one(schedule_for_cpu(k, avx512_target())));
  EXPECT_TRUE(file_check(text, {"// stage 1: store buf0 over x1", "= cppi_log(s);", "for (int64_t x1 = 0; x1 < 32;",
                                "NOT:cppi_log(cppi_vsplat"}))
      << text;
  size_t logs = 0;
  for (size_t at = text.find("cppi_log("); at != std::string::npos; at = text.find("cppi_log(", at + 1)) ++logs;
  EXPECT_EQ(logs, 1u) << text;
  expect_matches(k, true);
}

TEST(CpuPrinter, SoftmaxHasThreeVectorisedStages) {
  auto k = schedule_for_cpu(softmax_kernel(256, 1000), avx512_target());
  auto m = print_one(k);
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "// stage 0: reduce max over r0 -> amax",
                                             "amax_vacc = cppi_max(amax_vacc, tmp",
                                             "cppi_vreduce_max(amax_vacc)",
                                             "// stage 1: reduce sum over r0 -> denom",
                                             "cppi_vsplat<cppi_f32x16>(amax)",
                                             "cppi_exp(",
                                             "cppi_vreduce_add(denom_vacc)",
                                             "// stage 2: store buf0 over r0",
                                             "cppi_vsplat<cppi_f32x16>(denom)",
                                             "cppi_vstore(&out_buf0[r0 + 1000*x0]",
                                         }));
}

TEST(CpuPrinter, HalfLoadsConvertToFloatAndStoresRoundBack) {
  auto k = schedule_for_cpu(half_kernel(1000), avx512_target(1 << 20));
  auto m = print_one(k);
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "const cppi_half* in_arg0 = (const cppi_half*)buffers[0];",
                                             "cppi_vload<cppi_u16x16>(&in_arg0[x0])",
                                             "cppi_half_to_float(tmp",
                                             "cppi_float_to_half(",
                                             "cppi_vstore(&out_buf0[x0], ",
                                             "cppi_half_to_float(",
                                             "cppi_float_to_half(",
                                         }));
}

TEST(CpuPrinter, CommonSubexpressionsAreNamedOnce) {
  // exp(x - amax) appears in two stages; inside each it is computed once, and
  // the pointwise kernel's load of x is shared by three uses.
  auto m = print_one(schedule_for_cpu(pointwise_kernel(70), avx512_target()));
  const std::string text = kernel_text(m);
  size_t loads = 0;
  for (size_t at = text.find("in_arg0[x0]"); at != std::string::npos; at = text.find("in_arg0[x0]", at + 1)) ++loads;
  EXPECT_EQ(loads, 2u) << text;  // once in the vector body, once in the tail
}

TEST(CpuPrinter, SinAndCosOfOneValueAreOneSincosInTheVectorLoop) {
  auto m = print_one(with_scalar_tail(schedule_for_cpu(sin_cos_kernel(1000), avx512_target(1 << 20))));
  const std::string text = kernel_text(m);
  const size_t tail = text.find("for (int64_t x0 = 992; x0 < 1000; ++x0) {");
  ASSERT_NE(tail, std::string::npos) << text;
  const std::string vector_loop = text.substr(0, tail);
  EXPECT_TRUE(file_check(vector_loop, {"cppi_f32x16 tmp1, tmp2;", "cppi_sincos(tmp0, &tmp1, &tmp2);",
                                       "(tmp1 + tmp2)", "cppi_sin(", "NOT:cppi_cos("}));
  // Only one value takes both; the scalar tail keeps sin and cos (LLVM pairs
  // scalar sinf and cosf of one value by itself).
  EXPECT_EQ(vector_loop.find("cppi_sincos(", vector_loop.find("cppi_sincos(") + 1), std::string::npos) << text;
  EXPECT_TRUE(file_check(text.substr(tail), {"cppi_sin(", "cppi_cos(", "NOT:cppi_sincos("}));
}

TEST(CpuPrinter, SymbolsMapToGraphOrder) {
  IndexExpr s1 = sym("s1");
  auto k = schedule_for_cpu(pointwise_kernel(s1), avx512_target());
  auto m = print_one(k, {"s0", "s1"});
  EXPECT_TRUE(file_check(kernel_text(m), {"const int64_t s1 = symbols[1];", "x0_vec_end"}));
  auto missing = print_cpu_module({k}, {"s0"}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("s1"), std::string::npos);
}

TEST(CpuPrinter, RefusesASchedulItCannotHonour) {
  Schedule s;
  s.cpu.vectorized = VectorizedLoop::InnermostOuter;
  s.cpu.vector_width = 16;
  s.cpu.tail = TailKind::Overlapped;  // but the loop is shorter than a vector
  auto m = print_cpu_module({pointwise_kernel(8)->with_schedule(s)}, {}, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, Error::Kind::Internal);
}

// --- numerics: compiled vs the reference interpreter ----------------------------------------------

struct NumericCase {
  std::string name;
  std::function<KernelPtr(int64_t)> make;
};

class CpuNumerics : public ::testing::TestWithParam<int64_t> {};

TEST_P(CpuNumerics, Pointwise) {
  expect_matches(pointwise_kernel(GetParam()), false);
  expect_matches(pointwise_kernel(GetParam()), true);
}

TEST_P(CpuNumerics, SinAndCos) { expect_matches(sin_cos_kernel(GetParam()), true); }

TEST_P(CpuNumerics, BroadcastAdd) { expect_matches(broadcast_add_kernel(7, GetParam()), true); }

TEST_P(CpuNumerics, RowReductions) {
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min, ReductionKind::Prod,
                    ReductionKind::ArgMax, ReductionKind::ArgMin, ReductionKind::Any, ReductionKind::All,
                    ReductionKind::Welford}) {
    RunOptions o;
    o.rtol = 1e-4;
    o.atol = 1e-4;
    expect_matches(row_reduction_kernel(kind, 5, GetParam()), false, o);
    expect_matches(row_reduction_kernel(kind, 5, GetParam()), true, o);
  }
}

TEST_P(CpuNumerics, ColumnReductions) {
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::ArgMin, ReductionKind::Welford,
                    ReductionKind::Any}) {
    RunOptions o;
    o.rtol = 1e-4;
    o.atol = 1e-4;
    expect_matches(column_reduction_kernel(kind, 37, GetParam()), true, o);
  }
}

TEST(CpuPrinter, FewColumnsSplitTheirRowsIntoVectorPartials) {
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 100000, 7), avx512_target());
  EXPECT_TRUE(file_check(kernel_text(print_one(k)),
                         {
                             "// x0 from 0: one vector, its lanes from 7 on turned off",
                             "const cppi_f32x8 red_state = cppi_parallel_reduce<cppi_f32x8>(0, 100000, ",
                             "[=](int64_t r0_chunk_begin, int64_t r0_chunk_end, cppi_f32x8) -> cppi_f32x8 {",
                             "cppi_vload_partial<cppi_f32x8>(&in_arg0[7*r0 + x0], 7)",
                             "[](cppi_f32x8 a, cppi_f32x8 b) { return (a + b); });",
                             "cppi_vstore_partial(&out_buf0[x0], red, 7);",
                             "NOT:cppi_parallel_for",
                         }));
}

TEST(CpuNumerics, ColumnReductionsOfFewColumnsSplitTheirRows) {
  // Rows split among the threads, each thread a vector of partial states
  // combined in order: every kind, masked (1-15 columns) and overlapped (17,
  // 40) vectors, NaN and infinities.
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min, ReductionKind::Prod,
                    ReductionKind::ArgMax, ReductionKind::ArgMin, ReductionKind::Any, ReductionKind::All,
                    ReductionKind::Welford}) {
    for (int64_t cols : {2, 3, 7, 9, 17, 40}) {
      auto k = schedule_for_cpu(column_reduction_kernel(kind, 3000, cols), avx512_target());
      ASSERT_TRUE(k->schedule.cpu.parallel_reduction) << to_string(kind) << " " << cols;
      RunOptions o;
      o.rtol = 1e-4;
      o.atol = 1e-4;
      EXPECT_EQ(run_and_compare(k, o), "") << to_string(kind) << " " << cols;
      o.specials = true;
      EXPECT_EQ(run_and_compare(k, o), "") << to_string(kind) << " " << cols;
    }
  }
}

TEST(CpuNumerics, InvariantInt64ScalarsDoNotNarrowTheVector) {
  // x0 (an int64 index value) is a scalar in the loop over x1: the float
  // vectors stay 16 wide (layer_norm's n - correction did this: width 8).
  auto in = input("arg0", DType::Float32, {8, 64});
  auto out = output("buf0", DType::Float32, {8, 64});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = binary(BinaryOp::Mul, load(in, x0 * 64 + x1), cast(IndexValue::make(x0), DType::Float32));
  auto k = Kernel::make("scale_0", Device::CPU, {Loop{x0, 8}, Loop{x1, 64}},
                        {PointwiseStage{{}, {Store::make(out, x0 * 64 + x1, v)}}}, {}, {"mul"});
  auto scheduled = schedule_for_cpu(k, avx512_target());
  EXPECT_EQ(scheduled->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(scheduled->schedule.cpu.vector_width, 16);
  expect_matches(k, false);
}

/// out[i] = x[i] / sqrt(1 - pow(0.999, step[0] + 1)): an optimizer's bias
/// correction on a 0-d step. With `write_step`, the kernel also stores
/// step + 1 into `step` (so its loads are not invariant); `step_sizes` gives
/// the step buffer other sizes (its element 0 is read all the same).
KernelPtr bias_corrected_kernel(int64_t n, bool write_step, std::vector<IndexExpr> step_sizes = {}) {
  auto x = input("x", DType::Float32, {n});
  auto step = write_step ? output("step", DType::Float32, step_sizes) : input("step", DType::Float32, step_sizes);
  auto out = output("buf0", DType::Float32, {n});
  IndexExpr x0 = var("x0");
  Expr next = binary(BinaryOp::Add, load(step, index_const(0)), const_float(1));
  Expr correction = unary(UnaryOp::Sqrt, binary(BinaryOp::Sub, const_float(1), binary(BinaryOp::Pow, const_float(0.999), next)));
  std::vector<Store> stores = {Store::make(out, x0, binary(BinaryOp::TrueDiv, load(x, x0), correction))};
  std::vector<Stage> stages = {PointwiseStage{{}, stores}};
  if (write_step) stages.push_back(PointwiseStage{{}, {Store::make(step, index_const(0), next)}});
  return Kernel::make("bias_corrected_0", Device::CPU, {Loop{x0, n}}, stages, {}, {"pow", "sqrt", "div"});
}

TEST(CpuPrinter, LoopInvariantMathRunsOnceBeforeTheLoops) {
  auto k = schedule_for_cpu(bias_corrected_kernel(1 << 16, false), avx512_target());
  const std::string text = kernel_text(print_one(k));
  // Once, as eager computes it on a 0-d tensor (libm's pow, not a vector's lane 0).
  EXPECT_TRUE(file_check(text, {"// loop-invariant values, computed once", "= in_step[0];", "cppi_pow(0.999000013f, ",
                                "cppi_sqrt(", "cppi_parallel_for("}))
      << text;
  EXPECT_EQ(text.find("cppi_pow"), text.rfind("cppi_pow")) << text;  // not again in the loops
  expect_matches(bias_corrected_kernel(1000, false), false);
}

TEST(CpuPrinter, ValuesOfBuffersTheKernelWritesAreNotHoisted) {
  auto k = bias_corrected_kernel(100, true);
  const std::string text = kernel_text(print_one(schedule_for_cpu(k, avx512_target())));
  EXPECT_EQ(text.find("loop-invariant"), std::string::npos) << text;
  expect_matches(k, false);
  // Nor loads of a buffer that may be empty: the entry runs even when the
  // loops do not, and must not read it.
  auto maybe_empty = bias_corrected_kernel(100, false, {sym("s0")});
  const std::string text2 = kernel_text(print_one(schedule_for_cpu(maybe_empty, avx512_target())));
  EXPECT_EQ(text2.find("loop-invariant"), std::string::npos) << text2;
}

TEST(CpuNumerics, TiledColumnReductionsOverSeveralBlocks) {
  // 2100 columns: two blocks of 64 vectors and a partial one, then a scalar
  // tail of 4; 45 rows: two row blocks of 16 and a partial one.
  for (auto kind : {ReductionKind::Sum, ReductionKind::ArgMax, ReductionKind::Welford}) {
    auto k = schedule_for_cpu(column_reduction_kernel(kind, 45, 2100), avx512_target());
    EXPECT_EQ(k->schedule.cpu.column_block, 64);
    RunOptions o;
    o.rtol = 1e-4;
    o.atol = 1e-4;
    expect_matches(column_reduction_kernel(kind, 45, 2100), true, o);
  }
}

TEST_P(CpuNumerics, Softmax) {
  RunOptions o;
  o.rtol = 1e-5;
  expect_matches(softmax_kernel(3, GetParam()), false, o);
}

TEST_P(CpuNumerics, HalfAndBFloat16) {
  expect_matches(half_kernel(GetParam(), DType::Float16), true);
  expect_matches(half_kernel(GetParam(), DType::BFloat16), true);
}

TEST_P(CpuNumerics, OpZoo) { expect_matches(op_zoo_kernel(GetParam()), false); }

TEST_P(CpuNumerics, FullReductions) {
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::ArgMax, ReductionKind::Welford}) {
    RunOptions o;
    o.rtol = 1e-4;
    o.atol = 1e-3;
    expect_matches(full_reduction_kernel(kind, GetParam() * 37), true, o);
  }
}

TEST_P(CpuNumerics, MaskedTails) {
  // Every kind a masked tail takes, NaN and infinities included; the stage
  // loop of 1 is too short to vectorise.
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min, ReductionKind::Prod, ReductionKind::Any,
                    ReductionKind::All}) {
    RunOptions o;
    o.rtol = 1e-4;
    o.atol = 1e-4;
    const KernelPtr k = masked_tail_kernel(kind, 5, GetParam());
    const CpuSchedule s = schedule_for_cpu(k, avx512_target())->schedule.cpu;
    if (GetParam() == 1) {
      EXPECT_NE(s.vectorized, VectorizedLoop::InnermostOfEachStage);
    } else {
      EXPECT_EQ(s.tail, GetParam() % s.vector_width == 0 ? TailKind::ScalarLoop : TailKind::Masked);
    }
    expect_matches(k, false, o);
    expect_matches(k, true, o);
  }
}

// 64: exactly one group of the 4 max/min accumulators; 1023: groups, whole vectors after them, a tail.
INSTANTIATE_TEST_SUITE_P(Sizes, CpuNumerics, ::testing::Values(1, 7, 16, 17, 64, 100, 1023));

TEST(CpuNumerics, SoftmaxStatisticsOfFewLongRowsSplitAcrossThreads) {
  // 1 and 3 rows long enough to split (parallel_reduction, checked by the
  // schedule test above) against the serial schedule, NaN and inf included.
  RunOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  for (int64_t rows : {1, 3}) {
    for (int64_t cols : {(1 << 14) + 3, 100000}) {
      ASSERT_TRUE(schedule_for_cpu(softmax_statistics_kernel(rows, cols), avx512_target())->schedule.cpu.parallel_reduction);
      expect_matches(softmax_statistics_kernel(rows, cols), false, o);
      expect_matches(softmax_statistics_kernel(rows, cols), true, o);
    }
  }
}

TEST(CpuNumerics, SoftmaxOfFewLongRowsSplitsItsPointwiseLoopsToo) {
  // The normalising loop (and, stashed, the loop storing exp) in chunks on
  // the threads between the split reductions; NaN and inf included.
  RunOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 100000}, {3, (1 << 14) + 3}}) {
    for (const auto& k : {softmax_kernel(rows, cols), stash_reduction_bodies(softmax_kernel(rows, cols))}) {
      ASSERT_TRUE(schedule_for_cpu(k, avx512_target())->schedule.cpu.parallel_reduction) << rows << " x " << cols;
      expect_matches(k, false, o);
      expect_matches(k, true, o);
    }
  }
}

TEST(CpuNumerics, PrefaultedOutputs) {
  for (auto k : {broadcast_add_kernel(1024, 1100), pointwise_kernel((1 << 20) + 7), softmax_kernel(1024, 1100)}) {
    auto scheduled = schedule_for_cpu(k, avx512_target());
    ASSERT_TRUE(scheduled->schedule.cpu.prefault_outputs) << k->name;
    EXPECT_EQ(run_and_compare(scheduled, {}), "") << k->name;
  }
}

TEST(CpuNumerics, SymbolicSizes) {
  RunOptions o;
  o.graph_symbols = {"s0", "s1"};
  o.symbols = {{"s0", 5}, {"s1", 203}};
  expect_matches(softmax_kernel(sym("s0"), sym("s1")), false, o);
  o.symbols = {{"s0", 5}, {"s1", 7}};  // the masked tail alone
  expect_matches(softmax_kernel(sym("s0"), sym("s1")), false, o);
  o.symbols = {{"s0", 5}, {"s1", 203}};
  expect_matches(pointwise_kernel(sym("s1")), true, o);
  o.rtol = o.atol = 1e-4;
  expect_matches(column_reduction_kernel(ReductionKind::Sum, sym("s0"), sym("s1")), true, o);
}

TEST(CpuPrinter, SymbolicWorkPerRowSetsTheGrainAtRunTime) {
  // Rows of s1 elements: the estimate (s1 ~ 1024) gave 32 rows a chunk, so
  // 3 rows of 4M ran on one thread (x.sum(-1), two threads: 2.13 -> 1.57 ms;
  // softmax over 2 x 2M: 6.4 -> 3.6, Inductor 2.4-3.4).
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, sym("s0"), sym("s1")), avx512_target(4096));
  EXPECT_EQ(k->schedule.cpu.grain_work, 4096);
  auto m = print_one(k, {"s0", "s1"});
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "cppi_parallel_for(0, s0, cppi_max_i<int64_t>(1, cppi_div_up(4096, "
                                             "cppi_max_i<int64_t>(1, s1 + 1))), [=](int64_t begin, int64_t end) {",
                                         }));
  // Constant rows: the grain is known when compiling.
  EXPECT_EQ(schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, sym("s0"), 1000), avx512_target(4096))
                ->schedule.cpu.grain_work,
            0);
  RunOptions o;
  o.graph_symbols = {"s0", "s1"};
  o.rtol = o.atol = 1e-4;
  for (auto sizes : {std::pair<int64_t, int64_t>{3, 20000}, {1000, 7}, {1, 5}}) {
    o.symbols = {{"s0", sizes.first}, {"s1", sizes.second}};
    EXPECT_EQ(run_and_compare(k, o), "") << sizes.first << " x " << sizes.second;
  }
}

TEST(CpuNumerics, ArgmaxFirstIndexOnTiesAndFirstNaNWins) {
  // All-equal rows pick index 0; a row with NaNs picks the first NaN.
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::ArgMax, 2, 40), avx512_target());
  auto compiled = compile_cpu_kernels({k}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  std::vector<float> in(80, 1.0f);
  in[40 + 21] = NAN;
  in[40 + 33] = NAN;
  in[40 + 5] = INFINITY;
  std::vector<int64_t> out(2, -1);
  void* bufs[] = {in.data(), out.data()};
  compiled->kernels[0]->run(bufs, nullptr, 0);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 21);
}

TEST(CpuNumerics, GxxCompilesTheSameSource) {
  RunOptions o;
  o.compiler = CompileOptions::Compiler::Gxx;
  o.rtol = o.atol = 1e-4;
  for (auto k : {softmax_kernel(3, 77), op_zoo_kernel(45), row_reduction_kernel(ReductionKind::Welford, 3, 77),
                 column_reduction_kernel(ReductionKind::ArgMax, 9, 45), half_kernel(45, DType::BFloat16),
                 full_reduction_kernel(ReductionKind::Sum, 100000), sin_cos_kernel(45),
                 masked_tail_kernel(ReductionKind::All, 3, 7), masked_tail_kernel(ReductionKind::Max, 3, 45)}) {
    EXPECT_EQ(run_and_compare(schedule_for_cpu(k, avx512_target()), o), "") << k->name;
  }
}

TEST(CpuKernel, ManyKernelsCompileAsSeveralModulesAtOnce) {
  // Six kernels on three threads: three modules, each handle's symbol from
  // the module its kernel was dealt to, and each handle runs its kernel as
  // the interpreter does; the same graph again deals the same way, so its
  // modules come from the memory cache.
  std::vector<ir::KernelPtr> ks;
  for (int64_t n : {100, 37, 1000}) ks.push_back(schedule_for_cpu(pointwise_kernel(n), avx512_target()));
  for (int64_t cols : {50, 7, 300}) ks.push_back(schedule_for_cpu(softmax_kernel(4, cols), avx512_target()));
  for (size_t i = 0; i < ks.size(); ++i)
    ks[i] = ir::Kernel::make(cat("k", i), ks[i]->device, ks[i]->outer, ks[i]->stages, ks[i]->schedule);
  CpuKernelOptions o;
  o.compile_threads = 3;
  auto compiled = compile_cpu_kernels(ks, {}, o);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  ASSERT_EQ(compiled->job->modules().size(), 3u);
  ASSERT_EQ(compiled->kernels.size(), ks.size());
  std::set<const CompiledModule*> used;
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(compiled->kernels[i]->name(), cat("k", i));
    const CompiledModule* m = &compiled->kernels[i]->module();
    EXPECT_NE(m->lookup(cat("k", i)), nullptr);
    used.insert(m);
    RunOptions run;
    run.compiled = compiled->kernels[i];
    EXPECT_EQ(run_and_compare(ks[i], run), "") << ks[i]->name;
  }
  EXPECT_EQ(used.size(), 3u);
  // The dump's source still holds every kernel in one translation unit.
  for (size_t i = 0; i < ks.size(); ++i)
    EXPECT_NE(compiled->source.find(cat("extern \"C\" void k", i, "(")), std::string::npos);
  reset_compiler_stats();
  auto again = compile_cpu_kernels(ks, {}, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(compiler_stats().memory_cache_hits, 3u);
  o.compile_threads = 1;
  auto one = compile_cpu_kernels(ks, {}, o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->job->modules().size(), 1u);
}

TEST(CpuKernel, HandlesOfAKernelStillCompilingWaitForItOnFirstRun) {
  std::vector<ir::KernelPtr> ks;
  for (int64_t n : {100, 37, 1000, 5}) ks.push_back(schedule_for_cpu(pointwise_kernel(n), avx512_target()));
  for (size_t i = 0; i < ks.size(); ++i)
    ks[i] = ir::Kernel::make(cat("bg", i), ks[i]->device, ks[i]->outer, ks[i]->stages, ks[i]->schedule);
  CpuKernelOptions o;
  o.compile.memory_cache = false;  // a compile that really runs
  o.compile.disk_cache = false;
  auto started = start_cpu_kernels(ks, {}, o);
  ASSERT_TRUE(started.ok()) << started.error().message;
  // No wait(): each handle's first run waits and resolves its own symbol.
  for (size_t i = 0; i < ks.size(); ++i) {
    RunOptions run;
    run.compiled = started->kernels[i];
    EXPECT_EQ(run_and_compare(ks[i], run), "") << ks[i]->name;
  }
  ASSERT_TRUE(started->job->wait().ok());
  EXPECT_GT(started->job->seconds(), 0.0);
}

TEST(CpuKernel, AFailedBackgroundCompileComesBackFromWaitAndFromRun) {
  auto k = schedule_for_cpu(pointwise_kernel(64), avx512_target());
  CpuKernelOptions o;
  o.compile.memory_cache = false;
  o.compile.disk_cache = false;
  o.compile.defines = {"cppi_parallel_for=\"not code\""};  // breaks the kernel's source
  auto started = start_cpu_kernels({k}, {}, o);
  ASSERT_TRUE(started.ok()) << started.error().message;  // printing succeeded
  Status s = started->job->wait();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, Error::Kind::CompileFailed) << s.error().message;
  EXPECT_EQ(started->job->wait().error().message, s.error().message);  // the same answer again
  try {
    started->kernels[0]->run(nullptr, nullptr, 0);
    ADD_FAILURE() << "run() of a kernel whose compile failed returned";
  } catch (const CompilerError& e) {
    EXPECT_EQ(e.error().message, s.error().message);
  }
  auto compiled = compile_cpu_kernels({k}, {}, o);  // the waiting form returns the error itself
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind, Error::Kind::CompileFailed);
}

TEST(CpuKernel, ACompileDroppedUnfinishedIsJoinedNotLeaked) {
  auto k = schedule_for_cpu(pointwise_kernel(77), avx512_target());
  CpuKernelOptions o;
  o.compile.memory_cache = false;
  o.compile.disk_cache = false;
  for (int i = 0; i < 3; ++i) {
    auto started = start_cpu_kernels({k}, {}, o);
    ASSERT_TRUE(started.ok());
    EXPECT_EQ(background_compiles_running(), 1u);  // a compile takes tens of ms
  }  // dropped while compiling: the destructor waited for the thread
  EXPECT_EQ(background_compiles_running(), 0u);
  auto kept = start_cpu_kernels({k}, {}, o);
  ASSERT_TRUE(kept.ok());
  wait_for_background_compiles();  // what the module's atexit hook runs
  EXPECT_EQ(background_compiles_running(), 0u);
  EXPECT_TRUE(kept->job->wait().ok());
}

TEST(CpuKernel, OneModuleForManyKernels) {
  auto a = schedule_for_cpu(pointwise_kernel(100), avx512_target());
  auto b = schedule_for_cpu(softmax_kernel(4, 50), avx512_target());
  auto compiled = compile_cpu_kernels({a, b}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  ASSERT_EQ(compiled->kernels.size(), 2u);
  EXPECT_EQ(compiled->kernels[0]->name(), "pointwise_0");
  EXPECT_EQ(compiled->kernels[1]->name(), "softmax_0");
  EXPECT_STREQ(compiled->kernels[1]->device(), "cpu");
  EXPECT_TRUE(compiled->kernels[1]->info().vectorized);
}

}  // namespace
}  // namespace cppi::cpu::test

namespace cppi::cpu::test {
namespace {

// A kernel-local buffer (not an argument): each outer iteration writes a row
// of scratch in one stage and reads it back reversed in the next.
KernelPtr scratch_kernel(int64_t rows, int64_t cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = output("buf0", DType::Float32, {rows, cols});
  auto tmp = Buffer::make_contiguous("tmp0", DType::Float32, Device::CPU, BufferKind::KernelLocal, {cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  PointwiseStage fill{{Loop{x1, cols}},
                      {Store::make(tmp, x1, binary(BinaryOp::Mul, load(in, x0 * cols + x1), const_float(2)))}};
  PointwiseStage use{{Loop{x1, cols}}, {Store::make(out, x0 * cols + x1, load(tmp, (cols - 1) - x1))}};
  return Kernel::make("scratch_0", Device::CPU, {Loop{x0, rows}}, {fill, use});
}

TEST(CpuNumerics, KernelLocalScratchIsPrivatePerChunk) {
  auto k = scratch_kernel(64, 100);
  ASSERT_TRUE(signature(*k).scratch.size() == 1u);
  auto s = schedule_for_cpu(k, avx512_target(256));
  EXPECT_EQ(s->schedule.cpu.parallel_loops, 1);
  auto m = print_one(s);
  EXPECT_TRUE(file_check(kernel_text(m), {"cppi_parallel_for(", "float* scratch_tmp0 = (float*)malloc(sizeof(float) * (100));",
                                          "for (int64_t x0 = begin;", "free(scratch_tmp0);", "});"}));
  EXPECT_EQ(run_and_compare(s, {}), "");
  EXPECT_EQ(run_and_compare(schedule_for_cpu(k, avx512_target(1 << 30)), {}), "");
}

}  // namespace
}  // namespace cppi::cpu::test
