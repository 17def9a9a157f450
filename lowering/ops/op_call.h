/// \file
/// OpCall: one FX node being lowered, with typed access to its arguments
/// (positional or keyword, as torch's schema allows both) and the helpers
/// every lowering family shares: where the result goes, normalising dims.
/// Accessors return Error::unsupported with a message naming the argument
/// when it has a form we do not lower; the node then falls back with that
/// reason.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "lowering/ops/context.h"

namespace cppi::lowering {

/// Assigns the value of an Expected or returns its error (for functions
/// returning Status or Expected).
#define CPPI_ASSIGN_OR_RETURN(lhs, expr)       \
  auto lhs##_or = (expr);                      \
  if (!lhs##_or.ok()) return lhs##_or.error(); \
  auto lhs = std::move(*lhs##_or)

#define CPPI_RETURN_IF_ERROR_STATUS(expr) \
  do {                                    \
    Status _st = (expr);                  \
    if (!_st.ok()) return _st.error();    \
  } while (0)

class OpCall {
 public:
  OpCall(LoweringContext& ctx, int index) : ctx(ctx), index(index), node(ctx.graph().nodes[index]) {}

  LoweringContext& ctx;
  const int index;
  const Node& node;

  /// Positional argument `pos` or keyword `kw`; nullptr when absent or None.
  const Arg* arg(size_t pos, std::string_view kw = {}) const;
  /// The graph node an argument refers to, or -1.
  static int node_of(const Arg* a) { return a && a->kind == Arg::Kind::Node ? static_cast<int>(a->i) : -1; }

  Expected<TensorRef> tensor(size_t pos, std::string_view kw = {}) const;
  Expected<std::vector<TensorRef>> tensor_list(size_t pos, std::string_view kw = {}) const;
  /// A scalar argument (literal, symbolic int, or a node holding a number).
  Expected<Scalar> scalar(size_t pos, std::string_view kw = {}) const;
  Expected<std::optional<Scalar>> optional_scalar(size_t pos, std::string_view kw = {}) const;
  /// A constant integer (dims, flags); `dflt` when absent.
  Expected<int64_t> int_const(size_t pos, std::string_view kw, std::optional<int64_t> dflt = std::nullopt) const;
  /// A list of constant ints (or a single int); empty when absent.
  Expected<std::vector<int64_t>> int_list(size_t pos, std::string_view kw = {}) const;
  /// An int that may be symbolic (sizes, offsets).
  Expected<ir::IndexExpr> size(size_t pos, std::string_view kw = {}) const;
  Expected<std::vector<ir::IndexExpr>> size_list(size_t pos, std::string_view kw = {}) const;
  bool flag(size_t pos, std::string_view kw, bool dflt) const;
  std::optional<DType> dtype(size_t pos, std::string_view kw) const;

  /// The node's tensor meta (its value must be a tensor).
  const TensorMeta& meta() const { return node.value.tensor; }
  const TensorMeta& item_meta(size_t k) const { return node.value.items.at(k).tensor; }
  /// The buffer this node's (tensor) value is stored in.
  ir::BufferPtr result_buffer() const { return ctx.result_buffer(index, meta()); }
  /// The buffer for tuple item `k`: bound to its getitem node when there is
  /// one, an internal temporary otherwise.
  ir::BufferPtr item_buffer(size_t k) const;
  bool item_used(size_t k) const { return ctx.getitem_node(index, static_cast<int>(k)) >= 0; }

  /// Records the lowered value.
  void set_result(TensorRef t) const;
  void set_items(std::vector<std::optional<TensorRef>> items) const;
  /// Lowers to `buffer` (the node's own buffer): result is its identity ref.
  void set_result_buffer(const ir::BufferPtr& buffer) const;
};

/// dim in [-rank, rank) -> [0, rank); Error when out of range.
Expected<int> normalize_dim(int64_t dim, size_t rank);
/// Normalised, sorted, unique dims; an empty list means every dim.
Expected<std::vector<int>> normalize_dims(const std::vector<int64_t>& dims, size_t rank);

/// diagonal's and diagonal_scatter's (offset, dim1, dim2), read from the
/// call's arguments at `first`, `first + 1`, `first + 2`: the dims
/// normalised for `rank` and distinct. The diagonal's element i is at
/// dim1 = i + max(-offset, 0), dim2 = i + max(offset, 0).
struct DiagonalArgs {
  int64_t offset = 0;
  int dim1 = 0, dim2 = 1;
  int64_t dim1_start() const { return offset < 0 ? -offset : 0; }
  int64_t dim2_start() const { return offset > 0 ? offset : 0; }
};
Expected<DiagonalArgs> diagonal_args(const OpCall& c, size_t first, size_t rank);

}  // namespace cppi::lowering
