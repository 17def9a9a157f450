/// \file
/// The imported ATen graph: what AOTAutograd traced, as typed C++ data.
/// `import_graph` validates a Desc produced by python/cppinductor/export.py
/// (format documented there and in tests/cpp/backend/graph_test.cpp);
/// `export_graph` turns a Graph back into the same Desc (round trip).
///
/// Graph-level symbolic sizes are `SizeExpr` trees (constants, size symbols,
/// + * floordiv mod min max); lowering translates them to IR index expressions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lowering/graph/desc.h"
#include "support/dtype.h"
#include "support/status.h"

namespace cppi {

/// An integer expression over graph size symbols, as sympy printed it.
struct SizeExpr {
  enum class Kind { Const, Symbol, Add, Mul, FloorDiv, Mod, Min, Max };
  Kind kind = Kind::Const;
  int64_t value = 0;      // Const
  std::string symbol;     // Symbol
  std::vector<SizeExpr> operands;

  static SizeExpr constant(int64_t v) { return {Kind::Const, v, {}, {}}; }
  static SizeExpr sym(std::string name) { return {Kind::Symbol, 0, std::move(name), {}}; }
  bool is_const() const { return kind == Kind::Const; }
  bool operator==(const SizeExpr& o) const {
    return kind == o.kind && value == o.value && symbol == o.symbol && operands == o.operands;
  }
  /// Value given symbol values (in `Graph::symbols` order); Error if unbound.
  Expected<int64_t> evaluate(const std::vector<std::string>& names,
                             const std::vector<int64_t>& values) const;
  std::string to_string() const;
};

enum class Device { CPU, CUDA };

/// A tensor value's metadata (from FakeTensor).
struct TensorMeta {
  DType dtype = DType::Float32;
  std::vector<SizeExpr> sizes;
  std::vector<SizeExpr> strides;
  SizeExpr storage_offset;
  Device device = Device::CPU;
  int device_index = 0;
  int rank() const { return static_cast<int>(sizes.size()); }
};

/// A SymFloat computed from sizes (var's backward scale 2 / (n - 1)): the
/// float expressions of python/cppinductor/export.py, evaluated in double.
struct FloatExpr {
  enum class Op { Const, ToFloat, Add, Mul, Div };
  Op op = Op::Const;
  double value = 0;             // Const
  SizeExpr size;                // ToFloat: the size converted to double
  std::vector<FloatExpr> args;  // Add, Mul: one or more; Div: numerator, denominator
};

/// What an FX node produces.
struct ValueInfo {
  enum class Kind { None, Tensor, SymInt, SymFloat, SymBool, Int, Float, Bool, Tuple };
  Kind kind = Kind::None;
  TensorMeta tensor;            // Tensor
  SizeExpr sym;                 // SymInt (the expression); Int as a constant
  double number = 0;            // Float / SymFloat hint
  std::optional<FloatExpr> fexpr;  // SymFloat: its expression, when export could describe it
  std::vector<ValueInfo> items; // Tuple
};

/// An argument of an ATen call.
struct Arg {
  enum class Kind { None, Bool, Int, Float, String, DType, Device, Layout, MemoryFormat, Node, SymExpr, List };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;        // Int; Node: index into Graph::nodes
  double f = 0;
  std::string s;        // String / Device / Layout / MemoryFormat
  DType dtype = DType::Float32;
  SizeExpr sym;         // SymExpr
  std::vector<Arg> list;
};

struct Node {
  enum class Op { Placeholder, GetAttr, CallFunction, Output };
  std::string name;
  Op op = Op::CallFunction;
  std::string target;  // "aten.add.Tensor", "getitem", "operator.mul", attr name for GetAttr
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  ValueInfo value;
  std::string stack_trace;  // the user's source line, for provenance comments
};

/// Where a size symbol's value comes from at run time.
struct SymbolBinding {
  std::string symbol;
  int placeholder = -1;  // index among placeholders
  int dim = -1;          // -1: the placeholder itself is a SymInt
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<std::string> symbols;
  std::vector<SymbolBinding> bindings;  // derived at import

  std::vector<int> placeholders() const;
  const Node& output() const { return nodes.back(); }
};

/// Validates and imports a graph description. Unsupported content (a dtype we
/// do not know, a sparse layout, ...) is an Error of kind Unsupported whose
/// message names the node.
Expected<Graph> import_graph(const Desc& desc);
Desc export_graph(const Graph& graph);

const char* to_string(Node::Op op);

}  // namespace cppi
