/// \file
/// Reduction kinds, their result types, identities and NaN rules.
///
/// A reduction folds the values of a body expression over the reduction loop
/// variables (r0, r1, ... in row-major order) into one result per pointwise
/// index (two or three for some kinds):
/// - sum, prod: accumulate in the body's dtype (lowerings cast the body to
///   the accumulation type first, e.g. float16 -> float32, bool/int8 ->
///   int64). The order of accumulation is unspecified (codegen may split and
///   vectorise), so float results may differ in the last bits.
/// - max, min: NaN propagates (any NaN in, NaN out), as torch.amax/amin.
///   Bool is allowed (max = any, min = all).
/// - argmax, argmin: the int64 position of the max/min in the row-major
///   flattening of the reduction ranges. Ties pick the first position. NaN
///   counts as larger than everything for argmax and smaller than everything
///   for argmin, so the first NaN wins, as in torch.
/// - any, all: over a bool body.
/// - welford: a float32/float64 body; three results (mean, m2, weight):
///   mean of the values, m2 = sum of squared deviations from the mean, weight
///   = count as a float. var = m2 / (weight - correction). Partials combine
///   with Chan et al.'s formula: delta = mean_b - mean_a, w = w_a + w_b,
///   mean = mean_a + delta * w_b / w, m2 = m2_a + m2_b + delta^2 * w_a*w_b / w
///   (a partial with w == 0 is the identity).
#pragma once

#include <string>
#include <vector>

#include "lowering/ir/expr.h"
#include "support/status.h"

namespace cppi::ir {

enum class ReductionKind : uint8_t {
#define CPPI_REDUCTION_ENUM(Name, name, results, state, fold) Name,
  CPPI_FOR_EACH_REDUCTION_KIND(CPPI_REDUCTION_ENUM)
#undef CPPI_REDUCTION_ENUM
};
const char* to_string(ReductionKind k);

/// What an accumulator of a kind holds (ops.def): the running result, a
/// value and its position, or Welford's mean, m2 and weight.
enum class ReductionState : uint8_t { Value, Arg, Welford };
ReductionState state_of(ReductionKind k);

/// The BinaryOp that folds a kind's values (argmax: maximum; welford: add).
BinaryOp fold_of(ReductionKind k);

/// The identity of fold_of(k) over `body`: the value a state's value starts
/// from (0, 1, lowest, highest, false, true).
Expr fold_identity(ReductionKind k, DType body);

/// The fields of an accumulator holding the results, in result order:
/// {""} for a value, {".index"} for a position, {".mean", ".m2", ".weight"}.
std::vector<std::string> state_fields(ReductionKind k);

/// 3 for welford, 1 otherwise.
int num_results(ReductionKind k);
/// Names of the results as printed and used in LocalRef names by convention
/// ("" for single-result kinds; "mean", "m2", "weight" for welford).
std::vector<const char*> result_suffixes(ReductionKind k);

/// The result dtypes for a body of dtype `body`, or an error if the kind does
/// not accept it (e.g. sum over float16: cast to float32 first).
Expected<std::vector<DType>> reduction_result_dtypes(ReductionKind k, DType body);

/// The value a (partial) accumulator starts from, one per result:
/// sum 0, prod 1, max -inf / lowest, min +inf / highest, any false, all true,
/// argmax/argmin: index 0 (the value accumulator starts at the max/min
/// identity of the body's dtype), welford 0, 0, 0.
std::vector<Expr> reduction_identity(ReductionKind k, DType body);

}  // namespace cppi::ir
