// The loop nests the CUDA printer walks, as the debug dump shows them
// (loop_ir_scheduled_cuda.txt): each mapping's walk and the stages' loops
// inside it. No GPU and no NVRTC needed.
#include <gtest/gtest.h>

#include <string>

#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_test_kernels.h"
#include "source_checks.h"

namespace cppi::gpu {
namespace {

using namespace ir;
using namespace testing;

TEST(CudaPrinter, GridStrideKernelsPrintTheirLoopNest) {
  // The loop nest lower_grid_stride_loops builds, as the debug dump shows it
  // (loop_ir_scheduled_cuda.txt): the grid-stride loop over the elements, a
  // store's lanes two at a time where they round to bf16.
  CudaPrintOptions dumps;
  dumps.loop_ir_dumps = true;
  auto m = print_cuda_module({scheduled(rounded_chain(sym("s0"), sym("s1"), DType::BFloat16))}, kSymbols, dumps);
  ASSERT_TRUE(m.ok()) << m.error().message;
  expect_in_order(m->kernels[0].loop_ir,
                  {"after lower_grid_stride_loops", "n = ", "gpu grid-stride for idx in [0, n), step 8, 128 threads a block",
                   "unravel the outer variables from idx", "gpu lanes for vl in [0, 8), step 2", "store out"});
  // One element a thread: the stages inside, printed serially.
  auto scalar = print_cuda_module({scheduled(add_relu_mul(3, 1001))}, kSymbols, dumps);
  ASSERT_TRUE(scalar.ok()) << scalar.error().message;
  expect_in_order(scalar->kernels[0].loop_ir,
                  {"gpu grid-stride for idx in [0, n), ", "unravel the outer variables the stages use from idx",
                   "stages"});
  EXPECT_EQ(scalar->kernels[0].loop_ir.find("gpu lanes"), std::string::npos);
  // Only when asked for.
  EXPECT_TRUE(print_cuda_module({scheduled(add_relu_mul(3, 1001))}, kSymbols)->kernels[0].loop_ir.empty());
}

/// A kernel's loop nest as the debug dump shows it (loop_ir_scheduled_cuda.txt).
std::string loop_ir(const KernelPtr& k) {
  CudaPrintOptions dumps;
  dumps.loop_ir_dumps = true;
  auto m = print_cuda_module({k}, kSymbols, dumps);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? m->kernels[0].loop_ir : std::string();
}

TEST(CudaPrinter, RowKernelsPrintTheirLoopOverRows) {
  // The loop over the rows lower_row_loops builds, as the debug dump shows
  // it: a warp's rows, a block's rows, a split row's blocks, and inside a
  // row the unravelled outer variables, a cached row's filling, the stages.
  const KernelPtr warp = scheduled(row_reduce(ReductionKind::Sum, sym("s0"), 512));
  ASSERT_EQ(warp->schedule.gpu.mapping, GpuMapping::RowPerWarp);
  const int warp_size = warp->schedule.gpu.block_size;
  expect_in_order(loop_ir(warp), {"after lower_row_loops", "rows = s0",
                                  "gpu warp rows for row in [0, rows), step " + std::to_string(warp_size / 32) + ", " +
                                      std::to_string(warp_size) + " threads a block",
                                  "unravel the outer variables the stages use from row", "stages"});
  const std::string block = loop_ir(with_gpu(layer_norm(sym("s0"), 1024), GpuMapping::RowPerBlock, 256, 4));
  expect_in_order(block, {"gpu block rows for row in [0, rows), 256 threads a block\n", "unravel",
                          "declare the row cache and find its loads", "stages"});
  const KernelPtr split = scheduled(row_reduce(ReductionKind::Sum, 2, 300000));
  expect_in_order(loop_ir(split), {"rows = 2", "gpu block rows for row in [0, rows), " +
                                                   std::to_string(split->schedule.gpu.block_size) +
                                                   " threads a block, 18 blocks a row"});
  EXPECT_EQ(loop_ir(split).find("row cache"), std::string::npos);  // too long to cache
  // Only when asked for.
  EXPECT_TRUE(print_cuda_module({warp}, kSymbols)->kernels[0].loop_ir.empty());
}

TEST(CudaPrinter, RowStagesPrintTheirLoopsOverPositions) {
  // The stages inside a row or column group as lower_row_stage_loops builds
  // them: a pass's accumulators, its loop over the positions a thread owns
  // (split rows: its part of them) around the stages at a position, the
  // combines after it; a cached row's loop over its slots instead.
  const KernelPtr long_rows = scheduled(row_reduce(ReductionKind::Sum, 2, 300000));
  const std::string split = loop_ir(long_rows);
  expect_in_order(split, {"gpu block rows for row in [0, rows), ", "// stage 0: reduce sum over the row",
                          "declare the accumulator of stage 0",
                          "  gpu row positions for pos in [0, 300000), " +
                              std::to_string(long_rows->schedule.gpu.block_size) + " threads a row, 18 blocks a row\n",
                          "    the stages at the position, [first, end) = 0, 1\n",
                          "combine the threads' accumulators of stages [first, end) = 0, 1", "// stage 1: store out",
                          "store once, stage 1"});
  const std::string cached = loop_ir(with_gpu(layer_norm(sym("s0"), 1024), GpuMapping::RowPerBlock, 256, 4));
  expect_in_order(cached, {"declare the row cache", "// stage 0: reduce welford over the row",
                           "gpu row slots for slot in [0, 4), 256 threads a row\n",
                           "the stages at the position, [first, end) = 0, 1", "combine the threads' accumulators",
                           "// stage 1: store out", "gpu row slots for slot in [0, 4), 256 threads a row\n",
                           "the stages at the position, [first, end) = 1, 2"});
  // A row cached in vectors: slots in groups of V (RowCachesItsRowInSlotGroups).
  expect_in_order(loop_ir(scheduled(softmax(sym("s0"), 1024))),
                  {"gpu row slots for slot in [0, 32), step 4, 32 threads a row\n", "// stage 2: store out",
                   "gpu row slot groups for group in [0, 32), step 4, 32 threads a row\n"});
  expect_in_order(loop_ir(scheduled(column_sum(sym("s0"), sym("s1")))),
                  {"gpu column groups for idx in [0, n), ", "declare the accumulator of stage 0",
                   "gpu row positions for pos in [0, s0), 32 threads a row\n",
                   "the stages at the position, [first, end) = 0, 1", "store once, stage 1"});
}

TEST(CudaPrinter, RowCachesItsRowInSlotGroups) {
  // A cached row's filling as lower_row_cache_fill builds it: its arrays,
  // then a loop over its slots, a group's first position named and, where
  // the row ends before the last group, the group guarded, each cached
  // load into the slots.
  expect_in_order(loop_ir(with_gpu(layer_norm(sym("s0"), 1000), GpuMapping::RowPerBlock, 256, 4)),
                  {"declare the row cache and find its loads\n",
                   "gpu row slot groups for slot in [0, 4), 256 threads a row\n",
                   "  pos = (int64_t)slot * 256 + tid\n", "  if pos < 1000\n",
                   "    unravel the row cache's variables from pos\n", "    load into the row cache, load 0\n",
                   "// stage 0: reduce welford over the row"});
  // Cached in vectors of 8 (a warp's row of 768 bf16): a group a vector
  // load each; the values the row keeps, two slots at a time where their
  // roundings to bf16 pair.
  const std::string residual = loop_ir(scheduled(residual_layer_norm(sym("s0"), 768, DType::BFloat16, 3, false)));
  expect_in_order(residual, {"gpu row slot groups for slot in [0, 24), step 8, 32 threads a row\n",
                             "pos = (int64_t)(slot / 8) * 256 + tid * 8\n", "load into the row cache, load 2\n",
                             "gpu lanes for vl in [0, 8), step 2\n",
                             "the row cache's values at slots slot + vl, slot + vl + 1\n"});
  // A row cached in vectors stores a stage a vector a group: what does not
  // change along the row first, then each group's vectors, their lanes and
  // their stores.
  expect_in_order(loop_ir(scheduled(softmax(sym("s0"), 1024))),
                  {"// stage 2: store out\n", "compute once what does not change along the row, stage 2\n",
                   "gpu row slot groups for group in [0, 32), step 4, 32 threads a row\n",
                   "  first = (int64_t)(group / 4) * 128 + tid * 4\n",
                   "  load and declare the slot group's vectors, stage 2\n", "  gpu lanes for vl in [0, 4)\n",
                   "    the stored vectors' lane at the slot, stage 2\n",
                   "  store the slot group's vectors, stage 2\n"});
}

TEST(CudaPrinter, ColumnGroupsAndScansPrintTheirLoopNests) {
  // The loops lower_column_group_loops and lower_scan_loops build, as the
  // debug dump shows them: the column groups' loop over the columns, split
  // groups' blocks; a scan's loop over its rows or groups, or split, the
  // tile its block takes by ticket, around the loop over its chunks.
  const KernelPtr col = scheduled(column_sum(sym("s0"), sym("s1")));
  ASSERT_EQ(col->schedule.gpu.threads_per_column, 32);
  expect_in_order(loop_ir(col), {"after lower_column_group_loops", "n = s1",
                                 "gpu column groups for idx in [0, n), step 32, 1024 threads a block\n",
                                 "unravel the outer variables the stages use from idx", "stages"});
  expect_in_order(loop_ir(scheduled(cumsum(256, 65536, 1))),
                  {"after lower_scan_loops", "declare the scan scratch", "rows = 256",
                   "gpu block rows for row in [0, rows), ", "the block's share of the scan", "start the carry",
                   "serial for base in [start, stop), step ", "store the running value at slot"});
  expect_in_order(loop_ir(scheduled(cumsum(4096, 4096, 0))),
                  {"n = 4096", "the thread's column and slice", "gpu column groups for idx in [0, n), step 32, ",
                   "unravel the outer variables the stages use from idx", "store the running value at slot"});
  const std::string split = loop_ir(scheduled(cumsum(65536, 64, 0)));
  expect_in_order(split, {"gpu tickets for tile in [0, 256), 1024 threads a block, 128 tiles a row or group",
                          "from the tile, its group", "the thread's column idx, valid, of group and columns group, n",
                          "if split + 1 < 128", "serial for base in [start, stop)", "carry the chunk's total",
                          "publish the share's total at tile * 32 + lane, tid == 0",
                          "fold the earlier splits' totals", "carry the earlier splits' totals",
                          "serial for base in [start, stop)", "store the running value at slot"});
}

TEST(CudaPrinter, ScanChunksPrintTheirFoldScanAndStores) {
  // A scan's chunk as lower_scan_chunk_loops builds it: the thread's first
  // position, its fold over its slots, the scan of the threads' folds
  // across the block (a row's) or of the slices' (a column's), the stores
  // pass over the slots again, the carry of the chunk's total.
  const KernelPtr row = scheduled(cumsum(256, 65536, 1));
  ASSERT_EQ(row->schedule.gpu.mapping, GpuMapping::RowPerBlock);
  const std::string e = std::to_string(row->schedule.gpu.elements_per_thread);
  const std::string rows = loop_ir(row);
  // Its positions load and store in vectors of V (cache_vector): the
  // vectors' loops over the slots' groups before the fold and after the stores.
  const int v = row->schedule.gpu.cache_vector;
  ASSERT_GT(v, 1);
  const std::string groups = "gpu scan slots for group in [0, " + std::to_string(std::stoi(e) / v) + "), step " +
                             std::to_string(v) + "\n";
  expect_in_order(rows, {"serial for base in [start, stop), step ", "  pos = base + (int64_t)threadIdx.x * " + e + "\n",
                         "declare the vectors of loads, each of", groups, "leave the slots if !(r0 < stop)\n",
                         "load the vectors at group\n", "declare the running values, of " + e,
                         "start the thread's fold", "gpu scan slots for slot in [0, " + e + ")\n", "if r0 < stop\n",
                         "fold the position at slot\n", "keep the running value at slot\n",
                         "scan the threads' folds: the chunk's total, before from the carry\n",
                         "declare the vectors of stores, each of", "gpu scan slots for slot in [0, " + e + ")\n",
                         "leave the slots if r0 >= stop\n", "store the running value at slot\n", groups,
                         "store the vectors at group\n", "carry the chunk's total\n"});
  const std::string columns = loop_ir(scheduled(cumsum(4096, 4096, 0)));
  expect_in_order(columns, {"serial for base in [start, stop), step ", "pos = base + (int64_t)tid * ",
                            "gpu scan slots for slot in [0, ", "if valid && r0 < stop\n", "fold the position at slot",
                            "scan the slices' folds: before and the chunk's total\n", "before from the carry\n",
                            "leave the slots if !valid || r0 >= stop\n", "store the running value at slot",
                            "carry the chunk's total"});
  EXPECT_EQ(columns.find("scan the threads' folds"), std::string::npos);
  // A split scan's share before it publishes its total: the fold and the
  // scan only, the running values neither kept nor stored.
  const std::string split = loop_ir(scheduled(cumsum(65536, 64, 0)));
  const std::string published = split.substr(0, split.find("publish the share's total"));
  expect_in_order(published, {"if split + 1 < 128", "start the thread's fold", "fold the position at slot",
                              "scan the slices' folds", "carry the chunk's total"});
  EXPECT_EQ(published.find("keep the running value"), std::string::npos);
  EXPECT_EQ(published.find("store the running value"), std::string::npos);
}

}  // namespace
}  // namespace cppi::gpu
