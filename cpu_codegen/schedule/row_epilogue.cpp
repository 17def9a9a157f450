/// \file
/// The epilogue of W rows in lanes and the reductions in trees before it
/// (CpuSchedule::epilogue_in_lanes, reduction_trees): what a kernel must be
/// for its innermost outer loop to run in blocks of a vector of rows.
#include "cpu_codegen/schedule/row_epilogue.h"

#include <map>
#include <set>
#include <string>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::cpu {

using namespace ir;

size_t epilogue_start(const Kernel& k) {
  size_t first = k.stages.size();
  while (first > 0) {
    const auto* p = std::get_if<PointwiseStage>(&k.stages[first - 1]);
    if (!p || !p->loops.empty()) break;
    --first;
  }
  return first == 0 ? k.stages.size() : first;
}

/// Whether `k` may run its epilogue (epilogue_start) a vector of `width`
/// rows at a time (CpuSchedule::epilogue_in_lanes): rows are independent (no
/// store accumulates, the epilogue writes nothing the stages before it read,
/// which the block runs first for all its rows); every store is contiguous
/// along the innermost outer loop; every value has a vector at `width` (no
/// bf16/fp16 or bool values the stages before hand over, no 8-byte lanes
/// beyond 8) and none may raise or index through memory where a partial
/// block's lanes are off. `*math`: whether the epilogue calls a math
/// function (what a vector of rows saves when the reductions stay per row).
bool epilogue_in_lanes_fits(const Kernel& k, int width, bool* math_out) {
  const size_t first = epilogue_start(k);
  if (first == k.stages.size() || k.outer.empty() || width < 2 || accumulates(k)) return false;
  if (auto rows = k.outer.back().extent.constant(); rows && *rows < width) return false;
  const std::string v = k.outer.back().var.as<IndexVar>()->name;
  std::set<std::string> read_before;
  for (size_t i = 0; i < first; ++i) {
    for (const auto& a : reads(k.stages[i])) read_before.insert(a.buffer->name);
  }
  auto has_vector = [&](DType t) {
    if (t == DType::Float16 || t == DType::BFloat16) return false;
    return dtype_size(t) < 8 || width <= 8;
  };
  bool math = false;
  std::vector<Expr> values;
  for (size_t i = first; i < k.stages.size(); ++i) {
    for (const auto& st : std::get<PointwiseStage>(k.stages[i]).stores) {
      if (read_before.count(st.buffer->name) || !has_vector(st.buffer->dtype)) return false;
      const auto stride = coefficient(st.index, var(v));
      if (!stride || !stride->is_constant(1) || !indirect_terms(st.index).empty()) return false;
    }
    for (const auto& e : stage_values(k.stages[i])) values.push_back(e);
  }
  // What changes from row to row runs as a vector of the rows; the rest
  // (constants, a row count cast to float) stays scalar, as the printer
  // prints it (CpuKernelPrinter::varying), and needs no vector of its type.
  std::map<const ExprNode*, bool> varying;
  for (const Expr& e : post_order(values)) {
    bool v_e = false;
    if (e.as<LocalRef>()) {
      v_e = true;
    } else if (const auto* n = e.as<Load>()) {
      v_e = depends_on(n->index, v) || (n->mask.defined() && varying[n->mask.get()]);
    } else if (const auto* n = e.as<IndexValue>()) {
      v_e = depends_on(n->index, v);
    } else if (const auto* n = e.as<Random>()) {
      v_e = depends_on(n->offset, v) || varying[n->seed.get()];
    } else {
      for (const Expr& c : operands(e)) v_e = v_e || varying[c.get()];
    }
    varying[e.get()] = v_e;
    if (may_raise(e) || (v_e && !has_vector(e.dtype()))) return false;
    if (const auto* l = e.as<LocalRef>(); l && e.dtype() == DType::Bool) return false;
    if (const auto* n = e.as<Load>(); n && !indirect_terms(n->index).empty()) return false;
    math = math || calls_math_function(e);
  }
  *math_out = math;
  return true;
}

/// Whether the reductions before `k`'s epilogue may combine a block of
/// rows in one tree each (CpuSchedule::reduction_trees): each is a float
/// sum, max or min with one result over one loop of constant extent, at
/// least a vector (shorter rows go in lanes whole: row_blocks) and short
/// enough that a vector of rows stays in L1 for the block's later passes
/// (16 KiB); the stage loops end in masked vectors or in none (whole
/// vectors), so a row's vector accumulator is all its state.
bool reduction_trees_fit(const Kernel& k, const CpuSchedule& s) {
  constexpr int64_t kBlockBytes = 16 << 10;
  const size_t first = epilogue_start(k);
  if (first == k.stages.size() || s.row_blocks) return false;
  for (size_t i = 0; i < first; ++i) {
    const auto* r = std::get_if<ReductionStage>(&k.stages[i]);
    if (!r || r->results.size() != 1 || r->loops.size() != 1) return false;
    if (r->kind != ReductionKind::Sum && r->kind != ReductionKind::Max && r->kind != ReductionKind::Min) return false;
    const DType t = r->body.dtype();
    if (t != DType::Float32 && t != DType::Float64) return false;
    const auto n = r->loops[0].extent.constant();
    if (!n || *n < s.vector_width || *n * dtype_size(t) * s.vector_width > kBlockBytes) return false;
    if (s.tail != TailKind::Masked && *n % s.vector_width != 0) return false;
  }
  return true;
}

}  // namespace cppi::cpu
