/// \file
/// A reference interpreter for the loop IR: small, slow and obviously
/// correct. It runs a Kernel (or a pre-fusion node) on host memory, one
/// element at a time, in scalar double / int64 arithmetic rounded to each
/// node's dtype after every operation (so float32 math is float32 math,
/// computed through double). Lowering and fusion tests use it to check their
/// output without a codegen; codegen tests compare against it.
///
/// Reductions run sequentially in row-major order over the reduction loops
/// (compiled code may reorder sums; compare with a tolerance). Random uses
/// the Philox algorithm documented in expr.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lowering/ir/kernel.h"
#include "lowering/ir/node.h"
#include "support/status.h"

namespace cppi::ir {

/// Base pointers by buffer name (host memory, laid out as the buffer's dtype
/// and index expressions say) and the values of the size symbols.
struct InterpreterArgs {
  /// Fluent setup: InterpreterArgs().bind("a", a_vec).bind("out", out_vec).symbol("s0", 3).
  /// The vector overload also records the element count for bounds checks.
  InterpreterArgs& bind(const std::string& name, void* data, int64_t num_elements = -1) {
    buffers[name] = data;
    if (num_elements >= 0) elements[name] = num_elements;
    return *this;
  }
  template <typename T>
  InterpreterArgs& bind(const std::string& name, std::vector<T>& data) {
    return bind(name, data.data(), static_cast<int64_t>(data.size()));
  }
  InterpreterArgs& symbol(const std::string& name, int64_t value) {
    symbols[name] = value;
    return *this;
  }

  std::unordered_map<std::string, void*> buffers;
  IndexBindings symbols;
  /// Optional: elements available at each base pointer. A load or store
  /// outside [0, n) of a listed buffer is reported as an error naming the
  /// buffer and index (instead of corrupting memory).
  std::unordered_map<std::string, int64_t> elements;
};

/// One value as the interpreter holds it: integral and bool in `i` (bool is
/// 0/1), floats in `f` already rounded to `dtype`.
struct ScalarValue {
  DType dtype = DType::Int64;
  int64_t i = 0;
  double f = 0;

  double as_double() const { return is_floating(dtype) ? f : static_cast<double>(i); }
};

Status interpret(const Kernel& kernel, const InterpreterArgs& args);
Status interpret(const ComputeNode& node, const InterpreterArgs& args);
/// Runs the nodes in order.
Status interpret(const NodeList& nodes, const InterpreterArgs& args);

/// Evaluates one expression with the given loop-variable values (added to
/// the symbols) and LocalRef values. For tests of op semantics.
Expected<ScalarValue> evaluate_expr(const Expr& e, const InterpreterArgs& args, const IndexBindings& vars = {},
                                    const std::unordered_map<std::string, ScalarValue>& locals = {});

/// The Philox4x32-10 block function (Salmon et al. 2011; Random123, Triton).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, uint32_t key0, uint32_t key1);
/// Philox4x32-10 uniform / normal float32 exactly as Random defines them.
float philox_uniform(int64_t seed, int64_t offset);
float philox_normal(int64_t seed, int64_t offset);

}  // namespace cppi::ir
