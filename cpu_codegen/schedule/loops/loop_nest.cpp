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

ScheduledLoops schedule_loop_nest(const LoopNestInput& in, bool dumps) {
  using Pass = codegen::Stmt (*)(const codegen::Stmt&, const LoopNestInput&);
  static const std::pair<const char*, Pass> kPasses[] = {
      {"split_vector_loop_pieces", split_vector_loop_pieces},
      {"tile_columns", tile_columns},
      {"split_vector_tails", split_vector_tails},
  };
  ScheduledLoops out;
  out.nest = lower_loop_nest(in);
  if (dumps) out.dumps.emplace_back("lower_loop_nest", codegen::to_text(out.nest));
  for (const auto& [name, pass] : kPasses) {
    codegen::Stmt next = pass(out.nest, in);
    if (dumps && next != out.nest) out.dumps.emplace_back(name, codegen::to_text(next));
    out.nest = std::move(next);
  }
  // Each pointwise stage's own loops (the printer asks for them as it
  // prints the stage: schedule_stage_loops).
  for (size_t i = 0; dumps && i < in.k.stages.size(); ++i) {
    const auto* p = std::get_if<ir::PointwiseStage>(&in.k.stages[i]);
    if (!p || p->loops.empty()) continue;
    out.dumps.emplace_back(cat("schedule_stage_loops of stage ", i), codegen::to_text(schedule_stage_loops(*p, in)));
  }
  return out;
}

}  // namespace cppi::cpu
