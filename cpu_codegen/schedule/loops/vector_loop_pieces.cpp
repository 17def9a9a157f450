/// split_vector_loop_pieces (CpuSchedule::vector_loop_splits): the
/// vectorised loop in pieces at the points where its stages' index
/// conditions change, each piece's stages with those conditions folded to
/// constants (cpu_codegen/schedule/index_conditions.h).
#include "cpu_codegen/schedule/index_conditions.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

codegen::Stmt split_vector_loop_pieces(const codegen::Stmt& s, const LoopNestInput& in) {
  if (in.s.vector_loop_splits.empty()) return s;
  return map_unsplit_vector_loops(s, [&](const codegen::For& l) {
    if (!l.lo.value || *l.lo.value != 0 || !l.hi.value || in.s.tail != ir::TailKind::ScalarLoop ||
        in.s.column_block > 0) {
      in.fail("vector_loop_splits need the whole constant loop and a scalar tail");
    }
    // The vectorised loop is the innermost outer one (InnermostOuter).
    const std::string var = in.k.outer.back().var.as<ir::IndexVar>()->name;
    std::vector<int64_t> ends = in.s.vector_loop_splits;
    ends.push_back(*l.hi.value);
    std::vector<codegen::Stmt> pieces;
    int64_t from = 0;
    for (int64_t to : ends) {
      if (to <= from || to > *l.hi.value) in.fail("vector_loop_splits out of order or range");
      pieces.push_back(codegen::stmt(codegen::Comment{cat(l.var, " in [", from, ", ", to, "): its index comparisons are constants")}));
      codegen::For piece = l;
      piece.lo = codegen::Bound::constant(from);
      piece.hi = codegen::Bound::constant(to);
      piece.body = codegen::stmt(codegen::Stages{var, from, to, fold_index_conditions(in.k.stages, var, from, to)});
      pieces.push_back(codegen::stmt(piece));
      from = to;
    }
    return codegen::block(pieces);
  });
}

}  // namespace cppi::cpu
