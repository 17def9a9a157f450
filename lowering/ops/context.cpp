#include "lowering/ops/context.h"

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {

ir::IndexExpr view_var(int i) { return ir::var("v" + std::to_string(i)); }

std::vector<ir::IndexExpr> view_vars(size_t n) {
  std::vector<ir::IndexExpr> out;
  for (size_t i = 0; i < n; ++i) out.push_back(view_var(static_cast<int>(i)));
  return out;
}

namespace {
ir::VarRanges view_ranges(const std::vector<ir::IndexExpr>& sizes) {
  ir::VarRanges r;
  for (size_t i = 0; i < sizes.size(); ++i) r["v" + std::to_string(i)] = sizes[i];
  return r;
}

ir::VarRanges ranges_of(const std::vector<ir::IndexExpr>& vars, const std::vector<ir::IndexExpr>& extents) {
  ir::VarRanges r;
  for (size_t i = 0; i < vars.size(); ++i) r[vars[i].as<ir::IndexVar>()->name] = extents[i];
  return r;
}
}  // namespace

TensorRef TensorRef::of_buffer(const ir::BufferPtr& buffer, ir::IndexExpr storage_offset) {
  TensorRef t;
  t.dtype = buffer->dtype;
  t.device = buffer->device;
  t.sizes = buffer->layout.sizes;
  t.buffer = buffer;
  t.index = buffer->layout.index(view_vars(buffer->layout.rank()));
  t.buffer_storage_offset = std::move(storage_offset);
  return t;
}

TensorRef TensorRef::view(std::vector<ir::IndexExpr> new_sizes, const std::vector<ir::IndexExpr>& base_coords) const {
  std::map<std::string, ir::IndexExpr> sub;
  for (size_t i = 0; i < base_coords.size(); ++i) sub["v" + std::to_string(i)] = base_coords[i];
  TensorRef t = *this;
  t.index = ir::simplify(ir::substitute(index, sub), view_ranges(new_sizes));
  t.sizes = std::move(new_sizes);
  t.is_view = true;
  return t;
}

DType Scalar::category() const {
  switch (kind) {
    case Kind::Bool: return DType::Bool;
    case Kind::Float:
    case Kind::SymbolicFloat: return DType::Float64;
    default: return DType::Int64;
  }
}

ir::Expr Scalar::as_expr(DType dtype) const {
  switch (kind) {
    case Kind::Bool: return ir::Constant::make(static_cast<double>(i), dtype);
    case Kind::Int:
      if (is_floating(dtype)) return ir::const_float(static_cast<double>(i), dtype);
      return ir::Constant::make_int(dtype == DType::Bool ? (i != 0) : i, dtype);
    case Kind::Float: return ir::Constant::make(f, dtype);
    case Kind::Symbolic: return ir::cast(ir::IndexValue::make(sym), dtype);
    case Kind::SymbolicFloat: return ir::cast(fexpr, dtype);
  }
  return ir::Constant::make(0, dtype);
}

// --- context ---------------------------------------------------------------------------

namespace {
/// The ATen ops whose lowerings read each operand through its layout, so
/// that any strides give the same kernel results: the pointwise and
/// reduction families and the copies.
const std::set<std::string>& index_readers() {
  static const std::set<std::string> readers = [] {
    Registry r;
    register_pointwise_lowerings(r);
    register_reduction_lowerings(r);
    std::set<std::string> targets{"aten.clone.default", "aten._to_copy.default"};
    for (auto& t : r.targets()) targets.insert(std::move(t));
    return targets;
  }();
  return readers;
}

void for_each_node_arg(const Arg& a, const std::function<void(int)>& f) {
  if (a.kind == Arg::Kind::Node) f(static_cast<int>(a.i));
  for (const auto& e : a.list) for_each_node_arg(e, f);
}

void for_each_operand(const Node& n, const std::function<void(int)>& f) {
  for (const auto& a : n.args) for_each_node_arg(a, f);
  for (const auto& [key, a] : n.kwargs) for_each_node_arg(a, f);
}

/// Whether `meta`'s innermost dim (of more than one element) is its last.
bool last_dim_innermost(const TensorMeta& meta) {
  for (int d = meta.rank() - 1; d >= 0; --d) {
    const auto size = to_index(meta.sizes[d]);
    if (size.is_constant(1)) continue;
    return to_index(meta.strides[d]).is_constant(1);
  }
  return false;
}

/// Per node: whether its value is an intermediate to store row-major rather
/// than in its traced strides (see LoweringContext::result_buffer). In graph
/// order, so that a value stored row-major counts as such for its readers.
std::vector<bool> row_major_results(const Graph& graph, const std::set<int>& outputs) {
  const size_t n = graph.nodes.size();
  std::vector<bool> only_index_readers(n, true), read(n, false), reader(n, false);
  for (size_t r = 0; r < n; ++r) {
    const Node& node = graph.nodes[r];
    reader[r] = node.op == Node::Op::CallFunction && index_readers().count(node.target) > 0;
    for_each_operand(node, [&](int i) {
      read[i] = true;
      if (!reader[r]) only_index_readers[i] = false;
    });
  }
  std::vector<bool> row_major(n, false), chosen(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph.nodes[i];
    if (node.value.kind != ValueInfo::Kind::Tensor) continue;
    const TensorMeta& meta = node.value.tensor;
    row_major[i] = last_dim_innermost(meta);
    // Only what an index reader computes (views keep their base's layout).
    if (row_major[i] || !reader[i] || !read[i] || !only_index_readers[i] || outputs.count(static_cast<int>(i)))
      continue;
    bool operand_row_major = false;
    for_each_operand(node, [&](int o) { operand_row_major = operand_row_major || row_major[o]; });
    chosen[i] = row_major[i] = operand_row_major;
  }
  return chosen;
}
}  // namespace

LoweringContext::LoweringContext(const Graph& graph, const LoweringOptions& options, Remarks& remarks)
    : graph_(graph), options_(options), remarks_(remarks), values_(graph.nodes.size()) {
  for (const auto& a : graph.output().args) for_each_node_arg(a, [&](int i) { outputs_.insert(i); });
  row_major_ = row_major_results(graph, outputs_);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.op == Node::Op::CallFunction && n.target == "getitem" && n.args.size() == 2 &&
        n.args[0].kind == Arg::Kind::Node && n.args[1].kind == Arg::Kind::Int) {
      getitems_.emplace(std::make_pair(static_cast<int>(n.args[0].i), static_cast<int>(n.args[1].i)),
                        static_cast<int>(i));
    }
  }
}

int LoweringContext::getitem_node(int node, int k) const {
  auto it = getitems_.find({node, k});
  return it == getitems_.end() ? -1 : it->second;
}

std::string LoweringContext::fresh_buffer_name(const std::string& base) {
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k) name = cat(base, "_", k);
  used_names_.insert(name);
  return name;
}

std::string LoweringContext::fresh_node_name(const std::string& base) { return fresh_buffer_name("op_" + base); }

ir::BufferPtr LoweringContext::graph_buffer(int node, const TensorMeta& meta, ir::BufferKind kind) {
  ir::Layout layout;
  layout.sizes = to_index(meta.sizes);
  layout.strides = to_index(meta.strides);
  return bound(node, ir::Buffer::make(fresh_buffer_name(graph_.nodes[node].name), meta.dtype, ir_device(meta), kind,
                                      std::move(layout), /*layout_fixed=*/true));
}

ir::BufferPtr LoweringContext::bound(int node, ir::BufferPtr buffer) {
  bindings_[buffer->name] = node;
  return buffer;
}

ir::BufferPtr LoweringContext::result_buffer(int node, const TensorMeta& meta) {
  if (is_graph_output(node)) return graph_buffer(node, meta, ir::BufferKind::GraphOutput);
  if (!row_major_[node] || !to_index(meta.storage_offset).is_constant(0))
    return graph_buffer(node, meta, ir::BufferKind::Intermediate);
  return bound(node, ir::Buffer::make_contiguous(fresh_buffer_name(graph_.nodes[node].name), meta.dtype,
                                                 ir_device(meta), ir::BufferKind::Intermediate, to_index(meta.sizes)));
}

ir::BufferPtr LoweringContext::temp_buffer(const std::string& hint, DType dtype, ir::Device device,
                                           std::vector<ir::IndexExpr> sizes) {
  return ir::Buffer::make_contiguous(fresh_buffer_name(hint), dtype, device, ir::BufferKind::Intermediate,
                                     std::move(sizes));
}

LoweringContext::RandomStream LoweringContext::random_stream(ir::Device device, int device_index,
                                                            const ir::IndexExpr& count) {
  const Seed* seed = nullptr;
  for (const auto& s : seeds_)
    if (s.device == device && s.device_index == device_index) seed = &s;
  if (!seed) {
    std::string base = device == ir::Device::CPU ? "seed_cpu" : cat("seed_cuda", device_index);
    auto buffer = ir::Buffer::make_contiguous(fresh_buffer_name(base), DType::Int64, device, ir::BufferKind::GraphInput,
                                              {ir::index_const(1)});
    seeds_.push_back({device, device_index, buffer});
    seed = &seeds_.back();
  }
  RandomStream out{ir::load(seed->buffer, ir::index_const(0)), next_random_offset_};
  next_random_offset_ = ir::simplify(next_random_offset_ + count, {});
  return out;
}

void LoweringContext::emit(ir::ComputeNode node) { result_.program.emplace_back(std::move(node)); }

void LoweringContext::ensure_runtime(int node) {
  NodeValue& v = values_[node];
  if (v.runtime_ready) return;
  // A view, a symbolic value or an alias: cheap for ATen to recompute from
  // its inputs, which must be available first.
  emit_aten(node, /*is_extern=*/false, /*recomputes=*/true);
}

void LoweringContext::emit_aten(int node, bool is_extern, bool recomputes) {
  std::vector<int> reads;
  std::function<void(const Arg&)> visit = [&](const Arg& a) {
    if (a.kind == Arg::Kind::Node) {
      ensure_runtime(static_cast<int>(a.i));
      reads.push_back(static_cast<int>(a.i));
    }
    for (const auto& e : a.list) visit(e);
  };
  const Node& n = graph_.nodes[node];
  for (const auto& a : n.args) visit(a);
  for (const auto& [k, a] : n.kwargs) visit(a);
  result_.program.emplace_back(AtenItem{node, is_extern, std::move(reads), recomputes});
  values_[node].runtime_ready = true;
}

void LoweringContext::rollback(const Mark& m) {
  result_.program.resize(m.program);
  for (auto it = bindings_.begin(); it != bindings_.end();) {
    if (!m.names.count(it->first)) {
      it = bindings_.erase(it);
    } else {
      ++it;
    }
  }
  used_names_ = m.names;
  seeds_.erase(seeds_.begin() + static_cast<std::ptrdiff_t>(m.seeds), seeds_.end());
}

LoweredGraph LoweringContext::finish() {
  std::set<std::string> seen;
  auto add = [&](const ir::BufferPtr& b) {
    if (!b || !seen.insert(b->name).second) return;
    for (const auto& s : seeds_) {
      if (s.buffer->name == b->name) {
        result_.buffers.push_back({b, -1, /*is_seed=*/true, s.device_index});
        return;
      }
    }
    auto it = bindings_.find(b->name);
    result_.buffers.push_back({b, it == bindings_.end() ? -1 : it->second});
  };
  for (const auto& item : result_.program) {
    if (auto* n = std::get_if<ir::ComputeNode>(&item)) {
      for (const auto& a : ir::reads(*n)) add(a.buffer);
      for (const auto& a : ir::writes(*n)) add(a.buffer);
    }
  }
  return std::move(result_);
}

// --- bodies ------------------------------------------------------------------------------

ir::Device ir_device(const TensorMeta& meta) {
  return meta.device == Device::CUDA ? ir::Device::CUDA : ir::Device::CPU;
}

ir::IndexExpr to_index(const SizeExpr& e) {
  switch (e.kind) {
    case SizeExpr::Kind::Const: return ir::index_const(e.value);
    case SizeExpr::Kind::Symbol: return ir::sym(e.symbol);
    case SizeExpr::Kind::Add: return ir::sum(to_index(e.operands));
    case SizeExpr::Kind::Mul: return ir::product(to_index(e.operands));
    case SizeExpr::Kind::FloorDiv: return ir::floordiv(to_index(e.operands.at(0)), to_index(e.operands.at(1)));
    case SizeExpr::Kind::Mod: return ir::mod(to_index(e.operands.at(0)), to_index(e.operands.at(1)));
    case SizeExpr::Kind::Min:
    case SizeExpr::Kind::Max: {
      ir::IndexExpr acc = to_index(e.operands.at(0));
      for (size_t i = 1; i < e.operands.size(); ++i) {
        acc = e.kind == SizeExpr::Kind::Min ? ir::min(acc, to_index(e.operands[i])) : ir::max(acc, to_index(e.operands[i]));
      }
      return acc;
    }
  }
  return ir::index_const(0);
}

std::vector<ir::IndexExpr> to_index(const std::vector<SizeExpr>& e) {
  std::vector<ir::IndexExpr> out;
  for (const auto& x : e) out.push_back(to_index(x));
  return out;
}

ir::IndexExpr element_index(const TensorRef& t, const std::vector<ir::IndexExpr>& coords) {
  std::map<std::string, ir::IndexExpr> sub;
  for (size_t i = 0; i < coords.size(); ++i) sub["v" + std::to_string(i)] = coords[i];
  return ir::substitute(t.index, sub);
}

ir::Expr load(const TensorRef& t, const std::vector<ir::IndexExpr>& coords, ir::Expr mask) {
  return ir::load(t.buffer, element_index(t, coords), std::move(mask));
}

ir::Expr load_broadcast(const TensorRef& t, const std::vector<ir::IndexExpr>& coords) {
  size_t n = coords.size(), k = t.rank();
  std::vector<ir::IndexExpr> c(k);
  for (size_t j = 0; j < k; ++j) c[j] = t.sizes[j].is_constant(1) ? ir::index_const(0) : coords[n - k + j];
  return load(t, c);
}

Status check_broadcast(const TensorRef& t, const std::vector<ir::IndexExpr>& out_sizes) {
  if (t.rank() > out_sizes.size()) return Error::unsupported("operand has a higher rank than the result");
  const size_t shift = out_sizes.size() - t.rank();
  for (size_t j = 0; j < t.rank(); ++j) {
    if (t.sizes[j].is_constant(1) || t.sizes[j] == out_sizes[j + shift]) continue;
    return Error::unsupported(cat("cannot tell whether size ", ir::to_string(t.sizes[j]), " broadcasts against ",
                                  ir::to_string(out_sizes[j + shift])));
  }
  return Status::success();
}

void emit_pointwise_store(LoweringContext& ctx, const std::string& origin, const std::vector<ir::IndexExpr>& ranges,
                          const ir::BufferPtr& out,
                          const std::function<ir::IndexExpr(const std::vector<ir::IndexExpr>&)>& store_at,
                          const BodyFn& body, StoreMode mode) {
  auto vars = ir::pointwise_vars(ranges.size());
  ir::VarRanges vr = ranges_of(vars, ranges);
  ir::Expr value = ir::simplify_indices(ir::cast(body(vars), out->dtype), vr);
  ir::IndexExpr index = ir::simplify(store_at(vars), vr);
  ir::Store store = mode == StoreMode::Accumulate ? ir::Store::make_accumulate(out, std::move(index), value)
                                                  : ir::Store::make(out, std::move(index), value);
  ctx.emit(ir::PointwiseNode::make_with_store(ctx.fresh_node_name(out->name), ranges, std::move(store), {origin}));
}

void emit_pointwise(LoweringContext& ctx, const std::string& origin, const ir::BufferPtr& out, const BodyFn& body) {
  emit_pointwise_store(ctx, origin, out->layout.sizes, out,
                       [&](const std::vector<ir::IndexExpr>& x) { return out->layout.index(x); }, body);
}

}  // namespace cppi::lowering
