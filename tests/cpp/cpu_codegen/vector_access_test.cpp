// How a vector loop reads memory that is not one contiguous run along it:
// transposed tiles (x.t() + y), the pieces of a cat, strided loads (a
// pooling window's columns, x[..., ::2]), repeated elements (nearest
// upsampling's x[..., i // 2]). The schedule's choice, the printed
// source, and runs against the reference interpreter.
#include <gtest/gtest.h>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

// --- transposed tiles and cat pieces ---------------------------------------------------------

/// out[b, x0, x1] = a[b, x0, x1] + t[b, x1, x0] over [batch, rows, cols]:
/// t is read across its rows (x.t() + y), `dtype` throughout.
KernelPtr transposed_add_kernel(const IndexExpr& batch, const IndexExpr& rows, const IndexExpr& cols,
                                DType dtype = DType::Float32) {
  auto a = input("a", dtype, {batch, rows, cols});
  auto t = input("t", dtype, {batch, cols, rows});
  auto out = output("out", dtype, {batch, rows, cols});
  IndexExpr b = var("x0"), r = var("x1"), c = var("x2");
  // Reduced floats compute in float32, stored rounded back.
  const DType compute = is_reduced_float(dtype) ? DType::Float32 : dtype;
  Expr sum = binary(BinaryOp::Add, cast(load(a, (b * rows + r) * cols + c), compute),
                    cast(load(t, (b * cols + c) * rows + r), compute));
  sum = cast(sum, dtype);
  return Kernel::make("transposed_add", Device::CPU, {Loop{b, batch}, Loop{r, rows}, Loop{c, cols}},
                      {PointwiseStage{{}, {Store::make(out, (b * rows + r) * cols + c, sum)}}});
}

TEST(CpuSchedule, TransposedLoadsAreReadThroughTiles) {
  // One batch: the rows are the parallel loop, counted in tiles of 16.
  auto k = schedule_for_cpu(transposed_add_kernel(1, 2048, 2048), avx512_target());
  EXPECT_TRUE(k->schedule.cpu.transpose_tile);
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(k->schedule.cpu.vector_width, 16);
  EXPECT_EQ(k->schedule.cpu.tail, TailKind::ScalarLoop);
  EXPECT_NE(explain_cpu_schedule(*k, avx512_target()).find("16x16 tiles over x1 (1 contiguous, 1 transposed"),
            std::string::npos)
      << explain_cpu_schedule(*k, avx512_target());
  // Doubles: 8 x 8 tiles.
  EXPECT_EQ(schedule_for_cpu(transposed_add_kernel(2, 64, 64, DType::Float64), avx512_target())->schedule.cpu.vector_width, 8);
  // Fewer rows than four lanes: no tile fits, the loop stays scalar.
  EXPECT_FALSE(schedule_for_cpu(transposed_add_kernel(4, 3, 64), avx512_target())->schedule.cpu.transpose_tile);
}

TEST(CpuSchedule, AKernelThatRewritesWhatItReadsTransposedIsNotTiled) {
  // t[x1, x0] = t[x0, x1] + 1 over a square: a tile read ahead of the stores
  // would miss what they write.
  auto t = output("t", DType::Float32, {64, 64});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = binary(BinaryOp::Add, load(t, x1 * 64 + x0), const_float(1.0));
  auto k = Kernel::make("rewrite", Device::CPU, {Loop{x0, 64}, Loop{x1, 64}},
                        {PointwiseStage{{}, {Store::make(t, x0 * 64 + x1, v)}}});
  EXPECT_FALSE(schedule_for_cpu(k, avx512_target())->schedule.cpu.transpose_tile);
}

TEST(CpuPrinter, TransposedTilesCoverWholeTilesThenThePlainLoop) {
  auto k = schedule_for_cpu(transposed_add_kernel(2, 40, 70), avx512_target());
  EXPECT_TRUE(file_check(kernel_text(print_one(k)),
                         {"transpose_tile=yes", "cppi_parallel_for(", "const int64_t x1_first = x1_tile * 16;",
                          "if (x1_first + 16 <= 40)", "alignas(64) float tile0_in_t[256];",
                          "cppi_transpose_tile<16, 4>(&in_t[", "cppi_vload<cppi_f32x16>(&tile0_in_t[(x1 - x1_first) * 16])",
                          "for (int64_t x2 = 64; x2 < 70; ++x2)", "the last rows, fewer than a tile",
                          "cppi_vgen<cppi_f32x16>"}));
}

/// cat([a, b], 1) over [rows, split + rest]: out[x0, x1] = where(x1 < split,
/// a[x0, x1] (masked by x1 < split), b[x0, x1 - split] (masked by x1 >= split)).
KernelPtr cat_kernel(int64_t rows, int64_t split, int64_t rest) {
  const int64_t cols = split + rest;
  auto a = input("a", DType::Float32, {rows, split});
  auto b = input("b", DType::Float32, {rows, rest});
  auto out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr first = compare(CompareOp::Lt, IndexValue::make(x1), IndexValue::make(index_const(split)));
  Expr second = compare(CompareOp::Ge, IndexValue::make(x1), const_int(split));
  Expr v = where(first, load(a, x0 * split + x1, first), load(b, x0 * rest + x1 - split, second));
  return Kernel::make("cat", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, v)}}});
}

TEST(CpuSchedule, CatSplitsTheVectorLoopWhereItsInputsMeet) {
  auto k = schedule_for_cpu(cat_kernel(64, 37, 53), avx512_target());
  EXPECT_EQ(k->schedule.cpu.vector_loop_splits, std::vector<int64_t>{37});
  // The int64 lane indices fold away: 16 floats wide, not 8.
  EXPECT_EQ(k->schedule.cpu.vector_width, 16);
  const std::string text = kernel_text(print_one(k));
  EXPECT_TRUE(file_check(text, {"vector_loop_splits=37", "x1 in [0, 37)", "cppi_vload<cppi_f32x16>(&in_a[",
                                "x1 in [37, 90)", "cppi_vload<cppi_f32x16>(&in_b[", "NOT:masked", "NOT:cppi_viota"}));
  // A symbolic extent: no pieces.
  EXPECT_TRUE(schedule_for_cpu(broadcast_add_kernel(7, sym("s0")), avx512_target())->schedule.cpu.vector_loop_splits.empty());
}

TEST(CpuNumerics, TransposedTiles) {
  RunOptions o;
  for (auto k : {transposed_add_kernel(1, 64, 48), transposed_add_kernel(3, 37, 53), transposed_add_kernel(2, 16, 16),
                 transposed_add_kernel(1, 4, 5), transposed_add_kernel(2, 40, 70, DType::Float64),
                 transposed_add_kernel(2, 40, 70, DType::Int64), transposed_add_kernel(2, 40, 70, DType::BFloat16)}) {
    expect_matches(k, false, o);
  }
  o.graph_symbols = {"s0", "s1"};
  o.symbols = {{"s0", 37}, {"s1", 83}};
  expect_matches(transposed_add_kernel(2, sym("s0"), sym("s1")), true, o);
  RunOptions gxx;
  gxx.compiler = CompileOptions::Compiler::Gxx;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(transposed_add_kernel(3, 37, 53), avx512_target()), gxx), "");
}

TEST(CpuNumerics, CatPieces) {
  for (auto k : {cat_kernel(5, 37, 53), cat_kernel(3, 16, 16), cat_kernel(4, 3, 40), cat_kernel(2, 40, 2)}) {
    expect_matches(k, true);
  }
}


// --- strided loads ----------------------------------------------------------------------------

/// out[x0, x1] = in[x0, S*x1] + in[x0, S*x1 + S - 1] over [rows, cols], the
/// input [rows, S*cols]; `padded` adds in[x0, S*x1 - 1] where that is inside
/// the row (a pooling window with one column of padding).
KernelPtr strided_kernel(int64_t rows, int64_t cols, int64_t stride, DType dtype = DType::Float32,
                         bool padded = false) {
  auto in = input("a", dtype, {rows, cols * stride});
  auto out = output("out", dtype, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  const DType compute = is_reduced_float(dtype) ? DType::Float32 : dtype;
  IndexExpr row = x0 * (cols * stride);
  Expr v = binary(BinaryOp::Add, cast(load(in, row + stride * x1), compute),
                  cast(load(in, row + stride * x1 + (stride - 1)), compute));
  if (padded) {
    Expr inside = compare(CompareOp::Ge, IndexValue::make(stride * x1 - 1), const_int(0));
    Expr left = where(inside, cast(load(in, row + stride * x1 - 1, inside), compute), is_floating(compute) ? const_float(0, compute) : const_int(0, compute));
    v = binary(BinaryOp::Add, v, left);
  }
  return Kernel::make("strided", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, cast(v, dtype))}}});
}

/// sum over r0 of in[x0, 2*r0]: a row sum of every other element.
KernelPtr strided_row_sum_kernel(int64_t rows, int64_t cols) {
  auto in = input("a", DType::Float32, {rows, 2 * cols});
  auto out = output("out", DType::Float32, {rows});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto sum = ReductionStage::make({{r0, cols}}, ReductionKind::Sum, load(in, x0 * (2 * cols) + 2 * r0), {"sum"});
  return Kernel::make("strided_sum", Device::CPU, {Loop{x0, rows}},
                      {sum, PointwiseStage{{}, {Store::make(out, x0, sum.result())}}});
}

/// sum over r0 < group of in[x0 * group + r0]: groups of `group` neighbours.
KernelPtr group_sum_kernel(int64_t outputs, int64_t group) {
  auto in = input("a", DType::Float32, {outputs * group});
  auto out = output("out", DType::Float32, {outputs});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto sum = ReductionStage::make({{r0, group}}, ReductionKind::Sum, load(in, x0 * group + r0), {"sum"});
  return Kernel::make("group_sum", Device::CPU, {Loop{x0, outputs}},
                      {sum, PointwiseStage{{}, {Store::make(out, x0, sum.result())}}});
}

/// out[x0, x1] = a[x0, (x1 + shift) // repeat] * 2 (bool: negated) over
/// [rows, cols]: nearest upsampling along the columns (shift 0).
KernelPtr repeated_kernel(int64_t rows, int64_t cols, int64_t repeat, int64_t shift = 0,
                          DType dtype = DType::Float32) {
  const int64_t in_cols = (cols + shift + repeat - 1) / repeat;
  auto in = input("a", dtype, {rows, in_cols});
  auto out = output("out", dtype, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  const DType compute = is_reduced_float(dtype) ? DType::Float32 : dtype;
  Expr v = cast(load(in, x0 * in_cols + floordiv(x1 + shift, index_const(repeat))), compute);
  if (dtype == DType::Bool) {
    v = unary(UnaryOp::LogicalNot, v);
  } else {
    v = binary(BinaryOp::Mul, v, is_floating(compute) ? const_float(2, compute) : const_int(2, compute));
  }
  return Kernel::make("repeated", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, cast(v, dtype))}}});
}

TEST(CpuSchedule, RepeatedElementsAreVectorised) {
  EXPECT_EQ(repeated_load(floordiv(var("x1"), index_const(2)) + var("x0") * 64, false, "x1"), 2);
  EXPECT_EQ(repeated_load(floordiv(var("x1"), index_const(4)), false, "x1"), 4);
  // Not from multiples of the repeat, not a step of 1, masked, affine: no.
  EXPECT_EQ(repeated_load(floordiv(var("x1") + 1, index_const(2)), false, "x1"), std::nullopt);
  EXPECT_EQ(repeated_load(floordiv(var("x1"), index_const(2)) * 2, false, "x1"), std::nullopt);
  EXPECT_EQ(repeated_load(floordiv(var("x1"), index_const(2)), true, "x1"), std::nullopt);
  EXPECT_EQ(repeated_load(var("x1") * 2, false, "x1"), std::nullopt);
  for (int64_t r : {2, 4, 8}) {
    auto k = schedule_for_cpu(repeated_kernel(64, 128, r), avx512_target());
    EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter) << r;
    EXPECT_EQ(k->schedule.cpu.vector_width, 16) << r;
  }
  EXPECT_NE(explain_cpu_schedule(*repeated_kernel(64, 128, 2), avx512_target()).find("1 repeated"),
            std::string::npos);
}

TEST(CpuPrinter, RepeatedElementsLoadPartOfAVector) {
  EXPECT_TRUE(file_check(kernel_text(print_one(schedule_for_cpu(repeated_kernel(64, 128, 2), avx512_target()))),
                         {"cppi_vload_repeat<cppi_f32x16, 2>(&in_a[", "NOT:cppi_vgen<cppi_f32x16>(x1, [&]"}));
}

TEST(CpuNumerics, RepeatedElements) {
  for (int64_t r : {2, 3, 4, 8}) {
    for (auto k : {repeated_kernel(5, 37, r), repeated_kernel(3, 16, r), repeated_kernel(3, 37, r, 1),
                   repeated_kernel(3, 37, r, 0, DType::Float64), repeated_kernel(3, 37, r, 0, DType::BFloat16),
                   repeated_kernel(3, 37, r, 0, DType::Int64), repeated_kernel(2, 64, r, 0, DType::Bool)}) {
      expect_matches(k, true);
    }
  }
  RunOptions gxx;
  gxx.compiler = CompileOptions::Compiler::Gxx;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(repeated_kernel(3, 37, 2), avx512_target()), gxx), "");
}

TEST(CpuSchedule, AReductionShorterThanAVectorIsVectorisedAcrossItsOutputs) {
  // Four lanes and a horizontal step per output, or sixteen outputs per
  // vector through strided loads: the outputs win.
  for (int64_t group : {2, 3, 4}) {
    auto k = schedule_for_cpu(group_sum_kernel(1000, group), avx512_target());
    EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter) << group;
    EXPECT_EQ(k->schedule.cpu.vector_width, 16) << group;
  }
  // Groups of 8 would be gathered across the outputs: they go in lanes,
  // eight vectors of sixteen groups turned in registers.
  auto k = schedule_for_cpu(group_sum_kernel(1000, 8), avx512_target());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_TRUE(k->schedule.cpu.row_blocks);
  EXPECT_EQ(k->schedule.cpu.vector_width, 16);
  // A full vector along the group stays there.
  EXPECT_EQ(schedule_for_cpu(group_sum_kernel(100, 64), avx512_target())->schedule.cpu.vectorized,
            VectorizedLoop::InnermostOfEachStage);
}

TEST(CpuSchedule, StridedLoadsAreVectorised) {
  for (int64_t stride : {2, 3, 4}) {
    auto k = schedule_for_cpu(strided_kernel(64, 100, stride), avx512_target());
    EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter) << stride;
    EXPECT_EQ(k->schedule.cpu.vector_width, 16);
  }
  EXPECT_NE(explain_cpu_schedule(*strided_kernel(64, 100, 2), avx512_target()).find("0 contiguous, 2 strided"),
            std::string::npos);
  // Stride 5 would load five vectors for one: lane by lane, and not worth a vector loop.
  EXPECT_EQ(schedule_for_cpu(strided_kernel(64, 100, 5), avx512_target())->schedule.cpu.vectorized,
            VectorizedLoop::None);
  // A padded window's masked load and its index comparison vectorise too.
  EXPECT_EQ(schedule_for_cpu(strided_kernel(64, 100, 2, DType::Float32, true), avx512_target())->schedule.cpu.vectorized,
            VectorizedLoop::InnermostOuter);
  EXPECT_EQ(schedule_for_cpu(strided_row_sum_kernel(8, 100), avx512_target())->schedule.cpu.vectorized,
            VectorizedLoop::InnermostOfEachStage);
}

TEST(CpuPrinter, StridedLoadsReadWholeVectors) {
  EXPECT_TRUE(file_check(kernel_text(print_one(schedule_for_cpu(strided_kernel(64, 100, 3), avx512_target()))),
                         {"cppi_vload_strided<cppi_f32x16, 3>(&in_a[", "cppi_vload_strided<cppi_f32x16, 3>(&in_a[",
                          "NOT:cppi_vgen<"}));
  // Masked: whole vectors where every lane is inside, the index an iota of step 2.
  EXPECT_TRUE(file_check(
      kernel_text(print_one(schedule_for_cpu(strided_kernel(64, 100, 2, DType::Float32, true), avx512_target()))),
      {"cppi_viota_step<cppi_i64x8>(", ", 2)", "cppi_vload_masked<cppi_f32x8>(",
       "[&]() { return cppi_vload_strided<cppi_f32x8, 2>(&in_a["}));
}

TEST(CpuNumerics, StridedLoads) {
  for (int64_t stride : {2, 3, 4}) {
    for (auto k : {strided_kernel(5, 37, stride), strided_kernel(3, 16, stride), strided_kernel(4, 5, stride),
                   strided_kernel(3, 37, stride, DType::Float64), strided_kernel(3, 37, stride, DType::BFloat16),
                   strided_kernel(3, 37, stride, DType::Int64), strided_kernel(3, 37, stride, DType::Float32, true)}) {
      expect_matches(k, true);
    }
  }
  expect_matches(strided_row_sum_kernel(5, 70), true);
  for (int64_t group : {2, 3, 4, 8}) expect_matches(group_sum_kernel(37, group), true);
  RunOptions gxx;
  gxx.compiler = CompileOptions::Compiler::Gxx;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(strided_kernel(3, 37, 3, DType::Float32, true), avx512_target()), gxx), "");
}

}  // namespace
}  // namespace cppi::cpu::test
