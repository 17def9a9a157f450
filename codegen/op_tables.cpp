#include "codegen/op_tables.h"

namespace cppi::codegen {

using ir::BinaryOp;
using ir::UnaryOp;

OperandClass operand_class(DType t) {
  if (t == DType::Bool) return OperandClass::Bool;
  return is_floating(t) ? OperandClass::Float : OperandClass::Int;
}

// --- scalar table --------------------------------------------------------------------

const char* scalar_unary_template(UnaryOp op, OperandClass c) {
  const bool f = c == OperandClass::Float, i = c == OperandClass::Int, b = c == OperandClass::Bool;
  switch (op) {
    case UnaryOp::Neg: return f ? "(-{0})" : i ? "cppi_wsub<{T}>(0, {0})" : nullptr;
    case UnaryOp::Abs: return f ? "cppi_abs({0})" : i ? "cppi_int_abs<{T}>({0})" : nullptr;
    case UnaryOp::Sign: return (f || i) ? "cppi_sign<{T}>({0})" : nullptr;
    case UnaryOp::Exp: return f ? "cppi_exp({0})" : nullptr;
    case UnaryOp::Exp2: return f ? "cppi_exp2({0})" : nullptr;
    case UnaryOp::Expm1: return f ? "cppi_expm1({0})" : nullptr;
    case UnaryOp::Log: return f ? "cppi_log({0})" : nullptr;
    case UnaryOp::Log2: return f ? "cppi_log2({0})" : nullptr;
    case UnaryOp::Log10: return f ? "cppi_log10({0})" : nullptr;
    case UnaryOp::Log1p: return f ? "cppi_log1p({0})" : nullptr;
    case UnaryOp::Sqrt: return f ? "cppi_sqrt({0})" : nullptr;
    case UnaryOp::Rsqrt: return f ? "(({T})1 / cppi_sqrt({0}))" : nullptr;
    case UnaryOp::Reciprocal: return f ? "(({T})1 / {0})" : nullptr;
    case UnaryOp::Sin: return f ? "cppi_sin({0})" : nullptr;
    case UnaryOp::Cos: return f ? "cppi_cos({0})" : nullptr;
    case UnaryOp::Tan: return f ? "cppi_tan({0})" : nullptr;
    case UnaryOp::Asin: return f ? "cppi_asin({0})" : nullptr;
    case UnaryOp::Acos: return f ? "cppi_acos({0})" : nullptr;
    case UnaryOp::Atan: return f ? "cppi_atan({0})" : nullptr;
    case UnaryOp::Sinh: return f ? "cppi_sinh({0})" : nullptr;
    case UnaryOp::Cosh: return f ? "cppi_cosh({0})" : nullptr;
    case UnaryOp::Tanh: return f ? "cppi_tanh({0})" : nullptr;
    case UnaryOp::Asinh: return f ? "cppi_asinh({0})" : nullptr;
    case UnaryOp::Acosh: return f ? "cppi_acosh({0})" : nullptr;
    case UnaryOp::Atanh: return f ? "cppi_atanh({0})" : nullptr;
    case UnaryOp::Sigmoid: return f ? "(({T})1 / (({T})1 + cppi_exp(-{0})))" : nullptr;
    case UnaryOp::Erf: return f ? "cppi_erf({0})" : nullptr;
    case UnaryOp::Erfc: return f ? "cppi_erfc({0})" : nullptr;
    case UnaryOp::Erfinv: return f ? "cppi_erfinv({0})" : nullptr;
    case UnaryOp::Lgamma: return f ? "cppi_lgamma({0})" : nullptr;
    case UnaryOp::Floor: return f ? "cppi_floor({0})" : nullptr;
    case UnaryOp::Ceil: return f ? "cppi_ceil({0})" : nullptr;
    case UnaryOp::Round: return f ? "cppi_round({0})" : nullptr;
    case UnaryOp::Trunc: return f ? "cppi_trunc({0})" : nullptr;
    case UnaryOp::LogicalNot: return b ? "(!{0})" : nullptr;
    case UnaryOp::BitwiseNot: return i ? "(({T})~{0})" : b ? "(!{0})" : nullptr;
    case UnaryOp::NonzeroDivisor: return i ? "cppi_nonzero_divisor<{T}>({0})" : nullptr;
    case UnaryOp::IsNan: return f ? "cppi_isnan({0})" : nullptr;
    case UnaryOp::IsInf: return f ? "cppi_isinf({0})" : nullptr;
    case UnaryOp::IsFinite: return f ? "cppi_isfinite({0})" : nullptr;
    case UnaryOp::SignBit: return f ? "cppi_signbit({0})" : nullptr;
  }
  return nullptr;
}

const char* scalar_binary_template(BinaryOp op, OperandClass c) {
  const bool f = c == OperandClass::Float, i = c == OperandClass::Int, b = c == OperandClass::Bool;
  switch (op) {
    case BinaryOp::Add: return f ? "({0} + {1})" : i ? "cppi_wadd<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Sub: return f ? "({0} - {1})" : i ? "cppi_wsub<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Mul: return f ? "({0} * {1})" : i ? "cppi_wmul<{T}>({0}, {1})" : nullptr;
    case BinaryOp::TrueDiv: return f ? "({0} / {1})" : nullptr;
    case BinaryOp::FloorDiv: return f ? "cppi_float_floordiv<{T}>({0}, {1})" : i ? "cppi_int_floordiv<{T}>({0}, {1})" : nullptr;
    case BinaryOp::TruncDiv: return f ? "cppi_trunc({0} / {1})" : i ? "cppi_int_truncdiv<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Fmod: return f ? "cppi_fmod({0}, {1})" : i ? "cppi_int_fmod<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Remainder: return f ? "cppi_float_remainder<{T}>({0}, {1})" : i ? "cppi_int_remainder<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Pow: return f ? "cppi_pow({0}, {1})" : i ? "cppi_int_pow<{T}>({0}, {1})" : nullptr;
    case BinaryOp::Maximum: return f ? "cppi_max({0}, {1})" : i ? "cppi_max_i<{T}>({0}, {1})" : "({0} || {1})";
    case BinaryOp::Minimum: return f ? "cppi_min({0}, {1})" : i ? "cppi_min_i<{T}>({0}, {1})" : "({0} && {1})";
    case BinaryOp::Atan2: return f ? "cppi_atan2({0}, {1})" : nullptr;
    case BinaryOp::Hypot: return f ? "cppi_hypot({0}, {1})" : nullptr;
    case BinaryOp::Copysign: return f ? "cppi_copysign({0}, {1})" : nullptr;
    case BinaryOp::LogicalAnd: return b ? "({0} && {1})" : nullptr;
    case BinaryOp::LogicalOr: return b ? "({0} || {1})" : nullptr;
    case BinaryOp::LogicalXor: return b ? "({0} != {1})" : nullptr;
    case BinaryOp::BitwiseAnd: return i ? "(({T})({0} & {1}))" : b ? "({0} && {1})" : nullptr;
    case BinaryOp::BitwiseOr: return i ? "(({T})({0} | {1}))" : b ? "({0} || {1})" : nullptr;
    case BinaryOp::BitwiseXor: return i ? "(({T})({0} ^ {1}))" : b ? "({0} != {1})" : nullptr;
    case BinaryOp::LShift: return i ? "cppi_int_shl<{T}>({0}, {1})" : nullptr;
    case BinaryOp::RShift: return i ? "cppi_int_shr<{T}>({0}, {1})" : nullptr;
  }
  return nullptr;
}

// --- vector table --------------------------------------------------------------------
// Bool vectors are lane masks (all ones / zero), so logic is bitwise.

const char* vector_unary_template(UnaryOp op, OperandClass c) {
  const bool f = c == OperandClass::Float, i = c == OperandClass::Int, b = c == OperandClass::Bool;
  switch (op) {
    case UnaryOp::Neg: return (f || i) ? "(-{0})" : nullptr;
    case UnaryOp::Abs: return f ? "cppi_abs({0})" : nullptr;
    case UnaryOp::Sign: return nullptr;
    case UnaryOp::Exp: return f ? "cppi_exp({0})" : nullptr;
    case UnaryOp::Exp2: return f ? "cppi_exp2({0})" : nullptr;
    case UnaryOp::Expm1: return f ? "cppi_expm1({0})" : nullptr;
    case UnaryOp::Log: return f ? "cppi_log({0})" : nullptr;
    case UnaryOp::Log2: return f ? "cppi_log2({0})" : nullptr;
    case UnaryOp::Log10: return f ? "cppi_log10({0})" : nullptr;
    case UnaryOp::Log1p: return f ? "cppi_log1p({0})" : nullptr;
    case UnaryOp::Sqrt: return f ? "cppi_sqrt({0})" : nullptr;
    case UnaryOp::Rsqrt: return f ? "(cppi_vsplat<{V}>(1) / cppi_sqrt({0}))" : nullptr;
    case UnaryOp::Reciprocal: return f ? "(cppi_vsplat<{V}>(1) / {0})" : nullptr;
    case UnaryOp::Sin: return f ? "cppi_sin({0})" : nullptr;
    case UnaryOp::Cos: return f ? "cppi_cos({0})" : nullptr;
    case UnaryOp::Tan: return f ? "cppi_tan({0})" : nullptr;
    case UnaryOp::Asin: return f ? "cppi_asin({0})" : nullptr;
    case UnaryOp::Acos: return f ? "cppi_acos({0})" : nullptr;
    case UnaryOp::Atan: return f ? "cppi_atan({0})" : nullptr;
    case UnaryOp::Sinh: return f ? "cppi_sinh({0})" : nullptr;
    case UnaryOp::Cosh: return f ? "cppi_cosh({0})" : nullptr;
    case UnaryOp::Tanh: return f ? "cppi_tanh({0})" : nullptr;
    case UnaryOp::Asinh: return f ? "cppi_asinh({0})" : nullptr;
    case UnaryOp::Acosh: return f ? "cppi_acosh({0})" : nullptr;
    case UnaryOp::Atanh: return f ? "cppi_atanh({0})" : nullptr;
    case UnaryOp::Sigmoid: return f ? "(cppi_vsplat<{V}>(1) / (cppi_vsplat<{V}>(1) + cppi_exp(-{0})))" : nullptr;
    case UnaryOp::Erf: return f ? "cppi_erf({0})" : nullptr;
    case UnaryOp::Erfc: return f ? "cppi_erfc({0})" : nullptr;
    case UnaryOp::Erfinv: return nullptr;
    case UnaryOp::Lgamma: return f ? "cppi_lgamma({0})" : nullptr;
    case UnaryOp::Floor: return f ? "cppi_floor({0})" : nullptr;
    case UnaryOp::Ceil: return f ? "cppi_ceil({0})" : nullptr;
    case UnaryOp::Round: return f ? "cppi_round({0})" : nullptr;
    case UnaryOp::Trunc: return f ? "cppi_trunc({0})" : nullptr;
    case UnaryOp::LogicalNot: return b ? "(~{0})" : nullptr;
    case UnaryOp::BitwiseNot: return (i || b) ? "(~{0})" : nullptr;
    case UnaryOp::NonzeroDivisor: return nullptr;  // lane by lane: a zero reports to the runtime
    // Float predicates produce masks of the operand's width ({M}).
    case UnaryOp::IsNan: return f ? "({0} != {0})" : nullptr;
    case UnaryOp::IsInf: return f ? "(cppi_abs({0}) == cppi_vsplat<{V}>(({T})__builtin_inf()))" : nullptr;
    case UnaryOp::IsFinite: return f ? "(cppi_abs({0}) < cppi_vsplat<{V}>(({T})__builtin_inf()))" : nullptr;
    case UnaryOp::SignBit: return f ? "(cppi_bit_cast<{M}>({0}) < cppi_vsplat<{M}>(0))" : nullptr;
  }
  return nullptr;
}

const char* vector_binary_template(BinaryOp op, OperandClass c) {
  const bool f = c == OperandClass::Float, i = c == OperandClass::Int, b = c == OperandClass::Bool;
  switch (op) {
    case BinaryOp::Add: return (f || i) ? "({0} + {1})" : nullptr;
    case BinaryOp::Sub: return (f || i) ? "({0} - {1})" : nullptr;
    case BinaryOp::Mul: return (f || i) ? "({0} * {1})" : nullptr;
    case BinaryOp::TrueDiv: return f ? "({0} / {1})" : nullptr;
    case BinaryOp::FloorDiv: return nullptr;
    case BinaryOp::TruncDiv: return f ? "cppi_trunc({0} / {1})" : nullptr;
    case BinaryOp::Fmod: return f ? "cppi_fmod({0}, {1})" : nullptr;
    case BinaryOp::Remainder: return nullptr;
    case BinaryOp::Pow: return f ? "cppi_pow({0}, {1})" : nullptr;
    case BinaryOp::Maximum: return f ? "cppi_max({0}, {1})" : i ? "cppi_vmax_int({0}, {1})" : "({0} | {1})";
    case BinaryOp::Minimum: return f ? "cppi_min({0}, {1})" : i ? "cppi_vmin_int({0}, {1})" : "({0} & {1})";
    case BinaryOp::Atan2: return f ? "cppi_atan2({0}, {1})" : nullptr;
    case BinaryOp::Hypot: return f ? "cppi_hypot({0}, {1})" : nullptr;
    case BinaryOp::Copysign: return nullptr;
    case BinaryOp::LogicalAnd: return b ? "({0} & {1})" : nullptr;
    case BinaryOp::LogicalOr: return b ? "({0} | {1})" : nullptr;
    case BinaryOp::LogicalXor: return b ? "({0} ^ {1})" : nullptr;
    case BinaryOp::BitwiseAnd: return (i || b) ? "({0} & {1})" : nullptr;
    case BinaryOp::BitwiseOr: return (i || b) ? "({0} | {1})" : nullptr;
    case BinaryOp::BitwiseXor: return (i || b) ? "({0} ^ {1})" : nullptr;
    case BinaryOp::LShift: return nullptr;
    case BinaryOp::RShift: return nullptr;
  }
  return nullptr;
}

std::string expand_template(const char* tmpl, const std::vector<std::string>& operands, const std::string& t,
                            const std::string& v, const std::string& m) {
  std::string out;
  for (const char* p = tmpl; *p; ++p) {
    if (*p == '{') {
      const char* close = p + 1;
      while (*close && *close != '}') ++close;
      std::string key(p + 1, close);
      if (key == "T") out += t;
      else if (key == "V") out += v;
      else if (key == "M") out += m;
      else out += operands.at(static_cast<size_t>(std::stoi(key)));
      p = close;
      continue;
    }
    out += *p;
  }
  return out;
}

}  // namespace cppi::codegen
