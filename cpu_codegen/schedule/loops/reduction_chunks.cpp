/// split_reduction_chunks (CpuSchedule::parallel_reduction): a reduction
/// run's first loop in chunks on the threads, each chunk running the run's
/// nest over its share from accumulators of its own and returning the state
/// it leaves, the chunks' states combined in chunk order.
#include <algorithm>

#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

codegen::Stmt split_reduction_chunks(const codegen::Stmt& s, const ReductionRun& r, const LoopNestInput& in) {
  if (!r.chunks) return s;
  if (r.stages.size() != 1) in.fail("a one-pass run in a parallel reduction");
  const auto* accumulators = std::get_if<codegen::Accumulators>(&s->node);
  if (!accumulators) in.fail("a parallel reduction's chunks around a nest without its accumulators");
  // The state the chunk leaves: the one it combined its parts into, or its
  // only one.
  const codegen::StageAccumulators& a = accumulators->stages.front();
  const ir::ReductionStage& head = *r.stages.front();
  const auto [begin, end] = chunk_bounds(head.loops[0]);
  codegen::ReductionChunks chunks;
  chunks.state = in.result_name(head.results[0]) + "_state";
  chunks.partial = !a.result.empty() ? a.result : r.lanes ? a.vectors.front() : a.scalar;
  chunks.kind = head.kind;
  chunks.dtype = head.body.dtype();
  chunks.lanes = r.lanes;
  chunks.count = in.extent(head.loops[0]).text;
  chunks.grain = std::to_string(std::max<int64_t>(1, in.s.grain_size));
  chunks.begin = begin.text;
  chunks.end = end.text;
  chunks.body = s;
  return codegen::stmt(std::move(chunks));
}

}  // namespace cppi::cpu
