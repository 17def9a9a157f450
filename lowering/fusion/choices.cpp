#include "lowering/fusion/choices.h"

#include <cstdlib>
#include <numeric>

#include "lowering/ir/expr_visitor.h"

namespace cppi::lowering::fusion {

namespace {

int unary_cost(ir::UnaryOp op) {
  if (ir::is_math_function(op)) return 4;
  switch (op) {
    case ir::UnaryOp::Sqrt:
    case ir::UnaryOp::Rsqrt:
    case ir::UnaryOp::Reciprocal: return 2;
    default: return 1;
  }
}

int binary_cost(ir::BinaryOp op) {
  if (ir::is_math_function(op)) return 4;
  switch (op) {
    case ir::BinaryOp::TrueDiv:
    case ir::BinaryOp::FloorDiv:
    case ir::BinaryOp::TruncDiv:
    case ir::BinaryOp::Fmod:
    case ir::BinaryOp::Remainder: return 2;
    default: return 1;
  }
}

class CostCounter : public ir::ExprVisitor {
 public:
  int cost = 0;

 protected:
  void visit(const ir::Load& n) override {
    cost += 1;
    ExprVisitor::visit(n);
  }
  void visit(const ir::Cast& n) override {
    cost += 1;
    ExprVisitor::visit(n);
  }
  void visit(const ir::Unary& n) override {
    cost += unary_cost(n.op);
    ExprVisitor::visit(n);
  }
  void visit(const ir::Binary& n) override {
    cost += binary_cost(n.op);
    ExprVisitor::visit(n);
  }
  void visit(const ir::Compare& n) override {
    cost += 1;
    ExprVisitor::visit(n);
  }
  void visit(const ir::Where& n) override {
    cost += 1;
    ExprVisitor::visit(n);
  }
  void visit(const ir::Random& n) override {
    cost += 8;
    ExprVisitor::visit(n);
  }
};


bool reads(const ir::Expr& e, const std::string& buffer) {
  for (const ir::Expr& x : ir::post_order({e})) {
    const auto* l = x.as<ir::Load>();
    if (l && l->buffer->name == buffer) return true;
  }
  return false;
}

class ExactComparisonFinder : public ir::ExprVisitor {
 public:
  explicit ExactComparisonFinder(const std::string& b) : buffer(b) {}
  const std::string& buffer;
  bool found = false;

 protected:
  void visit(const ir::Compare& n) override {
    if ((n.op == ir::CompareOp::Eq || n.op == ir::CompareOp::Ne) && is_floating(n.lhs.dtype())) {
      found |= reads(n.lhs, buffer) || reads(n.rhs, buffer);
    }
    ExprVisitor::visit(n);
  }
};

}  // namespace

bool varies_across_kernels(const ir::Expr& e) { return ir::calls_math_function(e); }

bool compares_exactly(const ir::Expr& e, const std::string& buffer) {
  ExactComparisonFinder f(buffer);
  f.walk(e);
  return f.found;
}

int recompute_cost(const ir::Expr& e) {
  CostCounter c;
  c.walk(e);
  return c.cost;
}

int invariant_cost(const ir::Expr& e, const std::string& var) {
  if (e.kind() == ir::ExprKind::Constant) return 0;
  if (!ir::free_vars(e).count(var)) return recompute_cost(e);
  int cost = 0;
  for (const ir::Expr& operand : ir::operands(e)) cost += invariant_cost(operand, var);
  return cost;
}

std::optional<std::string> why_not_recompute(const FusionHeuristics& h, int cost, int reads, bool broadcast,
                                             bool outer_broadcast) {
  if (broadcast && cost > h.expensive_cost) {
    return cat("would recompute an expensive producer for every element it is broadcast to (cost ", cost,
               " per element)");
  }
  if (outer_broadcast && cost > h.outer_broadcast_cost) {
    return cat("would recompute a producer that varies along its reader's inner loop for every outer iteration (cost ",
               cost, " per element)");
  }
  if (cost <= h.cheap_cost) return std::nullopt;
  if (reads <= 1) return std::nullopt;
  if (reads <= h.max_recompute_reads && cost <= h.expensive_cost) return std::nullopt;
  return cat("would recompute an expensive producer ", reads, " times (cost ", cost, " per element)");
}

std::optional<std::string> why_not_reload(const FusionHeuristics& h, int whole_loads, int reads, bool cuda) {
  if (reads <= 1 || whole_loads <= (cuda ? h.cuda_max_shared_producer_loads : h.max_shared_producer_loads)) {
    return std::nullopt;
  }
  return cat("would load its ", whole_loads, " input buffers again at each of ", reads,
             " reads: stored once instead");
}

std::optional<std::string> why_not_loops_without_outer(const FusionHeuristics& h, size_t outer_loops,
                                                       size_t stage_loops, std::optional<int64_t> stage_elements) {
  if (!h.epilogues_need_outer_loops || outer_loops > 0 || stage_loops == 0) return std::nullopt;
  if (stage_elements && *stage_elements <= h.serial_stage_elements) return std::nullopt;
  return "the reduction has no outer loop: a pointwise loop fused with it would run serially";
}

std::optional<std::string> why_not_fuse_independent(bool kernel_stores_contiguous, bool node_stores_contiguous) {
  if (kernel_stores_contiguous == node_stores_contiguous) return std::nullopt;
  return std::string("independent loops storing along different axes would not vectorise together");
}

std::optional<std::string> why_not_permute(const FusionHeuristics& h, int cost, std::optional<int64_t> stage_elements,
                                           std::optional<int64_t> rows, std::optional<int64_t> row_stride_bytes) {
  if (cost <= h.cheap_cost) {
    return cat("reordering its loops to join: its work per element (cost ", cost, ", at most ", h.cheap_cost,
               ") would not repay another pass over each block of columns");
  }
  if (!stage_elements || *stage_elements > h.max_permuted_stage_elements) {
    return cat("reordering its loops to join would leave a stage of ",
               stage_elements ? std::to_string(*stage_elements) : std::string("a symbolic number of"),
               " elements per outer iteration (more than ", h.max_permuted_stage_elements, ")");
  }
  if (!rows || !row_stride_bytes || *row_stride_bytes == 0) {
    return std::string("reordering its loops to join: the stage's stores do not move by a known stride");
  }
  const int64_t per_set = *rows * std::gcd(std::llabs(*row_stride_bytes), h.l2_set_period) / h.l2_set_period;
  if (per_set > h.l2_ways) {
    return cat("reordering its loops to join: its ", *rows, " rows ", *row_stride_bytes, " bytes apart put ", per_set,
               " lines on each L2 set (more than ", h.l2_ways, " ways), so the kernel's later passes would miss");
  }
  return std::nullopt;
}

std::optional<std::string> why_not_grow(const FusionHeuristics& h, size_t nodes) {
  if (static_cast<int>(nodes) <= h.max_fusion_size) return std::nullopt;
  return cat("the kernel already has ", h.max_fusion_size, " nodes (max_fusion_size)");
}

}  // namespace cppi::lowering::fusion
