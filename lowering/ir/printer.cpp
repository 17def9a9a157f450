#include "lowering/ir/printer.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "lowering/ir/expr_visitor.h"

namespace cppi::ir {

namespace {

std::string float_text(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::to_chars_result r;
  if (t == DType::Float64) {
    r = std::to_chars(buf, buf + sizeof(buf), v);
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  }
  return std::string(buf, r.ptr);
}

std::string constant_text(const Constant& c) {
  if (c.dtype == DType::Bool) return c.int_value ? "true" : "false";
  std::string name(dtype_name(c.dtype));
  if (is_floating(c.dtype)) return name + "(" + float_text(c.float_value, c.dtype) + ")";
  return name + "(" + std::to_string(c.int_value) + ")";
}

std::string load_text(const Load& l, const std::string& mask) {
  std::string s = "load " + l.buffer->name + "[" + to_string(l.index) + "]";
  if (l.mask.defined()) s += " if " + mask;
  return s;
}

// The text of one node given the texts of operands(e).
std::string node_text(const Expr& e, const std::vector<std::string>& ops) {
  switch (e.kind()) {
    case ExprKind::Constant: return constant_text(*e.as<Constant>());
    case ExprKind::Load: {
      auto l = e.as<Load>();
      return load_text(*l, l->mask.defined() ? ops.back() : "");  // indirect values come first
    }
    case ExprKind::IndexValue: return "index(" + to_string(e.as<IndexValue>()->index) + ")";
    case ExprKind::LocalRef: return e.as<LocalRef>()->name;
    case ExprKind::Cast: return std::string("cast<") + std::string(dtype_name(e.dtype())) + ">(" + ops[0] + ")";
    case ExprKind::Unary: return std::string(to_string(e.as<Unary>()->op)) + "(" + ops[0] + ")";
    case ExprKind::Binary: return std::string(to_string(e.as<Binary>()->op)) + "(" + ops[0] + ", " + ops[1] + ")";
    case ExprKind::Compare: return std::string(to_string(e.as<Compare>()->op)) + "(" + ops[0] + ", " + ops[1] + ")";
    case ExprKind::Where: return "where(" + ops[0] + ", " + ops[1] + ", " + ops[2] + ")";
    case ExprKind::Random: {
      auto r = e.as<Random>();
      return std::string(to_string(r->random_kind)) + "(seed=" + ops[0] + ", offset=" + to_string(r->offset) + ")";
    }
  }
  return "?";
}

std::string inline_text(const Expr& e) {
  if (!e.defined()) return "<null>";
  std::vector<std::string> ops;
  for (const auto& o : operands(e)) ops.push_back(inline_text(o));
  return node_text(e, ops);
}

bool prints_inline(const Expr& e) { return e.kind() == ExprKind::Constant || e.kind() == ExprKind::LocalRef; }

// Prints bodies in SSA form; names restart at t0 for each printer.
class BodyPrinter {
 public:
  BodyPrinter(std::ostream& os, std::string indent) : os_(os), indent_(std::move(indent)) {}

  /// Emits lines for `e` and everything below it not yet emitted; returns its name.
  std::string emit(const Expr& e) {
    for (const Expr& n : post_order({e})) {
      if (prints_inline(n) || names_.count(n.get())) continue;
      std::vector<std::string> ops;
      for (const auto& o : operands(n)) ops.push_back(name_of(o));
      std::string name = "t" + std::to_string(names_.size());
      os_ << indent_ << name << ": " << dtype_name(n.dtype()) << " = " << node_text(n, ops) << "\n";
      names_.emplace(n.get(), name);
    }
    return name_of(e);
  }

 private:
  std::string name_of(const Expr& e) const {
    if (prints_inline(e)) return node_text(e, {});
    return names_.at(e.get());
  }

  std::ostream& os_;
  std::string indent_;
  std::unordered_map<const ExprNode*, std::string> names_;
};

std::string join_origins(const std::vector<std::string>& origins) {
  if (origins.empty()) return "";
  std::string s = " origins=[";
  for (size_t i = 0; i < origins.size(); ++i) s += (i ? ", " : "") + origins[i];
  return s + "]";
}

std::string ranges_text(const std::vector<IndexExpr>& vars, const std::vector<IndexExpr>& extents) {
  std::string s;
  for (size_t i = 0; i < vars.size(); ++i) s += (i ? ", " : "") + to_string(vars[i]) + " < " + to_string(extents[i]);
  return s;
}

std::string list_text(const std::vector<IndexExpr>& list) {
  std::string s = "[";
  for (size_t i = 0; i < list.size(); ++i) s += (i ? ", " : "") + to_string(list[i]);
  return s + "]";
}

void print_pointwise(std::ostream& os, const PointwiseNode& n) {
  os << "pointwise " << n.name << join_origins(n.origins) << "\n";
  os << "  ranges: " << ranges_text(n.vars(), n.ranges) << "\n";
  BodyPrinter body(os, "  ");
  std::string v = body.emit(n.store.value);
  os << "  store " << n.store.buffer->name << "[" << n.store.index << "]" << (n.store.accumulate ? " += " : " = ")
     << v << "\n";
}

void print_reduction(std::ostream& os, const ReductionNode& n) {
  os << "reduction " << n.name << join_origins(n.origins) << "\n";
  os << "  ranges: " << ranges_text(n.vars(), n.ranges) << "\n";
  os << "  reduction_ranges: " << ranges_text(n.reduction_vars(), n.reduction_ranges) << "\n";
  BodyPrinter body(os, "  ");
  std::string v = body.emit(n.body);
  os << "  " << to_string(n.kind) << "(" << v << ") ->";
  auto suffixes = result_suffixes(n.kind);
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    os << (i ? "," : "") << " ";
    if (suffixes[i][0]) os << suffixes[i] << ": ";
    if (n.outputs[i].buffer) {
      os << n.outputs[i].buffer->name << "[" << n.outputs[i].index << "]";
    } else {
      os << "-";
    }
  }
  os << "\n";
}

void print_scan(std::ostream& os, const ScanNode& n) {
  os << "scan " << n.name << join_origins(n.origins) << "\n";
  os << "  ranges: " << ranges_text(n.vars(), n.ranges) << "\n";
  os << "  scan_range: " << ranges_text({n.scan_var()}, {n.scan_range}) << "\n";
  BodyPrinter body(os, "  ");
  std::string v = body.emit(n.body);
  os << "  " << n.output->name << "[" << n.index << "] = running " << to_string(n.kind) << "(" << v << ")\n";
}

std::string loops_text(const std::vector<Loop>& loops) {
  std::string s;
  for (size_t i = 0; i < loops.size(); ++i) {
    s += (i ? ", " : "") + to_string(loops[i].var) + " in [0, " + to_string(loops[i].extent) + ")";
  }
  return s;
}

}  // namespace

std::string to_string(const Expr& e) { return inline_text(e); }
std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << inline_text(e); }

std::string to_string(const Buffer& b) {
  std::ostringstream os;
  os << b.name << ": " << dtype_name(b.dtype) << list_text(b.layout.sizes) << " strides=" << list_text(b.layout.strides)
     << " offset=" << b.layout.offset << " " << to_string(b.device) << " " << to_string(b.kind) << " "
     << (b.layout_fixed ? "fixed" : "flexible");
  return os.str();
}

std::string to_string(const ComputeNode& n) {
  std::ostringstream os;
  if (auto p = std::get_if<PointwiseNodePtr>(&n)) {
    print_pointwise(os, **p);
  } else if (auto sc = std::get_if<ScanNodePtr>(&n)) {
    print_scan(os, **sc);
  } else {
    print_reduction(os, *std::get<ReductionNodePtr>(n));
  }
  return os.str();
}

std::string to_string(const NodeList& nodes) {
  std::ostringstream os;
  for (const auto& b : nodes.buffers) os << to_string(*b) << "\n";
  for (const auto& n : nodes.nodes) os << "\n" << to_string(n);
  return os.str();
}

std::string to_string(const Schedule& s) {
  std::ostringstream os;
  const auto& c = s.cpu;
  os << "cpu: parallel_loops=" << c.parallel_loops << " grain=" << c.grain_size;
  if (c.grain_work > 0) os << " grain_work=" << c.grain_work;
  os << " parallel_reduction=" << (c.parallel_reduction ? "true" : "false") << " vectorized=" << to_string(c.vectorized)
     << " width=" << c.vector_width << " tail=" << to_string(c.tail);
  if (c.column_block > 0) os << " column_block=" << c.column_block << " row_block=" << c.row_block;
  if (c.cascade_block > 0) os << " cascade_block=" << c.cascade_block;
  if (c.vector_accumulators != 1) os << " vector_accumulators=" << c.vector_accumulators;
  if (c.transpose_tile) os << " transpose_tile=true";
  if (c.row_blocks) os << " row_blocks=true";
  if (c.epilogue_in_lanes) os << " epilogue_in_lanes=true";
  if (c.reduction_trees) os << " reduction_trees=true";
  if (!c.vector_loop_splits.empty()) {
    os << " vector_loop_splits=";
    for (size_t i = 0; i < c.vector_loop_splits.size(); ++i) os << (i ? "," : "") << c.vector_loop_splits[i];
  }
  if (c.prefault_outputs) os << " prefault_outputs=true";
  os << "\n";
  const auto& g = s.gpu;
  os << "gpu: mapping=" << to_string(g.mapping) << " block=" << g.block_size << " grid=" << g.grid_size
     << " elements_per_thread=" << g.elements_per_thread;
  if (g.threads_per_column != 1) os << " threads_per_column=" << g.threads_per_column;
  if (g.row_splits != 1) os << " row_splits=" << g.row_splits;
  if (g.cache_vector != 1) os << " cache_vector=" << g.cache_vector;
  if (g.flat_vector) os << " flat_vector=true";
  os << "\n";
  return os.str();
}

namespace {
bool is_default(const Schedule& s) {
  Schedule d;
  const auto &a = s.cpu, &b = d.cpu;
  const auto &g = s.gpu, &h = d.gpu;
  return a.parallel_loops == b.parallel_loops && a.grain_size == b.grain_size && a.grain_work == b.grain_work &&
         a.parallel_reduction == b.parallel_reduction && a.vectorized == b.vectorized &&
         a.vector_width == b.vector_width && a.tail == b.tail && a.column_block == b.column_block &&
         a.row_block == b.row_block && a.cascade_block == b.cascade_block &&
         a.vector_accumulators == b.vector_accumulators && a.prefault_outputs == b.prefault_outputs &&
         a.transpose_tile == b.transpose_tile && a.row_blocks == b.row_blocks &&
         a.epilogue_in_lanes == b.epilogue_in_lanes && a.reduction_trees == b.reduction_trees &&
         a.vector_loop_splits == b.vector_loop_splits && g.mapping == h.mapping &&
         g.block_size == h.block_size && g.grid_size == h.grid_size && g.elements_per_thread == h.elements_per_thread &&
         g.threads_per_column == h.threads_per_column && g.row_splits == h.row_splits &&
         g.cache_vector == h.cache_vector && g.flat_vector == h.flat_vector;
}
}  // namespace

std::string to_string(const Kernel& k) {
  std::ostringstream os;
  os << "kernel " << k.name << " " << to_string(k.device) << join_origins(k.origins) << "\n";
  if (!is_default(k.schedule)) {
    std::istringstream lines(to_string(k.schedule));
    for (std::string line; std::getline(lines, line);) os << "  schedule " << line << "\n";
  }
  std::string indent = "  ";
  if (!k.outer.empty()) {
    os << indent << "for " << loops_text(k.outer) << ":\n";
    indent += "  ";
  }
  for (const auto& stage : k.stages) {
    if (auto r = std::get_if<ReductionStage>(&stage)) {
      os << indent << "reduce " << to_string(r->kind);
      if (!r->loops.empty()) os << " for " << loops_text(r->loops);
      os << ":\n";
      BodyPrinter body(os, indent + "  ");
      std::string v = body.emit(r->body);
      os << indent << "  ";
      for (size_t i = 0; i < r->results.size(); ++i) {
        os << (i ? ", " : "") << r->results[i] << ": " << dtype_name(r->result_dtypes[i]);
      }
      os << " = " << to_string(r->kind) << "(" << v << ")\n";
    } else {
      const auto* sc = std::get_if<ScanStage>(&stage);
      const auto& loops = loops_of(stage);
      const auto& stores = sc ? sc->stores : std::get<PointwiseStage>(stage).stores;
      os << indent << (sc ? "scan" : "pointwise");
      if (sc) os << " " << to_string(sc->kind);
      if (!loops.empty()) os << " for " << loops_text(loops);
      os << ":\n";
      BodyPrinter body(os, indent + "  ");
      if (sc) {
        std::string v = body.emit(sc->body);
        os << indent << "  " << sc->result << ": " << dtype_name(sc->body.dtype()) << " = running "
           << to_string(sc->kind) << "(" << v << ")\n";
      }
      for (const auto& s : stores) {
        std::string v = body.emit(s.value);
        os << indent << "  store " << s.buffer->name << "[" << s.index << "]" << (s.accumulate ? " += " : " = ")
           << v << "\n";
      }
    }
  }
  return os.str();
}

std::string to_string(const std::vector<KernelPtr>& kernels) {
  std::string out;
  for (size_t i = 0; i < kernels.size(); ++i) out += (i ? "\n" : "") + to_string(*kernels[i]);
  return out;
}

}  // namespace cppi::ir
