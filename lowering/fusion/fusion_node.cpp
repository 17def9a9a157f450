#include "lowering/fusion/fusion_node.h"

#include <cctype>
#include <map>
#include <sstream>

#include "lowering/ir/computed_positions.h"
#include "lowering/ir/expr_visitor.h"

namespace cppi::lowering::fusion {

using ir::ComputeNode;
using ir::Expr;
using ir::IndexExpr;

bool is_reduction(const ComputeNode& n) { return std::holds_alternative<ir::ReductionNodePtr>(n); }

bool is_scan(const ComputeNode& n) { return std::holds_alternative<ir::ScanNodePtr>(n); }

bool accumulates(const ComputeNode& n) {
  const auto* p = std::get_if<ir::PointwiseNodePtr>(&n);
  return p && (*p)->store.accumulate;
}

const std::vector<IndexExpr>& ranges_of(const ComputeNode& n) {
  return std::visit([](const auto& p) -> const std::vector<IndexExpr>& { return p->ranges; }, n);
}

const std::vector<std::string>& origins_of(const ComputeNode& n) {
  return std::visit([](const auto& p) -> const std::vector<std::string>& { return p->origins; }, n);
}

ir::Device device_of(const ComputeNode& n) {
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&n)) return (*p)->store.buffer->device;
  if (auto sc = std::get_if<ir::ScanNodePtr>(&n)) return (*sc)->output->device;
  for (const auto& out : std::get<ir::ReductionNodePtr>(n)->outputs) {
    if (out.buffer) return out.buffer->device;
  }
  return ir::Device::CPU;
}

bool computes_host_scalar(const ComputeNode& n, ir::Device device) {
  const auto* p = std::get_if<ir::PointwiseNodePtr>(&n);
  if (!p || (*p)->store.accumulate || !ir::is_host_scalar(*(*p)->store.buffer, device)) return false;
  for (const auto& a : ir::reads(n))
    if (!ir::is_host_scalar(*a.buffer, device)) return false;
  return true;
}

ir::VarRanges var_ranges_of(const ComputeNode& n) {
  return std::visit([](const auto& p) { return p->var_ranges(); }, n);
}

std::set<std::string> read_buffers(const ComputeNode& n) {
  std::set<std::string> out;
  for (const auto& a : ir::reads(n)) out.insert(a.buffer->name);
  return out;
}

std::set<std::string> written_buffers(const ComputeNode& n) {
  std::set<std::string> out;
  for (const auto& a : ir::writes(n)) out.insert(a.buffer->name);
  return out;
}

Expr value_of(const ComputeNode& n) {
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&n)) return (*p)->store.value;
  if (auto sc = std::get_if<ir::ScanNodePtr>(&n)) return (*sc)->body;
  return std::get<ir::ReductionNodePtr>(n)->body;
}

std::string display_name(const ComputeNode& n) {
  const auto& origins = origins_of(n);
  return origins.empty() ? ir::node_name(n) : origins.front();
}

std::string c_identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::string format_ranges(const std::vector<IndexExpr>& ranges) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranges.size(); ++i) os << (i ? ", " : "") << ranges[i];
  os << "]";
  return os.str();
}

namespace {

/// Renumbers the loops whose extent is not 1; the others' variables become 0.
struct UnitLoopDrop {
  std::vector<IndexExpr> kept;
  std::map<std::string, IndexExpr> replacements;
  bool changed = false;

  UnitLoopDrop(const std::vector<IndexExpr>& extents, IndexExpr (*var_of)(int)) {
    for (size_t i = 0; i < extents.size(); ++i) {
      std::string name = var_of(static_cast<int>(i)).as<ir::IndexVar>()->name;
      if (extents[i].is_constant(1)) {
        replacements[name] = ir::index_const(0);
        changed = true;
      } else {
        if (kept.size() != i) changed = true;
        replacements[name] = var_of(static_cast<int>(kept.size()));
        kept.push_back(extents[i]);
      }
    }
  }
};

/// Adds `mask` to every load in an expression.
class MaskLoads : public ir::ExprMutator {
 public:
  explicit MaskLoads(Expr mask) : mask_(std::move(mask)) {}

 protected:
  Expr visit(const ir::Load& node) override {
    Expr base = ExprMutator::visit(node);
    const auto* l = base.as<ir::Load>();
    Expr mask = l->mask.defined() ? ir::binary(ir::BinaryOp::LogicalAnd, mask_, l->mask) : mask_;
    return ir::load(l->buffer, l->index, mask);
  }

 private:
  Expr mask_;
};

}  // namespace

ComputeNode drop_unit_loops(const ComputeNode& n) {
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&n)) {
    const auto& node = **p;
    UnitLoopDrop drop(node.ranges, &ir::pointwise_var);
    if (!drop.changed) return n;
    auto store = node.store.with(ir::substitute(node.store.index, drop.replacements),
                                 ir::substitute_indices(node.store.value, drop.replacements));
    return ir::PointwiseNode::make_with_store(node.name, drop.kept, store, node.origins);
  }
  if (auto sc = std::get_if<ir::ScanNodePtr>(&n)) {
    // The scan loop stays, whatever its extent: it is the stage's one loop.
    const auto& node = **sc;
    UnitLoopDrop drop(node.ranges, &ir::pointwise_var);
    if (!drop.changed) return n;
    return ir::ScanNode::make(node.name, drop.kept, node.scan_range, node.kind,
                              ir::substitute_indices(node.body, drop.replacements), node.output,
                              ir::substitute(node.index, drop.replacements), node.origins);
  }
  const auto& node = *std::get<ir::ReductionNodePtr>(n);
  UnitLoopDrop outer(node.ranges, &ir::pointwise_var);
  UnitLoopDrop inner(node.reduction_ranges, &ir::reduction_var);
  if (!outer.changed && !inner.changed) return n;
  auto replacements = outer.replacements;
  replacements.insert(inner.replacements.begin(), inner.replacements.end());
  std::vector<ir::ReductionOutput> outputs;
  for (const auto& out : node.outputs) {
    outputs.push_back({out.buffer, out.buffer ? ir::substitute(out.index, replacements) : out.index});
  }
  return ir::ReductionNode::make(node.name, outer.kept, inner.kept, node.kind,
                                 ir::substitute_indices(node.body, replacements), outputs, node.origins);
}

std::map<std::string, IndexExpr> at_point(const ir::PointwiseNode& producer, const std::vector<IndexExpr>& point) {
  const auto vars = producer.vars();
  std::map<std::string, IndexExpr> at;
  for (size_t j = 0; j < vars.size() && j < point.size(); ++j) at[vars[j].as<ir::IndexVar>()->name] = point[j];
  return at;
}

ComputeNode inline_producer(const ComputeNode& reader, const ir::PointwiseNode& producer,
                            const std::vector<ir::Access>& accesses,
                            const std::vector<std::vector<IndexExpr>>& points, std::vector<std::string> origins) {
  auto ranges = var_ranges_of(reader);
  auto value_at = [&](const ir::Load& load) -> Expr {
    const std::vector<IndexExpr>* point = nullptr;
    for (size_t i = 0; i < accesses.size(); ++i) {
      if (accesses[i].index == load.index) point = &points[i];
    }
    if (!point) throw CompilerError(Error::internal(cat("fusion: no producer point for ", load.index)));
    Expr value = ir::simplify_indices(ir::substitute_indices(producer.store.value, at_point(producer, *point)), ranges);
    if (!load.mask.defined()) return value;
    MaskLoads masked(load.mask);
    return ir::where(load.mask, masked.mutate(value), ir::Constant::make(0.0, value.dtype()));
  };
  const std::string& buffer = producer.store.buffer->name;
  if (auto p = std::get_if<ir::PointwiseNodePtr>(&reader)) {
    const auto& node = **p;
    // A scatter's store index may read the producer too (an index tensor).
    // Positions computed from the producer's values (upsampling's arange)
    // may now be index arithmetic.
    auto store = node.store.with(
        ir::resolve_computed_positions(ir::replace_loads(node.store.index, buffer, value_at), ranges),
        ir::resolve_computed_positions(ir::replace_loads(node.store.value, buffer, value_at), ranges));
    return ir::PointwiseNode::make_with_store(node.name, node.ranges, store, std::move(origins));
  }
  if (auto sc = std::get_if<ir::ScanNodePtr>(&reader)) {
    const auto& node = **sc;
    return ir::ScanNode::make(node.name, node.ranges, node.scan_range, node.kind,
                              ir::resolve_computed_positions(ir::replace_loads(node.body, buffer, value_at), ranges),
                              node.output, node.index, std::move(origins));
  }
  const auto& node = *std::get<ir::ReductionNodePtr>(reader);
  return ir::ReductionNode::make(node.name, node.ranges, node.reduction_ranges, node.kind,
                                 ir::resolve_computed_positions(ir::replace_loads(node.body, buffer, value_at), ranges),
                                 node.outputs, std::move(origins));
}

}  // namespace cppi::lowering::fusion
