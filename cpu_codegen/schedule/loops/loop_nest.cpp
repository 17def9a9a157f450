/// schedule_loop_nest: the CPU loop-nest passes, in order.
#include "cpu_codegen/schedule/loops/loop_nest.h"

#include "codegen/c_printer.h"
#include "support/status.h"

namespace cppi::cpu {

std::pair<codegen::Bound, codegen::Bound> chunk_bounds(const ir::Loop& l) {
  const std::string v = codegen::loop_var(l);
  return {codegen::Bound::symbolic(v + "_chunk_begin"), codegen::Bound::symbolic(v + "_chunk_end")};
}

codegen::Stmt map_unsplit_vector_loops(const codegen::Stmt& s,
                                       const std::function<codegen::Stmt(const codegen::For&)>& f) {
  if (const auto* l = std::get_if<codegen::For>(&s->node);
      l && l->kind != codegen::LoopKind::Serial && l->tail != codegen::Tail::None) {
    return f(*l);
  }
  return codegen::map_children(s, [&](const codegen::Stmt& c) { return map_unsplit_vector_loops(c, f); });
}

namespace {

/// Each stage's own loops, as the printer asks for them as it prints the
/// stage: a pointwise stage's (schedule_stage_loops), and a reduction run's
/// (schedule_reduction_loops) in the form of the kernel's main loop (in
/// lanes under a vectorised outer loop). The column tiles' block's
/// reductions run over its row blocks (lower_column_blocks): not here.
void dump_stage_loops(const LoopNestInput& in, std::vector<std::pair<std::string, std::string>>& dumps) {
  const bool lanes = in.s.vectorized == ir::VectorizedLoop::InnermostOuter;
  for (size_t i = 0; i < in.k.stages.size();) {
    const size_t first = i++;
    if (const auto* p = std::get_if<ir::PointwiseStage>(&in.k.stages[first]); p && !p->loops.empty()) {
      dumps.emplace_back(cat("schedule_stage_loops of stage ", first), codegen::to_text(schedule_stage_loops(*p, in)));
    }
    const auto* head = std::get_if<ir::ReductionStage>(&in.k.stages[first]);
    if (!head || head->loops.empty() || in.s.column_block > 0) continue;
    i = one_pass_end(in, first, lanes);
    std::vector<const ir::ReductionStage*> stages;
    for (size_t j = first; j < i; ++j) stages.push_back(&std::get<ir::ReductionStage>(in.k.stages[j]));
    const auto [lo, hi] = in.s.parallel_reduction ? chunk_bounds(head->loops[0])
                                                  : std::pair{codegen::Bound::constant(0), in.extent(head->loops[0])};
    // As print_reduction_run prints it: a one-value stage's final state
    // under its result's name, except a parallel chunk's.
    ReductionRun run = reduction_run(stages, lanes, false, in);
    run.named_results = !in.s.parallel_reduction;
    const codegen::Stmt nest = schedule_reduction_loops(run, lo, hi, in);
    dumps.emplace_back(i == first + 1 ? cat("schedule_reduction_loops of stage ", first)
                                      : cat("schedule_reduction_loops of stages ", first, "-", i - 1),
                       codegen::to_text(nest));
  }
}

}  // namespace

ScheduledLoops schedule_loop_nest(const LoopNestInput& in, bool dumps) {
  using Pass = codegen::Stmt (*)(const codegen::Stmt&, const LoopNestInput&);
  static const std::pair<const char*, Pass> kPasses[] = {
      {"split_vector_loop_pieces", split_vector_loop_pieces},
      {"tile_columns", tile_columns},
      {"split_vector_tails", split_vector_tails},
      {"lower_column_blocks", lower_column_blocks},
      {"open_row_blocks", open_row_blocks},
      {"choose_forward_slots", choose_forward_slots},
  };
  ScheduledLoops out;
  out.nest = lower_loop_nest(in);
  if (dumps) out.dumps.emplace_back("lower_loop_nest", codegen::to_text(out.nest));
  for (const auto& [name, pass] : kPasses) {
    codegen::Stmt next = pass(out.nest, in);
    if (dumps && next != out.nest) out.dumps.emplace_back(name, codegen::to_text(next));
    out.nest = std::move(next);
  }
  if (dumps) dump_stage_loops(in, out.dumps);
  return out;
}

}  // namespace cppi::cpu
