#include "lowering/ir/node.h"

#include <map>
#include <set>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/node_check.h"

namespace cppi::ir {

IndexExpr pointwise_var(int i) { return var("x" + std::to_string(i)); }
IndexExpr reduction_var(int j) { return var("r" + std::to_string(j)); }

std::vector<IndexExpr> pointwise_vars(size_t n) {
  std::vector<IndexExpr> out;
  for (size_t i = 0; i < n; ++i) out.push_back(pointwise_var(static_cast<int>(i)));
  return out;
}

std::vector<IndexExpr> reduction_vars(size_t n) {
  std::vector<IndexExpr> out;
  for (size_t j = 0; j < n; ++j) out.push_back(reduction_var(static_cast<int>(j)));
  return out;
}

Store Store::make(BufferPtr buffer, IndexExpr index, Expr value) {
  if (!buffer) throw CompilerError(Error::internal("Store: null buffer"));
  if (!index.defined()) throw CompilerError(Error::internal(cat("Store to ", buffer->name, ": null index")));
  if (!value.defined()) throw CompilerError(Error::internal(cat("Store to ", buffer->name, ": null value")));
  if (value.dtype() != buffer->dtype) {
    throw CompilerError(Error::internal(cat("Store to ", buffer->name, " (", dtype_name(buffer->dtype),
                                            "): value is ", dtype_name(value.dtype()), "; insert a Cast")));
  }
  return Store{std::move(buffer), std::move(index), std::move(value)};
}

Store Store::make_accumulate(BufferPtr buffer, IndexExpr index, Expr value) {
  Store s = make(std::move(buffer), std::move(index), std::move(value));
  if (s.buffer->dtype == DType::Bool) {
    throw CompilerError(Error::internal(cat("accumulating store to ", s.buffer->name, ": bool has no add")));
  }
  s.accumulate = true;
  return s;
}

bool accumulate_supported(DType t, Device device) {
  if (device == Device::CPU) return t != DType::Bool;
  return t == DType::Int32 || t == DType::Int64 || t == DType::Float32 || t == DType::Float64;
}

Store Store::with(IndexExpr new_index, Expr new_value) const {
  Store s = make(buffer, std::move(new_index), std::move(new_value));
  s.accumulate = accumulate;
  return s;
}

Expr stored_value(const Store& s) {
  if (!s.accumulate) return s.value;
  const DType t = s.buffer->dtype;
  if (t != DType::Float16 && t != DType::BFloat16) return binary(BinaryOp::Add, load(s.buffer, s.index), s.value);
  // Reduced floats add in float32 and round once, as eager's `*dst += *src`.
  return cast(binary(BinaryOp::Add, cast(load(s.buffer, s.index), DType::Float32), cast(s.value, DType::Float32)), t);
}

// --- shared checks (node_check.h) ------------------------------------------------

namespace detail {

namespace {
class ScopeChecker : public ExprVisitor {
 public:
  ScopeChecker(const std::set<std::string>& vars, const std::map<std::string, DType>* locals)
      : vars_(vars), locals_(locals) {}
  std::string error;

 protected:
  void visit_index(const IndexExpr& index) override {
    if (!error.empty()) return;
    for (const auto& v : free_vars(index)) {
      if (!vars_.count(v)) error = cat("index ", index, " uses loop variable ", v, " that is not in scope");
    }
  }
  void visit(const LocalRef& node) override {
    if (!error.empty()) return;
    if (!locals_) {
      error = cat("LocalRef ", node.name, " outside a kernel");
      return;
    }
    auto it = locals_->find(node.name);
    if (it == locals_->end()) {
      error = cat("LocalRef ", node.name, " is not defined by an earlier stage");
    } else if (it->second != node.dtype) {
      error = cat("LocalRef ", node.name, " has dtype ", dtype_name(node.dtype), " but the stage defines ",
                  dtype_name(it->second));
    }
  }

 private:
  const std::set<std::string>& vars_;
  const std::map<std::string, DType>* locals_;
};
}  // namespace

Status check_index_scope(const IndexExpr& index, const std::set<std::string>& vars, const std::string& what) {
  for (const auto& v : free_vars(index)) {
    if (!vars.count(v)) return Error::internal(cat(what, ": ", index, " uses loop variable ", v, " not in scope"));
  }
  return Status::success();
}

Status check_expr_scope(const Expr& e, const std::set<std::string>& vars,
                        const std::map<std::string, DType>* locals, const std::string& what) {
  ScopeChecker checker(vars, locals);
  checker.walk(e);
  if (!checker.error.empty()) return Error::internal(cat(what, ": ", checker.error));
  return Status::success();
}

Status check_extents(const std::vector<IndexExpr>& extents, const std::string& what) {
  for (const auto& e : extents) {
    if (!e.defined()) return Error::internal(cat(what, ": null extent"));
    if (!free_vars(e).empty()) return Error::internal(cat(what, ": extent ", e, " uses a loop variable"));
  }
  return Status::success();
}

}  // namespace detail

// --- nodes -------------------------------------------------------------------------

namespace {
std::set<std::string> names_of(const std::vector<IndexExpr>& vars) {
  std::set<std::string> out;
  for (const auto& v : vars) out.insert(v.as<IndexVar>()->name);
  return out;
}
#define CPPI_RETURN_IF_ERROR(expr) \
  do {                             \
    Status _s = (expr);            \
    if (!_s.ok()) return _s;       \
  } while (0)
}  // namespace

VarRanges PointwiseNode::var_ranges() const {
  VarRanges out;
  for (size_t i = 0; i < ranges.size(); ++i) out[pointwise_var(static_cast<int>(i)).as<IndexVar>()->name] = ranges[i];
  return out;
}

VarRanges ReductionNode::var_ranges() const {
  VarRanges out;
  for (size_t i = 0; i < ranges.size(); ++i) out["x" + std::to_string(i)] = ranges[i];
  for (size_t j = 0; j < reduction_ranges.size(); ++j) out["r" + std::to_string(j)] = reduction_ranges[j];
  return out;
}

PointwiseNodePtr PointwiseNode::make(std::string name, BufferPtr output, Expr body,
                                     std::vector<std::string> origins) {
  if (!output) throw CompilerError(Error::internal(cat("pointwise node ", name, ": null output")));
  auto ranges = output->layout.sizes;
  auto index = output->layout.index(pointwise_vars(ranges.size()));
  return make_with_store(std::move(name), std::move(ranges), Store::make(output, index, std::move(body)),
                         std::move(origins));
}

PointwiseNodePtr PointwiseNode::make_with_store(std::string name, std::vector<IndexExpr> ranges, Store store,
                                                std::vector<std::string> origins) {
  if (name.empty()) throw CompilerError(Error::internal("pointwise node with an empty name"));
  auto node = PointwiseNodePtr(new PointwiseNode(std::move(name), std::move(ranges), std::move(store), std::move(origins)));
  verify(node).throw_if_error();
  return node;
}

ReductionNodePtr ReductionNode::make(std::string name, std::vector<IndexExpr> ranges,
                                     std::vector<IndexExpr> reduction_ranges, ReductionKind kind, Expr body,
                                     std::vector<ReductionOutput> outputs, std::vector<std::string> origins) {
  if (name.empty()) throw CompilerError(Error::internal("reduction node with an empty name"));
  if (!body.defined()) throw CompilerError(Error::internal(cat("reduction node ", name, ": null body")));
  auto dtypes = reduction_result_dtypes(kind, body.dtype());
  if (!dtypes.ok()) throw CompilerError(Error::internal(cat("reduction node ", name, ": ", dtypes.error().message)));
  if (outputs.size() != dtypes->size()) {
    throw CompilerError(Error::internal(cat("reduction node ", name, ": ", outputs.size(), " outputs for ",
                                            to_string(kind), " which has ", dtypes->size(), " results")));
  }
  bool any = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].buffer) continue;
    any = true;
    if (outputs[i].buffer->dtype != (*dtypes)[i]) {
      throw CompilerError(Error::internal(cat("reduction node ", name, ": output ", outputs[i].buffer->name, " is ",
                                              dtype_name(outputs[i].buffer->dtype), " but result ", i, " is ",
                                              dtype_name((*dtypes)[i]))));
    }
    if (!outputs[i].index.defined()) {
      throw CompilerError(Error::internal(cat("reduction node ", name, ": null output index")));
    }
  }
  if (!any) throw CompilerError(Error::internal(cat("reduction node ", name, ": stores no result")));
  auto node = ReductionNodePtr(new ReductionNode(std::move(name), std::move(ranges), std::move(reduction_ranges), kind,
                                                 std::move(body), std::move(outputs), std::move(dtypes).value(),
                                                 std::move(origins)));
  verify(node).throw_if_error();
  return node;
}

ReductionNodePtr ReductionNode::make(std::string name, BufferPtr output, std::vector<IndexExpr> reduction_ranges,
                                     ReductionKind kind, Expr body, std::vector<std::string> origins) {
  if (!output) throw CompilerError(Error::internal(cat("reduction node ", name, ": null output")));
  auto ranges = output->layout.sizes;
  ReductionOutput out{output, output->layout.index(pointwise_vars(ranges.size()))};
  return make(std::move(name), std::move(ranges), std::move(reduction_ranges), kind, std::move(body), {out},
              std::move(origins));
}

bool is_scan_kind(ReductionKind kind) { return kind == ReductionKind::Sum || kind == ReductionKind::Prod; }

VarRanges ScanNode::var_ranges() const {
  VarRanges out;
  for (size_t i = 0; i < ranges.size(); ++i) out["x" + std::to_string(i)] = ranges[i];
  out["r0"] = scan_range;
  return out;
}

Expr ScanNode::stored(const Expr& running) const {
  return running.dtype() == output->dtype ? running : cast(running, output->dtype);
}

ScanNodePtr ScanNode::make(std::string name, std::vector<IndexExpr> ranges, IndexExpr scan_range, ReductionKind kind,
                           Expr body, BufferPtr output, IndexExpr index, std::vector<std::string> origins) {
  auto fail = [&](const std::string& why) { throw CompilerError(Error::internal(cat("scan node ", name, ": ", why))); };
  if (name.empty()) throw CompilerError(Error::internal("scan node with an empty name"));
  if (!body.defined() || !output || !index.defined() || !scan_range.defined()) fail("null body, output, index or range");
  if (!is_scan_kind(kind)) fail(cat("no ", to_string(kind), " scan (sum and prod are)"));
  if (body.dtype() == DType::Bool) fail("a bool body: cast it to the accumulation type first");
  auto dtypes = reduction_result_dtypes(kind, body.dtype());
  if (!dtypes.ok()) fail(dtypes.error().message);
  auto node = ScanNodePtr(new ScanNode(std::move(name), std::move(ranges), std::move(scan_range), kind, std::move(body),
                                       std::move(output), std::move(index), std::move(origins)));
  verify(node).throw_if_error();
  return node;
}

const std::string& node_name(const ComputeNode& n) {
  return std::visit([](const auto& p) -> const std::string& { return p->name; }, n);
}

Status verify(const ComputeNode& n) {
  if (auto p = std::get_if<PointwiseNodePtr>(&n)) {
    const auto& node = **p;
    std::string what = cat("pointwise node ", node.name);
    CPPI_RETURN_IF_ERROR(detail::check_extents(node.ranges, what));
    auto vars = names_of(node.vars());
    CPPI_RETURN_IF_ERROR(detail::check_index_scope(node.store.index, vars, what));
    return detail::check_expr_scope(node.store.value, vars, nullptr, what);
  }
  if (auto sc = std::get_if<ScanNodePtr>(&n)) {
    const auto& node = **sc;
    std::string what = cat("scan node ", node.name);
    CPPI_RETURN_IF_ERROR(detail::check_extents(node.ranges, what));
    CPPI_RETURN_IF_ERROR(detail::check_extents({node.scan_range}, what));
    auto vars = names_of(node.vars());
    vars.insert(node.scan_var().as<IndexVar>()->name);
    CPPI_RETURN_IF_ERROR(detail::check_index_scope(node.index, vars, what));
    return detail::check_expr_scope(node.body, vars, nullptr, what);
  }
  const auto& node = *std::get<ReductionNodePtr>(n);
  std::string what = cat("reduction node ", node.name);
  CPPI_RETURN_IF_ERROR(detail::check_extents(node.ranges, what));
  CPPI_RETURN_IF_ERROR(detail::check_extents(node.reduction_ranges, what));
  auto outer = names_of(node.vars());
  auto all = outer;
  for (const auto& v : names_of(node.reduction_vars())) all.insert(v);
  for (const auto& out : node.outputs) {
    if (out.buffer) CPPI_RETURN_IF_ERROR(detail::check_index_scope(out.index, outer, what));
  }
  return detail::check_expr_scope(node.body, all, nullptr, what);
}

// --- read / write sets --------------------------------------------------------------

namespace {
class LoadCollector : public ExprVisitor {
 public:
  std::vector<Access> out;

 protected:
  void visit(const Load& node) override {
    for (const auto& a : out) {
      if (a.buffer->name == node.buffer->name && a.index == node.index && a.masked == node.mask.defined()) {
        ExprVisitor::visit(node);
        return;
      }
    }
    out.push_back(Access{node.buffer, node.index, node.mask.defined()});
    ExprVisitor::visit(node);
  }
};
}  // namespace

std::vector<Access> reads(const Expr& e) {
  LoadCollector c;
  c.walk(e);
  return std::move(c.out);
}

std::vector<Access> reads(const ComputeNode& n) {
  if (auto p = std::get_if<PointwiseNodePtr>(&n)) {
    // A scatter's store index reads its index tensor (indirect leaves).
    std::vector<Expr> roots = indirect_values((*p)->store.index);
    if (roots.empty()) return reads((*p)->store.value);
    LoadCollector c;
    c.walk((*p)->store.value);
    for (const auto& r : roots) c.walk(r);
    return std::move(c.out);
  }
  if (auto sc = std::get_if<ScanNodePtr>(&n)) return reads((*sc)->body);
  return reads(std::get<ReductionNodePtr>(n)->body);
}

std::vector<Access> writes(const ComputeNode& n) {
  if (auto p = std::get_if<PointwiseNodePtr>(&n)) return {Access{(*p)->store.buffer, (*p)->store.index, false}};
  if (auto sc = std::get_if<ScanNodePtr>(&n)) return {Access{(*sc)->output, (*sc)->index, false}};
  std::vector<Access> out;
  for (const auto& o : std::get<ReductionNodePtr>(n)->outputs) {
    if (o.buffer) out.push_back(Access{o.buffer, o.index, false});
  }
  return out;
}

Status verify(const NodeList& list) {
  std::map<std::string, BufferPtr> declared;
  for (const auto& b : list.buffers) {
    if (!b) return Error::internal("node list: null buffer");
    if (!declared.emplace(b->name, b).second) return Error::internal(cat("node list: buffer ", b->name, " declared twice"));
  }
  std::set<std::string> written;
  for (const auto& n : list.nodes) {
    const std::string& name = node_name(n);
    CPPI_RETURN_IF_ERROR(verify(n));
    for (const auto& a : reads(n)) {
      auto it = declared.find(a.buffer->name);
      if (it == declared.end()) return Error::internal(cat("node ", name, " reads undeclared buffer ", a.buffer->name));
      if (it->second->kind != BufferKind::GraphInput && !written.count(a.buffer->name)) {
        return Error::internal(cat("node ", name, " reads ", a.buffer->name, " before any node writes it"));
      }
    }
    for (const auto& a : writes(n)) {
      auto it = declared.find(a.buffer->name);
      if (it == declared.end()) return Error::internal(cat("node ", name, " writes undeclared buffer ", a.buffer->name));
      if (it->second->kind == BufferKind::GraphInput) {
        return Error::internal(cat("node ", name, " writes graph input ", a.buffer->name));
      }
      written.insert(a.buffer->name);
    }
  }
  return Status::success();
}

}  // namespace cppi::ir
