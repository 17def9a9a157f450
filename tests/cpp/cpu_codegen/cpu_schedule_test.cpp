// CPU schedule: what schedule_for_cpu decides (vector loop and width,
// parallel loops and grain, split reductions, accumulators, prefaulting) for
// the kernels of kernel_builders.h. The printed source and the numerics:
// cpu_codegen_test.cpp.
#include <gtest/gtest.h>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

TEST(CpuSchedule, PointwiseIsVectorisedAt16FloatsAndParallelInVectorBlocks) {
  auto k = schedule_for_cpu(pointwise_kernel(100000), avx512_target());
  const auto& s = k->schedule.cpu;
  EXPECT_EQ(s.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(s.vector_width, 16);
  EXPECT_EQ(s.parallel_loops, 1);
  EXPECT_EQ(s.tail, TailKind::ScalarLoop);
  // 4096 elements per chunk = 256 vectors of 16.
  EXPECT_EQ(s.grain_size, 256);
}

TEST(CpuSchedule, SmallKernelsStaySerial) {
  auto k = schedule_for_cpu(pointwise_kernel(1000), avx512_target(32768));
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 0);
  EXPECT_FALSE(k->schedule.cpu.parallel_reduction);
}

TEST(CpuSchedule, SymbolicRowCountsLeaveSerialToTheRuntimeGrain) {
  // s0 elements are only guessed (symbol_hint): the kernel is parallel and
  // its grain, checked at run time, keeps a small s0 on one thread.
  auto pointwise = schedule_for_cpu(pointwise_kernel(sym("s0")), avx512_target(32768));
  EXPECT_EQ(pointwise->schedule.cpu.parallel_loops, 1);
  EXPECT_EQ(pointwise->schedule.cpu.grain_size, 2048);  // 32768 floats in vectors of 16
  auto softmax = schedule_for_cpu(softmax_kernel(sym("s0"), 7), avx512_target(32768));
  EXPECT_EQ(softmax->schedule.cpu.parallel_loops, 1);
  EXPECT_GT(softmax->schedule.cpu.grain_size, 1);
}

TEST(CpuSchedule, Avx2AndDoublesHalveTheWidth) {
  CpuTarget avx2 = avx512_target();
  avx2.vector_bytes = 32;
  EXPECT_EQ(schedule_for_cpu(pointwise_kernel(1000), avx2)->schedule.cpu.vector_width, 8);
  auto argmax = schedule_for_cpu(row_reduction_kernel(ReductionKind::ArgMax, 64, 1000), avx512_target());
  EXPECT_EQ(argmax->schedule.cpu.vector_width, 8);  // int64 indices
  auto dbl = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 64, 1000, DType::Float64), avx512_target());
  EXPECT_EQ(dbl->schedule.cpu.vector_width, 8);
}

TEST(CpuSchedule, RowReductionVectorisesTheReductionLoop) {
  auto k = schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 512, 1000), avx512_target());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOfEachStage);
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 1);
  EXPECT_FALSE(k->schedule.cpu.parallel_reduction);
}

TEST(CpuSchedule, ColumnReductionVectorisesAcrossOutputs) {
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 1000, 512), avx512_target());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(k->schedule.cpu.vector_width, 16);
}

TEST(CpuSchedule, FullReductionIsSplitAcrossThreads) {
  auto k = schedule_for_cpu(full_reduction_kernel(ReductionKind::Sum, 1 << 20), avx512_target());
  EXPECT_TRUE(k->schedule.cpu.parallel_reduction);
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 0);
  EXPECT_EQ(k->schedule.cpu.grain_size, 4096);
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOfEachStage);
}

TEST(CpuSchedule, FewLongRowsThatDoNotDivideAmongThreadsAreSplit) {
  // 8 threads, min_parallel_work 4096: a row must give each thread 16384.
  auto split = [](int64_t rows, int64_t cols) {
    return schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, rows, cols), avx512_target())
        ->schedule.cpu.parallel_reduction;
  };
  EXPECT_TRUE(split(5, 1 << 18));    // fewer rows than threads
  EXPECT_TRUE(split(12, 1 << 18));   // 12 rows: the second round keeps half the threads idle
  EXPECT_FALSE(split(16, 1 << 18));  // two full rounds
  EXPECT_FALSE(split(40, 1 << 18));  // more than 4 rows per thread
  EXPECT_FALSE(split(12, 1 << 16));  // 8192 per thread: not worth a region per row
}

TEST(CpuSchedule, FewRowsOfSeveralReductionsSplitEachInTurn) {
  // One row of a softmax's max and sum of exp: both reductions split across
  // the threads, one after the other (the sum needs the whole row's max).
  auto k = schedule_for_cpu(softmax_statistics_kernel(1, 1 << 18), avx512_target());
  EXPECT_TRUE(k->schedule.cpu.parallel_reduction);
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 0);
  const std::string src = print_one(k).source;
  size_t regions = 0;
  for (size_t at = src.find("cppi_parallel_reduce<"); at != std::string::npos; at = src.find("cppi_parallel_reduce<", at + 1))
    ++regions;
  EXPECT_EQ(regions, 2u) << src;
  // A pointwise stage with loops (the normalising loop) splits too: each
  // store writes its own elements (3 rows of 1M floats on two threads,
  // softmax 1.89 -> 1.41 ms, layer_norm 1.20 -> 0.88; eager 1.8, 1.9).
  auto whole = schedule_for_cpu(softmax_kernel(1, 1 << 18), avx512_target());
  EXPECT_TRUE(whole->schedule.cpu.parallel_reduction);
  EXPECT_TRUE(file_check(print_one(whole).source, {
                                                      "cppi_parallel_reduce<float>(0, 262144,",
                                                      "cppi_parallel_reduce<float>(0, 262144,",
                                                      "cppi_parallel_for(0, 262144, ",
                                                  }));
  // Not where two iterations of the stage's loop store one element: a loop
  // over r0 storing every row's total into out[x0] (the last store wins,
  // so its order matters).
  auto in = input("arg0", DType::Float32, {3, 1 << 18});
  auto out = output("buf0", DType::Float32, {3});
  IndexExpr x0 = var("x0"), r0 = var("r0"), x1 = var("x1");
  auto total = ReductionStage::make({Loop{r0, 1 << 18}}, ReductionKind::Sum, load(in, x0 * (1 << 18) + r0), {"total"});
  auto last = Kernel::make("last_0", Device::CPU, {Loop{x0, 3}},
                           {total, PointwiseStage{{Loop{x1, 1 << 18}},
                                                  {Store::make(out, x0, binary(BinaryOp::Add, total.result(),
                                                                               load(in, x0 * (1 << 18) + x1)))}}});
  EXPECT_FALSE(schedule_for_cpu(last, avx512_target())->schedule.cpu.parallel_reduction);
}

TEST(CpuSchedule, TransposedStoresStayScalar) {
  auto in = input("arg0", DType::Float32, {64, 64});
  auto out = output("buf0", DType::Float32, {64, 64});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  auto k = Kernel::make("transpose_0", Device::CPU, {Loop{x0, 64}, Loop{x1, 64}},
                        {PointwiseStage{{}, {Store::make(out, x1 * 64 + x0, load(in, x0 * 64 + x1))}}});
  auto s = schedule_for_cpu(k, avx512_target());
  EXPECT_EQ(s->schedule.cpu.vectorized, VectorizedLoop::None);
  EXPECT_NE(explain_cpu_schedule(*k, avx512_target()).find("strided stores"), std::string::npos);
}

TEST(CpuSchedule, LargeDenseOutputsArePrefaultedPerChunk) {
  // 1024 x 1100 floats: 4.4 MB, written densely in loop order.
  EXPECT_TRUE(schedule_for_cpu(broadcast_add_kernel(1024, 1100), avx512_target())->schedule.cpu.prefault_outputs);
  EXPECT_TRUE(schedule_for_cpu(pointwise_kernel(1 << 21), avx512_target())->schedule.cpu.prefault_outputs);
  EXPECT_NE(explain_cpu_schedule(*broadcast_add_kernel(1024, 1100), avx512_target()).find("prefaulted"), std::string::npos);
  // A row kernel's pointwise stage writes rows densely too (softmax's output).
  EXPECT_TRUE(schedule_for_cpu(softmax_kernel(1024, 1100), avx512_target())->schedule.cpu.prefault_outputs);
  // Small outputs, symbolic sizes, reductions and transposed stores: no.
  EXPECT_FALSE(schedule_for_cpu(broadcast_add_kernel(64, 1100), avx512_target())->schedule.cpu.prefault_outputs);
  EXPECT_FALSE(schedule_for_cpu(broadcast_add_kernel(sym("s0"), 1100), avx512_target())->schedule.cpu.prefault_outputs);
  EXPECT_FALSE(schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 1024, 4096), avx512_target())
                   ->schedule.cpu.prefault_outputs);
  auto in = input("arg0", DType::Float32, {2048, 2048});
  auto out = output("buf0", DType::Float32, {2048, 2048});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  auto transpose = Kernel::make("transpose_0", Device::CPU, {Loop{x0, 2048}, Loop{x1, 2048}},
                                {PointwiseStage{{}, {Store::make(out, x1 * 2048 + x0, load(in, x0 * 2048 + x1))}}});
  EXPECT_FALSE(schedule_for_cpu(transpose, avx512_target())->schedule.cpu.prefault_outputs);
}

TEST(CpuSchedule, RowsShorterThanFourVectorsKeepOneAccumulator) {
  // 33 floats fill two AVX-512 vectors: three more accumulators would only
  // be combined. 64 fill all four.
  EXPECT_EQ(schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 512, 33), avx512_target())
                ->schedule.cpu.vector_accumulators, 1);
  EXPECT_EQ(schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 512, 64), avx512_target())
                ->schedule.cpu.vector_accumulators, 4);
}

TEST(CpuSchedule, StageLoopsThatCallMathFunctionsMaskTheirLastVector) {
  auto sched = [](const KernelPtr& k) { return schedule_for_cpu(k, avx512_target())->schedule.cpu; };
  // Softmax over rows of 33: two whole vectors per stage and one with a
  // lane on. (Rows shorter than a vector go in lanes: row_blocks_test.cpp.)
  EXPECT_EQ(sched(softmax_kernel(512, 33)).vector_width, 16);
  EXPECT_EQ(sched(softmax_kernel(512, 33)).tail, TailKind::Masked);
  EXPECT_EQ(sched(softmax_kernel(512, sym("s0"))).tail, TailKind::Masked);
  // Whole vectors leave nothing to mask.
  EXPECT_EQ(sched(softmax_kernel(512, 64)).tail, TailKind::ScalarLoop);
  // AVX-512 masks arithmetic too (a masked move per tail); AVX2 moves the
  // lanes one by one, so arithmetic alone keeps the scalar tail there.
  EXPECT_EQ(sched(row_reduction_kernel(ReductionKind::Sum, 512, 33)).tail, TailKind::Masked);
  CpuTarget avx2 = avx512_target();
  avx2.vector_bytes = 32;
  EXPECT_EQ(schedule_for_cpu(row_reduction_kernel(ReductionKind::Sum, 512, 33), avx2)->schedule.cpu.tail,
            TailKind::ScalarLoop);
  EXPECT_EQ(schedule_for_cpu(softmax_kernel(512, 9), avx2)->schedule.cpu.tail, TailKind::Masked);
  for (auto kind : {ReductionKind::Sum, ReductionKind::Prod, ReductionKind::Max, ReductionKind::Min, ReductionKind::Any,
                    ReductionKind::All}) {
    EXPECT_EQ(sched(masked_tail_kernel(kind, 512, 33)).tail, TailKind::Masked) << to_string(kind);
  }
}

TEST(CpuSchedule, NoMaskedTailWhereTheLanesTurnedOffCouldFault) {
  auto sched = [](const KernelPtr& k) { return schedule_for_cpu(k, avx512_target())->schedule.cpu; };
  // Welford counts its lanes and an arg reduction's lanes carry positions.
  for (auto kind : {ReductionKind::Welford, ReductionKind::ArgMax}) {
    IndexExpr x0 = var("x0"), r0 = var("r0");
    auto in = input("arg0", DType::Float32, {512, 33});
    auto red = ReductionStage::make({Loop{r0, 33}}, kind, unary(UnaryOp::Exp, load(in, x0 * 33 + r0)),
                                    kind == ReductionKind::Welford ? std::vector<std::string>{"m", "m2", "w"}
                                                                    : std::vector<std::string>{"i"});
    auto out = output("buf0", red.result_dtypes[0], {512});
    auto k = Kernel::make("k", Device::CPU, {Loop{x0, 512}}, {red, PointwiseStage{{}, {Store::make(out, x0, red.result(0))}}},
                          {}, {});
    EXPECT_EQ(sched(k).tail, TailKind::ScalarLoop) << to_string(kind);
  }
  // The lanes that are off load zeros: an integer division by a loaded value
  // would trap there.
  IndexExpr x0 = var("x0"), x1 = var("x1");
  auto a = input("arg0", DType::Int32, {512, 33}), d = input("arg1", DType::Int32, {512, 33});
  auto out = output("buf0", DType::Float32, {512, 33});
  const Expr q = binary(BinaryOp::FloorDiv, load(a, x0 * 33 + x1), load(d, x0 * 33 + x1));
  auto k = Kernel::make("k", Device::CPU, {Loop{x0, 512}},
                        {PointwiseStage{{Loop{x1, 33}}, {Store::make(out, x0 * 33 + x1, unary(UnaryOp::Exp, cast(q, DType::Float32)))}}},
                        {}, {});
  const CpuSchedule s = sched(k);
  EXPECT_EQ(s.vectorized, VectorizedLoop::InnermostOfEachStage);
  EXPECT_EQ(s.tail, TailKind::ScalarLoop);
}

TEST(CpuSchedule, ColumnsFewerThanAVectorAreOneMaskedVectorWithTheRowsSplit) {
  auto sched = [](const KernelPtr& k) { return schedule_for_cpu(k, avx512_target())->schedule.cpu; };
  // 10^5 rows of 7 columns: one 8-lane vector, its rows split among the threads.
  const CpuSchedule seven = sched(column_reduction_kernel(ReductionKind::Sum, 100000, 7));
  EXPECT_EQ(seven.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(seven.vector_width, 8);
  EXPECT_EQ(seven.tail, TailKind::Masked);
  EXPECT_TRUE(seven.parallel_reduction);
  EXPECT_EQ(seven.parallel_loops, 0);
  EXPECT_EQ(seven.column_block, 0);
  // Each lane adds a term per row: the lane accumulators cascade as a tiled
  // column's do.
  EXPECT_EQ(seven.cascade_block, 64);
  // The lanes never combine, so welford and arg reductions mask too.
  for (auto kind : {ReductionKind::Welford, ReductionKind::ArgMax, ReductionKind::Any}) {
    EXPECT_EQ(sched(column_reduction_kernel(kind, 100000, 7)).tail, TailKind::Masked) << to_string(kind);
  }
  // 3 columns: the rows' loop reads stride-3 vectors, once per column; the
  // columns' loop reads each row once, in a 4-lane masked vector.
  const CpuSchedule three = sched(column_reduction_kernel(ReductionKind::Sum, 100000, 3));
  EXPECT_EQ(three.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(three.vector_width, 4);
  EXPECT_EQ(three.tail, TailKind::Masked);
  // Symbolic columns mask their last vector; whole vectors need no mask;
  // without masked moves (AVX2) 7 columns are 4 lanes and an overlapping 4.
  EXPECT_EQ(sched(column_reduction_kernel(ReductionKind::Sum, 100000, sym("s0"))).tail, TailKind::Masked);
  EXPECT_EQ(sched(column_reduction_kernel(ReductionKind::Sum, 100000, 16)).tail, TailKind::ScalarLoop);
  CpuTarget avx2 = avx512_target();
  avx2.vector_bytes = 32;
  const CpuSchedule seven_avx2 = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 100000, 7), avx2)->schedule.cpu;
  EXPECT_EQ(seven_avx2.vector_width, 4);
  EXPECT_EQ(seven_avx2.tail, TailKind::Overlapped);
  // Many columns stay parallel over their vectors, tiled.
  const CpuSchedule wide = sched(column_reduction_kernel(ReductionKind::Sum, 100000, 1024));
  EXPECT_FALSE(wide.parallel_reduction);
  EXPECT_EQ(wide.parallel_loops, 1);
  EXPECT_GT(wide.column_block, 0);
}

}  // namespace
}  // namespace cppi::cpu::test
