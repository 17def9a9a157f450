/// choose_forward_slots (CpuSchedule::tail Masked, vectorised stage loops):
/// which stores of each pointwise stage also go into a vector variable, a
/// slot, for a later stage's load of the same elements to read instead of
/// memory. The printer declares a stage's slots where it prints the stage
/// and tracks, store by store, which forwarded vectors are still valid.
#include <map>
#include <set>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "lowering/ir/index_expr.h"
#include "support/status.h"

namespace cppi::cpu {

namespace {

/// The slots of pointwise stage `stage`: its stores of a plain dtype to a
/// buffer a later stage reads, once per access, in store order.
void choose_stage_slots(const ir::PointwiseStage& s, size_t stage, const LoopNestInput& in,
                        std::vector<codegen::ForwardSlot>& out) {
  // One stage loop of constant extent whose last vector is masked: that
  // vector runs once per outer iteration, at fixed elements.
  if (s.loops.size() != 1) return;
  const auto n = s.loops[0].extent.constant();
  if (!n || *n % in.s.vector_width == 0) return;
  std::set<std::string> read_later;
  for (size_t j = stage + 1; j < in.k.stages.size(); ++j) {
    for (const auto& a : ir::reads(in.k.stages[j])) read_later.insert(a.buffer->name);
  }
  std::set<std::string> keys;  // buffer[index]
  for (const auto& st : s.stores) {
    const DType t = st.buffer->dtype;
    const bool plain =
        t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
    if (!plain || !read_later.count(st.buffer->name) || !ir::indirect_terms(st.index).empty()) continue;
    const std::string index = in.index(st.index);
    if (!keys.insert(cat(st.buffer->name, "[", index, "]")).second) continue;
    out.push_back(codegen::ForwardSlot{stage, static_cast<int>(keys.size()) - 1, st.buffer, index});
  }
}

}  // namespace

codegen::Stmt choose_forward_slots(const codegen::Stmt& s, const LoopNestInput& in) {
  // (Split across threads, a stage's last vector is another thread's.)
  if (in.s.vectorized != ir::VectorizedLoop::InnermostOfEachStage || in.s.tail != ir::TailKind::Masked ||
      in.s.parallel_reduction) {
    return s;
  }
  std::vector<codegen::ForwardSlot> slots;
  for (size_t i = 0; i < in.k.stages.size(); ++i) {
    if (const auto* p = std::get_if<ir::PointwiseStage>(&in.k.stages[i])) choose_stage_slots(*p, i, in, slots);
  }
  if (slots.empty()) return s;
  return codegen::stmt(codegen::ForwardSlots{std::move(slots), s});
}

}  // namespace cppi::cpu
