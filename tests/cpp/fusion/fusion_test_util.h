/// \file
/// Hand-built LoweredGraphs for the fusion tests, and a numerical check that
/// runs a graph unfused and fused through the IR reference interpreter.
#pragma once

#include <optional>

#include <string>
#include <vector>

#include "lowering/fusion/fusion.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/node.h"

namespace cppi::lowering::testing {

using ir::BufferKind;
using ir::BufferPtr;
using ir::Expr;
using ir::IndexExpr;

/// Builds a LoweredGraph node by node. Every buffer is float32 on the CPU
/// unless told otherwise; a graph input or output is bound to a fresh graph
/// node, an intermediate to none.
class GraphBuilder {
 public:
  BufferPtr input(const std::string& name, std::vector<IndexExpr> sizes, DType dtype = DType::Float32);
  BufferPtr output(const std::string& name, std::vector<IndexExpr> sizes, DType dtype = DType::Float32);
  BufferPtr temp(const std::string& name, std::vector<IndexExpr> sizes, DType dtype = DType::Float32);
  /// A value an ATen item may read: an intermediate bound to a graph node.
  BufferPtr graph_value(const std::string& name, std::vector<IndexExpr> sizes, DType dtype = DType::Float32);
  BufferPtr add_buffer(BufferPtr b, int graph_node);

  /// out[x] = body (body over x0.. of out's sizes).
  void pointwise(const std::string& origin, const BufferPtr& out, Expr body);
  /// out[x] = reduce over r of body; out has the kept (keepdim) sizes.
  void reduction(const std::string& origin, const BufferPtr& out, std::vector<IndexExpr> reduction_ranges,
                 ir::ReductionKind kind, Expr body);
  void node(ir::ComputeNode n);
  /// An ATen call producing `result` that reads `args` (default: every other
  /// graph-bound buffer).
  void aten(const BufferPtr& result, bool is_extern = true, std::optional<std::vector<BufferPtr>> args = std::nullopt);

  LoweredGraph graph;
  /// The device of the buffers made from now on.
  ir::Device device = ir::Device::CPU;

 private:
  int next_graph_node_ = 0;
};

/// Loads of a buffer at coordinates (its layout's index).
Expr at(const BufferPtr& b, const std::vector<IndexExpr>& coords);
IndexExpr x(int i);
IndexExpr r(int i);
Expr f32(double v);

/// Runs `lowered` node by node and `fused` kernel by kernel through the
/// interpreter on the same random inputs and compares every graph output
/// (and every buffer the fused graph still stores that is bound to a graph
/// node). Returns "" when they agree, else a description.
std::string compare_numerics(const LoweredGraph& lowered, const FusedGraph& fused, const ir::IndexBindings& symbols = {});

std::vector<ir::KernelPtr> kernels(const FusedGraph& fused);
/// "R3 P1 P0": one letter per stage (Reduction / Pointwise) and its loop count.
std::string stage_shape(const ir::Kernel& k);
bool has_buffer(const FusedGraph& fused, const std::string& name);
std::string remark_text(const Remarks& remarks);

/// fuse() with these options (all on by default).
FusedGraph run(const LoweredGraph& g, Remarks& remarks, FusionOptions options = {});
/// relu(x + bias) * 2 with bias broadcast along rows.
GraphBuilder bias_relu_mul(IndexExpr rows = 8, IndexExpr cols = 16);
/// softmax (or log_softmax) over the last dim of [rows, cols] as Inductor decomposes it.
GraphBuilder softmax(IndexExpr rows = 6, IndexExpr cols = 10, bool log = false);
/// softmax over dim 0 of a [rows, cols] input: the reductions run per column
/// (outer loop over cols), the normalising node loops (row, col).
GraphBuilder column_softmax(IndexExpr rows, IndexExpr cols);

}  // namespace cppi::lowering::testing
