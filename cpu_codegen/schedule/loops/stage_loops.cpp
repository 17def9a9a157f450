/// lower_stage_loops: a pointwise stage's own loops as the scheduled loop IR.
#include "codegen/c_printer.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;

codegen::Stmt lower_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in) {
  if (s.loops.empty()) return nullptr;
  const bool vector_stage = in.s.vectorized == ir::VectorizedLoop::InnermostOfEachStage;
  Stmt body = stmt(codegen::StageStores{s.stores});
  for (size_t level = s.loops.size(); level-- > 0;) {
    const ir::Loop& l = s.loops[level];
    const std::string v = codegen::loop_var(l);
    // parallel_reduction: the first loop in chunks on the threads, as the
    // reductions' are (the schedule checked that no two of its iterations
    // touch one element).
    const bool split = level == 0 && in.s.parallel_reduction;
    const auto [lo, hi] = split ? chunk_bounds(l) : std::pair{Bound::constant(0), in.extent(l)};
    codegen::For loop{v, lo, hi, codegen::LoopKind::Serial, codegen::Tail::None, false, false, body};
    if (level + 1 == s.loops.size() && vector_stage) {
      loop.kind = codegen::LoopKind::Vector;
      loop.tail = in.s.tail == ir::TailKind::Masked ? codegen::Tail::Masked : codegen::Tail::Scalar;
      loop.no_autovec = true;
      loop.stage_loop = true;
    }
    body = stmt(loop);
    if (split) {
      body = stmt(codegen::ParallelChunks{in.extent(l).text, std::to_string(std::max<int64_t>(1, in.s.grain_size)),
                                          body, lo.text, hi.text});
    }
  }
  return body;
}

codegen::Stmt schedule_stage_loops(const ir::PointwiseStage& s, const LoopNestInput& in) {
  const Stmt nest = lower_stage_loops(s, in);
  return nest ? split_vector_tails(nest, in) : nest;
}

}  // namespace cppi::cpu
