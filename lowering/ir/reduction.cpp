#include "lowering/ir/reduction.h"

#include <cmath>
#include <limits>

namespace cppi::ir {

const char* to_string(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_NAME(Name, name, results, state, fold) \
  case ReductionKind::Name: return name;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_NAME)
#undef CPPI_REDUCTION_NAME
  }
  return "?";
}

int num_results(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_RESULTS(Name, name, results, state, fold) \
  case ReductionKind::Name: return results;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_RESULTS)
#undef CPPI_REDUCTION_RESULTS
  }
  return 1;
}

ReductionState state_of(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_STATE(Name, name, results, state, fold) \
  case ReductionKind::Name: return ReductionState::state;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_STATE)
#undef CPPI_REDUCTION_STATE
  }
  return ReductionState::Value;
}

BinaryOp fold_of(ReductionKind k) {
  switch (k) {
#define CPPI_REDUCTION_FOLD(Name, name, results, state, fold) \
  case ReductionKind::Name: return BinaryOp::fold;
    CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_FOLD)
#undef CPPI_REDUCTION_FOLD
  }
  return BinaryOp::Add;
}

std::vector<const char*> result_suffixes(ReductionKind k) {
  if (state_of(k) == ReductionState::Welford) return {"mean", "m2", "weight"};
  return {""};
}

std::vector<std::string> state_fields(ReductionKind k) {
  switch (state_of(k)) {
    case ReductionState::Value: return {""};
    case ReductionState::Arg: return {".index"};
    case ReductionState::Welford: break;
  }
  std::vector<std::string> fields;  // the state's members are named as its results
  for (const char* suffix : result_suffixes(k)) fields.push_back(std::string(".") + suffix);
  return fields;
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

Expr fold_identity(ReductionKind k, DType body) {
  switch (fold_of(k)) {
    case BinaryOp::Mul: return Constant::make(1, body);
    case BinaryOp::Maximum: return lowest(body);
    case BinaryOp::Minimum: return highest(body);
    case BinaryOp::LogicalOr: return const_bool(false);
    case BinaryOp::LogicalAnd: return const_bool(true);
    default: return Constant::make(0, body);
  }
}

std::vector<Expr> reduction_identity(ReductionKind k, DType body) {
  switch (state_of(k)) {
    case ReductionState::Value: return {fold_identity(k, body)};
    case ReductionState::Arg: return {const_int(0)};
    case ReductionState::Welford: {
      Expr zero = Constant::make(0, body);
      return {zero, zero, zero};
    }
  }
  return {};
}

}  // namespace cppi::ir
