/// \file
/// The C op emission tables: one scalar table and one vector table, each a
/// switch over the op lists of lowering/ir/ops.def (so a new op is a compile
/// error here, -Werror=switch). Entries are templates over the operands:
///   {0} {1}  operand expressions      {T}  scalar C type of the operands
///   {V}      vector C type             {M}  same-width integer mask type
/// A vector entry of nullptr means "no vector instruction sequence": the
/// printer applies the scalar entry lane by lane (cppi_vmap1/cppi_vmap2).
/// A target printer (CUDA) supplies its own tables for what differs.
#pragma once

#include <string>
#include <vector>

#include "lowering/ir/expr.h"

namespace cppi::codegen {

/// How an op's operands are typed, which picks the table column.
enum class OperandClass { Float, Int, Bool };
OperandClass operand_class(DType t);

const char* scalar_unary_template(ir::UnaryOp op, OperandClass c);
const char* scalar_binary_template(ir::BinaryOp op, OperandClass c);
const char* vector_unary_template(ir::UnaryOp op, OperandClass c);
const char* vector_binary_template(ir::BinaryOp op, OperandClass c);

/// Substitutes {0}, {1}, {T}, {V}, {M} in `tmpl`.
std::string expand_template(const char* tmpl, const std::vector<std::string>& operands, const std::string& t,
                            const std::string& v = "", const std::string& m = "");

}  // namespace cppi::codegen
