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
#include "lowering/ir/index_simplify.h"

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

/// affine_form over `vars` after each indirect leaf that does not depend on
/// the last of them became a variable of its own, whose stride (the leaf's
/// coefficient) follows those of `vars` in the form. A row gathered at a
/// position read from memory (an embedding: table[ids[r] * D + x]) is then
/// affine along x, and its vectors along x are aligned wherever every other
/// stride and the offset are multiples of the width. nullopt as affine_form,
/// and for a leaf that moves along the last variable (a gather along it).
std::optional<AffineForm> affine_form_over_gathers(const IndexExpr& e, const std::vector<IndexExpr>& vars);

/// Whether distinct points of `vars` (each over [0, ranges[v])) always
/// select disjoint elements of `e`, whatever values its other variables and
/// indirect leaves take: e = offset + sum_i stride_i * v_i, each stride
/// positive and larger than the offset's span (bounds() over `ranges`) plus
/// the span of the smaller strides (innermost variables first when a stride
/// is symbolic, as `vars` are listed outermost first). A store whose index
/// passes writes each element from one point of `vars` at most: in-place
/// reuse asks it over every loop (the offset then has no span), the CPU's
/// parallel accumulating stores over the parallel loops (no two threads add
/// into one element).
bool selects_disjoint_elements(const IndexExpr& e, const std::vector<IndexExpr>& vars, const VarRanges& ranges);

/// The stride of `v` in `e`, or nullopt when `e` is not affine in `v`.
/// 0 means `e` does not depend on `v` (broadcast along v).
std::optional<IndexExpr> coefficient(const IndexExpr& e, const IndexExpr& v);

}  // namespace cppi::ir
