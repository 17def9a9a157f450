// The CPU loop nest in the scheduled loop IR (cpu_codegen/schedule/loops):
// what each pass makes of the vectorised loop, read from the dump the
// printer keeps (PrintedKernel::loop_ir) and from the passes themselves.
#include <gtest/gtest.h>

#include <string>

#include "codegen/loop_stmt.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

/// `k` with its AVX2 schedule changed by `edit`.
KernelPtr scheduled(const KernelPtr& k, const std::function<void(CpuSchedule&)>& edit) {
  Schedule s = schedule_for_cpu(k, avx2_target())->schedule;
  edit(s.cpu);
  return k->with_schedule(s);
}

/// The nest's text after each pass, as the printer keeps it.
std::string dumps(const KernelPtr& k, const std::vector<std::string>& symbols = {}) {
  PrintOptions o;
  o.loop_ir_dumps = true;
  return print_one(k, symbols, o).kernels.at(0).loop_ir;
}

std::string after(const std::string& dumps, const std::string& pass) {
  const size_t at = dumps.find(" after " + pass + "\n");
  if (at == std::string::npos) return "";
  const size_t end = dumps.find("\n// ", at + 1);
  return dumps.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

LoopNestInput input_of(const KernelPtr& k) {
  return LoopNestInput{*k, k->schedule.cpu, [](const IndexExpr& e) { return to_string(e); },
                       [](const std::string& result) { return result; }};
}

TEST(LoopNest, MaskedTailOfAColumnSumIsOneVectorWithItsLanesOff) {
  // x.sum(0) of n x 7: one vector of 8 lanes per row, 7 of them on.
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, 7), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.parallel_loops = 0;
    s.column_block = 0;
  });
  const std::string d = dumps(k);
  EXPECT_NE(after(d, "lower_loop_nest").find("vector for x0 in [0, 7), masked tail"), std::string::npos) << d;
  const std::string split = after(d, "split_vector_tails");
  EXPECT_NE(split.find("lanes below 7 on"), std::string::npos) << d;
  EXPECT_EQ(split.find("masked tail"), std::string::npos) << d;
  EXPECT_NE(split.find("vector for x0 in [0, 7)"), std::string::npos) << d;
}

TEST(LoopNest, AStagesVectorLoopEndsInOneMaskedVectorOrAScalarLoop) {
  // softmax over rows of 1003 with its stages' loops vectorised: the store
  // stage's loop is a nest of its own, its rest after the whole vectors one
  // vector at 1000 with 3 lanes on (masked tails) or a scalar loop.
  auto softmax_with = [](TailKind tail) {
    return scheduled(softmax_kernel(64, 1003), [tail](CpuSchedule& s) {
      s.vectorized = VectorizedLoop::InnermostOfEachStage;
      s.vector_width = 8;
      s.tail = tail;
      s.parallel_reduction = false;
    });
  };
  const std::string masked = after(dumps(softmax_with(TailKind::Masked)), "schedule_stage_loops of stage 2");
  EXPECT_NE(masked.find("stage vector for r0 in [0, 1000), whole vectors of a masked split"), std::string::npos)
      << masked;
  EXPECT_NE(masked.find("lanes below 3 on"), std::string::npos) << masked;
  EXPECT_NE(masked.find("one vector at r0 = 1000"), std::string::npos) << masked;
  EXPECT_NE(masked.find("store buf0"), std::string::npos) << masked;
  const std::string scalar = after(dumps(softmax_with(TailKind::ScalarLoop)), "schedule_stage_loops of stage 2");
  EXPECT_NE(scalar.find("stage vector for r0 in [0, 1000)\n"), std::string::npos) << scalar;
  EXPECT_NE(scalar.find("stage serial for r0 in [1000, 1003)"), std::string::npos) << scalar;
  // Split across the threads (parallel_reduction): the first loop in chunks
  // named by its variable, split at named points.
  const KernelPtr split = scheduled(softmax_kernel(1, 100000), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.parallel_reduction = true;
    s.grain_size = 4096;
  });
  const std::string chunks = after(dumps(split), "schedule_stage_loops of stage 2");
  EXPECT_NE(chunks.find("parallel chunks [r0_chunk_begin, r0_chunk_end) of [0, 100000), grain 4096"), std::string::npos)
      << chunks;
  EXPECT_NE(chunks.find("r0_lo = r0_chunk_begin"), std::string::npos) << chunks;
}

TEST(LoopNest, ARowSumsWholeVectorsGoInGroupsOneVectorPerAccumulator) {
  // x.sum(1) over rows of 1003: four vector accumulators, so the whole
  // vectors [0, 1000) run in groups of four (vector k into accumulator k),
  // the ones after the last group into the first; the masked last vector
  // too.
  const KernelPtr k = scheduled(row_reduction_kernel(ReductionKind::Sum, 64, 1003), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.vector_accumulators = 4;
    s.parallel_reduction = false;
    s.cascade_block = 0;
  });
  const std::string d = after(dumps(k), "schedule_reduction_loops of stage 0");
  EXPECT_NE(d.find("r0_grp_end = 0 + (1000 - 0) / 32 * 32"), std::string::npos) << d;
  EXPECT_NE(d.find("stage serial for r0_grp in [0, r0_grp_end), step 32"), std::string::npos) << d;
  EXPECT_NE(d.find("one vector at r0 = r0_grp + 24\n"), std::string::npos) << d;
  EXPECT_NE(d.find("accumulate into 3 of 4"), std::string::npos) << d;
  EXPECT_NE(d.find("stage vector for r0 in [r0_grp_end, 1000), whole vectors of a masked split"), std::string::npos)
      << d;
  EXPECT_NE(d.find("lanes below 3 on"), std::string::npos) << d;
  EXPECT_NE(d.find("one vector at r0 = 1000"), std::string::npos) << d;
}

TEST(LoopNest, ACascadedSumCountsItsBlocksTerms) {
  // A float sum over rows of 100000 with cascade blocks of 1024 terms per
  // lane: the row in blocks of 8192 (a vector holds 8 terms), each block's
  // loop split at its whole vectors, its terms counted after it.
  const KernelPtr k = scheduled(row_reduction_kernel(ReductionKind::Sum, 4, 100000), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::ScalarLoop;
    s.vector_accumulators = 1;
    s.parallel_reduction = false;
    s.cascade_block = 1024;
  });
  const std::string d = after(dumps(k), "schedule_reduction_loops of stage 0");
  EXPECT_NE(d.find("serial for r0_cblk in [0, 100000), step 8192"), std::string::npos) << d;
  EXPECT_NE(d.find("r0_cblk_end = cppi_min_i<int64_t>(r0_cblk + 8192, 100000)"), std::string::npos) << d;
  EXPECT_NE(d.find("stage vector for r0 in [r0_lo, r0_vec_end)"), std::string::npos) << d;
  EXPECT_NE(d.find("stage serial for r0 in [r0_vec_end, r0_end)"), std::string::npos) << d;
  EXPECT_NE(d.find("cascade block done: terms [r0_cblk, r0_cblk_end)"), std::string::npos) << d;
}

TEST(LoopNest, AColumnSumInLanesIsASerialLoopOfVectorUpdates) {
  // Under a vectorised outer loop each lane reduces its own column: the
  // reduction's loop stays serial, its update a vector of lanes.
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, 16), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.parallel_loops = 0;
    s.parallel_reduction = false;
    s.column_block = 0;
    s.cascade_block = 0;
  });
  const std::string d = after(dumps(k), "schedule_reduction_loops of stage 0");
  EXPECT_NE(d.find("serial for r0 in [0, 64)\n    accumulate into 0 of 1"), std::string::npos) << d;
}

TEST(LoopNest, AReductionsAccumulatorsAreDeclaredAroundItsLoopsMergedAtItsBlocksAndFinishedAfter) {
  // The cascaded row sum with two vector accumulators: a scalar state for
  // the scalar tail, two vector states, three levels of totals (the row's
  // extent is unknown) and their counters before the loops; each full
  // block merged into the totals under its count; the final state after.
  const KernelPtr k = scheduled(row_reduction_kernel(ReductionKind::Sum, 4, sym("s0")), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::ScalarLoop;
    s.vector_accumulators = 2;
    s.parallel_reduction = false;
    s.cascade_block = 1024;
  });
  const std::string d = after(dumps(k, {"s0"}), "schedule_reduction_loops of stage 0");
  EXPECT_TRUE(file_check(d, {"\naccumulators\n",
                             "  stage 0: sum over float32, scalar red_acc, vectors red_vacc red_vacc_1, totals "
                             "red_total red_total_2 red_total_3 -> red\n",
                             "  cascade: 8192 terms a block, counted in red_terms, merges counted in red_merges1 "
                             "red_merges2\n",
                             "accumulate into 1 of 2", "cascade block done: terms [r0_cblk, r0_cblk_end)\n",
                             "  merge into totals: run stages 0\n", "  finish accumulators\n"}))
      << d;
  // In lanes (a vectorised outer loop) one vector state, a lane per column,
  // final as it stands: no totals, nothing to combine.
  const KernelPtr lanes = scheduled(column_reduction_kernel(ReductionKind::Max, 64, 16), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.parallel_loops = 0;
    s.parallel_reduction = false;
    s.column_block = 0;
    s.cascade_block = 0;
  });
  const std::string l = after(dumps(lanes), "schedule_reduction_loops of stage 0");
  EXPECT_TRUE(file_check(l, {"\naccumulators, in lanes\n", "  stage 0: max over float32, vectors red_vacc\n",
                             "NOT:cascade", "finish accumulators"}))
      << l;
}

TEST(LoopNest, AParallelReductionsChunksEachRunTheNestFromTheirOwnAccumulators) {
  // A sum over rows of 100000 in chunks on the threads: each chunk's nest
  // over [r0_chunk_begin, r0_chunk_end) with its accumulators inside, the
  // state it returns, and the state the chunks combine into. Without
  // parallel_reduction the pass leaves the nest.
  const KernelPtr k = scheduled(row_reduction_kernel(ReductionKind::Sum, 2, 100000), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.vector_accumulators = 1;
    s.cascade_block = 0;
    s.parallel_reduction = true;
    s.grain_size = 4096;
  });
  const std::string d = after(dumps(k), "schedule_reduction_loops of stage 0");
  EXPECT_TRUE(file_check(d, {"\nreduction chunks [r0_chunk_begin, r0_chunk_end) of [0, 100000), grain 4096: each "
                             "returns red_red, combined into red_state\n",
                             "  accumulators\n", "    stage 0: sum over float32, vectors red_vacc -> red_red\n",
                             "stage vector for r0 in [r0_lo, r0_vec_end)", "    finish accumulators\n"}))
      << d;
  const KernelPtr serial = scheduled(k, [](CpuSchedule& s) { s.parallel_reduction = false; });
  const LoopNestInput in = input_of(serial);
  const ReductionRun run = reduction_run({&std::get<ReductionStage>(serial->stages.at(0))}, false, false, in);
  const codegen::Stmt placed = place_accumulators(
      lower_reduction_loops(run, codegen::Bound::constant(0), codegen::Bound::constant(100000), in), run, in);
  EXPECT_EQ(split_reduction_chunks(placed, run, in), placed);
}

TEST(LoopNest, WhereTheRunPrintsSetsItsAccumulatorsStartAndEnd) {
  // The column tiles' block starts a lane reduction from a tile's slots; a
  // block's reduction tree takes each row's merged vector state.
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, 16), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.cascade_block = 0;
  });
  const LoopNestInput in = input_of(k);
  const auto& stage = std::get<ReductionStage>(k->stages.at(0));
  ReductionRun r = reduction_run({&stage}, true, true, in);
  r.lane_init = "red_tile[t]";
  const std::string from_tile = codegen::to_text(place_accumulators(lower_reduction_loops(r, codegen::Bound::constant(0),
                                                                                        codegen::Bound::constant(64), in),
                                                                  r, in));
  EXPECT_NE(from_tile.find("vectors red_vacc from red_tile[t]\n"), std::string::npos) << from_tile;

  const KernelPtr rows = scheduled(row_reduction_kernel(ReductionKind::Sum, 4, 64), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.vector_accumulators = 1;
    s.cascade_block = 0;
    s.parallel_reduction = false;
  });
  const LoopNestInput rows_in = input_of(rows);
  ReductionRun tree = reduction_run({&std::get<ReductionStage>(rows->stages.at(0))}, false, false, rows_in);
  tree.tree_row = "x0 - x0_blk";
  const std::string into_tree = codegen::to_text(schedule_reduction_loops(tree, codegen::Bound::constant(0),
                                                                          codegen::Bound::constant(64), rows_in));
  EXPECT_TRUE(file_check(into_tree, {"vectors red_vacc -> red_vaccs\n", "finish accumulators, into tree row x0 - x0_blk"}))
      << into_tree;
}

TEST(LoopNest, SymbolicBoundsSplitAtNamedPoints) {
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, sym("s0")), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.tail = TailKind::ScalarLoop;
    s.parallel_loops = 0;
    s.column_block = 0;
  });
  const std::string split = after(dumps(k, {"s0"}), "split_vector_tails");
  EXPECT_NE(split.find("x0_vec_end = x0_lo + (x0_end - x0_lo) / 8 * 8"), std::string::npos) << split;
  EXPECT_NE(split.find("vector for x0 in [x0_lo, x0_vec_end)"), std::string::npos) << split;
  EXPECT_NE(split.find("serial for x0 in [x0_vec_end, x0_end)"), std::string::npos) << split;
}

TEST(LoopNest, ColumnTilesAreALoopKindTheTailsPassSplitsLikeAnyOther) {
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, 20), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.tail = TailKind::ScalarLoop;
    s.parallel_loops = 0;
    s.column_block = 2;
    s.row_block = 8;
  });
  const std::string d = dumps(k);
  EXPECT_NE(after(d, "tile_columns").find("vector tiles for x0 in [0, 20), scalar tail"), std::string::npos) << d;
  const std::string split = after(d, "split_vector_tails");
  EXPECT_NE(split.find("vector tiles for x0 in [0, 16)"), std::string::npos) << d;
  EXPECT_NE(split.find("serial for x0 in [16, 20)"), std::string::npos) << d;
}

TEST(LoopNest, PiecesFoldTheirStagesIndexConditions) {
  const KernelPtr k = scheduled(broadcast_add_kernel(4, 40), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.tail = TailKind::ScalarLoop;
    s.parallel_loops = 0;
    s.vector_loop_splits = {16};
  });
  const codegen::Stmt pieces = split_vector_loop_pieces(lower_loop_nest(input_of(k)), input_of(k));
  const std::string text = codegen::to_text(pieces);
  EXPECT_NE(text.find("stages, index conditions folded for x1 in [0, 16)"), std::string::npos) << text;
  EXPECT_NE(text.find("stages, index conditions folded for x1 in [16, 40)"), std::string::npos) << text;
  // The pieces keep their tails for split_vector_tails.
  EXPECT_NE(text.find("vector for x1 in [16, 40), scalar tail"), std::string::npos) << text;
}

TEST(LoopNest, RowBlocksOpenBeforeTheirFirstStageAndTheStoredOnesStoreAfterTheStages) {
  // Softmax over rows of 7 with exp(x - max) stashed (row_blocks_test.cpp):
  // the input's block opens loaded before stage 0, the stash's opens before
  // the stage that stores it and goes back to memory after the stages, in
  // the whole vectors of rows and in the masked last one alike.
  const KernelPtr k = schedule_for_cpu(stash_reduction_bodies(softmax_kernel(sym("s0"), 7)), avx512_target());
  ASSERT_TRUE(k->schedule.cpu.row_blocks);
  const std::string d = after(dumps(k, {"s0"}), "open_row_blocks");
  const std::vector<std::string> around_stages = {
      "row blocks", "  row block 0: arg0[7*x0], 7 vectors, opened at stage 0, loaded",
      "  row block 1: buf0[7*x0], 7 vectors, opened at stage 1\n", "stages", "store row block 1: buf0[7*x0], 7 vectors"};
  std::vector<std::string> twice = around_stages;
  twice.push_back("lanes below");
  twice.insert(twice.end(), around_stages.begin(), around_stages.end());
  twice.push_back("NOT:store row block 0");
  EXPECT_TRUE(file_check(d, twice)) << d;
}

TEST(LoopNest, AStoreALaterStageReadsGetsAForwardSlotAroundTheNest) {
  // Softmax over rows of 7 with exp(x - max) stashed and its stages' loops
  // vectorised in one masked vector each: the stash's store (stage 1) gets
  // a slot, which the sum and the output stage after it read; the output's
  // store, read by no stage after, gets none.
  const KernelPtr k = scheduled(stash_reduction_bodies(softmax_kernel(64, 7)), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOfEachStage;
    s.vector_width = 8;
    s.tail = TailKind::Masked;
    s.parallel_reduction = false;
    s.row_blocks = false;
  });
  const std::string d = after(dumps(k), "choose_forward_slots");
  EXPECT_TRUE(file_check(d, {"forward slots", "  stage 1: buf0[r0 + 7*x0] -> slot 0\n", "NOT:stage 3:", "stages"})) << d;
  // Under a scalar tail nothing is forwarded: the pass leaves the nest.
  const KernelPtr scalar = scheduled(k, [](CpuSchedule& s) { s.tail = TailKind::ScalarLoop; });
  EXPECT_EQ(after(dumps(scalar), "choose_forward_slots"), "");
}

TEST(LoopNest, PassesLeaveWhatTheyDoNotChangeShared) {
  const KernelPtr k = scheduled(column_reduction_kernel(ReductionKind::Sum, 64, 16), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.parallel_loops = 0;
    s.column_block = 0;
    s.vector_loop_splits.clear();
  });
  const codegen::Stmt nest = lower_loop_nest(input_of(k));
  EXPECT_EQ(split_vector_loop_pieces(nest, input_of(k)), nest);
  EXPECT_EQ(tile_columns(nest, input_of(k)), nest);
  EXPECT_NE(split_vector_tails(nest, input_of(k)), nest);
  EXPECT_EQ(open_row_blocks(nest, input_of(k)), nest);
  EXPECT_EQ(choose_forward_slots(nest, input_of(k)), nest);
  // A run that does not cascade has no block to merge: its nest is kept.
  const auto& stage = std::get<ReductionStage>(k->stages.at(0));
  const ReductionRun run = reduction_run({&stage}, true, false, input_of(k));
  const codegen::Stmt loops = lower_reduction_loops(run, codegen::Bound::constant(0), codegen::Bound::constant(64),
                                                    input_of(k));
  const codegen::Stmt placed = place_accumulators(loops, run, input_of(k));
  const auto& body = std::get<codegen::Block>(std::get<codegen::Accumulators>(placed->node).body->node).body;
  EXPECT_EQ(body.at(0), loops);
  EXPECT_EQ(codegen::map_children(nest, [](const codegen::Stmt& s) { return s; }), nest);
}

TEST(LoopNest, AnInconsistentScheduleIsAnInternalError) {
  const KernelPtr k = scheduled(broadcast_add_kernel(4, 40), [](CpuSchedule& s) {
    s.vectorized = VectorizedLoop::InnermostOuter;
    s.vector_width = 8;
    s.tail = TailKind::Overlapped;
    s.parallel_loops = 0;
    s.vector_loop_splits = {16};  // pieces need a scalar tail
  });
  auto printed = print_cpu_module({k}, {}, PrintOptions{});
  ASSERT_FALSE(printed.ok());
  EXPECT_NE(printed.error().message.find("vector_loop_splits need"), std::string::npos) << printed.error().message;
}

}  // namespace
}  // namespace cppi::cpu::test
