// Column reductions of several stages, tiled over blocks of columns (a
// softmax over dim 0: the column max, then the sum of exp(x - max) reading
// it): the schedule, the printed tiles, and runs against the reference
// interpreter.
#include <gtest/gtest.h>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// Softmax statistics over dim 0 of a [rows, cols] input, as the fusion pass
/// builds them: amax[x0] = max over r0 of in[r0, x0], then
/// denom[x0] = sum over r0 of exp(in[r0, x0] - amax[x0]), both stored.
KernelPtr column_softmax_stats_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, r0 * cols + x0);
  auto amax = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Max, x, {"amax"});
  auto denom = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum,
                                    unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result())), {"denom"});
  PointwiseStage store{{},
                       {Store::make(output("buf0", DType::Float32, {cols}), x0, amax.result()),
                        Store::make(output("buf1", DType::Float32, {cols}), x0, denom.result())}};
  return Kernel::make("col_softmax_0", Device::CPU, {Loop{x0, cols}}, {amax, denom, store}, {}, {"amax", "exp", "sum"});
}

/// A two-pass column variance: mean[x0] = sum over r0 of in[r0, x0] / rows,
/// then m2[x0] = sum over r0 of (in[r0, x0] - mean)^2. Tall (or symbolic)
/// columns cascade both sums: the second must read the first's merged total.
KernelPtr column_two_pass_variance_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  Expr x = load(in, r0 * cols + x0);
  auto sum = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum, x, {"total"});
  Expr mean = binary(BinaryOp::TrueDiv, sum.result(), cast(IndexValue::make(rows), DType::Float32));
  Expr d = binary(BinaryOp::Sub, x, mean);
  auto m2 = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum, binary(BinaryOp::Mul, d, d), {"m2"});
  PointwiseStage store{{},
                       {Store::make(output("buf0", DType::Float32, {cols}), x0, mean),
                        Store::make(output("buf1", DType::Float32, {cols}), x0, m2.result())}};
  return Kernel::make("col_var_0", Device::CPU, {Loop{x0, cols}}, {sum, m2, store}, {}, {"sum", "sub", "mul", "sum_1"});
}

/// Softmax over dim 0 as one kernel (the normalising step joined with its
/// loops reordered, fusion permuted_for_group), then stashed:
/// out[r1, x0] = exp(in[r1, x0] - amax) stored, summed, and scaled in place.
KernelPtr column_softmax_kernel(const IndexExpr& rows, const IndexExpr& cols) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = output("out", DType::Float32, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), r1 = var("r1");
  Expr x = load(in, r0 * cols + x0);
  auto amax = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Max, x, {"amax"});
  auto denom = ReductionStage::make({Loop{r0, rows}}, ReductionKind::Sum,
                                    unary(UnaryOp::Exp, binary(BinaryOp::Sub, x, amax.result())), {"denom"});
  Expr e = unary(UnaryOp::Exp, binary(BinaryOp::Sub, load(in, r1 * cols + x0), amax.result()));
  PointwiseStage normalise{{Loop{r1, rows}},
                           {Store::make(out, r1 * cols + x0, binary(BinaryOp::TrueDiv, e, denom.result()))}};
  return stash_reduction_bodies(
      Kernel::make("col_softmax_0", Device::CPU, {Loop{x0, cols}}, {amax, denom, normalise}, {}, {"amax", "exp", "div"}));
}

TEST(TiledColumns, EveryLeadingReductionOfAColumnKernelIsTiled) {
  auto k = schedule_for_cpu(column_softmax_stats_kernel(1024, 1024), avx512_target(4096));
  EXPECT_EQ(k->schedule.cpu.vectorized, VectorizedLoop::InnermostOuter);
  // Two passes over the block: 1 KiB of each row, so it stays in L2.
  EXPECT_EQ(k->schedule.cpu.column_block, 16);
  EXPECT_EQ(k->schedule.cpu.row_block, 16);
  EXPECT_NE(explain_cpu_schedule(*k, avx512_target(4096)).find("column reductions (2) tiled"), std::string::npos);
  // One vector of columns: nothing to tile across.
  EXPECT_EQ(schedule_for_cpu(column_softmax_stats_kernel(1024, 16), avx512_target(4096))->schedule.cpu.column_block, 0);
}

TEST(TiledColumns, TheSecondTileReadsTheFirst) {
  auto k = schedule_for_cpu(column_softmax_stats_kernel(1024, 1024), avx512_target(1 << 30));
  auto m = print_cpu_module({k}, {}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(file_check(kernel_text(*m), {
                                              "cppi_f32x16 amax_tile[16];",
                                              "for (int64_t r0_blk = 0; r0_blk < 1024; r0_blk += 16) {",
                                              "amax_vacc = amax_tile[x0_i];",
                                              "for (int64_t r0 = r0_blk; r0 < r0_blk_end; ++r0) {",
                                              "cppi_f32x16 denom_tile[16];",
                                              "for (int64_t r0_blk = 0; r0_blk < 1024; r0_blk += 16) {",
                                              "const cppi_f32x16 amax = amax_tile[x0_i];",
                                              "denom_vacc = denom_tile[x0_i];",
                                              "cppi_exp(",
                                              "const cppi_f32x16 denom = denom_tile[x0_i];",
                                              "cppi_vstore(&out_buf1[x0], denom);",
                                              // 1024 columns: no scalar tail walking a whole column
                                              "NOT:for (int64_t r0 = 0;",
                                          }));
}

/// The kernel's nest after lower_column_blocks, from the dumps the printer
/// keeps (PrintOptions::loop_ir_dumps).
std::string column_blocks_nest(const KernelPtr& k, const std::vector<std::string>& symbols = {}) {
  PrintOptions o;
  o.loop_ir_dumps = true;
  const std::string d = print_one(k, symbols, o).kernels.at(0).loop_ir;
  const size_t at = d.find(" after lower_column_blocks\n");
  if (at == std::string::npos) return "";
  const size_t end = d.find("\n// ", at + 1);
  return d.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(TiledColumns, TheBlockIsALoopNestOfRowBlocksAroundTheBlocksVectors) {
  // A softmax over dim 0: the loop over blocks of 16 vectors; in a block the
  // max's tile started, then its rows 16 at a time, each row block a loop
  // over the block's vectors reducing into the tile; the stored exp(x - max)
  // with its rows outside the vectors, reading the max from its tile; the
  // sum's tile; the scaling reading both.
  auto k = schedule_for_cpu(column_softmax_kernel(45, 2100), avx512_target(1 << 30));
  const std::string d = column_blocks_nest(k);
  EXPECT_TRUE(file_check(d, {
                                "serial for x0_blk in [0, 2096), step 256\n",
                                "  x0_blk_end = cppi_min_i<int64_t>(x0_blk + 256, 2096)\n",
                                "  x0_vectors = cppi_div_up(x0_blk_end - x0_blk, 16)\n",
                                "  // stage 0, tiled: 16 vectors x 16 r0 at a time\n",
                                "  tile arrays of 16 max states over float32: amax_tile\n",
                                "  serial for x0_i in [0, x0_vectors)\n",
                                "    one vector of the block at x0 = x0_blk + 16 * x0_i\n",
                                "      set tile slots of max over float32\n",
                                "        amax_tile[x0_i] = identity\n",
                                "  serial for r0_blk in [0, 45), step 16\n",
                                "    r0_blk_end = cppi_min_i<int64_t>(r0_blk + 16, 45)\n",
                                "    serial for x0_i in [0, x0_vectors)\n",
                                "        results read from tiles: none\n",
                                "        reduce stage 0 in lanes over [r0_blk, r0_blk_end) from amax_tile[x0_i] into "
                                "amax_tile[x0_i]\n",
                                "  // stage 1, tiled: store out, 16 vectors x 16 r1 at a time\n",
                                "  serial for r1_blk in [0, 45), step 16\n",
                                "        results read from tiles: stage 0 amax_tile[x0_i]\n",
                                "        serial for r1 in [r1_blk, r1_blk_end)\n",
                                "          store out\n",
                                "  tile arrays of 16 sum states over float32: denom_tile\n",
                                "        reduce stage 2 in lanes over [r1_blk, r1_blk_end) from denom_tile[x0_i]",
                                "        results read from tiles: stage 0 amax_tile[x0_i], stage 2 denom_tile[x0_i]\n",
                                "          store out",
                                "NOT:stages\n",
                            }))
      << d;
  // Symbolic rows cascade both sums of a variance: each tile's totals and
  // counters, each full block of rows merged into the first total (and
  // each level into the next every 64 merges), the totals folded into the
  // tile before the second sum reads it.
  auto var = schedule_for_cpu(column_two_pass_variance_kernel(sym("s0"), 520), avx512_target(1 << 30));
  const std::string v = column_blocks_nest(var, {"s0"});
  EXPECT_TRUE(file_check(v, {
                                "  tile arrays of 16 sum states over float32: total_tile total_tile_total "
                                "total_tile_total2 total_tile_total3\n",
                                "  counters total_tile_terms total_tile_merges1 total_tile_merges2 from 0\n",
                                "  serial for r0_blk in [0, s0), step 16\n",
                                "    tile cascade block done: total_tile_terms += (r0_blk_end - r0_blk), full at 64\n",
                                "            total_tile_total[x0_i] = combine(total_tile_total[x0_i], total_tile[x0_i])\n",
                                "            total_tile[x0_i] = identity\n",
                                "      merges counted in total_tile_merges1, full:\n",
                                "              total_tile_total2[x0_i] = combine(total_tile_total2[x0_i], "
                                "total_tile_total[x0_i])\n",
                                "      merges counted in total_tile_merges2, full:\n",
                                "        total_tile[x0_i] = combine(total_tile_total[x0_i], total_tile[x0_i])\n",
                                "        total_tile[x0_i] = combine(total_tile_total3[x0_i], total_tile[x0_i])\n",
                                "        results read from tiles: stage 0 total_tile[x0_i]\n",
                                "        reduce stage 1 in lanes",
                            }))
      << v;
}

TEST(TiledColumns, SplitRowsAndLoopLessStagesAreNodesOfTheBlock) {
  // Few vectors of columns: the sum's rows in chunks on the threads, each
  // into a tile of its own; the loop-less store after it once per vector.
  CpuTarget two = avx512_target(4096);
  two.num_threads = 2;
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 20000, 20), two);
  ASSERT_TRUE(k->schedule.cpu.parallel_reduction) << to_string(k->schedule);
  const std::string d = column_blocks_nest(k);
  EXPECT_TRUE(file_check(d, {
                                "  // stage 0, tiled: ",
                                " at a time, the rows split among the threads\n",
                                "  tile chunks [r0_chunk_begin, r0_chunk_end) of [0, 20000), grain 205: each returns "
                                "red_tile's first x0_vectors slots (at most 2), combined into red_tile of ",
                                "    tile arrays of ",
                                "    serial for r0_blk in [r0_chunk_begin, r0_chunk_end), step 16\n",
                                "      results read from tiles: stage 0 red_tile[x0_i]\n      pointwise stage 1\n",
                            }))
      << d;
}

void expect_tiled_matches(const KernelPtr& k, RunOptions o) {
  // Parallel over column vectors (several blocks per chunk or a partial
  // one), then serial: one chunk of every block.
  for (int64_t work : {int64_t{4096}, int64_t{1} << 40}) {
    auto scheduled = schedule_for_cpu(k, avx512_target(work));
    ASSERT_GT(scheduled->schedule.cpu.column_block, 0) << to_string(scheduled->schedule);
    EXPECT_EQ(run_and_compare(scheduled, o), "") << to_string(scheduled->schedule);
  }
}

TEST(TiledColumns, SoftmaxStatisticsMatchTheInterpreter) {
  // 2100 columns: two blocks of 64 vectors, a partial one and a scalar tail
  // of 4; 45 rows: two row blocks of 16 and a partial one. NaN and inf too.
  RunOptions o;
  o.rtol = 1e-5;
  expect_tiled_matches(column_softmax_stats_kernel(45, 2100), o);
  o.specials = true;
  expect_tiled_matches(column_softmax_stats_kernel(45, 2100), o);
}

TEST(TiledColumns, PointwiseStagesWithLoopsAreTiledToo) {
  auto k = schedule_for_cpu(column_softmax_kernel(45, 2100), avx512_target(4096));
  ASSERT_EQ(k->stages.size(), 4u) << to_string(*k);  // max, exp stored, its sum, the scaling
  // It passes over each block four times: 1 KiB of each row per block.
  EXPECT_EQ(k->schedule.cpu.column_block, 16);
  // The output is read back, but the kernel fills it before: recomputing the
  // last columns in an overlapping vector gives the same values.
  EXPECT_EQ(k->schedule.cpu.tail, TailKind::Overlapped);
  auto m = print_cpu_module({k}, {}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(file_check(kernel_text(*m), {
                                              "cppi_f32x16 amax_tile[16];",
                                              "// stage 1, tiled: store out, 16 vectors x 16 r1 at a time",
                                              "const cppi_f32x16 amax = amax_tile[x0_i];",
                                              "for (int64_t r1 = r1_blk; r1 < r1_blk_end; ++r1) {",
                                              "cppi_exp(",
                                              "cppi_f32x16 denom_tile[16];",
                                              "// stage 3, tiled: store out",
                                              "const cppi_f32x16 denom = denom_tile[x0_i];",
                                              "// the rest: one vector ending at the loop's end",
                                              "NOT:for (int64_t r0 = 0;",
                                          }));
  RunOptions o;
  o.rtol = 1e-5;
  expect_tiled_matches(column_softmax_kernel(45, 2100), o);
  o.specials = true;
  expect_tiled_matches(column_softmax_kernel(45, 2100), o);
}

TEST(TiledColumns, AnOverlappedRestJoinsTheTilesPassOverTheRows) {
  // 24 columns: one vector and a rest of 8, whose vector overlaps the first
  // (columns 8 to 23). As a second tiled pass it read all the rows again
  // (x.sum(0) of 700000 x 24, two threads: 5.2 ms, 2.8 in one pass). Two
  // threads: with more, so few vectors split each one's rows instead.
  auto two_threads = [](int64_t work) {
    CpuTarget t = avx512_target(work);
    t.num_threads = 2;
    return t;
  };
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 300, 24), two_threads(4096));
  ASSERT_EQ(k->schedule.cpu.tail, TailKind::Overlapped) << to_string(k->schedule);
  ASSERT_GT(k->schedule.cpu.column_block, 0) << to_string(k->schedule);
  auto m = print_cpu_module({k}, {}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(file_check(kernel_text(*m), {
                                              "const int64_t x0_vectors = cppi_div_up(x0_blk_end - x0_blk, 16);",
                                              "const int64_t x0 = cppi_min_i<int64_t>(x0_blk + 16 * x0_i, x0_blk_end - 16);",
                                              "for (int64_t r0_blk = 0; r0_blk < 300; r0_blk += 16) {",
                                              "const int64_t x0 = cppi_min_i<int64_t>(x0_blk + 16 * x0_i, x0_blk_end - 16);",
                                              "NOT:the rest",
                                          }));
  const std::string text = kernel_text(*m);
  const std::string pass = "for (int64_t r0_blk = 0;";
  const size_t first = text.find(pass);
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(text.find(pass, first + 1), std::string::npos) << "a second pass over the rows:\n" << text;
  // Sums, maxima (NaN and inf too); 1030 columns: a block of 64 vectors and
  // a fragment of 6 whose vector starts in the block before.
  for (auto kind : {ReductionKind::Sum, ReductionKind::Max}) {
    for (int64_t cols : {24, 40, 1030}) {
      for (int64_t work : {int64_t{4096}, int64_t{1} << 40}) {  // parallel over column vectors, then serial
        auto scheduled = schedule_for_cpu(column_reduction_kernel(kind, 45, cols), two_threads(work));
        ASSERT_GT(scheduled->schedule.cpu.column_block, 0) << to_string(scheduled->schedule);
        ASSERT_EQ(scheduled->schedule.cpu.tail, TailKind::Overlapped) << to_string(scheduled->schedule);
        RunOptions o;
        o.rtol = 1e-5;
        EXPECT_EQ(run_and_compare(scheduled, o), "") << cols << " " << to_string(scheduled->schedule);
        o.specials = true;
        EXPECT_EQ(run_and_compare(scheduled, o), "") << cols << " " << to_string(scheduled->schedule);
      }
    }
  }
}

TEST(TiledColumns, FewVectorsOfColumnsSplitTheirRowsAmongTheThreads) {
  // Fewer vectors of columns than twice the threads: each reduction's rows
  // go to the threads in chunks, each chunk tiling all the columns into a
  // tile of its own; the chunks' tiles combine in order (x.sum(0) of 2M x 20
  // floats, two threads: 12.0 -> 6.9 ms, Inductor 10.2-13.2).
  CpuTarget two = avx512_target(4096);
  two.num_threads = 2;
  auto k = schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 20000, 20), two);
  const CpuSchedule& c = k->schedule.cpu;
  EXPECT_TRUE(c.parallel_reduction) << to_string(k->schedule);
  EXPECT_EQ(c.parallel_loops, 0);
  EXPECT_GT(c.column_block, 0);
  EXPECT_EQ(c.tail, TailKind::Overlapped);
  EXPECT_EQ(c.grain_size, (4096 + 19) / 20);  // rows per chunk: min_parallel_work elements
  auto m = print_cpu_module({k}, {}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(file_check(kernel_text(*m), {
                                              "the rows split among the threads",
                                              "struct red_tile_part { cppi_f32x16 v[2]; };",
                                              "cppi_parallel_reduce<red_tile_part>(0, 20000, 205, red_tile_identity,",
                                              "for (int64_t r0_blk = r0_chunk_begin; r0_blk < r0_chunk_end;",
                                              "a.v[k] = (a.v[k] + b.v[k]);",
                                              "red_tile[k] = red_tile_parts.v[k];",
                                              "cppi_vstore(&out_buf0[x0], red);",
                                          }));
  // Enough vectors to share (4 on 2 threads): parallel over the vectors.
  EXPECT_EQ(schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 20000, 64), two)->schedule.cpu.parallel_loops, 1);
  // Too few rows for a thread's share: serial.
  EXPECT_FALSE(schedule_for_cpu(column_reduction_kernel(ReductionKind::Sum, 200, 20), two)->schedule.cpu.parallel_reduction);
  // Numerics: sums, maxima (NaN and inf), Welford, and a second tiled pass
  // reading the first's merged result (var over dim 0), over chunks of rows
  // that are not multiples of the row block.
  RunOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  for (int64_t cols : {20, 40, 56}) {
    for (auto kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Welford}) {
      auto s = schedule_for_cpu(column_reduction_kernel(kind, 5003, cols), avx512_target(512));
      ASSERT_TRUE(s->schedule.cpu.parallel_reduction && s->schedule.cpu.column_block > 0) << to_string(s->schedule);
      EXPECT_EQ(run_and_compare(s, o), "") << cols << " " << to_string(kind);
      if (kind == ReductionKind::Max) {
        RunOptions specials = o;
        specials.specials = true;
        EXPECT_EQ(run_and_compare(s, specials), "") << cols;
      }
    }
    auto var = schedule_for_cpu(column_two_pass_variance_kernel(5003, cols), avx512_target(512));
    ASSERT_TRUE(var->schedule.cpu.parallel_reduction && var->schedule.cpu.column_block > 0) << to_string(var->schedule);
    EXPECT_EQ(run_and_compare(var, o), "") << cols;
  }
}

TEST(TiledColumns, CascadedSecondPassReadsTheMergedFirst) {
  // 300 symbolic rows: both sums cascade (tiled columns merge into their
  // totals every 64 rows); the second pass must see the first's whole sum.
  // 520 columns: 33 vectors, too many to split each one's rows among 8 threads.
  auto k = column_two_pass_variance_kernel(sym("s0"), 520);
  EXPECT_EQ(schedule_for_cpu(k, avx512_target(4096))->schedule.cpu.cascade_block, 64);
  RunOptions o;
  o.graph_symbols = {"s0"};
  o.symbols = {{"s0", 300}};
  o.rtol = 1e-4;
  o.atol = 1e-4;
  expect_tiled_matches(k, o);
}

TEST(TiledColumns, ALoopLessReductionAfterTheTiledOnesRunsPerColumn) {
  // std over dim 0 then all() over a size-1 dim: the column sum is tiled,
  // the all() has no loops and reads it per lane (the printer took its
  // first loop and crashed; fuzzer seed 96012).
  auto in = input("arg0", DType::Float32, {33, 40});
  auto out = output("out", DType::Bool, {40});
  IndexExpr x0 = var("x0"), r0 = var("r0");
  auto sum = ReductionStage::make({{r0, 33}}, ReductionKind::Sum, load(in, r0 * 40 + x0), {"sum"});
  auto any = ReductionStage::make({}, ReductionKind::Any,
                                  compare(CompareOp::Gt, sum.result(), const_float(0.5)), {"any"});
  auto k = Kernel::make("sum_any", Device::CPU, {Loop{x0, 40}},
                        {sum, any, PointwiseStage{{}, {Store::make(out, x0, any.result())}}});
  auto scheduled = schedule_for_cpu(k, avx512_target(4096));
  ASSERT_GT(scheduled->schedule.cpu.column_block, 0) << to_string(scheduled->schedule);
  auto m = print_cpu_module({scheduled}, {}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(file_check(kernel_text(*m), {"// stage 1, per column: reduce any without loops", "any_tile[",
                                           "cppi_vstore("}));
  RunOptions o;
  o.specials = true;
  o.rtol = o.atol = 1e-4;
  expect_tiled_matches(k, o);
}

}  // namespace
}  // namespace cppi::cpu::test
