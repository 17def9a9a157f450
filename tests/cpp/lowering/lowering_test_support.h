/// \file
/// Shared by the lowering tests: graphs built as Descs (the format export.py
/// produces), lowered, and run on the reference interpreter over host memory.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "lowering/graph/graph.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/printer.h"
#include "lowering/ir/scalar_convert.h"
#include "lowering/ops/lower_graph.h"
#include "lowering/ops/registry.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering::test_support {

// --- building graphs -----------------------------------------------------------------------

inline Desc tag(const std::string& t, Desc v) { return Desc(Desc::Dict{{t, std::move(v)}}); }
inline Desc ref(const std::string& n) { return tag("node", n); }

inline Desc::List contiguous_strides(const Desc::List& sizes) {
  Desc::List strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i].is_int() ? sizes[i].as_int() : 1;
  }
  return strides;
}

inline Desc tensor(const std::string& dtype, Desc::List sizes, Desc::List strides = {}, const std::string& device = "cpu") {
  if (strides.empty() && !sizes.empty()) strides = contiguous_strides(sizes);
  return tag("tensor", Desc::Dict{{"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"offset", 0},
                                  {"device", device}});
}

/// A graph under construction: nodes in order, then output().
struct GraphBuilder {
  Desc::List nodes;
  Desc::List symbols;

  GraphBuilder& input(const std::string& name, Desc val) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "placeholder"}, {"target", name}, {"args", Desc::List{}},
                               {"kwargs", Desc::Dict{}}, {"val", std::move(val)}});
    return *this;
  }
  GraphBuilder& call(const std::string& name, const std::string& target, Desc::List args, Desc val,
                     Desc::Dict kwargs = {}) {
    nodes.push_back(Desc::Dict{{"name", name}, {"op", "call_function"}, {"target", target}, {"args", args},
                               {"kwargs", kwargs}, {"val", std::move(val)}});
    return *this;
  }
  Graph output(Desc::List outs) {
    nodes.push_back(Desc::Dict{{"name", "output"}, {"op", "output"}, {"target", "output"},
                               {"args", Desc::List{Desc(outs)}}, {"kwargs", Desc::Dict{}}, {"val", Desc()}});
    auto g = import_graph(Desc(Desc::Dict{{"symbols", symbols}, {"nodes", nodes}}));
    if (!g.ok()) throw std::runtime_error(g.error().message);
    return *g;
  }
};

// --- running lowered graphs ----------------------------------------------------------------

struct Lowered {
  Graph graph;
  LoweredGraph lowered;
  Remarks remarks;
};

inline Lowered lower(Graph g, LoweringOptions options = {}) {
  Lowered out{std::move(g), {}, {}};
  auto r = lower_graph(out.graph, options, out.remarks);
  if (!r.ok()) throw std::runtime_error(r.error().message);
  out.lowered = std::move(*r);
  return out;
}

inline ir::NodeList node_list(const LoweredGraph& lg) {
  ir::NodeList nl;
  for (const auto& b : lg.buffers) nl.buffers.push_back(b.buffer);
  for (const auto& item : lg.program)
    if (auto* n = std::get_if<ir::ComputeNode>(&item)) nl.nodes.push_back(*n);
  return nl;
}

inline std::string printed(const LoweredGraph& lg) { return ir::to_string(node_list(lg)); }

inline void store_scalar(void* base, int64_t idx, DType t, double v) {
  char* p = static_cast<char*>(base) + idx * dtype_size(t);
  switch (t) {
    case DType::Bool: *reinterpret_cast<bool*>(p) = v != 0; break;
    case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case DType::Int8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::Int16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
    case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::Float16: *reinterpret_cast<uint16_t*>(p) = ir::float_to_half(static_cast<float>(v)); break;
    case DType::BFloat16: *reinterpret_cast<uint16_t*>(p) = ir::float_to_bf16(static_cast<float>(v)); break;
    case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    case DType::Float64: *reinterpret_cast<double*>(p) = v; break;
  }
}

inline double load_scalar(const void* base, int64_t idx, DType t) {
  const char* p = static_cast<const char*>(base) + idx * dtype_size(t);
  switch (t) {
    case DType::Bool: return *reinterpret_cast<const bool*>(p);
    case DType::UInt8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Int8: return *reinterpret_cast<const int8_t*>(p);
    case DType::Int16: return *reinterpret_cast<const int16_t*>(p);
    case DType::Int32: return *reinterpret_cast<const int32_t*>(p);
    case DType::Int64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::Float16: return ir::half_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::BFloat16: return ir::bf16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::Float32: return *reinterpret_cast<const float*>(p);
    case DType::Float64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

/// Host memory for every buffer of a lowered graph; values are read and
/// written in logical row-major order through each buffer's layout.
struct Memory {
  const LoweredGraph& lg;
  ir::IndexBindings symbols;
  std::map<std::string, std::vector<double>> storage;  // double-aligned backing

  explicit Memory(const LoweredGraph& g, ir::IndexBindings syms = {}) : lg(g), symbols(std::move(syms)) {
    for (const auto& b : lg.buffers) {
      int64_t n = ir::evaluate(b.buffer->layout.storage_size(), symbols);
      storage[b.buffer->name].assign(static_cast<size_t>(n) + 1, 0.0);
    }
  }
  ir::BufferPtr find(const std::string& name) const {
    for (const auto& b : lg.buffers)
      if (b.buffer->name == name) return b.buffer;
    throw std::runtime_error("no buffer " + name);
  }
  template <typename F>
  void for_each(const ir::Layout& l, F f) const {
    std::vector<int64_t> sizes;
    int64_t total = 1;
    for (const auto& s : l.sizes) {
      sizes.push_back(ir::evaluate(s, symbols));
      total *= sizes.back();
    }
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t rest = flat;
      ir::IndexBindings at = symbols;
      std::vector<ir::IndexExpr> coords;
      for (size_t d = sizes.size(); d-- > 0;) {
        at["c" + std::to_string(d)] = rest % sizes[d];
        rest /= sizes[d];
      }
      for (size_t d = 0; d < sizes.size(); ++d) coords.push_back(ir::var("c" + std::to_string(d)));
      f(flat, ir::evaluate(l.index(coords), at));
    }
  }
  void set(const std::string& name, const std::vector<double>& values) {
    auto b = find(name);
    for_each(b->layout, [&](int64_t flat, int64_t idx) { store_scalar(storage[name].data(), idx, b->dtype, values.at(flat)); });
  }
  std::vector<double> get(const std::string& name) const {
    auto b = find(name);
    std::vector<double> out;
    for_each(b->layout, [&](int64_t, int64_t idx) { out.push_back(load_scalar(storage.at(name).data(), idx, b->dtype)); });
    return out;
  }
  void run() {
    ir::InterpreterArgs args;
    args.symbols = symbols;
    // With element counts, an out-of-bounds access is an error, not a corruption.
    for (const auto& b : lg.buffers)
      args.bind(b.buffer->name, storage[b.buffer->name].data(),
                ir::evaluate(b.buffer->layout.storage_size(), symbols));
    Status st = ir::interpret(node_list(lg), args);
    if (!st.ok()) throw std::runtime_error(st.error().message);
  }
};

inline std::vector<const Remark*> fallbacks(const Lowered& l) {
  std::vector<const Remark*> out;
  for (const auto& r : l.remarks.all())
    if (r.kind == Remark::Kind::Fallback) out.push_back(&r);
  return out;
}

inline void expect_all_lowered(const Lowered& l) {
  for (const auto* r : fallbacks(l)) ADD_FAILURE() << "fallback " << r->node << " (" << r->op << "): " << r->reason;
}

inline void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
    }
  }
}
}  // namespace cppi::lowering::test_support
