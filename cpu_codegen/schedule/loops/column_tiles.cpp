/// tile_columns (CpuSchedule::column_block): the vectorised outer loop to run
/// in blocks of column_block vectors, each reduction's rows interchanged with
/// the vectors of a block, and whether its overlapped rest joins the blocks;
/// lower_column_blocks builds the blocks once the tail is split off.
#include "cpu_codegen/schedule/loops/loop_nest.h"

namespace cppi::cpu {

codegen::Stmt tile_columns(const codegen::Stmt& s, const LoopNestInput& in) {
  if (in.s.column_block <= 0) return s;
  return map_unsplit_vector_loops(s, [&](const codegen::For& l) {
    codegen::For tiled = l;
    tiled.kind = codegen::LoopKind::VectorTiles;
    // An overlapped tail joins the tiles' pass over the rows: the loop holds
    // at least one whole vector (CpuSchedule::tail). Not when a stage reads a
    // buffer the kernel writes: the overlapping vector would read its
    // neighbour's results in place of what they replaced (a column softmax
    // scales its output in place).
    if (l.tail == codegen::Tail::Overlapped && ir::read_back_buffers(in.k).empty()) {
      tiled.overlapped_rest = true;
      tiled.tail = codegen::Tail::None;
    }
    return codegen::stmt(tiled);
  });
}

}  // namespace cppi::cpu
