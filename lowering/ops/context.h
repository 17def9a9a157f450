/// \file
/// The explicit state of one lower_graph() call and the value model the
/// lowerings share.
///
/// Every tensor a lowering reads is a TensorRef: logical sizes plus the
/// element offset into a buffer as an index expression over view variables
/// v0..vn-1 (one per logical dim). A node's own buffer has the identity
/// mapping (its layout index); a view (permute, slice, reshape, ...) only
/// rewrites the mapping, and views of views compose by substitution.
/// Readers load at their loop variables, and the indices are simplified with
/// the loop ranges when the compute node is built, so a reshape of a
/// contiguous buffer ends up as plain affine indices and only the
/// non-contiguous cases keep floordiv/mod.
///
/// No globals: the registry, the graph, the options, the remarks and the
/// result all hang off the LoweringContext passed to each lowering.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lowering/graph/graph.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/node.h"
#include "lowering/lowered_graph.h"
#include "lowering/ops/lower_graph.h"
#include "support/remarks.h"

namespace cppi::lowering {

/// The view variable of logical dim i ("v0", "v1", ...).
ir::IndexExpr view_var(int i);
std::vector<ir::IndexExpr> view_vars(size_t n);

struct TensorRef {
  DType dtype = DType::Float32;
  ir::Device device = ir::Device::CPU;
  std::vector<ir::IndexExpr> sizes;
  ir::BufferPtr buffer;
  /// Element offset of logical element (v0, ..., vn-1) in `buffer`.
  ir::IndexExpr index;
  /// The storage offset (in elements, as in the FX meta) of the buffer's base
  /// pointer: as_strided addresses storage, not the buffer.
  ir::IndexExpr buffer_storage_offset = ir::index_const(0);
  bool is_view = false;

  size_t rank() const { return sizes.size(); }
  /// The whole buffer, identity mapping.
  static TensorRef of_buffer(const ir::BufferPtr& buffer, ir::IndexExpr storage_offset = ir::index_const(0));
  /// A view of this value: `sizes` are the view's, `base_coords` gives the
  /// coordinates in this value of view element (view_var(0), ...).
  TensorRef view(std::vector<ir::IndexExpr> sizes, const std::vector<ir::IndexExpr>& base_coords) const;
};

/// A Python scalar argument: a literal, a symbolic int (SymInt node or
/// symexpr argument) or a float computed from sizes (SymFloat node).
struct Scalar {
  /// Symbolic: a SymInt (`sym`). SymbolicFloat: a SymFloat computed from
  /// sizes (`fexpr`, a float64 expression of IndexValues), which only
  /// elementwise operands take (lowering/ops/elementwise.h); OpCall::scalar
  /// refuses it, so no lowering reads a constant it does not have.
  enum class Kind { Bool, Int, Float, Symbolic, SymbolicFloat };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  ir::IndexExpr sym;
  ir::Expr fexpr;

  static Scalar of_bool(bool b) { return {Kind::Bool, b ? 1 : 0, 0, {}, {}}; }
  static Scalar of_int(int64_t v) { return {Kind::Int, v, 0, {}, {}}; }
  static Scalar of_float(double v) { return {Kind::Float, 0, v, {}, {}}; }
  static Scalar of_sym(ir::IndexExpr e) { return {Kind::Symbolic, 0, 0, std::move(e), {}}; }
  static Scalar of_float_expr(ir::Expr e) { return {Kind::SymbolicFloat, 0, 0, {}, std::move(e)}; }
  bool is_symbolic() const { return kind == Kind::Symbolic || kind == Kind::SymbolicFloat; }
  /// Bool, Int64 or Float64: the category for type promotion.
  DType category() const;
  /// The constant's value (not for symbolic scalars: check is_symbolic()).
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(i); }
  /// The value as an expression of `dtype` (a constant, a cast IndexValue or
  /// the cast float expression).
  ir::Expr as_expr(DType dtype) const;
};

/// What lowering knows about one graph node's value.
struct NodeValue {
  enum class Kind { None, Tensor, Tuple, Scalar };
  Kind kind = Kind::None;
  TensorRef tensor;                          // Tensor
  std::vector<std::optional<TensorRef>> items;  // Tuple: nullopt where the item is not lowered
  Scalar scalar;                             // Scalar (SymInt nodes, number nodes)
  /// The node's runtime slot holds the value (a bound buffer, an executed
  /// AtenItem, a placeholder). Views and symbolic nodes get an AtenItem on
  /// demand when something at run time needs their slot.
  bool runtime_ready = false;
  /// The value is produced at run time by ATen (its tuple items are read
  /// through getitem AtenItems).
  bool from_aten = false;
};

class LoweringContext {
 public:
  LoweringContext(const Graph& graph, const LoweringOptions& options, Remarks& remarks);

  const Graph& graph() const { return graph_; }
  const LoweringOptions& options() const { return options_; }
  Remarks& remarks() { return remarks_; }
  NodeValue& value(int node) { return values_[node]; }
  const NodeValue& value(int node) const { return values_[node]; }
  bool is_graph_output(int node) const { return outputs_.count(node) > 0; }
  /// The getitem node reading item `k` of `node`, or -1.
  int getitem_node(int node, int k) const;

  /// A buffer bound to graph node `node`'s slot with exactly `meta`'s layout
  /// (fixed), named after the node.
  ir::BufferPtr graph_buffer(int node, const TensorMeta& meta, ir::BufferKind kind);
  /// The buffer a lowered node stores its value in: GraphOutput when the
  /// graph returns it, Intermediate otherwise. An intermediate whose last
  /// dim is not its innermost is stored row-major instead when only
  /// index-reading ops read it (pointwise, reductions, copies: not ATen, a
  /// view or the caller) and one of its operands is row-major in its last
  /// dim: Inductor's flexible layouts take their order from the reads. A
  /// permuted value that a residual chain carries on (Whisper's encoder,
  /// from a convolution's output) would otherwise make every reader of the
  /// chain read across rows; channels-last chains between convolutions,
  /// whose operands are all channels-last, stay as traced.
  ir::BufferPtr result_buffer(int node, const TensorMeta& meta);
  /// An internal contiguous intermediate (not a graph value; flexible layout).
  ir::BufferPtr temp_buffer(const std::string& hint, DType dtype, ir::Device device,
                            std::vector<ir::IndexExpr> sizes);

  /// What one random node draws from: the call's seed on its device (a Load
  /// of the seed buffer the runtime fills on every call) and the first of
  /// `count` Philox counters reserved for it. Each random node gets its own
  /// counter range (after the previous node's), so two random nodes of a
  /// graph never share a counter and their values are independent.
  struct RandomStream {
    ir::Expr seed;
    ir::IndexExpr base_offset;
  };
  RandomStream random_stream(ir::Device device, int device_index, const ir::IndexExpr& count);

  /// A unique compute-node name derived from `base`.
  std::string fresh_node_name(const std::string& base);
  void emit(ir::ComputeNode node);
  /// Appends an AtenItem for `node`, first making every node it reads
  /// available at run time.
  void emit_aten(int node, bool is_extern, bool recomputes = false);
  /// Makes node's slot hold its value at run time (AtenItems for views and
  /// symbolic nodes, recursively).
  void ensure_runtime(int node);

  /// Undo point for a lowering that fails halfway.
  struct Mark {
    size_t program = 0;
    std::set<std::string> names;
    size_t seeds = 0;
  };
  Mark mark() const { return {result_.program.size(), used_names_, seeds_.size()}; }
  /// The program so far (items after a mark are what a lowering emitted).
  const std::vector<LoweredGraph::Item>& program() const { return result_.program; }
  void rollback(const Mark& m);

  /// The result; buffers are collected from the compute nodes.
  LoweredGraph finish();

 private:
  std::string fresh_buffer_name(const std::string& base);

  const Graph& graph_;
  const LoweringOptions& options_;
  Remarks& remarks_;
  std::vector<NodeValue> values_;
  /// `buffer`, recorded as graph node `node`'s (bindings_).
  ir::BufferPtr bound(int node, ir::BufferPtr buffer);

  std::set<int> outputs_;
  /// Per node: an intermediate stored row-major, not as traced (result_buffer).
  std::vector<bool> row_major_;
  std::map<std::pair<int, int>, int> getitems_;
  std::map<std::string, int> bindings_;  // buffer name -> graph node
  std::set<std::string> used_names_;
  /// Seed buffers by (device, CUDA index), in creation order.
  struct Seed {
    ir::Device device;
    int device_index;
    ir::BufferPtr buffer;
  };
  std::vector<Seed> seeds_;
  /// The next free Philox counter (random_stream). Not rolled back: a
  /// lowering that gave up leaves a gap, which costs nothing.
  ir::IndexExpr next_random_offset_ = ir::index_const(0);
  LoweredGraph result_;
};

// --- building bodies -------------------------------------------------------------------

/// ir::Device of a graph tensor.
ir::Device ir_device(const TensorMeta& meta);
ir::IndexExpr to_index(const SizeExpr& e);
std::vector<ir::IndexExpr> to_index(const std::vector<SizeExpr>& e);

/// Where `t`'s element at logical coordinates `coords` sits in its buffer.
ir::IndexExpr element_index(const TensorRef& t, const std::vector<ir::IndexExpr>& coords);
/// `t` at logical coordinates `coords` (optionally masked).
ir::Expr load(const TensorRef& t, const std::vector<ir::IndexExpr>& coords, ir::Expr mask = {});
/// `t` broadcast (numpy rules, trailing dims aligned) to the coordinates of
/// an output of rank coords.size(): a dim of size 1 reads index 0, any other
/// reads the output's coordinate. Check the shapes first (check_broadcast).
ir::Expr load_broadcast(const TensorRef& t, const std::vector<ir::IndexExpr>& coords);
/// Unsupported unless every dim of `t` is 1 or the same expression as the
/// output's size there, so load_broadcast knows which dims broadcast. A
/// symbolic size Dynamo guarded to be 1 is neither (x[1::2] of a length-s
/// tensor is s//2 long; broadcast against s, it is 1): reading it at the
/// output's coordinate would run past its end.
Status check_broadcast(const TensorRef& t, const std::vector<ir::IndexExpr>& out_sizes);

using BodyFn = std::function<ir::Expr(const std::vector<ir::IndexExpr>& coords)>;
/// out[x] = cast(body(x), out dtype) over out's sizes; indices simplified
/// with the loop ranges.
void emit_pointwise(LoweringContext& ctx, const std::string& origin, const ir::BufferPtr& out, const BodyFn& body);
/// The same with an explicit iteration space and store target (`store_at`
/// maps loop coords to the element offset in `out`); Accumulate adds the
/// value to the element (ir::Store::accumulate).
enum class StoreMode { Overwrite, Accumulate };
void emit_pointwise_store(LoweringContext& ctx, const std::string& origin, const std::vector<ir::IndexExpr>& ranges,
                          const ir::BufferPtr& out,
                          const std::function<ir::IndexExpr(const std::vector<ir::IndexExpr>&)>& store_at,
                          const BodyFn& body, StoreMode mode = StoreMode::Overwrite);

}  // namespace cppi::lowering
