/// \file
/// Compute nodes before fusion: what one lowered ATen op produces.
///
/// - PointwiseNode: for every point (x0, ..., xn-1) of its ranges, evaluate
///   one value expression and store it. The loop variables are named x0, x1,
///   ... (pointwise_var(i)); the store index is normally the output buffer's
///   layout index at those variables (PointwiseNode::make does that).
/// - ReductionNode: for every point of its (pointwise) ranges x0..xn-1, fold
///   the body over its reduction ranges r0..rm-1 (reduction_var(j)) with a
///   ReductionKind and store the result(s) (reduction.h).
/// - ScanNode: for every point of its ranges x0..xn-1, walk r0 over its
///   scan range in order, fold the body into a running value (cumsum,
///   cumprod) and store the running value at every step.
/// Ranges are extents: the variable runs over [0, extent). Extents may
/// contain size symbols, never loop variables. Bodies may only use the node's
/// own loop variables, and contain no LocalRef.
///
/// Each node records its origins (FX node names) for provenance remarks and
/// the comments in generated code. A NodeList is the whole lowered graph in
/// program order (what loop_ir_pre_fusion.txt shows).
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "lowering/ir/buffer.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ir/reduction.h"

namespace cppi::ir {

/// x{i} and r{j}: the loop variables of pre-fusion nodes.
IndexExpr pointwise_var(int i);
IndexExpr reduction_var(int j);
std::vector<IndexExpr> pointwise_vars(size_t n);
std::vector<IndexExpr> reduction_vars(size_t n);

/// buffer[index] = value, or with `accumulate` buffer[index] += value.
/// value.dtype() must equal buffer->dtype (insert a Cast where eager would
/// round on store).
///
/// An accumulating store (index_put(accumulate=True), scatter_add) may hit
/// one element from many iterations: the iterations' adds land in an
/// unspecified order, so a backend either runs its loops on one thread or
/// adds atomically. It reads its own target (reads(Stage) lists it); it is
/// never inlined into a reader, and no reader of its target shares its
/// kernel (fusion's why_not_join says which nodes may).
struct Store {
  BufferPtr buffer;
  IndexExpr index;
  Expr value;
  bool accumulate = false;

  static Store make(BufferPtr buffer, IndexExpr index, Expr value);
  /// buffer[index] += value: integer or float buffers (not bool).
  static Store make_accumulate(BufferPtr buffer, IndexExpr index, Expr value);
  /// This store (its buffer and mode) at another index and value: what
  /// every rewrite of a store builds, so none drops the mode.
  Store with(IndexExpr new_index, Expr new_value) const;
};

/// Whether an accumulating store to a `t` buffer runs on `device`. On the
/// CPU every dtype but bool (one thread adds, in the dtype, as eager's
/// serial kernel does). On CUDA the dtypes atomicAdd takes whole, int32,
/// int64, float32 and float64: half and bfloat16 atomics would round after
/// every add where eager sums repeated positions in float first.
bool accumulate_supported(DType t, Device device);

/// What `s` writes at its index: its value, or for an accumulating store the
/// element's old value plus it (what a backend running on one thread
/// stores).
Expr stored_value(const Store& s);

/// A buffer element that an expression reads or a node writes.
struct Access {
  BufferPtr buffer;
  IndexExpr index;
  bool masked = false;  // a masked load: may not touch memory everywhere
};

class PointwiseNode;
class ReductionNode;
class ScanNode;
using PointwiseNodePtr = std::shared_ptr<const PointwiseNode>;
using ReductionNodePtr = std::shared_ptr<const ReductionNode>;
using ScanNodePtr = std::shared_ptr<const ScanNode>;

class PointwiseNode {
 public:
  /// Stores `body` at `output`'s layout index over ranges = output sizes.
  static PointwiseNodePtr make(std::string name, BufferPtr output, Expr body,
                               std::vector<std::string> origins = {});
  /// The general form: any ranges, any store (e.g. a copy into a slice).
  static PointwiseNodePtr make_with_store(std::string name, std::vector<IndexExpr> ranges, Store store,
                                          std::vector<std::string> origins = {});

  const std::string name;
  const std::vector<IndexExpr> ranges;  // extents of x0..xn-1
  const Store store;
  const std::vector<std::string> origins;

  std::vector<IndexExpr> vars() const { return pointwise_vars(ranges.size()); }
  VarRanges var_ranges() const;

 private:
  PointwiseNode(std::string n, std::vector<IndexExpr> r, Store s, std::vector<std::string> o)
      : name(std::move(n)), ranges(std::move(r)), store(std::move(s)), origins(std::move(o)) {}
};

/// Where one reduction result goes; index is over the pointwise vars x*.
struct ReductionOutput {
  BufferPtr buffer;  // null: this result is not stored (e.g. welford's weight)
  IndexExpr index;
};

class ReductionNode {
 public:
  /// `outputs` has num_results(kind) entries (at least one with a buffer);
  /// each stored buffer's dtype must be the result's dtype.
  static ReductionNodePtr make(std::string name, std::vector<IndexExpr> ranges,
                               std::vector<IndexExpr> reduction_ranges, ReductionKind kind, Expr body,
                               std::vector<ReductionOutput> outputs, std::vector<std::string> origins = {});
  /// Single-result convenience: stores at `output`'s layout index over
  /// ranges = output sizes.
  static ReductionNodePtr make(std::string name, BufferPtr output, std::vector<IndexExpr> reduction_ranges,
                               ReductionKind kind, Expr body, std::vector<std::string> origins = {});

  const std::string name;
  const std::vector<IndexExpr> ranges;            // extents of x0..xn-1
  const std::vector<IndexExpr> reduction_ranges;  // extents of r0..rm-1
  const ReductionKind kind;
  const Expr body;
  const std::vector<ReductionOutput> outputs;
  const std::vector<DType> result_dtypes;
  const std::vector<std::string> origins;

  std::vector<IndexExpr> vars() const { return pointwise_vars(ranges.size()); }
  std::vector<IndexExpr> reduction_vars() const { return ir::reduction_vars(reduction_ranges.size()); }
  VarRanges var_ranges() const;  // both x* and r*

 private:
  ReductionNode(std::string n, std::vector<IndexExpr> r, std::vector<IndexExpr> rr, ReductionKind k, Expr b,
                std::vector<ReductionOutput> out, std::vector<DType> dt, std::vector<std::string> o)
      : name(std::move(n)),
        ranges(std::move(r)),
        reduction_ranges(std::move(rr)),
        kind(k),
        body(std::move(b)),
        outputs(std::move(out)),
        result_dtypes(std::move(dt)),
        origins(std::move(o)) {}
};

/// Whether a scan of `kind` exists: a running sum or product.
bool is_scan_kind(ReductionKind kind);

/// out[index(x*, r0)] = fold of body(x*, 0..r0) for r0 = 0, 1, ... in order:
/// cumsum and cumprod. The running value is of the body's dtype (lowerings
/// cast the body to the accumulation type, as eager's kernels accumulate);
/// it is rounded to the output's dtype where they differ. The steps along r0
/// depend on each other, so a scan runs in a kernel of its own
/// (ScanStage); the points x* are independent.
class ScanNode {
 public:
  static ScanNodePtr make(std::string name, std::vector<IndexExpr> ranges, IndexExpr scan_range, ReductionKind kind,
                          Expr body, BufferPtr output, IndexExpr index, std::vector<std::string> origins = {});

  const std::string name;
  const std::vector<IndexExpr> ranges;  // extents of x0..xn-1
  const IndexExpr scan_range;           // extent of r0
  const ReductionKind kind;             // Sum or Prod
  const Expr body;                      // over x* and r0
  const BufferPtr output;
  const IndexExpr index;  // over x* and r0
  const std::vector<std::string> origins;

  std::vector<IndexExpr> vars() const { return pointwise_vars(ranges.size()); }
  IndexExpr scan_var() const { return reduction_var(0); }
  VarRanges var_ranges() const;  // x* and r0
  /// What each step stores, given the running value: it, or it rounded to
  /// the output's dtype.
  Expr stored(const Expr& running) const;

 private:
  ScanNode(std::string n, std::vector<IndexExpr> r, IndexExpr sr, ReductionKind k, Expr b, BufferPtr out,
           IndexExpr i, std::vector<std::string> o)
      : name(std::move(n)),
        ranges(std::move(r)),
        scan_range(std::move(sr)),
        kind(k),
        body(std::move(b)),
        output(std::move(out)),
        index(std::move(i)),
        origins(std::move(o)) {}
};

using ComputeNode = std::variant<PointwiseNodePtr, ReductionNodePtr, ScanNodePtr>;
const std::string& node_name(const ComputeNode& n);

/// The lowered graph before fusion: its buffers (inputs, outputs,
/// intermediates) and compute nodes in a valid execution order.
struct NodeList {
  std::vector<BufferPtr> buffers;
  std::vector<ComputeNode> nodes;
};

/// Loads in `e` (each distinct buffer/index once, in first-visit order).
std::vector<Access> reads(const Expr& e);
std::vector<Access> reads(const ComputeNode& n);
std::vector<Access> writes(const ComputeNode& n);

/// Checks that every index and value of a node only uses the node's own loop
/// variables and no LocalRef; the factories call it.
Status verify(const ComputeNode& n);

/// Checks a whole lowered graph: buffer names are unique, every buffer a node
/// reads or writes is in `buffers`, no node writes a graph input, and every
/// buffer that is not a graph input is written by an earlier node before it
/// is read (program order is execution order).
Status verify(const NodeList& nodes);

}  // namespace cppi::ir
