/// \file
/// Affine decomposition of index expressions: e = offset + sum_i stride_i * v_i
/// over a chosen list of loop variables. Codegen uses it to recognise
/// contiguous access (stride 1 in the innermost variable), broadcast (stride
/// 0) and transposed/strided access; fusion uses it to compare how producer
/// and consumer walk a buffer. Strides and offset may contain size symbols and
/// other loop variables that are not in the list.
#pragma once

#include <optional>
#include <vector>

#include "lowering/ir/index_expr.h"

namespace cppi::ir {

struct AffineForm {
  std::vector<IndexExpr> strides;  // one per requested variable, same order
  IndexExpr offset;                // the part that depends on none of them
};

/// nullopt when `e` is not affine in `vars`: a variable occurs inside
/// floordiv/mod/min/max or inside an indirect leaf's value (a gather along
/// it), or two of them (or one twice) multiply. An indirect leaf that uses
/// none of `vars` is part of the offset. `vars` are
/// IndexVar expressions (as var("x0") builds them).
std::optional<AffineForm> affine_form(const IndexExpr& e, const std::vector<IndexExpr>& vars);

/// The stride of `v` in `e`, or nullopt when `e` is not affine in `v`.
/// 0 means `e` does not depend on `v` (broadcast along v).
std::optional<IndexExpr> coefficient(const IndexExpr& e, const IndexExpr& v);

}  // namespace cppi::ir
