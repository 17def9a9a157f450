#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {
namespace {

enum class Category { Bool = 0, Integral = 1, Floating = 2 };

Category category(DType t) {
  if (t == DType::Bool) return Category::Bool;
  return is_floating(t) ? Category::Floating : Category::Integral;
}

/// torch's combine_categories: the lower-priority dtype only wins when it is
/// of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

std::optional<DType> promote_all(std::optional<DType> acc, DType t) {
  return acc ? promote_types(*acc, t) : t;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;  // float16 + bfloat16
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integral, different. uint8 with a signed type needs the next wider signed type.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType result_type(const std::vector<PromotionOperand>& operands) {
  std::optional<DType> dims, zero_dim, scalars;
  for (const auto& o : operands) {
    switch (o.kind) {
      case PromotionOperand::Kind::Tensor: dims = promote_all(dims, o.dtype); break;
      case PromotionOperand::Kind::ZeroDimTensor: zero_dim = promote_all(zero_dim, o.dtype); break;
      case PromotionOperand::Kind::Scalar: {
        // A Python scalar stands for its category's default dtype.
        DType t = o.dtype == DType::Bool ? DType::Bool : is_floating(o.dtype) ? DType::Float32 : DType::Int64;
        scalars = promote_all(scalars, t);
        break;
      }
    }
  }
  auto r = combine(dims, combine(zero_dim, scalars));
  return r.value_or(DType::Float32);
}

DType opmath_type(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }

PromotedTypes elementwise_dtypes(const std::vector<PromotionOperand>& operands, Promotion kind) {
  DType promoted = result_type(operands);
  switch (kind) {
    case Promotion::Default: return {opmath_type(promoted), promoted};
    case Promotion::IntToFloat: {
      DType r = category(promoted) == Category::Floating ? promoted : DType::Float32;
      return {opmath_type(r), r};
    }
    case Promotion::AlwaysBool: return {opmath_type(promoted), DType::Bool};
    case Promotion::BoolToLong: {
      DType r = promoted == DType::Bool ? DType::Int64 : promoted;
      return {opmath_type(r), r};
    }
  }
  return {opmath_type(promoted), promoted};
}

}  // namespace cppi::lowering
