// Indirect indexing in the CPU schedule and printer: the position is a
// scalar computed before the access (wrap, then clamp), an embedding stays
// vectorised along its hidden dim, a gather or scatter along the vectorised
// variable stays scalar; compiled results match the reference interpreter
// for random valid indices (negative ones wrap); an index out of range
// raises after the kernel.
#include <gtest/gtest.h>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

CpuTarget target(int64_t min_parallel_work = 4096) {
  CpuTarget t;
  t.vector_bytes = 64;
  t.num_threads = 8;
  t.min_parallel_work = min_parallel_work;
  return t;
}

/// out[x0, x1] = w[idx[x0], x1] (w: rows x dim).
KernelPtr embedding_kernel(int64_t n, int64_t rows, int64_t dim) {
  auto w = input("arg0", DType::Float32, {rows, dim});
  auto idx = input("arg1", DType::Int64, {n});
  auto out = output("buf0", DType::Float32, {n, dim});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = load(w, indirect(load(idx, x0), rows) * dim + x1);
  return Kernel::make("embedding_0", Device::CPU, {Loop{x0, n}, Loop{x1, dim}},
                      {PointwiseStage{{}, {Store::make(out, x0 * dim + x1, binary(BinaryOp::Mul, v, const_float(2)))}}});
}

/// out[x0, x1] = x[x0, idx[x0, x1]] (gather along the innermost dim).
KernelPtr gather_kernel(int64_t n, int64_t cols, int64_t k) {
  auto x = input("arg0", DType::Float32, {n, cols});
  auto idx = input("arg1", DType::Int32, {n, k});
  auto out = output("buf0", DType::Float32, {n, k});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr v = load(x, x0 * cols + indirect(load(idx, x0 * k + x1), cols));
  return Kernel::make("gather_0", Device::CPU, {Loop{x0, n}, Loop{x1, k}},
                      {PointwiseStage{{}, {Store::make(out, x0 * k + x1, v)}}});
}

/// out[idx[x0], x1] = src[x0, x1] (index_put's store; out is also an input).
KernelPtr scatter_rows_kernel(int64_t n, int64_t rows, int64_t dim) {
  auto src = input("arg0", DType::Float32, {n, dim});
  auto idx = input("arg1", DType::Int64, {n});
  auto out = output("buf0", DType::Float32, {rows, dim});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  return Kernel::make("scatter_0", Device::CPU, {Loop{x0, n}, Loop{x1, dim}},
                      {PointwiseStage{{}, {Store::make(out, indirect(load(idx, x0), rows) * dim + x1, load(src, x0 * dim + x1))}}});
}

/// out[idx[x0], x1] += src[x0, x1] (index_put(accumulate=True): an
/// embedding's backward).
KernelPtr scatter_add_rows_kernel(int64_t n, int64_t rows, int64_t dim, DType t = DType::Float32) {
  auto src = input("arg0", t, {n, dim});
  auto idx = input("arg1", DType::Int64, {n});
  auto out = output("buf0", t, {rows, dim});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  return Kernel::make(
      "scatter_add_0", Device::CPU, {Loop{x0, n}, Loop{x1, dim}},
      {PointwiseStage{{}, {Store::make_accumulate(out, indirect(load(idx, x0), rows) * dim + x1, load(src, x0 * dim + x1))}}});
}

/// out[x0, idx[x0, x1]] += src[x0, x1] (scatter_add along the last dim):
/// every row x0 adds into its own row of out.
KernelPtr scatter_add_columns_kernel(int64_t n, int64_t cols, int64_t k) {
  auto src = input("arg0", DType::Float32, {n, k});
  auto idx = input("arg1", DType::Int64, {n, k});
  auto out = output("buf0", DType::Float32, {n, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  return Kernel::make("scatter_add_1", Device::CPU, {Loop{x0, n}, Loop{x1, k}},
                      {PointwiseStage{{}, {Store::make_accumulate(out, x0 * cols + indirect(load(idx, x0 * k + x1), cols),
                                                                  load(src, x0 * k + x1))}}});
}

/// out[x0] = x[idx[x0]]: the position moves with the only (vectorisable) loop.
KernelPtr gather_1d_kernel(int64_t n, int64_t size) {
  auto x = input("arg0", DType::Float32, {size});
  auto idx = input("arg1", DType::Int64, {n});
  auto out = output("buf0", DType::Float32, {n});
  IndexExpr x0 = var("x0");
  return Kernel::make("gather1d_0", Device::CPU, {Loop{x0, n}},
                      {PointwiseStage{{}, {Store::make(out, x0, load(x, indirect(load(idx, x0), size)))}}});
}

/// out[x0, x1] = idx[x0] == x1 ? -1 : x[x0, x1], positions compared as
/// `compare` (a scalar scatter of one position per row, as lowered, but
/// negative positions wrap here so random indices are all valid).
KernelPtr one_hot_kernel(int64_t rows, int64_t cols, DType compare = DType::Int32) {
  auto x = input("arg0", DType::Float32, {rows, cols});
  auto idx = input("arg1", DType::Int64, {rows});
  auto out = output("buf0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), x1 = var("x1");
  Expr hit = ir::compare(CompareOp::Eq, cast(IndexValue::make(indirect(load(idx, x0), cols)), compare),
                         cast(IndexValue::make(x1), compare));
  Expr v = where(hit, const_float(-1.0), load(x, x0 * cols + x1));
  return Kernel::make("one_hot_0", Device::CPU, {Loop{x0, rows}, Loop{x1, cols}},
                      {PointwiseStage{{}, {Store::make(out, x0 * cols + x1, v)}}});
}

std::string source_of(const KernelPtr& k) {
  auto m = print_cpu_module({k}, {}, {});
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m->source : "";
}

TEST(IndirectCodegen, EmbeddingVectorisesAlongTheHiddenDim) {
  auto k = schedule_for_cpu(embedding_kernel(64, 10, 64), target());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  std::string src = source_of(k);
  // The position: wrap a negative index, clamp into [0, 10), then a vector load.
  const char* in_order[] = {"in_arg1[x0]", "< 0)", "cppi_wadd<int64_t>(", "cppi_max_i<int64_t>(",
                            "cppi_min_i<int64_t>(", "cppi_vload<"};
  size_t pos = 0;
  for (const char* p : in_order) {
    size_t at = src.find(p, pos);
    ASSERT_NE(at, std::string::npos) << "missing " << p << " in\n" << src;
    pos = at;
  }
}

TEST(IndirectCodegen, GatherAlongTheVectorVariableStaysScalar) {
  for (const auto& k : {gather_kernel(64, 50, 64), gather_1d_kernel(4096, 7)}) {
    auto s = schedule_for_cpu(k, target());
    EXPECT_EQ(s->schedule.cpu.vectorized, VectorizedLoop::None) << k->name;
    EXPECT_FALSE(source_of(s).empty());
  }
  auto scatter = schedule_for_cpu(scatter_rows_kernel(8, 5, 64), target());
  EXPECT_EQ(scatter->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);  // contiguous along x1
}

TEST(IndirectCodegen, AnIndexThatDoesNotMoveAlongTheVectorIsBroadcast) {
  // The row's position is one scalar per row; compared as int32 the vector
  // keeps float32's 16 lanes (an int32 iota), as int64 it has 8.
  auto k = schedule_for_cpu(one_hot_kernel(64, 100), target());
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_EQ(k->schedule.cpu.vector_width, 16);
  EXPECT_NE(source_of(k).find("cppi_viota_step<cppi_i32x16>((int32_t)(x1), 1)"), std::string::npos);
  EXPECT_EQ(schedule_for_cpu(one_hot_kernel(64, 100, DType::Int64), target())->schedule.cpu.vector_width, 8);
  for (const CpuTarget& t : {target(), target(1 << 30)}) {
    for (DType c : {DType::Int32, DType::Int64}) {
      RunOptions o;
      o.int_range = 36;
      auto scheduled = schedule_for_cpu(one_hot_kernel(9, 37, c), t);
      EXPECT_EQ(run_and_compare(scheduled, o), "") << to_string(scheduled->schedule);
    }
  }
}

TEST(IndirectCodegen, CompiledMatchesTheInterpreterWithWrap) {
  // Indices in [-(size - 1), size - 1]: negative ones wrap, all are valid.
  const std::pair<KernelPtr, int64_t> cases[] = {{embedding_kernel(33, 10, 37), 9},
                                                 {embedding_kernel(16, 120, 64), 119},
                                                 {gather_kernel(9, 13, 21), 12},
                                                 {gather_1d_kernel(1000, 7), 6}};
  for (const CpuTarget& t : {target(), target(1 << 30)}) {
    for (const auto& [k, range] : cases) {
      RunOptions o;
      o.int_range = range;
      auto scheduled = schedule_for_cpu(k, t);
      EXPECT_EQ(run_and_compare(scheduled, o), "") << k->name << " " << to_string(scheduled->schedule);
    }
  }
}

TEST(IndirectCodegen, AnOutOfRangeIndexRaisesAfterTheKernel) {
  // Indices in [-50, 50] for dimensions of 7 to 120: serial, parallel and
  // vectorised kernels all report to the caller, which throws IndexOutOfRange
  // (IndexError in Python), as eager raises; the kernel itself ran clamped.
  for (const CpuTarget& t : {target(), target(1 << 30)}) {
    for (const auto& k : {embedding_kernel(33, 10, 37), gather_kernel(9, 13, 21), gather_1d_kernel(1000, 7),
                          scatter_rows_kernel(8, 5, 64)}) {
      auto scheduled = schedule_for_cpu(k, t);
      try {
        run_and_compare(scheduled, RunOptions{});
        ADD_FAILURE() << k->name << ": no error";
      } catch (const CompilerError& e) {
        EXPECT_EQ(e.error().kind, Error::Kind::IndexOutOfRange) << e.what();
        EXPECT_NE(std::string(e.what()).find("is out of bounds for dimension with size"), std::string::npos);
      }
    }
  }
  EXPECT_NE(source_of(schedule_for_cpu(embedding_kernel(64, 10, 64), target())).find("cppi_check_index("),
            std::string::npos);
}

TEST(IndirectCodegen, ScatterWithDistinctPositionsMatchesTheInterpreter) {
  // Random indices repeat, and which repeated write wins is unspecified; a
  // single row keeps every position distinct.
  auto k = schedule_for_cpu(scatter_rows_kernel(1, 5, 40), target());
  RunOptions o;
  o.int_range = 4;
  EXPECT_EQ(run_and_compare(k, o), "");
}

TEST(IndirectCodegen, AccumulatingRowsRunOnOneThreadAsVectors) {
  // Rows may repeat, so no two threads may add; the lanes of a vector are
  // distinct columns of one row, so each vector loads, adds and stores.
  auto k = schedule_for_cpu(scatter_add_rows_kernel(4096, 10, 64), target());
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 0);
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  EXPECT_NE(explain_cpu_schedule(*k, target()).find("serial: an accumulating store"), std::string::npos);
  EXPECT_TRUE(file_check(source_of(k), {"NOT:#pragma omp", "cppi_vload<cppi_f32x16>(&out_buf0[", " + ",
                                        "cppi_vstore(&out_buf0["}));
  // Indices in [-3, 3]: seven rows hit again and again (negatives wrap).
  RunOptions o;
  o.int_range = 3;
  for (const auto& [n, dim, t] : {std::tuple{33, 37, DType::Float32}, std::tuple{500, 64, DType::Float64},
                                  std::tuple{40, 19, DType::Int64}, std::tuple{40, 48, DType::BFloat16}}) {
    for (const CpuTarget& tg : {target(), target(1 << 30)}) {
      auto scheduled = schedule_for_cpu(scatter_add_rows_kernel(n, 7, dim, t), tg);
      EXPECT_EQ(run_and_compare(scheduled, o), "") << dtype_name(t) << " " << to_string(scheduled->schedule);
    }
  }
}

TEST(IndirectCodegen, AccumulatingIntoRowsOfTheirOwnSplitsTheRows) {
  // Row x0 of src adds only into row x0 of out: threads may split x0.
  auto k = schedule_for_cpu(scatter_add_columns_kernel(4096, 10, 16), target());
  EXPECT_EQ(k->schedule.cpu.parallel_loops, 1);
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::None);  // the position moves along x1
  RunOptions o;
  o.int_range = 4;  // columns -4..4 of 5 (negative ones wrap): every column is hit again and again
  for (const CpuTarget& tg : {target(), target(1 << 30)}) {
    auto scheduled = schedule_for_cpu(scatter_add_columns_kernel(300, 5, 21), tg);
    EXPECT_EQ(run_and_compare(scheduled, o), "") << to_string(scheduled->schedule);
  }
}

TEST(IndirectCodegen, AParallelScheduleForRacingAddsIsRefused) {
  // Codegen prints what the schedule says, but not adds that could race.
  auto k = scatter_add_rows_kernel(4096, 10, 64);
  Schedule s;
  s.cpu.parallel_loops = 1;
  auto racing = Kernel::make(k->name, k->device, k->outer, k->stages, s);
  auto m = print_cpu_module({racing}, {}, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("could race"), std::string::npos) << m.error().message;
}

}  // namespace
}  // namespace cppi::cpu::test
