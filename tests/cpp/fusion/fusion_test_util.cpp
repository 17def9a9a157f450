#include <set>
#include <variant>

#include "fusion_test_util.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "lowering/ir/interpreter.h"

namespace cppi::lowering::testing {

BufferPtr GraphBuilder::add_buffer(BufferPtr b, int graph_node) {
  graph.buffers.push_back({b, graph_node});
  return b;
}

BufferPtr GraphBuilder::input(const std::string& name, std::vector<IndexExpr> sizes, DType dtype) {
  return add_buffer(ir::Buffer::make_contiguous(name, dtype, device, BufferKind::GraphInput, sizes),
                    next_graph_node_++);
}
BufferPtr GraphBuilder::output(const std::string& name, std::vector<IndexExpr> sizes, DType dtype) {
  return add_buffer(ir::Buffer::make_contiguous(name, dtype, device, BufferKind::GraphOutput, sizes),
                    next_graph_node_++);
}
BufferPtr GraphBuilder::temp(const std::string& name, std::vector<IndexExpr> sizes, DType dtype) {
  return add_buffer(ir::Buffer::make_contiguous(name, dtype, device, BufferKind::Intermediate, sizes), -1);
}
BufferPtr GraphBuilder::graph_value(const std::string& name, std::vector<IndexExpr> sizes, DType dtype) {
  return add_buffer(ir::Buffer::make_contiguous(name, dtype, device, BufferKind::Intermediate, sizes),
                    next_graph_node_++);
}

void GraphBuilder::pointwise(const std::string& origin, const BufferPtr& out, Expr body) {
  node(ir::PointwiseNode::make(origin, out, std::move(body), {origin}));
}

void GraphBuilder::reduction(const std::string& origin, const BufferPtr& out,
                             std::vector<IndexExpr> reduction_ranges, ir::ReductionKind kind, Expr body) {
  node(ir::ReductionNode::make(origin, out, std::move(reduction_ranges), kind, std::move(body), {origin}));
}

void GraphBuilder::node(ir::ComputeNode n) { graph.program.push_back(std::move(n)); }

void GraphBuilder::aten(const BufferPtr& result, bool is_extern, std::optional<std::vector<BufferPtr>> args) {
  // Without named arguments the call reads every graph-bound value that
  // exists when it runs (a graph input, or written by an earlier item): the
  // most conservative ATen call there is.
  std::set<std::string> written;
  for (const auto& item : graph.program) {
    if (const auto* n = std::get_if<ir::ComputeNode>(&item)) {
      for (const auto& w : ir::writes(*n)) written.insert(w.buffer->name);
    } else {
      for (const auto& b : graph.buffers)
        if (b.graph_node == std::get<AtenItem>(item).graph_node) written.insert(b.buffer->name);
    }
  }
  std::vector<int> reads;
  for (const auto& b : graph.buffers) {
    if (b.graph_node < 0 || b.buffer->name == result->name) continue;
    bool exists = b.buffer->kind == BufferKind::GraphInput || written.count(b.buffer->name);
    bool named = false;
    if (args)
      for (const auto& a : *args) named = named || a->name == b.buffer->name;
    if (args ? named : exists) reads.push_back(b.graph_node);
  }
  for (const auto& b : graph.buffers) {
    if (b.buffer->name == result->name) graph.program.push_back(AtenItem{b.graph_node, is_extern, reads});
  }
}

Expr at(const BufferPtr& b, const std::vector<IndexExpr>& coords) { return ir::load(b, b->layout.index(coords)); }
IndexExpr x(int i) { return ir::pointwise_var(i); }
IndexExpr r(int i) { return ir::reduction_var(i); }
Expr f32(double v) { return ir::const_float(v, DType::Float32); }

namespace {

struct Memory {
  std::map<std::string, std::vector<unsigned char>> bytes;

  ir::InterpreterArgs args(const ir::IndexBindings& symbols) {
    ir::InterpreterArgs a;
    a.symbols = symbols;
    for (auto& [name, v] : bytes) a.buffers[name] = v.data();
    return a;
  }
};

Memory allocate(const LoweredGraph& g, const ir::IndexBindings& symbols) {
  Memory m;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (const auto& b : g.buffers) {
    int64_t n = ir::evaluate(b.buffer->layout.storage_size(), symbols);
    auto& v = m.bytes[b.buffer->name];
    v.assign(static_cast<size_t>(n) * dtype_size(b.buffer->dtype), 0);
    if (b.buffer->kind != BufferKind::GraphInput) continue;
    if (b.buffer->dtype == DType::Float32) {
      auto* f = reinterpret_cast<float*>(v.data());
      for (int64_t i = 0; i < n; ++i) f[i] = dist(rng);
    }
  }
  return m;
}

}  // namespace

std::string compare_numerics(const LoweredGraph& lowered, const FusedGraph& fused, const ir::IndexBindings& symbols) {
  Memory reference = allocate(lowered, symbols);
  Memory result = allocate(lowered, symbols);
  for (const auto& item : lowered.program) {
    auto node = std::get_if<ir::ComputeNode>(&item);
    if (!node) return "compare_numerics: ATen items are not supported";
    auto s = ir::interpret(*node, reference.args(symbols));
    if (!s.ok()) return "unfused: " + s.error().message;
  }
  for (const auto& item : fused.program) {
    auto k = std::get_if<ir::KernelPtr>(&item);
    if (!k) return "compare_numerics: ATen items are not supported";
    auto s = ir::interpret(**k, result.args(symbols));
    if (!s.ok()) return "fused: " + s.error().message;
  }
  std::ostringstream errors;
  for (const auto& b : lowered.buffers) {
    bool compared = b.buffer->kind == BufferKind::GraphOutput || b.buffer->kind == BufferKind::GraphInput;
    if (!compared || b.buffer->dtype != DType::Float32) continue;
    const auto* want = reinterpret_cast<const float*>(reference.bytes[b.buffer->name].data());
    const auto* got = reinterpret_cast<const float*>(result.bytes[b.buffer->name].data());
    size_t n = reference.bytes[b.buffer->name].size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      bool same_nan = std::isnan(want[i]) && std::isnan(got[i]);
      if (!same_nan && !(std::fabs(want[i] - got[i]) <= 1.5e-5 + 1.3e-5 * std::fabs(want[i]))) {
        errors << b.buffer->name << "[" << i << "]: want " << want[i] << " got " << got[i] << "\n";
        break;
      }
    }
  }
  return errors.str();
}

std::vector<ir::KernelPtr> kernels(const FusedGraph& fused) {
  std::vector<ir::KernelPtr> out;
  for (const auto& item : fused.program) {
    if (auto k = std::get_if<ir::KernelPtr>(&item)) out.push_back(*k);
  }
  return out;
}

std::string stage_shape(const ir::Kernel& k) {
  std::string out;
  for (const auto& s : k.stages) {
    if (!out.empty()) out += " ";
    if (auto r = std::get_if<ir::ReductionStage>(&s)) {
      out += "R" + std::to_string(r->loops.size());
    } else {
      out += "P" + std::to_string(std::get<ir::PointwiseStage>(s).loops.size());
    }
  }
  return out;
}

bool has_buffer(const FusedGraph& fused, const std::string& name) {
  for (const auto& b : fused.buffers) {
    if (b.buffer->name == name) return true;
  }
  return false;
}

std::string remark_text(const Remarks& remarks) {
  std::ostringstream os;
  for (const auto& r : remarks.all()) os << r.node << " / " << r.other << ": " << r.reason << "\n";
  return os.str();
}

// --- graphs several fusion tests share ----------------------------------------------

using ir::BinaryOp;
using ir::ReductionKind;
using ir::UnaryOp;

FusedGraph run(const LoweredGraph& g, Remarks& remarks, FusionOptions options) {
  return fuse(g, options, remarks);
}

GraphBuilder bias_relu_mul(IndexExpr rows, IndexExpr cols) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto bias = b.input("bias", {cols});
  auto t0 = b.temp("buf0", {rows, cols});
  auto t1 = b.temp("buf1", {rows, cols});
  auto out = b.output("out", {rows, cols});
  b.pointwise("add", t0, ir::binary(BinaryOp::Add, at(xin, {x(0), x(1)}), at(bias, {x(1)})));
  b.pointwise("relu", t1, ir::binary(BinaryOp::Maximum, at(t0, {x(0), x(1)}), f32(0)));
  b.pointwise("mul", out, ir::binary(BinaryOp::Mul, at(t1, {x(0), x(1)}), f32(2)));
  return b;
}

GraphBuilder softmax(IndexExpr rows, IndexExpr cols, bool log) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto amax = b.temp("amax", {rows, 1});
  auto sub = b.temp("sub", {rows, cols});
  auto exp = b.temp("exp", {rows, cols});
  auto sum = b.temp("sum", {rows, 1});
  auto out = b.output("out", {rows, cols});
  b.reduction("amax", amax, {cols}, ReductionKind::Max, at(xin, {x(0), r(0)}));
  b.pointwise("sub", sub, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(amax, {x(0), 0})));
  b.pointwise("exp", exp, ir::unary(UnaryOp::Exp, at(sub, {x(0), x(1)})));
  b.reduction("sum", sum, {cols}, ReductionKind::Sum, at(exp, {x(0), r(0)}));
  if (log) {
    b.pointwise("log_softmax", out,
                ir::binary(BinaryOp::Sub, at(sub, {x(0), x(1)}), ir::unary(UnaryOp::Log, at(sum, {x(0), 0}))));
  } else {
    b.pointwise("div", out, ir::binary(BinaryOp::TrueDiv, at(exp, {x(0), x(1)}), at(sum, {x(0), 0})));
  }
  return b;
}

GraphBuilder column_softmax(IndexExpr rows, IndexExpr cols) {
  GraphBuilder b;
  auto xin = b.input("x", {rows, cols});
  auto amax = b.temp("amax", {1, cols});
  auto exp = b.temp("exp", {rows, cols});
  auto sum = b.temp("sum", {1, cols});
  auto out = b.output("out", {rows, cols});
  b.reduction("amax", amax, {rows}, ReductionKind::Max, at(xin, {r(0), x(1)}));
  b.pointwise("exp", exp, ir::unary(UnaryOp::Exp, ir::binary(BinaryOp::Sub, at(xin, {x(0), x(1)}), at(amax, {0, x(1)}))));
  b.reduction("sum", sum, {rows}, ReductionKind::Sum, at(exp, {r(0), x(1)}));
  b.pointwise("div", out, ir::binary(BinaryOp::TrueDiv, at(exp, {x(0), x(1)}), at(sum, {0, x(1)})));
  return b;
}

}  // namespace cppi::lowering::testing
