// Elementwise math: arithmetic, transcendental functions, comparisons,
// logical and bitwise ops, clamp/where/masked_fill. Each op is a small
// function over lower_elementwise (type promotion + broadcasting).
#include <cmath>

#include "lowering/ops/elementwise.h"
#include "lowering/ops/registry.h"

namespace cppi::lowering {
namespace {

using ir::BinaryOp;
using ir::CompareOp;
using ir::Expr;
using ir::UnaryOp;
using Args = std::vector<Expr>;

/// Operands at `positions` (keyword names for those that may be passed by name).
Expected<std::vector<Operand>> operands(const OpCall& c, std::initializer_list<std::pair<size_t, const char*>> ps) {
  std::vector<Operand> out;
  for (auto [pos, kw] : ps) {
    CPPI_ASSIGN_OR_RETURN(o, operand(c, pos, kw));
    out.push_back(std::move(o));
  }
  return out;
}

Expr zero(DType t) { return ir::Constant::make(0, t); }

/// Integer division and remainder by zero raise in eager (CPU) and trap in
/// C: the divisor is 1 where it is 0 (ir nonzero_divisor), and the CPU kernel
/// reports the 0 so the call raises ZeroDivisionError as eager does (CUDA
/// eager does not raise: there the quotient is just unspecified).
Expr safe_divisor(const Expr& b, DType t) {
  if (is_floating(t)) return b;
  return ir::unary(UnaryOp::NonzeroDivisor, b);
}

// --- unary ---------------------------------------------------------------------------------

/// exp, log, sin, ...: integer inputs compute in the default float type.
LowerFn float_unary(UnaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
    return lower_elementwise(c, ops, {Promotion::IntToFloat},
                             [op](const Args& a, DType) -> Expected<Expr> { return ir::unary(op, a[0]); });
  };
}

/// floor, ceil, round, trunc: the identity on integers.
LowerFn rounding_unary(UnaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
    return lower_elementwise(c, ops, {}, [op](const Args& a, DType t) -> Expected<Expr> {
      return is_floating(t) ? ir::unary(op, a[0]) : a[0];
    });
  };
}

/// round(x, decimals): eager's rounding at a power of ten, half to even:
/// round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d, with
/// 10^|d| in the compute type.
Status lower_round_decimals(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  CPPI_ASSIGN_OR_RETURN(decimals, c.int_const(1, "decimals", 0));
  return lower_elementwise(c, ops, {}, [decimals](const Args& a, DType t) -> Expected<Expr> {
    if (!is_floating(t)) return Error::unsupported("round with decimals of an integer tensor");
    Expr ten_pow = ir::const_float(std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals)), t);
    BinaryOp scale = decimals < 0 ? BinaryOp::TrueDiv : BinaryOp::Mul;
    BinaryOp unscale = decimals < 0 ? BinaryOp::Mul : BinaryOp::TrueDiv;
    return ir::binary(unscale, ir::unary(UnaryOp::Round, ir::binary(scale, a[0], ten_pow)), ten_pow);
  });
}

Status lower_neg(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("negation of a bool tensor");
    return ir::unary(UnaryOp::Neg, a[0]);
  });
}

Status lower_abs(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool || t == DType::UInt8) return a[0];
    return ir::unary(UnaryOp::Abs, a[0]);
  });
}

Status lower_sign(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return a[0];
    return ir::unary(UnaryOp::Sign, a[0]);
  });
}

Status lower_relu(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  bool inject_bug = c.ctx.options().inject_relu_bug_testing_only;
  return lower_elementwise(c, ops, {}, [inject_bug](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("relu of a bool tensor");
    if (inject_bug) return a[0];  // wrong on purpose: negatives pass through
    // The bound first: on CPU a tie (-0) keeps x, as eager's relu does.
    return ir::binary(BinaryOp::Maximum, zero(t), a[0]);
  });
}

Status lower_logical_not(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  ElementwiseOptions o;
  o.compute = DType::Bool;
  return lower_elementwise(c, ops, o, [](const Args& a, DType) -> Expected<Expr> {
    return ir::unary(UnaryOp::LogicalNot, a[0]);
  });
}

Status lower_bitwise_not(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (is_floating(t)) return Error::unsupported("bitwise_not of a float tensor");
    return ir::unary(UnaryOp::BitwiseNot, a[0]);
  });
}

/// isnan, isinf, isfinite, signbit: bool results; integers are never NaN/inf.
LowerFn float_predicate(UnaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
    ElementwiseOptions o;
    o.compute = DType::Bool;
    o.keep_dtype = {true};
    return lower_elementwise(c, ops, o, [op](const Args& a, DType) -> Expected<Expr> {
      DType t = a[0].dtype();
      if (is_floating(t)) return ir::unary(op, a[0]);
      if (op == UnaryOp::IsFinite) return ir::const_bool(true);
      if (op == UnaryOp::SignBit && t != DType::Bool && t != DType::UInt8)
        return ir::compare(CompareOp::Lt, a[0], zero(t));
      return ir::const_bool(false);
    });
  };
}

// --- binary arithmetic ---------------------------------------------------------------------

/// a + alpha * b (add), a - alpha * b (sub); rsub swaps the operands.
LowerFn add_sub(BinaryOp op, bool reversed) {
  return [op, reversed](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    CPPI_ASSIGN_OR_RETURN(alpha, c.optional_scalar(2, "alpha"));
    if (reversed) std::swap(ops[0], ops[1]);
    return lower_elementwise(c, ops, {}, [op, alpha, reversed](const Args& a, DType t) -> Expected<Expr> {
      Expr x = a[0], y = a[1];
      if (t == DType::Bool) {
        if (op != BinaryOp::Add) return Error::unsupported("subtraction of bool tensors");
        if (alpha && alpha->is_symbolic()) return Error::unsupported("a symbolic alpha on bool tensors");
        return ir::binary(BinaryOp::LogicalOr, x, alpha && alpha->as_double() == 0 ? ir::const_bool(false) : y);
      }
      if (alpha && !(!alpha->is_symbolic() && alpha->as_double() == 1)) {
        Expr scaled = alpha->as_expr(t);
        if (reversed) x = ir::binary(BinaryOp::Mul, x, scaled);
        else y = ir::binary(BinaryOp::Mul, y, scaled);
      }
      return ir::binary(op, x, y);
    });
  };
}

Status lower_mul(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    return ir::binary(t == DType::Bool ? BinaryOp::LogicalAnd : BinaryOp::Mul, a[0], a[1]);
  });
}

/// prims.fma(a, b, c): Dynamo's form of addcmul_ / addcdiv_ with a value
/// and add_ with a tensor alpha. Computed as the prim's eager implementation
/// does, (a * b) + c, each operation rounded.
Status lower_fma(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "a"}, {1, "b"}, {2, "c"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("fma of bool tensors");
    return ir::binary(BinaryOp::Add, ir::binary(BinaryOp::Mul, a[0], a[1]), a[2]);
  });
}

/// torch.div: true division, or rounding_mode "trunc" / "floor".
Status lower_div(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
  const Arg* mode_arg = c.arg(2, "rounding_mode");
  std::string mode = mode_arg && mode_arg->kind == Arg::Kind::String ? mode_arg->s : "";
  if (mode.empty()) {
    return lower_elementwise(c, ops, {Promotion::IntToFloat}, [](const Args& a, DType) -> Expected<Expr> {
      return ir::binary(BinaryOp::TrueDiv, a[0], a[1]);
    });
  }
  if (mode != "trunc" && mode != "floor") return Error::unsupported(cat("rounding_mode '", mode, "'"));
  return lower_elementwise(c, ops, {}, [mode](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("rounding division of bool tensors");
    if (!is_floating(t)) {
      return ir::binary(mode == "trunc" ? BinaryOp::TruncDiv : BinaryOp::FloorDiv, a[0], safe_divisor(a[1], t));
    }
    if (mode == "trunc") return ir::unary(UnaryOp::Trunc, ir::binary(BinaryOp::TrueDiv, a[0], a[1]));
    return ir::binary(BinaryOp::FloorDiv, a[0], a[1]);  // torch.floor_divide semantics (expr.h)
  });
}

Status lower_floor_divide(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
  return lower_elementwise(c, ops, {}, [](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("floor_divide of bool tensors");
    return ir::binary(BinaryOp::FloorDiv, a[0], safe_divisor(a[1], t));
  });
}

/// fmod (sign of the dividend) and remainder (sign of the divisor).
LowerFn modulo(BinaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    return lower_elementwise(c, ops, {}, [op](const Args& a, DType t) -> Expected<Expr> {
      if (t == DType::Bool) return Error::unsupported("modulo of bool tensors");
      return ir::binary(op, a[0], safe_divisor(a[1], t));
    });
  };
}

/// pow with the exponents ATen's CPU kernel special-cases (so results match
/// eager bit for bit there): 2 and 3 as products, 0.5 as sqrt.
Status lower_pow(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "exponent"}}));
  std::optional<double> exponent;
  if (!ops[1].tensor && !ops[1].scalar.is_symbolic()) exponent = ops[1].scalar.as_double();
  return lower_elementwise(c, ops, {}, [exponent](const Args& a, DType t) -> Expected<Expr> {
    if (t == DType::Bool) return Error::unsupported("pow of bool tensors");
    if (exponent) {
      if (*exponent == 1) return a[0];
      if (*exponent == 2) return ir::binary(BinaryOp::Mul, a[0], a[0]);
      if (*exponent == 3) return ir::binary(BinaryOp::Mul, ir::binary(BinaryOp::Mul, a[0], a[0]), a[0]);
      if (*exponent == 0.5 && is_floating(t)) return ir::unary(UnaryOp::Sqrt, a[0]);
      if (*exponent < 0 && !is_floating(t) && std::floor(*exponent) == *exponent)
        return Error::unsupported("integer tensor to a negative integer power (eager raises)");
    }
    return ir::binary(BinaryOp::Pow, a[0], a[1]);
  });
}

/// maximum/minimum propagate NaN (expr.h), as torch does.
LowerFn min_max(BinaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    return lower_elementwise(c, ops, {}, [op](const Args& a, DType) -> Expected<Expr> {
      return ir::binary(op, a[0], a[1]);
    });
  };
}

/// fmax / fmin: a NaN operand yields the other operand (NaN only when both
/// are). Equal values yield self on CPU, -0 and +0 included, as eager's
/// there; on CUDA eager's ::fmax orders the zeros, as cppi_max does.
LowerFn fmax_fmin(bool is_max) {
  return [is_max](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    const bool on_cuda = c.meta().device == Device::CUDA;
    return lower_elementwise(c, ops, {}, [is_max, on_cuda](const Args& a, DType t) -> Expected<Expr> {
      const Expr& x = a[0];
      const Expr& y = a[1];
      Expr picked = on_cuda ? ir::binary(is_max ? BinaryOp::Maximum : BinaryOp::Minimum, x, y)
                            : ir::where(is_max ? ir::compare(CompareOp::Lt, x, y) : ir::compare(CompareOp::Lt, y, x),
                                        y, x);
      if (!is_floating(t)) return picked;
      return ir::where(ir::unary(UnaryOp::IsNan, x), y, ir::where(ir::unary(UnaryOp::IsNan, y), x, picked));
    });
  };
}

/// angle of a real tensor: pi where x < 0, else 0 (-0 included); NaN stays
/// NaN. Integers give floats.
Status lower_angle(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}}));
  return lower_elementwise(c, ops, {Promotion::IntToFloat}, [](const Args& a, DType t) -> Expected<Expr> {
    const Expr& x = a[0];
    Expr zero = ir::const_float(0, t);
    Expr half_turn = ir::where(ir::compare(CompareOp::Lt, x, zero), ir::const_float(M_PI, t), zero);
    return ir::where(ir::unary(UnaryOp::IsNan, x), x, half_turn);
  });
}

/// atan2, hypot, copysign: float results.
LowerFn float_binary(BinaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    return lower_elementwise(c, ops, {Promotion::IntToFloat}, [op](const Args& a, DType) -> Expected<Expr> {
      return ir::binary(op, a[0], a[1]);
    });
  };
}

/// A literal NaN float argument.
bool is_nan_literal(const Arg* a) { return a && a->kind == Arg::Kind::Float && a->f != a->f; }

/// clamp(x, min, max) = min(max(x, lo), hi): NaN in x or in a bound
/// propagates, and lo > hi gives hi, as in eager on CPU. clamp_min /
/// clamp_max take one bound. Eager's CUDA kernels compare with fmax/fmin,
/// which ignore a NaN scalar bound, so on CUDA such a bound is dropped to
/// give eager's result there.
LowerFn clamp(bool has_min, bool has_max) {
  return [has_min, has_max](const OpCall& c) -> Status {
    std::vector<Operand> ops;
    CPPI_ASSIGN_OR_RETURN(x, operand(c, 0, "self"));
    ops.push_back(x);
    const bool on_cuda = c.meta().device == Device::CUDA;
    auto ignored = [&](const Arg* a) { return on_cuda && is_nan_literal(a); };
    bool use_min = false, use_max = false;
    size_t pos = 1;
    if (has_min) {
      if (c.arg(pos, "min") && !ignored(c.arg(pos, "min"))) {
        CPPI_ASSIGN_OR_RETURN(lo, operand(c, pos, "min"));
        ops.push_back(lo);
        use_min = true;
      }
      ++pos;
    }
    if (has_max && c.arg(pos, "max") && !ignored(c.arg(pos, "max"))) {
      CPPI_ASSIGN_OR_RETURN(hi, operand(c, pos, "max"));
      ops.push_back(hi);
      use_max = true;
    }
    if (!use_min && !use_max) {
      if (on_cuda) return lower_elementwise(c, ops, {}, [](const Args& a, DType) -> Expected<Expr> { return a[0]; });
      return Error::unsupported("clamp without bounds");
    }
    return lower_elementwise(c, ops, {}, [use_min, use_max](const Args& a, DType t) -> Expected<Expr> {
      Expr r = a[0];
      size_t k = 1;
      // Bounds first: cppi_max / cppi_min give their second operand on a
      // tie, so on CPU a zero of the other sign keeps x, as eager's clamp
      // does (on CUDA both order the zeros, as eager's there).
      if (use_min) r = ir::binary(BinaryOp::Maximum, a[k++], r);
      if (use_max) r = ir::binary(BinaryOp::Minimum, a[k++], r);
      return r;
    });
  };
}

// --- comparisons, logical, bitwise -------------------------------------------------------

LowerFn comparison(CompareOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    return lower_elementwise(c, ops, {Promotion::AlwaysBool}, [op](const Args& a, DType) -> Expected<Expr> {
      return ir::compare(op, a[0], a[1]);
    });
  };
}

LowerFn logical(BinaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    ElementwiseOptions o;
    o.compute = DType::Bool;
    return lower_elementwise(c, ops, o, [op](const Args& a, DType) -> Expected<Expr> {
      return ir::binary(op, a[0], a[1]);
    });
  };
}

LowerFn bitwise(BinaryOp op) {
  return [op](const OpCall& c) -> Status {
    CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "other"}}));
    return lower_elementwise(c, ops, {}, [op](const Args& a, DType t) -> Expected<Expr> {
      if (is_floating(t)) return Error::unsupported("bitwise op on float tensors");
      bool shift = op == BinaryOp::LShift || op == BinaryOp::RShift;
      if (shift && t == DType::Bool) return Error::unsupported("shift of bool tensors");
      return ir::binary(op, a[0], a[1]);
    });
  };
}

// --- selection -----------------------------------------------------------------------------

/// where(cond, a, b): a and b promote; cond is read as bool.
Status lower_where(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "condition"}, {1, "self"}, {2, "other"}}));
  ElementwiseOptions o;
  o.keep_dtype = {true, false, false};
  return lower_elementwise(c, ops, o, [](const Args& a, DType) -> Expected<Expr> {
    return ir::where(ir::cast(a[0], DType::Bool), a[1], a[2]);
  });
}

/// masked_fill keeps self's dtype (no promotion with the value).
Status lower_masked_fill(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(ops, operands(c, {{0, "self"}, {1, "mask"}, {2, "value"}}));
  if (!ops[0].tensor) return Error::unsupported("masked_fill of a non-tensor");
  ElementwiseOptions o;
  o.compute = opmath_type(ops[0].tensor->dtype);
  o.keep_dtype = {false, true, false};
  return lower_elementwise(c, ops, o, [](const Args& a, DType) -> Expected<Expr> {
    return ir::where(ir::cast(a[1], DType::Bool), a[2], a[0]);
  });
}

}  // namespace

void register_pointwise_lowerings(Registry& r) {
  const std::pair<const char*, UnaryOp> float_unaries[] = {
      {"exp", UnaryOp::Exp},       {"exp2", UnaryOp::Exp2},       {"expm1", UnaryOp::Expm1},
      {"log", UnaryOp::Log},       {"log2", UnaryOp::Log2},       {"log10", UnaryOp::Log10},
      {"log1p", UnaryOp::Log1p},   {"sqrt", UnaryOp::Sqrt},       {"rsqrt", UnaryOp::Rsqrt},
      {"reciprocal", UnaryOp::Reciprocal}, {"sin", UnaryOp::Sin}, {"cos", UnaryOp::Cos},
      {"tan", UnaryOp::Tan},       {"asin", UnaryOp::Asin},       {"acos", UnaryOp::Acos},
      {"atan", UnaryOp::Atan},     {"sinh", UnaryOp::Sinh},       {"cosh", UnaryOp::Cosh},
      {"tanh", UnaryOp::Tanh},     {"asinh", UnaryOp::Asinh},     {"acosh", UnaryOp::Acosh},
      {"atanh", UnaryOp::Atanh},   {"sigmoid", UnaryOp::Sigmoid}, {"erf", UnaryOp::Erf},
      {"erfc", UnaryOp::Erfc},     {"erfinv", UnaryOp::Erfinv},   {"lgamma", UnaryOp::Lgamma},
  };
  for (auto [name, op] : float_unaries) r.add(cat("aten.", name, ".default"), float_unary(op));
  const std::pair<const char*, UnaryOp> roundings[] = {
      {"floor", UnaryOp::Floor}, {"ceil", UnaryOp::Ceil}, {"round", UnaryOp::Round}, {"trunc", UnaryOp::Trunc}};
  for (auto [name, op] : roundings) r.add(cat("aten.", name, ".default"), rounding_unary(op));
  r.add("aten.round.decimals", lower_round_decimals);
  r.add("aten.neg.default", lower_neg);
  r.add("aten.abs.default", lower_abs);
  r.add("aten.sign.default", lower_sign);
  r.add("aten.sgn.default", lower_sign);
  r.add("aten.relu.default", lower_relu);
  r.add("aten.logical_not.default", lower_logical_not);
  r.add("aten.bitwise_not.default", lower_bitwise_not);
  r.add("aten.isnan.default", float_predicate(UnaryOp::IsNan));
  r.add("aten.isinf.default", float_predicate(UnaryOp::IsInf));
  r.add("aten.isfinite.default", float_predicate(UnaryOp::IsFinite));
  r.add("aten.signbit.default", float_predicate(UnaryOp::SignBit));

  for (const char* o : {"Tensor", "Scalar"}) {
    r.add(cat("aten.add.", o), add_sub(BinaryOp::Add, false));
    r.add(cat("aten.sub.", o), add_sub(BinaryOp::Sub, false));
    r.add(cat("aten.rsub.", o), add_sub(BinaryOp::Sub, true));
    r.add(cat("aten.mul.", o), lower_mul);
    r.add(cat("aten.div.", o), lower_div);
    r.add(cat("aten.div.", o, "_mode"), lower_div);
    r.add(cat("aten.true_divide.", o), lower_div);  // div without rounding_mode
    r.add(cat("aten.fmod.", o), modulo(BinaryOp::Fmod));
    r.add(cat("aten.remainder.", o), modulo(BinaryOp::Remainder));
    r.add(cat("aten.copysign.", o), float_binary(BinaryOp::Copysign));
    r.add(cat("aten.bitwise_and.", o), bitwise(BinaryOp::BitwiseAnd));
    r.add(cat("aten.bitwise_or.", o), bitwise(BinaryOp::BitwiseOr));
    r.add(cat("aten.bitwise_xor.", o), bitwise(BinaryOp::BitwiseXor));
    r.add(cat("aten.__lshift__.", o), bitwise(BinaryOp::LShift));
    r.add(cat("aten.__rshift__.", o), bitwise(BinaryOp::RShift));
    r.add(cat("aten.eq.", o), comparison(CompareOp::Eq));
    r.add(cat("aten.ne.", o), comparison(CompareOp::Ne));
    r.add(cat("aten.lt.", o), comparison(CompareOp::Lt));
    r.add(cat("aten.le.", o), comparison(CompareOp::Le));
    r.add(cat("aten.gt.", o), comparison(CompareOp::Gt));
    r.add(cat("aten.ge.", o), comparison(CompareOp::Ge));
  }
  r.add("aten.remainder.Scalar_Tensor", modulo(BinaryOp::Remainder));
  r.add("aten.bitwise_left_shift.Tensor", bitwise(BinaryOp::LShift));
  r.add("aten.bitwise_right_shift.Tensor", bitwise(BinaryOp::RShift));
  r.add("aten.bitwise_left_shift.Tensor_Scalar", bitwise(BinaryOp::LShift));
  r.add("aten.bitwise_right_shift.Tensor_Scalar", bitwise(BinaryOp::RShift));
  r.add("aten.floor_divide.default", lower_floor_divide);
  r.add("aten.floor_divide.Scalar", lower_floor_divide);
  r.add("aten.pow.Tensor_Tensor", lower_pow);
  r.add("aten.pow.Tensor_Scalar", lower_pow);
  r.add("aten.pow.Scalar", lower_pow);
  r.add("aten.maximum.default", min_max(BinaryOp::Maximum));
  r.add("aten.minimum.default", min_max(BinaryOp::Minimum));
  r.add("aten.angle.default", lower_angle);
  r.add("aten.fmax.default", fmax_fmin(true));
  r.add("aten.fmin.default", fmax_fmin(false));
  r.add("aten.atan2.default", float_binary(BinaryOp::Atan2));
  r.add("aten.hypot.default", float_binary(BinaryOp::Hypot));
  r.add("aten.clamp.default", clamp(true, true));
  r.add("aten.clamp.Tensor", clamp(true, true));
  r.add("aten.clamp_min.default", clamp(true, false));
  r.add("aten.clamp_min.Tensor", clamp(true, false));
  r.add("aten.clamp_max.default", clamp(false, true));
  r.add("aten.clamp_max.Tensor", clamp(false, true));
  r.add("aten.logical_and.default", logical(BinaryOp::LogicalAnd));
  r.add("aten.logical_or.default", logical(BinaryOp::LogicalOr));
  r.add("aten.logical_xor.default", logical(BinaryOp::LogicalXor));
  r.add("prims.fma.default", lower_fma);
  r.add("aten.where.self", lower_where);
  r.add("aten.where.ScalarSelf", lower_where);
  r.add("aten.where.ScalarOther", lower_where);
  r.add("aten.where.Scalar", lower_where);
  r.add("aten.masked_fill.Scalar", lower_masked_fill);
  r.add("aten.masked_fill.Tensor", lower_masked_fill);
}

}  // namespace cppi::lowering
