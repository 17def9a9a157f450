/// lower_reduction_loops: a run of reduction stages' own loops as the
/// scheduled loop IR, the loops that feed the run's accumulators
/// (place_accumulators places them around the nest).
#include "codegen/c_printer.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "lowering/ir/expr_visitor.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;

namespace {

/// Whether a stage's vector updates spread over several accumulators
/// (CpuSchedule::vector_accumulators). Argmax/argmin need their updates in
/// order (first index on ties); Welford and prod keep one. A body that calls
/// a math function takes longer per vector than the add or max it feeds, so
/// one chain of those is no bottleneck, and the copies would only cost
/// compile time.
bool splits_into_accumulators(const ir::ReductionStage& s) {
  using ir::ReductionKind;
  const bool kind = s.kind == ReductionKind::Sum || s.kind == ReductionKind::Max || s.kind == ReductionKind::Min;
  return kind && !ir::calls_math_function(s.body);
}

/// The run's innermost loop over [lo, hi): serial steps, or in horizontal
/// mode a stage loop vectorised with its tail still in it (a masked vector
/// under TailKind::Masked, else a scalar loop).
Stmt innermost(const ReductionRun& r, const std::string& v, const Bound& lo, const Bound& hi, const LoopNestInput& in) {
  codegen::For loop{v, lo, hi, codegen::LoopKind::Serial, codegen::Tail::None, false, false,
                    stmt(codegen::Accumulate{0, r.group()})};
  if (r.horizontal) {
    loop.kind = codegen::LoopKind::Vector;
    loop.tail = in.s.tail == ir::TailKind::Masked ? codegen::Tail::Masked : codegen::Tail::Scalar;
    loop.no_autovec = true;
    loop.stage_loop = true;
  }
  return stmt(loop);
}

/// The innermost loop in cascade blocks (CpuSchedule::cascade_block): a
/// constant loop of at most one block runs whole, a longer or symbolic one
/// in blocks; either way the block's terms are counted after it.
Stmt cascade_blocks(const ReductionRun& r, const std::string& v, const Bound& lo, const Bound& hi,
                    const LoopNestInput& in) {
  const int64_t block = r.cascade_terms;
  if (lo.value && hi.value && *hi.value - *lo.value <= block) {
    return codegen::block({innermost(r, v, lo, hi, in), stmt(codegen::CascadeBlockDone{lo.text, hi.text, nullptr})}, true);
  }
  const std::string from = v + "_cblk", to = v + "_cblk_end";
  const codegen::Let block_end{to, cat("cppi_min_i<int64_t>(", from, " + ", block, ", ", hi.text, ")")};
  const Stmt body = codegen::block({stmt(block_end), innermost(r, v, Bound::symbolic(from), Bound::symbolic(to), in),
                                    stmt(codegen::CascadeBlockDone{from, to, nullptr})});
  codegen::For blocks{from, lo, hi, codegen::LoopKind::Serial, codegen::Tail::None, false, false, body};
  blocks.step = block;
  return stmt(blocks);
}

}  // namespace

int ReductionRun::group() const {
  int g = 1;
  for (int a : accumulators) g = std::max(g, a);
  return g;
}

size_t one_pass_end(const LoopNestInput& in, size_t first, bool lanes) {
  // Horizontal mode only: lane mode keeps a vector state per stage in a
  // tile, and a parallel reduction splits a kernel's single reduction.
  if (lanes || in.s.vectorized != ir::VectorizedLoop::InnermostOfEachStage || in.s.parallel_reduction) return first + 1;
  const auto* head = std::get_if<ir::ReductionStage>(&in.k.stages[first]);
  if (!head) return first + 1;
  // The run's stages must also name their loops alike: one loop nest
  // binds the names every body reads.
  const size_t end = ir::reduction_run_end(in.k, first);
  size_t i = first + 1;
  for (; i < end; ++i) {
    const auto& s = std::get<ir::ReductionStage>(in.k.stages[i]);
    bool same = true;
    for (size_t l = 0; l < s.loops.size(); ++l) same &= s.loops[l].var == head->loops[l].var;
    if (!same) break;
  }
  return i;
}

ReductionRun reduction_run(std::vector<const ir::ReductionStage*> stages, bool lanes, bool tiled,
                           const LoopNestInput& in) {
  ReductionRun r;
  r.stages = std::move(stages);
  const ir::ReductionStage& head = *r.stages.front();
  r.lanes = lanes;
  r.horizontal = !lanes && in.s.vectorized == ir::VectorizedLoop::InnermostOfEachStage && !head.loops.empty();
  if (r.stages.size() > 1 && !r.horizontal) in.fail("a one-pass run outside horizontal mode");
  r.chunks = in.s.parallel_reduction && !head.loops.empty() && !tiled;
  bool any_cascade = false;
  for (const ir::ReductionStage* s : r.stages) {
    const int accumulators = r.horizontal && splits_into_accumulators(*s) ? in.s.vector_accumulators : 1;
    if (accumulators < 1) in.fail(cat("vector_accumulators ", accumulators));
    // Tiled columns cascade per row block instead (the column tiles' block).
    const bool cascade = in.s.cascade_block > 0 && ir::accumulates_in_cascade(s->kind, s->body.dtype()) &&
                         !s->loops.empty() && !tiled;
    r.accumulators.push_back(accumulators);
    r.cascades.push_back(cascade);
    any_cascade |= cascade;
  }
  // A vector lane sees one term per vector iteration.
  if (any_cascade) r.cascade_terms = in.s.cascade_block * (r.horizontal ? in.s.vector_width : 1);
  return r;
}

codegen::Stmt lower_reduction_loops(const ReductionRun& r, const codegen::Bound& lo0, const codegen::Bound& hi0,
                                    const LoopNestInput& in) {
  const ir::ReductionStage& head = *r.stages.front();
  if (head.loops.empty()) return stmt(codegen::Accumulate{0, r.group()});
  auto lo = [&](size_t level) { return level == 0 ? lo0 : Bound::constant(0); };
  auto hi = [&](size_t level) { return level == 0 ? hi0 : in.extent(head.loops[level]); };
  // The run's stages share their loops (one_pass_end): the first's name them.
  const size_t last = head.loops.size() - 1;
  const std::string v = codegen::loop_var(head.loops[last]);
  Stmt body = r.cascade_terms > 0 ? cascade_blocks(r, v, lo(last), hi(last), in)
                                  : innermost(r, v, lo(last), hi(last), in);
  for (size_t level = last; level-- > 0;) {
    body = stmt(codegen::For{codegen::loop_var(head.loops[level]), lo(level), hi(level), codegen::LoopKind::Serial,
                             codegen::Tail::None, false, false, body});
  }
  return body;
}

codegen::Stmt schedule_reduction_loops(const ReductionRun& r, const codegen::Bound& lo0, const codegen::Bound& hi0,
                                       const LoopNestInput& in) {
  const Stmt tails = split_vector_tails(lower_reduction_loops(r, lo0, hi0, in), in);
  return split_reduction_chunks(place_accumulators(group_vector_accumulators(tails, in), r, in), r, in);
}

}  // namespace cppi::cpu
