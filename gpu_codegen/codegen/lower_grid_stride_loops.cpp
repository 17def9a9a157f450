// lower_grid_stride_loops (grid_stride_loops.h): a grid-stride kernel's loops
// as the scheduled loop IR.
#include "gpu_codegen/codegen/grid_stride_loops.h"

#include <algorithm>

#include "lowering/ir/expr_visitor.h"

namespace cppi::gpu {

using namespace codegen;

const ir::Cast* rounding_to_16_bits(const ir::Expr& e) {
  const auto* c = e.as<ir::Cast>();
  const bool narrow = c && (c->dtype == DType::Float16 || c->dtype == DType::BFloat16);
  return narrow && c->value.dtype() == DType::Float32 ? c : nullptr;
}

bool rounds_to_16_bits(const std::vector<ir::Expr>& values) {
  const std::vector<ir::Expr> nodes = ir::post_order(values);
  return std::any_of(nodes.begin(), nodes.end(), [](const ir::Expr& x) { return rounding_to_16_bits(x) != nullptr; });
}

For gpu_loop(std::string var, Bound hi, LoopKind kind, int64_t step, int threads, Stmt body) {
  For l;
  l.var = std::move(var);
  l.lo = Bound::constant(0);
  l.hi = std::move(hi);
  l.kind = kind;
  l.step = step;
  l.threads = threads;
  l.body = std::move(body);
  return l;
}

namespace {

/// Whether pairing the lanes of `value` pays: it rounds float to 16 bits
/// where the lanes differ (by `lane_var`, the innermost outer variable), so
/// two lanes' roundings can be one packed conversion. Roundings the lanes
/// share are computed once, before the lane loop, and do not count.
bool rounds_per_lane(const ir::Expr& value, const std::string& lane_var) {
  const std::vector<ir::Expr> nodes = ir::post_order({value});
  return std::any_of(nodes.begin(), nodes.end(),
                     [&](const ir::Expr& x) { return rounding_to_16_bits(x) && ir::free_vars(x).count(lane_var); });
}

/// Per store, the GpuLanes loop that computes its V lanes.
Stmt lane_loops(const ir::Kernel& k, const ir::GpuSchedule& g) {
  const int v = g.elements_per_thread;
  const std::string inner = k.outer.back().var.as<ir::IndexVar>()->name;
  std::vector<Stmt> loops{stmt(TargetPart{grid_part::kOuterVars, {"idx"}})};
  for (const auto& stage : k.stages) {
    for (const auto& st : std::get<ir::PointwiseStage>(stage).stores) {
      const int64_t step = !g.flat_vector && v % 2 == 0 && rounds_per_lane(st.value, inner) ? 2 : 1;
      loops.push_back(stmt(gpu_loop("vl", Bound::constant(v), LoopKind::GpuLanes, step, 0, stmt(StageStores{{st}}))));
    }
  }
  return block(std::move(loops));
}

}  // namespace

Stmt lower_grid_stride_loops(const ir::Kernel& k, const ir::GpuSchedule& g,
                             const std::function<std::string(const ir::IndexExpr&)>& index) {
  std::vector<ir::IndexExpr> extents;
  for (const auto& l : k.outer) extents.push_back(l.extent);
  Stmt body = g.elements_per_thread > 1
                  ? lane_loops(k, g)
                  : block({stmt(TargetPart{grid_part::kUsedOuterVars, {"idx"}}), stmt(Stages{})});
  return block({stmt(Let{"n", index(ir::product(extents))}),
                stmt(gpu_loop("idx", Bound::symbolic("n"), LoopKind::GpuGridStride, g.elements_per_thread,
                              g.block_size, std::move(body)))});
}

}  // namespace cppi::gpu
