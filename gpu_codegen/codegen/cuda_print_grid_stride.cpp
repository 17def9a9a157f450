// The CUDA printer's grid-stride mappings: pointwise kernels (scalar and
// V-element vectorised) and one-thread-per-column reductions, printed by
// walking the loop nest lower_grid_stride_loops builds (grid_stride_loops.h):
// the grid-stride loop, the unravelled outer variables, a vectorised store's
// lane loop; stages printed serially as the C printer's scalar path would
// (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "lowering/ir/scalar_convert.h"

#include <algorithm>

namespace cppi::gpu::cuda_print {

// --- grid-stride mappings --------------------------------------------------------------------

void CudaKernelPrinter::print_grid_stride(PrintedCudaKernel* info) {
  // Every mapping's loops print from a loop nest (the rows' and column
  // groups': cuda_print_rows.cpp; the scans': cuda_print_scans.cpp);
  // inside a row, a column group or a scan's chunk the stages' loops still
  // print in place (issue #38).
  print_grid_stride_stmt(lowered_nest(lower_grid_stride_loops, "lower_grid_stride_loops", info), nullptr);
}

void CudaKernelPrinter::print_grid_stride_stmt(const codegen::Stmt& s, VectorLanes* lanes) {
  if (const auto* l = std::get_if<codegen::For>(&s->node)) {
    if (l->kind == codegen::LoopKind::GpuGridStride) {
      print_grid_stride_loop(*l);
    } else if (l->kind == codegen::LoopKind::GpuLanes && lanes) {
      print_lane_loop(*l, *lanes);
    } else {
      fail(cat("kernel ", k_.name, ": loop ", l->var, " is not a grid-stride or lane loop"));
    }
  } else if (const auto* b = std::get_if<codegen::Block>(&s->node)) {
    for (const codegen::Stmt& c : b->body) print_grid_stride_stmt(c, lanes);
  } else if (const auto* let = std::get_if<codegen::Let>(&s->node)) {
    out_.line(cat("const int64_t ", let->name, " = ", let->value, ";"));
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node)) {
    print_grid_stride_part(*part);
  } else if (std::holds_alternative<codegen::Stages>(s->node)) {
    print_serial_stages();
  } else {
    fail(cat("kernel ", k_.name, ": a grid-stride loop nest holds a statement it cannot print"));
  }
}

void CudaKernelPrinter::print_grid_stride_part(const codegen::TargetPart& p) {
  if (p.args.size() != 1) fail(cat("kernel ", k_.name, ": ", p.what, " takes the flat index"));
  if (p.what == grid_part::kUsedOuterVars) {
    unravel_outer(p.args[0]);
  } else if (p.what == grid_part::kOuterVars) {
    unravel(k_.outer, p.args[0]);
  } else {
    fail(cat("kernel ", k_.name, ": no grid-stride part ", p.what));
  }
}

void CudaKernelPrinter::print_grid_stride_loop(const codegen::For& l) {
  if (l.lo.value != 0 || l.threads <= 0) {
    fail(cat("kernel ", k_.name, ": grid-stride loop ", l.var, " from ", l.lo.text, " on ", l.threads, " threads"));
  }
  const std::string thread = cat("(int64_t)blockIdx.x * ", l.threads, " + threadIdx.x");
  const std::string first = l.step == 1 ? thread : cat("(", thread, ") * ", l.step);
  out_.open(cat("for (int64_t ", l.var, " = ", first, "; ", l.var, " < ", l.hi.text, "; ", l.var,
                " += (int64_t)gridDim.x * ", l.threads * l.step, ")"));
  VectorLanes lanes;
  print_grid_stride_stmt(l.body, l.step > 1 ? &lanes : nullptr);
  out_.close();
}

void CudaKernelPrinter::print_serial_stages() {
  locals_.clear();
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (auto r = std::get_if<ReductionStage>(&k_.stages[i])) {
      print_serial_reduction(*r, i);
    } else if (auto scan = std::get_if<ScanStage>(&k_.stages[i])) {
      print_serial_scan(*scan);
    } else {
      print_serial_pointwise(std::get<PointwiseStage>(k_.stages[i]));
    }
  }
}

void CudaKernelPrinter::print_serial_loops(const std::vector<Loop>& loops, const std::function<void()>& innermost) {
  for (size_t i = 0; i < loops.size(); ++i) {
    const Loop& l = loops[i];
    const std::string v = var_name(l);
    // Unrolled by the printer, not left to NVVM, which unrolls only at full
    // optimisation: a short constant loop (a pooling window) whole, the
    // innermost loop otherwise by 4 so that four loads are in flight (a
    // thread-per-column sum under --Ofast-compile=min is many times slower
    // with one).
    const std::optional<int64_t> extent = l.extent.constant();
    if (extent && *extent <= 16) {
      out_.line("#pragma unroll");
    } else if (i + 1 == loops.size()) {
      out_.line("#pragma unroll 4");
    }
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", index(l.extent), "; ++", v, ")"));
  }
  innermost();
  for (size_t i = 0; i < loops.size(); ++i) out_.close();
}

void CudaKernelPrinter::print_serial_pointwise(const PointwiseStage& s) {
  print_serial_loops(s.loops, [&] {
    ValueScope scope;
    print_stores(s.stores, scope);
  });
}

void CudaKernelPrinter::print_serial_reduction(const ReductionStage& s, size_t i) {
  const DType t = s.body.dtype();
  const std::string acc = local_name(s.results[0]) + "_acc";
  out_.line(cat("// stage ", i, ": reduce ", to_string(s.kind), " (serial)"));
  out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  IndexExpr pos = 0;
  for (const auto& l : s.loops) pos = pos * l.extent + l.var;
  print_serial_loops(s.loops, [&] {
    ValueScope scope;
    const CValue v = scalar_value(s.body, scope);
    out_.line(state_update(s.kind, t, acc, v.text, index(pos)) + ";");
  });
  declare_results(s, acc);
}

void CudaKernelPrinter::print_serial_scan(const ScanStage& s) {
  const DType t = s.body.dtype();
  const std::string acc = local_name(s.result);
  out_.line(cat("// running ", to_string(s.kind), " (serial)"));
  out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  print_serial_loops(s.loops, [&] {
    ValueScope scope;
    const CValue v = scalar_value(s.body, scope);
    out_.line(state_update(s.kind, t, acc, v.text, "") + ";");
    locals_[s.result] = CValue{acc, t, false, 0};
    print_stores(s.stores, scope);
  });
}

void CudaKernelPrinter::print_stores(const std::vector<Store>& stores, ValueScope& scope) {
  for (const auto& st : stores) {
    const CValue v = scalar_value(st.value, scope);
    const std::string element = cat(pointer_name(st.buffer->name), "[", index(st.index, scope), "]");
    if (!st.accumulate) {
      out_.line(cat(element, " = ", v.text, ";"));
    } else if (accumulate_supported(st.buffer->dtype, Device::CUDA)) {
      out_.line(cat("cppi_atomic_add(&", element, ", ", v.text, ");"));
    } else {
      fail(cat("kernel ", k_.name, ": no atomic add for ", dtype_name(st.buffer->dtype), " (", st.buffer->name, ")"));
    }
    scope.forget_loads_of(st.buffer->name);
  }
}

void CudaKernelPrinter::hoist_invariants(const std::vector<Expr>& roots, const std::set<std::string>& vars,
                                         ValueScope& outer, const std::vector<Expr>& leave) {
  // A load of something the kernel writes stays where it is: a store inside
  // the loop may change it.
  std::set<std::string> written;
  for (const auto& a : sig_.buffers) {
    if (a.written) written.insert(a.buffer->name);
  }
  auto not_left = [&](const Expr& e) {
    return std::none_of(leave.begin(), leave.end(), [&](const Expr& x) { return x.same_as(e); });
  };
  auto invariant = [&](const Expr& e) {
    if (e.as<Constant>() || e.as<LocalRef>()) return false;
    const std::set<std::string> used = free_vars(e);
    if (std::any_of(used.begin(), used.end(), [&](const std::string& v) { return vars.count(v) > 0; })) return false;
    for (const Expr& x : post_order({e})) {
      const auto* l = x.as<Load>();
      if (l && written.count(l->buffer->name)) return false;
    }
    return true;
  };
  for (const Expr& e : outermost_picks(roots, invariant, not_left)) scalar_value(e, outer);
}

std::map<std::string, IndexExpr> CudaKernelPrinter::lane_vars(const std::string& lane) const {
  // What moves from lane to lane: by the innermost loop, its variable (x +
  // vl); over the flattened loops, every loop variable, each lane's own copy
  // (print_lane_carry).
  std::map<std::string, IndexExpr> vars;
  for (size_t j = 0; j < k_.outer.size(); ++j) {
    if (!g_.flat_vector && j + 1 < k_.outer.size()) continue;
    const Loop& l = k_.outer[j];
    vars[l.var.as<IndexVar>()->name] = g_.flat_vector ? var("f" + var_name(l)) : l.var + var(lane);
  }
  return vars;
}

std::string CudaKernelPrinter::vector_type(DType t) const {
  return cat("cppi_vec<", dtype_ctype(t), ", ", g_.elements_per_thread, ">");
}

void CudaKernelPrinter::print_vector_loads(const Store& st, VectorLanes& lanes) {
  for (const Expr& e : post_order({st.value})) {
    auto l = e.as<Load>();
    if (!l || !is_vector_load(k_, g_, *l)) continue;
    bool seen = false;
    for (const auto& [x, name] : lanes.loads) seen |= structurally_equal(x, e);
    if (seen) continue;
    const std::string name = fresh_name("v");
    const std::string vt = vector_type(l->dtype);
    const std::string load = cat("*(const ", vt, "*)(", pointer_name(l->buffer->name), " + ", index(l->index), ")");
    if (l->mask.defined()) {
      // The mask is the same for every lane (uniform_mask_bounds): lane 0's decides.
      const CValue m = scalar_value(l->mask, lanes.outer);
      out_.line(cat("const ", vt, " ", name, " = ", m.text, " ? ", load, " : ", vt, "{};"));
    } else {
      out_.line(cat("const ", vt, " ", name, " = ", load, ";"));
    }
    lanes.loads.emplace_back(e, name);
  }
}

void CudaKernelPrinter::print_lane_loop(const codegen::For& l, VectorLanes& lanes) {
  const auto* leaf = std::get_if<codegen::StageStores>(&l.body->node);
  if (!leaf || leaf->stores.size() != 1 || l.lo.value != 0 || l.hi.value != g_.elements_per_thread ||
      (l.step != 1 && l.step != 2)) {
    fail(cat("kernel ", k_.name, ": lane loop ", l.var, " is not over one store's lanes of a thread"));
  }
  const Store& st = leaf->stores[0];
  print_vector_loads(st, lanes);
  const std::map<std::string, IndexExpr> at_lane = lane_vars(l.var);
  std::set<std::string> varying;
  for (const auto& [name, e] : at_lane) varying.insert(name);
  hoist_invariants({st.value}, varying, lanes.outer);
  const std::string sv = fresh_name("sv");  // not "s": size symbols are s0, s1, ...
  out_.line(cat(vector_type(st.buffer->dtype), " ", sv, ";"));
  if (g_.flat_vector) {
    const char* type = lanes.lane_copies ? "" : "int64_t ";
    for (const auto& o : k_.outer) out_.line(cat(type, "f", var_name(o), " = ", var_name(o), ";"));
    lanes.lane_copies = true;
  }
  if (l.step == 2) {
    print_lane_pairs(l, st.value, at_lane, lanes, sv);
  } else {
    print_single_lanes(l, st.value, at_lane, lanes, sv);
  }
  out_.line(cat("cppi_store_vec(", pointer_name(st.buffer->name), " + ", index(st.index), ", ", sv, ");"));
  lanes.outer.forget_loads_of(st.buffer->name);
  std::vector<std::pair<Expr, std::string>> kept;
  for (auto& p : lanes.loads) {
    if (!codegen::reads_buffer(p.first, st.buffer->name)) kept.push_back(p);
  }
  lanes.loads = std::move(kept);
}

void CudaKernelPrinter::print_single_lanes(const codegen::For& l, const Expr& value,
                                           const std::map<std::string, IndexExpr>& at_lane, VectorLanes& lanes,
                                           const std::string& sv) {
  const Expr shifted = substitute_indices(value, at_lane);
  out_.line("#pragma unroll");
  out_.open(cat("for (int ", l.var, " = 0; ", l.var, " < ", l.hi.text, "; ++", l.var, ")"));
  const codegen::ExprSet sincos = codegen::sincos_operands({shifted});
  ValueScope scope(&lanes.outer, nullptr, &sincos);
  for (const auto& [x, name] : lanes.loads) {
    scope.add(substitute_indices(x, at_lane), CValue{cat(name, ".v[", l.var, "]"), x.dtype()});
  }
  const CValue v = scalar_value(shifted, scope);
  out_.line(cat(sv, ".v[", l.var, "] = ", v.text, ";"));
  if (g_.flat_vector) print_lane_carry();
  out_.close();
}

namespace {

/// The packed operation (cppi_bf16x2_op / cppi_halfx2_op) of an add,
/// subtract or multiply; nullptr for other operations.
const char* packed_op(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "cppi_pair_add";
    case BinaryOp::Sub: return "cppi_pair_sub";
    case BinaryOp::Mul: return "cppi_pair_mul";
    default: return nullptr;
  }
}

/// The bits of a float constant that `narrow` (half or bfloat16) holds
/// exactly; nullopt for other values.
std::optional<uint16_t> exact_16_bit_constant(const Expr& e, DType narrow) {
  const auto* k = e.as<Constant>();
  if (!k || k->dtype != DType::Float32 || k->float_value != k->float_value) return std::nullopt;
  const float v = static_cast<float>(k->float_value);
  if (ir::round_to_float_dtype(v, narrow) != static_cast<double>(v)) return std::nullopt;
  return narrow == DType::BFloat16 ? ir::float_to_bf16(v) : ir::float_to_half(v);
}

}  // namespace

bool CudaKernelPrinter::print_packed_pair(const Expr& lane0, const Expr& lane1, ValueScope& scope0,
                                          ValueScope& scope1) {
  const Cast* c[2] = {rounding_to_16_bits(lane0), rounding_to_16_bits(lane1)};
  const auto* b0 = c[0]->value.as<Binary>();
  const auto* b1 = c[1]->value.as<Binary>();
  if (!b0 || !b1 || b0->op != b1->op || !packed_op(b0->op)) return false;
  const DType narrow = c[0]->dtype;
  const std::string type = scalar_type(narrow);
  // Each operand a 16-bit value widened, or a constant of that type.
  auto widened = [&](const Expr& e) -> const Cast* {
    const auto* w = e.as<Cast>();
    return w && w->value.dtype() == narrow ? w : nullptr;
  };
  auto packable = [&](const Expr& e) { return widened(e) || exact_16_bit_constant(e, narrow); };
  if (!packable(b0->lhs) || !packable(b0->rhs) || !packable(b1->lhs) || !packable(b1->rhs)) return false;
  auto operand = [&](const Expr& e, ValueScope& scope) {
    if (const Cast* w = widened(e)) return scalar_value(w->value, scope).text;
    return cat(type, "{", *exact_16_bit_constant(e, narrow), "}");
  };
  const std::string a0 = operand(b0->lhs, scope0), a1 = operand(b1->lhs, scope1);
  const std::string x0 = operand(b0->rhs, scope0), x1 = operand(b1->rhs, scope1);
  const std::string r0 = fresh_name(), r1 = fresh_name();
  out_.line(cat(type, " ", r0, ", ", r1, ";"));
  out_.line(cat(narrow == DType::BFloat16 ? "cppi_bf16x2_op<" : "cppi_halfx2_op<", packed_op(b0->op), ">(", a0,
                ", ", a1, ", ", x0, ", ", x1, ", ", r0, ", ", r1, ");"));
  scope0.add(lane0, CValue{r0, narrow});
  scope1.add(lane1, CValue{r1, narrow});
  return true;
}

void CudaKernelPrinter::pair_roundings(const Expr& lane0, const Expr& lane1, ValueScope& scope0, ValueScope& scope1) {
  // The two lanes' values have the same shape, node for node in post order:
  // each rounding of lane 0 is printed with its twin of lane 1 (their
  // operands first), the rest as either lane needs it.
  const std::vector<Expr> order0 = post_order({lane0}), order1 = post_order({lane1});
  for (size_t i = 0; i < order0.size() && order0.size() == order1.size(); ++i) {
    const Cast* c0 = rounding_to_16_bits(order0[i]);
    const Cast* c1 = rounding_to_16_bits(order1[i]);
    if (!c0 || !c1 || c0->dtype != c1->dtype || scope0.find(order0[i]) || scope1.find(order1[i])) continue;
    if (print_packed_pair(order0[i], order1[i], scope0, scope1)) continue;
    const std::string a = scalar_value(c0->value, scope0).text, b = scalar_value(c1->value, scope1).text;
    const std::string r0 = fresh_name(), r1 = fresh_name();
    out_.line(cat(scalar_type(c0->dtype), " ", r0, ", ", r1, ";"));
    out_.line(cat(c0->dtype == DType::BFloat16 ? "cppi_float2_to_bf16(" : "cppi_float2_to_half(", a, ", ", b, ", ", r0,
                  ", ", r1, ");"));
    scope0.add(order0[i], CValue{r0, c0->dtype});
    scope1.add(order1[i], CValue{r1, c1->dtype});
  }
}

void CudaKernelPrinter::print_lane_pairs(const codegen::For& l, const Expr& value,
                                         const std::map<std::string, IndexExpr>& at_lane, VectorLanes& lanes,
                                         const std::string& sv) {
  std::map<std::string, IndexExpr> next_vars;
  for (const auto& [name, e] : at_lane) next_vars[name] = e + 1;
  const Expr lane[2] = {substitute_indices(value, at_lane), substitute_indices(value, next_vars)};
  out_.line("#pragma unroll");
  out_.open(cat("for (int ", l.var, " = 0; ", l.var, " < ", l.hi.text, "; ", l.var, " += 2)"));
  const codegen::ExprSet sincos = codegen::sincos_operands({lane[0], lane[1]});
  ValueScope scope0(&lanes.outer, nullptr, &sincos), scope1(&lanes.outer, nullptr, &sincos);
  for (const auto& [x, name] : lanes.loads) {
    scope0.add(substitute_indices(x, at_lane), CValue{cat(name, ".v[", l.var, "]"), x.dtype()});
    scope1.add(substitute_indices(x, next_vars), CValue{cat(name, ".v[", l.var, " + 1]"), x.dtype()});
  }
  pair_roundings(lane[0], lane[1], scope0, scope1);
  out_.line(cat(sv, ".v[", l.var, "] = ", scalar_value(lane[0], scope0).text, ";"));
  out_.line(cat(sv, ".v[", l.var, " + 1] = ", scalar_value(lane[1], scope1).text, ";"));
  out_.close();
}

void CudaKernelPrinter::print_lane_carry() {
  // The next flattened iteration: the innermost copy steps, and each copy
  // that reaches its extent wraps to 0 and carries into the one outside it.
  const size_t n = k_.outer.size();
  for (size_t j = n; j-- > 1;) {
    const std::string f = "f" + var_name(k_.outer[j]);
    out_.open(cat("if (++", f, " == ", index(k_.outer[j].extent), ")"));
    out_.line(cat(f, " = 0;"));
  }
  out_.line(cat("++f", var_name(k_.outer[0]), ";"));
  for (size_t j = n; j-- > 1;) out_.close();
}

}  // namespace cppi::gpu::cuda_print
