#include "lowering/ir/reduction.h"

#include <cmath>
#include <limits>

namespace cppi::ir {

const char* to_string(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_NAME(Name, name, results) \
  case ReductionKind::Name: return name;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_NAME)
#undef CPPI_REDUCTION_NAME
  }
  return "?";
}

int num_results(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_RESULTS(Name, name, results) \
  case ReductionKind::Name: return results;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_RESULTS)
#undef CPPI_REDUCTION_RESULTS
  }
  return 1;
}

std::vector<const char*> result_suffixes(ReductionKind k) {
  if (k == ReductionKind::Welford) return {"mean", "m2", "weight"};
  return {""};
}

Expected<std::vector<DType>> reduction_result_dtypes(ReductionKind k, DType body) {
  auto reject = [&](const char* why) -> Expected<std::vector<DType>> {
    return Error::internal(cat("reduction ", to_string(k), " over ", dtype_name(body), ": ", why));
  };
  if (is_reduced_float(body)) return reject("reduced floats must be cast to float32 first");
  switch (k) {
    case ReductionKind::Sum:
    case ReductionKind::Prod:
      if (body == DType::Bool) return reject("cast bool to an integer type first");
      return std::vector<DType>{body};
    case ReductionKind::Max:
    case ReductionKind::Min: return std::vector<DType>{body};
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return std::vector<DType>{DType::Int64};
    case ReductionKind::Any:
    case ReductionKind::All:
      if (body != DType::Bool) return reject("the body must be bool");
      return std::vector<DType>{DType::Bool};
    case ReductionKind::Welford:
      if (!is_floating(body)) return reject("the body must be float32 or float64");
      return std::vector<DType>{body, body, body};
  }
  return reject("unknown kind");
}

namespace {

Expr lowest(DType t) {
  if (is_floating(t)) return const_float(-INFINITY, t);
  switch (t) {
    case DType::Bool: return const_bool(false);
    case DType::UInt8: return const_int(0, t);
    case DType::Int8: return const_int(std::numeric_limits<int8_t>::min(), t);
    case DType::Int16: return const_int(std::numeric_limits<int16_t>::min(), t);
    case DType::Int32: return const_int(std::numeric_limits<int32_t>::min(), t);
    default: return const_int(std::numeric_limits<int64_t>::min(), t);
  }
}

Expr highest(DType t) {
  if (is_floating(t)) return const_float(INFINITY, t);
  switch (t) {
    case DType::Bool: return const_bool(true);
    case DType::UInt8: return const_int(255, t);
    case DType::Int8: return const_int(std::numeric_limits<int8_t>::max(), t);
    case DType::Int16: return const_int(std::numeric_limits<int16_t>::max(), t);
    case DType::Int32: return const_int(std::numeric_limits<int32_t>::max(), t);
    default: return const_int(std::numeric_limits<int64_t>::max(), t);
  }
}

}  // namespace

std::vector<Expr> reduction_identity(ReductionKind k, DType body) {
  switch (k) {
    case ReductionKind::Sum: return {Constant::make(0, body)};
    case ReductionKind::Prod: return {Constant::make(1, body)};
    case ReductionKind::Max: return {lowest(body)};
    case ReductionKind::Min: return {highest(body)};
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return {const_int(0)};
    case ReductionKind::Any: return {const_bool(false)};
    case ReductionKind::All: return {const_bool(true)};
    case ReductionKind::Welford: {
      Expr zero = Constant::make(0, body);
      return {zero, zero, zero};
    }
  }
  return {};
}

}  // namespace cppi::ir
