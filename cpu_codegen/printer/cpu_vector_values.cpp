/// CPU kernel printer: expressions in vector form: vector types, the vector
/// op table, casts, masks, contiguous loads and lane-wise gathers.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include <cmath>

#include "codegen/op_tables.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::cpu::detail {

// --- scalars through the vector implementation ---------------------------------------------

namespace {

/// Whether a scalar math call in this kernel goes through its vector form:
/// the kernel has vector loops whose lanes compute it with SLEEF or libmvec,
/// and a vector of `t` exists at the kernel's width.
bool through_vector_form(const CpuSchedule& s, DType t, bool math, bool has_vector_form) {
  if (!math || !has_vector_form || s.vectorized == VectorizedLoop::None) return false;
  return t == DType::Float32 || (t == DType::Float64 && s.vector_width <= 8);
}

/// The vector form of a float maximum or minimum one of whose operands is a
/// constant other than NaN (relu, clamp): only the other can be NaN, so one
/// comparison and a select give cppi_max's results (NaN wins, a tie keeps the
/// second operand), where cppi_max checks both for NaN first. Null otherwise.
const char* bounded_max_min(const Binary& n) {
  if (n.op != BinaryOp::Maximum && n.op != BinaryOp::Minimum) return nullptr;
  if (codegen::operand_class(n.lhs.dtype()) != codegen::OperandClass::Float) return nullptr;
  auto bound = [](const Expr& e) {
    const auto* c = e.as<Constant>();
    return c && !std::isnan(c->float_value);
  };
  const bool max = n.op == BinaryOp::Maximum;
  if (bound(n.lhs)) return max ? "cppi_max_bound_first({0}, {1})" : "cppi_min_bound_first({0}, {1})";
  if (bound(n.rhs)) return max ? "cppi_max_bound_second({0}, {1})" : "cppi_min_bound_second({0}, {1})";
  return nullptr;
}

}  // namespace

bool CpuKernelPrinter::scalar_math_beside_lanes(const Place& at) const {
  if (at.invariants) return false;
  return sched_.vectorized == VectorizedLoop::InnermostOuter || at.stage_loop;
}

std::string CpuKernelPrinter::scalar_unary(UnaryOp op, DType t, const std::string& x, const ValueScope& scope) const {
  const char* tmpl = codegen::vector_unary_template(op, codegen::OperandClass::Float);
  if (!scalar_math_beside_lanes(place(scope)) || !through_vector_form(sched_, t, ir::is_math_function(op), tmpl)) {
    return c_unary(op, t, x);
  }
  const std::string v = vtype(t);
  return "(" + codegen::expand_template(tmpl, {cat("cppi_vsplat<", v, ">(", x, ")")}, scalar_type(t), v,
                                        mask_type(dtype_size(t))) + ")[0]";
}

std::string CpuKernelPrinter::scalar_binary(BinaryOp op, DType t, const std::string& a, const std::string& b,
                                            const ValueScope& scope) const {
  const char* tmpl = codegen::vector_binary_template(op, codegen::OperandClass::Float);
  if (!scalar_math_beside_lanes(place(scope)) || !through_vector_form(sched_, t, ir::is_math_function(op), tmpl)) {
    return c_binary(op, t, a, b);
  }
  const std::string v = vtype(t);
  return "(" + codegen::expand_template(tmpl, {cat("cppi_vsplat<", v, ">(", a, ")"), cat("cppi_vsplat<", v, ">(", b, ")")},
                                        scalar_type(t), v, mask_type(dtype_size(t))) + ")[0]";
}

// --- vector values -------------------------------------------------------------------------

std::string CpuKernelPrinter::vtype(DType t) const {
  const int w = sched_.vector_width;
  if (dtype_size(t) == 8 && w > 8) fail(cat("kernel ", k_.name, ": no ", w, "-lane vector of ", dtype_name(t)));
  switch (t) {
    case DType::Float32: return "cppi_f32x" + width();
    case DType::Float64: return "cppi_f64x" + width();
    case DType::Int64: return "cppi_i64x" + width();
    case DType::Int32: return "cppi_i32x" + width();
    case DType::Int16: return "cppi_i16x" + width();
    case DType::Int8: return "cppi_i8x" + width();
    case DType::UInt8: return "cppi_u8x" + width();
    case DType::Float16:
    case DType::BFloat16: return "cppi_u16x" + width();
    case DType::Bool: return mask_type(4);
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: break;  // storage only (support/dtype.h)
  }
  fail(cat("kernel ", k_.name, ": no vector of ", dtype_name(t)));
}

bool CpuKernelPrinter::varying(const Expr& e, const Place& at) const {
  auto& memo = *at.varying;
  auto it = memo.find(e.get());
  if (it != memo.end()) return it->second;
  const std::string& vvar = at.vector_var;
  auto varying = [&](const Expr& x) { return this->varying(x, at); };
  bool r = false;
  switch (e.kind()) {
    case ExprKind::Constant: break;
    case ExprKind::LocalRef: r = local_value(*e.as<LocalRef>()).vector; break;
    case ExprKind::Load: {
      auto n = e.as<Load>();
      r = depends_on(n->index, vvar) || (n->mask.defined() && varying(n->mask));
      break;
    }
    case ExprKind::IndexValue: r = depends_on(e.as<IndexValue>()->index, vvar); break;
    case ExprKind::Cast: r = varying(e.as<Cast>()->value); break;
    case ExprKind::Unary: r = varying(e.as<Unary>()->operand); break;
    case ExprKind::Binary: r = varying(e.as<Binary>()->lhs) || varying(e.as<Binary>()->rhs); break;
    case ExprKind::Compare: r = varying(e.as<Compare>()->lhs) || varying(e.as<Compare>()->rhs); break;
    case ExprKind::Where: {
      auto n = e.as<Where>();
      r = varying(n->cond) || varying(n->then_value) || varying(n->else_value);
      break;
    }
    case ExprKind::Random: r = depends_on(e.as<Random>()->offset, vvar) || varying(e.as<Random>()->seed); break;
  }
  memo[e.get()] = r;
  return r;
}

CValue CpuKernelPrinter::value(const Expr& e, ValueScope& scope) {
  const Place& at = place(scope);
  if (!at.in_vector() || !varying(e, at)) return scalar_value(e, scope);
  if (auto l = e.as<LocalRef>()) return local_value(*l);
  if (const CValue* v = scope.find(e)) return *v;
  if (e.dtype() == DType::Float32 && is_sincos_half(e, scope)) {
    // The prelude's vector cppi_sincos is float only; scalar tails keep
    // sinf and cosf (LLVM pairs those into sincosf itself).
    const CValue x = value(e.as<Unary>()->operand, scope);
    CValue v = print_sincos(e, CValue{as_vector(x), DType::Float32, true}, vtype(DType::Float32), scope);
    scope.add(e, v);
    return v;
  }
  CValue v = vector_node(e, scope);
  const std::string type = v.dtype == DType::Bool ? mask_type(v.mask_bytes) : vtype(v.dtype);
  v.text = declare(type, v.text);
  scope.add(e, v);
  return v;
}

std::string CpuKernelPrinter::as_vector(const CValue& v) {
  if (v.dtype == DType::Bool) return as_mask(v, 4);
  if (v.vector) return v.text;
  if (is_reduced_float(v.dtype)) return cat("cppi_vsplat<", vtype(v.dtype), ">(", v.text, ".bits)");
  return cat("cppi_vsplat<", vtype(v.dtype), ">(", v.text, ")");
}

std::string CpuKernelPrinter::as_mask(const CValue& v, int bytes) {
  if (v.dtype != DType::Bool) fail("a non-bool value used as a mask");
  if (!v.vector) return cat("cppi_vsplat<", mask_type(bytes), ">(", v.text, " ? -1 : 0)");
  if (v.mask_bytes == bytes) return v.text;
  return cat("cppi_vconvert<", mask_type(bytes), ">(", v.text, ")");
}

std::string CpuKernelPrinter::vector_cast(DType from, DType to, const CValue& x) {
  if (from == to) return as_vector(x);
  if (is_reduced_float(from)) {
    CValue f{cat(from == DType::Float16 ? "cppi_half_to_float(" : "cppi_bf16_to_float(", as_vector(x), ")"),
             DType::Float32, true};
    return to == DType::Float32 ? f.text : vector_cast(DType::Float32, to, f);
  }
  if (is_reduced_float(to)) {
    CValue f{from == DType::Float32 ? as_vector(x) : vector_cast(from, DType::Float32, x), DType::Float32, true};
    return cat(to == DType::Float16 ? "cppi_float_to_half(" : "cppi_float_to_bf16(", f.text, ")");
  }
  if (from == DType::Bool) {
    const int b = dtype_size(to);
    return cat("cppi_vconvert<", vtype(to), ">(", as_mask(x, b), " & cppi_vsplat<", mask_type(b), ">(1))");
  }
  if (to == DType::Bool) return cat("(", as_vector(x), " != cppi_vsplat<", vtype(from), ">(0))");
  if (is_floating(from) && is_integral(to)) {
    // As scalar_cast: through int32 or int64, defined for every float.
    const DType wide = float_cast_truncates_through(to);
    const std::string converted = cat("cppi_vfloat_to_int<", vtype(wide), ">(", as_vector(x), ")");
    return wide == to ? converted : cat("cppi_vconvert<", vtype(to), ">(", converted, ")");
  }
  return cat("cppi_vconvert<", vtype(to), ">(", as_vector(x), ")");
}

std::string CpuKernelPrinter::tail_mask(int bytes, const std::string& lanes) const {
  return cat("cppi_vlanes_below<", mask_type(bytes), ">(", lanes, ")");
}

std::string CpuKernelPrinter::masked_tail_load(const Load& n, const std::string& mem_type, bool contiguous,
                                               ValueScope& scope) {
  const Place& at = place(scope);
  if (contiguous && !n.mask.defined()) {
    return cat("cppi_vload_partial<", mem_type, ">(&", pointer_name(n.buffer->name), "[", access_index(n.index, scope),
               "], ", at.tail_lanes, ")");
  }
  // Strided, repeated or gathered lanes, or a load's own mask: lane by lane.
  std::string on = tail_mask(4, at.tail_lanes);
  if (!n.mask.defined()) {
    return cat("cppi_vgen_masked<", mem_type, ">(", on, ", ", at.vector_var, ", ",
               lane_lambda(at.vector_var, lane_element(n, scope)), ")");
  }
  ValueScope unchecked(scope, ValueScope::UncheckedIndices{});
  on = cat("(", as_mask(value(n.mask, unchecked), 4), " & ", on, ")");
  return cat("cppi_vgen_masked<", mem_type, ">(", on, ", ", at.vector_var, ", ",
             lane_lambda(at.vector_var, lane_element(n, unchecked)), ")");
}

std::string CpuKernelPrinter::lane_lambda(const std::string& var, const std::string& body_expr) {
  return cat("[&](int64_t ", var, ") { return ", body_expr, "; }");
}

std::string CpuKernelPrinter::access_index(const IndexExpr& e, ValueScope& scope) {
  const std::string& vvar = place(scope).vector_var;
  if (!vvar.empty()) {
    for (const auto& leaf : indirect_terms(e)) {
      if (depends_on(leaf, vvar)) fail(cat("kernel ", k_.name, ": indirect index ", leaf, " varies along the vectorised ", vvar));
    }
  }
  return index(e, scope);
}

std::string CpuKernelPrinter::lane_element(const Load& n, ValueScope& scope) {
  const std::string access = pointer_name(n.buffer->name) + "[" + access_index(n.index, scope) + "]";
  if (is_reduced_float(n.dtype)) return access + ".bits";
  if (n.dtype == DType::Bool) return "(uint8_t)" + access;
  return access;
}

CValue CpuKernelPrinter::vector_load(const Load& n, ValueScope& scope) {
  CValue r;
  r.dtype = n.dtype;
  r.vector = true;
  if (r.dtype == DType::Bool) r.mask_bytes = 4;
  const std::string mem_type = n.dtype == DType::Bool ? "cppi_u8x" + width() : vtype(n.dtype);
  const Place& at = place(scope);
  const std::string& vvar = at.vector_var;
  auto lane_lambda = [&](const std::string& body) { return CpuKernelPrinter::lane_lambda(vvar, body); };
  std::string loaded;
  auto stride = coefficient(n.index, var(vvar));
  const bool contiguous = stride && stride->is_constant(1);
  if (const codegen::RowBlock* b = row_block_of(n.buffer, n.index, n.mask.defined(), at)) {
    loaded = cat(row_block_array(*b), "[", var_name(*at.row_loop), "]");
  } else if (const CValue* forwarded = forwarded_load(n, at)) {
    loaded = forwarded->text;
  } else if (!at.tail_lanes.empty()) {
    loaded = masked_tail_load(n, mem_type, contiguous, scope);
  } else if (n.mask.defined()) {
    ValueScope unchecked(scope, ValueScope::UncheckedIndices{});
    const CValue m = value(n.mask, unchecked);
    const std::string mask = m.vector ? m.text : as_mask(m, 4);
    const std::string lanes = lane_lambda(lane_element(n, unchecked));
    // Elements one or a few apart: whole vectors where every lane is on.
    const auto strided = strided_load(n.index, false, vvar);
    if (contiguous || strided) {
      const std::string load_fn = strided ? cat("cppi_vload_strided<", mem_type, ", ", *strided, ">")
                                          : cat("cppi_vload<", mem_type, ">");
      const std::string whole = cat("[&]() { return ", load_fn, "(&", pointer_name(n.buffer->name), "[",
                                    access_index(n.index, unchecked), "]); }");
      loaded = cat("cppi_vload_masked<", mem_type, ">(", mask, ", ", whole, ", ", vvar, ", ", lanes, ")");
    } else {
      loaded = cat("cppi_vgen_masked<", mem_type, ">(", mask, ", ", vvar, ", ", lanes, ")");
    }
  } else {
    const TransposedLoad* tiled = nullptr;
    if (!at.tile_row.empty()) {
      for (const auto& t : transposed_) {
        if (t.buffer->name == n.buffer->name && t.index == n.index) tiled = &t;
      }
    }
    if (contiguous) {
      loaded = cat("cppi_vload<", mem_type, ">(&", pointer_name(n.buffer->name), "[", access_index(n.index, scope), "])");
    } else if (tiled) {
      // This row of the tile (Place::tile_row, print_transpose_tiles) holds the vector's lanes.
      loaded = cat("cppi_vload<", mem_type, ">(&", tiled->tile, "[", at.tile_row, "])");
    } else if (auto s = strided_load(n.index, false, vvar)) {
      loaded = cat("cppi_vload_strided<", mem_type, ", ", *s, ">(&", pointer_name(n.buffer->name), "[",
                   access_index(n.index, scope), "])");
    } else if (auto rep = repeated_load(n.index, false, vvar); rep && sched_.vector_width % *rep == 0) {
      loaded = cat("cppi_vload_repeat<", mem_type, ", ", *rep, ">(&", pointer_name(n.buffer->name), "[",
                   access_index(n.index, scope), "], ", vvar, ", ", lane_lambda(lane_element(n, scope)), ")");
    } else {
      loaded = cat("cppi_vgen<", mem_type, ">(", vvar, ", ", lane_lambda(lane_element(n, scope)), ")");
    }
  }
  if (n.dtype == DType::Bool) {
    r.mask_bytes = 1;
    r.text = cat("(", loaded, " != cppi_vsplat<", mem_type, ">(0))");
  } else {
    r.text = loaded;
  }
  return r;
}

CValue CpuKernelPrinter::vector_node(const Expr& e, ValueScope& scope) {
  CValue r;
  r.dtype = e.dtype();
  r.vector = true;
  if (r.dtype == DType::Bool) r.mask_bytes = 4;
  const std::string w = width();
  const Place& at = place(scope);
  const std::string& vvar = at.vector_var;
  auto lane_lambda = [&](const std::string& body) { return CpuKernelPrinter::lane_lambda(vvar, body); };
  switch (e.kind()) {
    case ExprKind::Constant:
    case ExprKind::LocalRef: break;  // never varying / handled by value()
    case ExprKind::Load: return vector_load(*e.as<Load>(), scope);
    case ExprKind::IndexValue: {
      const IndexExpr& idx = e.as<IndexValue>()->index;
      auto stride = coefficient(idx, var(vvar));
      if (stride && stride->is_constant(1)) {
        r.text = cat("cppi_viota<cppi_i64x", w, ">(", access_index(idx, scope), ")");
      } else if (stride && stride->constant() && indirect_terms(idx).empty()) {
        r.text = cat("cppi_viota_step<cppi_i64x", w, ">(", access_index(idx, scope), ", ", *stride->constant(), ")");
      } else {
        r.text = cat("cppi_vgen<cppi_i64x", w, ">(", vvar, ", ", lane_lambda("(int64_t)(" + access_index(idx, scope) + ")"), ")");
      }
      return r;
    }
    case ExprKind::Cast: {
      auto n = e.as<Cast>();
      if (auto step = int32_iota_step(*n, vvar)) {
        r.text = cat("cppi_viota_step<cppi_i32x", w, ">((int32_t)(", access_index(n->value.as<IndexValue>()->index, scope),
                     "), ", *step, ")");
        return r;
      }
      const CValue x = value(n->value, scope);
      r.text = vector_cast(n->value.dtype(), n->dtype, x);
      // A half or bfloat16 value is compared with zero as float32 (vector_cast
      // widens it first), so its mask has float32's lanes, not 2-byte ones.
      if (r.dtype == DType::Bool) r.mask_bytes = is_reduced_float(n->value.dtype()) ? 4 : lane_bytes(n->value.dtype());
      return r;
    }
    case ExprKind::Unary: {
      auto n = e.as<Unary>();
      const DType t = n->operand.dtype();
      const CValue x = value(n->operand, scope);
      const auto cls = codegen::operand_class(t);
      const char* tmpl = codegen::vector_unary_template(n->op, cls);
      if (t == DType::Bool) {
        if (!tmpl) fail(cat("no vector form of ", to_string(n->op), " on bool"));
        r.mask_bytes = x.mask_bytes;
        r.text = codegen::expand_template(tmpl, {x.text}, "bool");
        return r;
      }
      const std::string operand = as_vector(x);
      if (tmpl) {
        r.text = codegen::expand_template(tmpl, {operand}, scalar_type(t), vtype(t), mask_type(dtype_size(t)));
      } else {
        const std::string lane = scalar_unary(n->op, t, "a", scope);
        if (r.dtype == DType::Bool) {
          r.text = cat("(cppi_vmap1(", operand, ", [](", scalar_type(t), " a) { return (", scalar_type(t), ")", lane,
                       "; }) != cppi_vsplat<", vtype(t), ">(0))");
        } else {
          r.text = cat("cppi_vmap1(", operand, ", [](", scalar_type(t), " a) { return ", lane, "; })");
        }
      }
      if (r.dtype == DType::Bool) r.mask_bytes = dtype_size(t);
      return r;
    }
    case ExprKind::Binary: {
      auto n = e.as<Binary>();
      const DType t = n->lhs.dtype();
      const CValue a = value(n->lhs, scope), b = value(n->rhs, scope);
      const char* tmpl = codegen::vector_binary_template(n->op, codegen::operand_class(t));
      if (t == DType::Bool) {
        if (!tmpl) fail(cat("no vector form of ", to_string(n->op), " on bool"));
        const int bytes = a.vector ? a.mask_bytes : b.mask_bytes;
        r.mask_bytes = bytes;
        r.text = codegen::expand_template(tmpl, {as_mask(a, bytes), as_mask(b, bytes)}, "bool");
        return r;
      }
      const std::string x = as_vector(a), y = as_vector(b);
      if (const char* bounded = bounded_max_min(*n)) {
        r.text = codegen::expand_template(bounded, {x, y}, scalar_type(t), vtype(t), mask_type(dtype_size(t)));
      } else if (tmpl) {
        r.text = codegen::expand_template(tmpl, {x, y}, scalar_type(t), vtype(t), mask_type(dtype_size(t)));
      } else {
        const std::string st = scalar_type(t);
        r.text = cat("cppi_vmap2(", x, ", ", y, ", [](", st, " a, ", st, " b) { return ", scalar_binary(n->op, t, "a", "b", scope),
                     "; })");
      }
      return r;
    }
    case ExprKind::Compare: {
      auto n = e.as<Compare>();
      const DType t = n->lhs.dtype();
      const CValue a = value(n->lhs, scope), b = value(n->rhs, scope);
      if (t == DType::Bool) {
        const int bytes = a.vector ? a.mask_bytes : b.mask_bytes;
        const std::string one = cat("cppi_vsplat<", mask_type(bytes), ">(1)");
        r.mask_bytes = bytes;
        r.text = cat("((", as_mask(a, bytes), " & ", one, ") ", c_operator(n->op), " (", as_mask(b, bytes), " & ", one, "))");
        return r;
      }
      r.mask_bytes = dtype_size(t);
      r.text = cat("(", as_vector(a), " ", c_operator(n->op), " ", as_vector(b), ")");
      return r;
    }
    case ExprKind::Where: {
      auto n = e.as<Where>();
      const CValue c = value(n->cond, scope), a = value(n->then_value, scope), b = value(n->else_value, scope);
      if (r.dtype == DType::Bool) {
        const int bytes = c.vector ? c.mask_bytes : 4;
        r.mask_bytes = bytes;
        r.text = cat("cppi_vselect(", as_mask(c, bytes), ", ", as_mask(a, bytes), ", ", as_mask(b, bytes), ")");
        return r;
      }
      r.text = cat("cppi_vselect(", as_mask(c, lane_bytes(r.dtype)), ", ", as_vector(a), ", ", as_vector(b), ")");
      return r;
    }
    case ExprKind::Random: {
      auto n = e.as<Random>();
      if (varying(n->seed, at)) fail("a random seed that varies across vector lanes");
      const std::string seed = value(n->seed, scope).text;
      const bool uniform = n->random_kind == RandomKind::Uniform;
      if (auto step = philox_lane_step(n->offset, vvar)) {
        // Lane 0's counter is the offset at the vector's first iteration.
        r.text = cat(uniform ? "cppi_vrand<" : "cppi_vrandn<", vtype(DType::Float32), ">(", seed, ", ",
                     access_index(n->offset, scope), ", ", *step, "u)");
      } else {
        r.text = cat("cppi_vgen<", vtype(DType::Float32), ">(", vvar, ", ",
                     lane_lambda(cat(uniform ? "cppi_rand(" : "cppi_randn(", seed, ", ", access_index(n->offset, scope), ")")),
                     ")");
      }
      return r;
    }
  }
  fail(cat("cannot print ", to_string(e.kind()), " as a vector"));
}

}  // namespace cppi::cpu::detail
