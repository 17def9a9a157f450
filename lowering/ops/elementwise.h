/// \file
/// The shared wrapper of elementwise lowerings (Inductor's register_lowering
/// with type promotion and broadcasting): operands are tensors or Python
/// scalars; the wrapper promotes them the way torch does, broadcasts tensors
/// through their indices (a size-1 dim reads index 0: stride 0), converts
/// every operand to the compute dtype, calls the op's body builder and
/// rounds the result to the node's dtype on store.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "lowering/ops/op_call.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {

struct Operand {
  std::optional<TensorRef> tensor;
  Scalar scalar;  // when !tensor

  PromotionOperand promotion() const;
};

/// Operand `pos` (or keyword `kw`): a tensor or a scalar.
Expected<Operand> operand(const OpCall& call, size_t pos, std::string_view kw = {});

/// Builds the body from the operands already converted to `compute`.
using ElementwiseFn = std::function<Expected<ir::Expr>(const std::vector<ir::Expr>& args, DType compute)>;

struct ElementwiseOptions {
  Promotion promotion = Promotion::Default;
  /// Operands that take no part in promotion (e.g. where's condition) are
  /// loaded with their own dtype.
  std::vector<bool> keep_dtype;
  /// Forces the compute dtype (e.g. logical ops compute in bool).
  std::optional<DType> compute;
};

/// Lowers `call` as out = fn(operands) elementwise into the node's buffer.
Status lower_elementwise(const OpCall& call, const std::vector<Operand>& operands, const ElementwiseOptions& options,
                         const ElementwiseFn& fn);

}  // namespace cppi::lowering
