/// \file
/// Type promotion as torch does it (torch._prims_common.elementwise_dtypes):
/// tensors with dimensions outrank zero-dim tensors, which outrank Python
/// scalars, and a lower-priority operand only matters when it is of a
/// higher category (bool < integer < float): int32 tensor + 2 -> int32,
/// int32 tensor + 2.5 -> float32 (the default float), float16 tensor + 2.5
/// -> float16. The compute dtype is the "opmath" type: reduced floats compute
/// in float32 (the IR requires it) and are rounded once, on store.
#pragma once

#include <optional>
#include <vector>

#include "support/dtype.h"

namespace cppi::lowering {

/// torch.promote_types.
DType promote_types(DType a, DType b);

/// What participates in promotion.
struct PromotionOperand {
  enum class Kind { Tensor, ZeroDimTensor, Scalar };
  Kind kind = Kind::Tensor;
  /// Tensors: their dtype. Scalars: Bool, Int64 or Float64 (the category).
  DType dtype = DType::Float32;
};

/// torch's ELEMENTWISE_TYPE_PROMOTION_KIND.
enum class Promotion {
  Default,      // result = promoted
  IntToFloat,   // integral/bool results become the default float (div, exp, sqrt, ...)
  AlwaysBool,   // comparisons: compute in the promoted type, result bool
  BoolToLong,   // bool results become int64
};

struct PromotedTypes {
  DType compute;  // what the body computes in (never a reduced float)
  DType result;   // the op's result dtype (what eager returns)
};

/// The promoted dtype of the operands (torch.result_type).
DType result_type(const std::vector<PromotionOperand>& operands);
PromotedTypes elementwise_dtypes(const std::vector<PromotionOperand>& operands, Promotion kind);

/// float16/bfloat16 -> float32, others unchanged.
DType opmath_type(DType t);

}  // namespace cppi::lowering
