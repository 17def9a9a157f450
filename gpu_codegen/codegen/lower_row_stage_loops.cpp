// lower_row_stage_loops (row_stage_loops.h): the stages of a row or column
// group, each pass's loop over its positions, as the scheduled loop IR.
#include "gpu_codegen/codegen/row_stage_loops.h"

#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/row_cache_loops.h"
#include "support/status.h"

namespace cppi::gpu {

using namespace codegen;

namespace {

/// How the stages of a row or column group walk their positions.
struct RowWalkShape {
  bool column_groups = false;
  int threads = 0;  // sharing a row (a warp or a block), or a group's row slices
  int cached = 0;   // E of a cached row; 0 = the stages read global memory
};

RowWalkShape walk_shape(const ir::GpuSchedule& g) {
  RowWalkShape w;
  w.column_groups = g.mapping == ir::GpuMapping::ColumnReduction;
  w.threads = w.column_groups ? g.threads_per_column : g.mapping == ir::GpuMapping::RowPerWarp ? 32 : g.block_size;
  w.cached = w.column_groups ? 0 : g.elements_per_thread;
  return w;
}

/// One past the cached-row stages of the pass that starts at reduction i:
/// two independent sums of one type over the same loops, with the same loop
/// names (so each reads the cache as its own stage would), share one slot
/// loop and one block reduction (cppi_block_reduce_sum2); else i + 1.
size_t cached_sum_pair_end(const ir::Kernel& k, size_t i) {
  if (i + 1 >= k.stages.size() || ir::reduction_run_end(k, i) < i + 2) return i + 1;
  const auto& a = std::get<ir::ReductionStage>(k.stages[i]);
  const auto& b = std::get<ir::ReductionStage>(k.stages[i + 1]);
  if (a.kind != ir::ReductionKind::Sum || b.kind != ir::ReductionKind::Sum || a.body.dtype() != b.body.dtype()) {
    return i + 1;
  }
  for (size_t l = 0; l < a.loops.size(); ++l) {
    if (!(a.loops[l].var == b.loops[l].var)) return i + 1;
  }
  return i + 2;
}

/// The positions of a row: the product of its stage loops' extents.
ir::IndexExpr row_length(const std::vector<ir::Loop>& loops) {
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : loops) extents.push_back(l.extent);
  return ir::product(extents);
}

/// The loop over the positions of stage `first`'s loops the thread owns,
/// around stages [first, end) at each.
Stmt position_loop(const ir::Kernel& k, const ir::GpuSchedule& g, const RowWalkShape& w, size_t first, size_t end,
                   const std::function<std::string(const ir::IndexExpr&)>& index) {
  Stmt at = stmt(TargetPart{row_stage_part::kPassAt, {std::to_string(first), std::to_string(end)}});
  if (w.cached > 0) {
    For slots = gpu_loop("slot", Bound::constant(w.cached), LoopKind::GpuRowSlots, g.cache_vector, w.threads, at);
    return stmt(std::move(slots));
  }
  const ir::IndexExpr len = row_length(ir::loops_of(k.stages[first]));
  Bound hi = len.constant() ? Bound{index(len), *len.constant()} : Bound::symbolic(index(len));
  For positions = gpu_loop("pos", std::move(hi), LoopKind::GpuRowPositions, 1, w.threads, at);
  positions.splits = g.row_splits;
  return stmt(std::move(positions));
}

/// Stage i's stores of a row cached in vectors, `length` positions long: a
/// slot group's values lane by lane, each store one vector a group.
void add_cached_vector_stores(const ir::GpuSchedule& g, const RowWalkShape& w, size_t i, int64_t length,
                              std::vector<Stmt>& out) {
  const std::vector<std::string> stage{std::to_string(i)};
  out.push_back(stmt(TargetPart{row_stage_part::kRowInvariants, stage}));
  For lanes = gpu_loop("vl", Bound::constant(g.cache_vector), LoopKind::GpuLanes, 1, 0,
                       stmt(TargetPart{row_stage_part::kLaneValues, stage}));
  Stmt group = block({stmt(TargetPart{row_stage_part::kGroupVectors, stage}), stmt(std::move(lanes)),
                      stmt(TargetPart{row_stage_part::kStoreVectors, stage})});
  out.push_back(slot_groups("group", "first", g, w.threads, length, std::move(group)));
}

std::string store_comment(const ir::PointwiseStage& s, size_t i) {
  std::string comment = cat("stage ", i, ": store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  return comment;
}

void add_pointwise(const ir::Kernel& k, const ir::GpuSchedule& g, const RowWalkShape& w, size_t i,
                   const std::function<std::string(const ir::IndexExpr&)>& index, std::vector<Stmt>& out) {
  const auto& s = std::get<ir::PointwiseStage>(k.stages[i]);
  out.push_back(stmt(Comment{store_comment(s, i)}));
  if (s.loops.empty()) {
    out.push_back(stmt(TargetPart{row_stage_part::kStoreOnce, {std::to_string(i)}}));
  } else if (w.cached > 0 && g.cache_vector > 1) {
    add_cached_vector_stores(g, w, i, *row_length(s.loops).constant(), out);
  } else {
    out.push_back(position_loop(k, g, w, i, i + 1, index));
  }
}

/// The pass over stages [first, end), first a reduction: each stage's
/// comment and accumulator, the loop, the combines.
void add_pass(const ir::Kernel& k, const ir::GpuSchedule& g, const RowWalkShape& w, size_t first, size_t end,
              const std::function<std::string(const ir::IndexExpr&)>& index, std::vector<Stmt>& out) {
  for (size_t i = first; i < end; ++i) {
    if (const auto* pw = std::get_if<ir::PointwiseStage>(&k.stages[i])) {
      out.push_back(stmt(Comment{cat(store_comment(*pw, i), " (in the pass of stage ", first, ")")}));
      continue;
    }
    const auto& s = std::get<ir::ReductionStage>(k.stages[i]);
    out.push_back(stmt(Comment{cat("stage ", i, ": reduce ", ir::to_string(s.kind), " over the row",
                                   end - first > 1 ? cat(" (one pass with stages ", first, "-", end - 1, ")")
                                                   : std::string())}));
    out.push_back(stmt(TargetPart{row_stage_part::kAccumulator, {std::to_string(i)}}));
  }
  if (std::get<ir::ReductionStage>(k.stages[first]).loops.empty()) {
    out.push_back(stmt(TargetPart{row_stage_part::kUpdateOnce, {std::to_string(first)}}));
    return;
  }
  out.push_back(position_loop(k, g, w, first, end, index));
  out.push_back(stmt(TargetPart{row_stage_part::kCombine, {std::to_string(first), std::to_string(end)}}));
}

}  // namespace

Stmt lower_row_stage_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                           const std::function<std::string(const ir::IndexExpr&)>& index) {
  const RowWalkShape w = walk_shape(g);
  std::vector<Stmt> stages;
  for (size_t i = 0; i < k.stages.size();) {
    if (!std::holds_alternative<ir::ReductionStage>(k.stages[i])) {
      add_pointwise(k, g, w, i, index, stages);
      ++i;
      continue;
    }
    // A cached row reads registers: one pass per stage costs no memory
    // traffic. Column groups fold runs of reductions only (their split
    // combine stores a partial per stage of the run).
    const size_t end = w.cached > 0        ? cached_sum_pair_end(k, i)
                       : w.column_groups ? ir::reduction_run_end(k, i)
                                         : ir::pass_run_end(k, i);
    add_pass(k, g, w, i, end, index, stages);
    i = end;
  }
  return block(std::move(stages));
}

}  // namespace cppi::gpu
