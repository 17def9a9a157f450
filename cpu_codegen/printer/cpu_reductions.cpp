/// CPU kernel printer: reduction stages (scalar, horizontal, lane and
/// parallel modes) and the reduction states, updates and combines they print.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "cpu_codegen/printer/op_tables.h"

namespace cppi::cpu::detail {

IndexExpr CpuKernelPrinter::reduction_position(const ReductionStage& s) const {
  IndexExpr pos = 0;
  for (const auto& l : s.loops) pos = pos * l.extent + l.var;
  return pos;
}

void CpuKernelPrinter::print_reduction(const ReductionStage& s, size_t index) {
  std::string comment = cat("// stage ", index, ": reduce ", to_string(s.kind), " over");
  for (const auto& l : s.loops) comment += " " + var_name(l);
  comment += " ->";
  for (const auto& r : s.results) comment += " " + r;
  out_.line(comment);
  const DType t = s.body.dtype();
  std::vector<std::string> names;
  for (const auto& r : s.results) names.push_back(local_name(r));

  if (in_vector()) {
    // Lane mode: W independent reductions, one per outer iteration.
    if (sched_.parallel_reduction) fail(cat("kernel ", k_.name, ": parallel_reduction inside a vectorised outer loop"));
    auto tiled = tiled_states_.find(index);
    const std::string state =
        tiled != tiled_states_.end()
            ? tiled->second
            : print_reduction_core(s, Bound{"0", 0}, s.loops.empty() ? Bound{"1", 1} : extent(s.loops[0]));
    bind_lane_results(s, state);
    return;
  }

  std::string state;
  if (sched_.parallel_reduction && !s.loops.empty()) {
    const Loop& first = s.loops[0];
    const std::string st = state_type(s.kind, t);
    const std::string identity = state_identity(s.kind, t);
    const std::string typed_identity = identity[0] == '{' ? st + identity : "(" + st + ")" + identity;
    state = names[0] + "_state";
    const std::string b = var_name(first) + "_chunk_begin", e = var_name(first) + "_chunk_end";
    out_.open(cat("const ", st, " ", state, " = cppi_parallel_reduce<", st, ">(0, ", extent(first).text, ", ",
                  std::max<int64_t>(1, sched_.grain_size), ", ", typed_identity, ",\n    [&](int64_t ",
                  b, ", int64_t ", e, ", ", st, ") -> ", st));
    const std::string partial = print_reduction_core(s, Bound{b, std::nullopt}, Bound{e, std::nullopt});
    out_.line("return " + partial + ";");
    out_.close(cat("}, [](", st, " a, ", st, " b) { return ", state_combine(s.kind, t, "a", "b"), "; });"));
  } else {
    // A one-value reduction's combined result is declared under its own name.
    const bool simple = num_results(s.kind) == 1 && s.kind != ReductionKind::ArgMax && s.kind != ReductionKind::ArgMin;
    state = print_reduction_core(s, Bound{"0", 0}, s.loops.empty() ? Bound{"1", 1} : extent(s.loops[0]),
                                 simple ? names[0] : "");
  }
  auto results = state_results(s.kind, state);
  for (size_t i = 0; i < names.size(); ++i) {
    if (results[i] != names[i]) out_.line(cat("const ", scalar_type(s.result_dtypes[i]), " ", names[i], " = ", results[i], ";"));
    locals_[s.results[i]] = CValue{names[i], s.result_dtypes[i]};
  }
}

void CpuKernelPrinter::bind_lane_results(const ReductionStage& s, const std::string& state) {
  auto results = state_results(s.kind, state);
  for (size_t i = 0; i < s.results.size(); ++i) {
    const std::string name = local_name(s.results[i]);
    CValue v;
    v.dtype = s.result_dtypes[i];
    v.vector = true;
    const std::string type = v.dtype == DType::Bool ? mask_type(4) : vtype(v.dtype);
    if (v.dtype == DType::Bool) v.mask_bytes = 4;
    out_.line(cat("const ", type, " ", name, " = ", results[i], ";"));
    v.text = name;
    locals_[s.results[i]] = v;
  }
}

std::string CpuKernelPrinter::print_reduction_core(const ReductionStage& s, const Bound& lo0, const Bound& hi0,
                                                   const std::string& result_name, const std::string& lane_init) {
  const DType t = s.body.dtype();
  const std::string base = local_name(s.results[0]);
  const bool lanes = in_vector();
  const bool horizontal_mode =
      !lanes && sched_.vectorized == VectorizedLoop::InnermostOfEachStage && !s.loops.empty();
  const IndexExpr pos = reduction_position(s);
  const std::string acc = base + "_acc", vacc = base + "_vacc";
  if (lanes) {
    out_.line(cat(vstate_type(s.kind, t), " ", vacc, " = ", lane_init.empty() ? vstate_identity(s.kind, t) : lane_init, ";"));
  } else {
    out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
    if (horizontal_mode) out_.line(cat(vstate_type(s.kind, t), " ", vacc, " = ", vstate_identity(s.kind, t), ";"));
  }
  // Max/min in horizontal mode: accumulators vacc, vacc_1, ... (see CpuSchedule::max_min_accumulators).
  const int accumulators =
      horizontal_mode && (s.kind == ReductionKind::Max || s.kind == ReductionKind::Min) ? sched_.max_min_accumulators : 1;
  if (accumulators < 1) fail(cat("kernel ", k_.name, ": max_min_accumulators ", accumulators));
  auto vacc_k = [&](int k) { return k == 0 ? vacc : cat(vacc, "_", k); };
  for (int k = 1; k < accumulators; ++k) {
    out_.line(cat(vstate_type(s.kind, t), " ", vacc_k(k), " = ", vstate_identity(s.kind, t), ";"));
  }
  // Cascade (CpuSchedule::cascade_block): the accumulators restart every
  // `block` terms of the innermost loop, their block result merged into a
  // total; a vector lane sees one term per vector iteration. Tiled columns
  // (lane_init) cascade per row block instead (print_tiled_columns).
  const bool cascade =
      sched_.cascade_block > 0 && accumulates_in_cascade(s.kind, t) && !s.loops.empty() && lane_init.empty();
  if (cascade && accumulators != 1) fail(cat("kernel ", k_.name, ": cascade with ", accumulators, " accumulators"));
  const int64_t block = sched_.cascade_block * (horizontal_mode ? sched_.vector_width : 1);
  const std::string total = base + "_total", terms = base + "_terms";
  if (cascade) {
    out_.line(lanes ? cat(vstate_type(s.kind, t), " ", total, " = ", vstate_identity(s.kind, t), ";")
                    : cat(state_type(s.kind, t), " ", total, " = ", state_identity(s.kind, t), ";"));
    out_.line(cat("int64_t ", terms, " = 0;"));
  }
  // The block so far, as one state.
  auto block_state = [&] {
    return horizontal_mode ? state_combine(s.kind, t, horizontal(s.kind, t, vacc), acc) : lanes ? vacc : acc;
  };
  auto flush = [&] {
    out_.line(cat(total, " = ",
                  lanes ? vstate_combine(s.kind, t, total, block_state()) : state_combine(s.kind, t, total, block_state()),
                  ";"));
    if (lanes || horizontal_mode) out_.line(cat(vacc, " = ", vstate_identity(s.kind, t), ";"));
    if (!lanes) out_.line(cat(acc, " = ", state_identity(s.kind, t), ";"));
  };
  auto scalar_step = [&] {
    ValueScope scope;
    const CValue v = value(s.body, scope);
    out_.line(scalar_update(s.kind, t, acc, v.text, index(pos)) + ";");
  };
  auto lane_step = [&] {
    ValueScope scope;
    const CValue v = value(s.body, scope);
    out_.line(vector_update(s.kind, t, vacc, v, cat("cppi_vsplat<cppi_i64x", width(), ">(", index(pos), ")")) + ";");
  };
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == s.loops.size()) {
      if (lanes) lane_step();
      else scalar_step();
      return;
    }
    const Loop& l = s.loops[level];
    const std::string v = var_name(l);
    const Bound lo = level == 0 ? lo0 : Bound{"0", 0};
    const Bound hi = level == 0 ? hi0 : extent(l);
    if (level + 1 < s.loops.size()) {
      out_.open(cat("for (int64_t ", v, " = ", lo.text, "; ", v, " < ", hi.text, "; ++", v, ")"));
      loops(level + 1);
      out_.close();
      return;
    }
    auto innermost = [&](const Bound& lo, const Bound& hi) {
      if (!horizontal_mode) {
        out_.open(cat("for (int64_t ", v, " = ", lo.text, "; ", v, " < ", hi.text, "; ++", v, ")"));
        loops(level + 1);
        out_.close();
        return;
      }
      auto vector_step = [&](const std::string& into) {
        enter_vector(v);
        ValueScope scope;
        const CValue val = value(s.body, scope);
        out_.line(vector_update(s.kind, t, into, val, cat("cppi_viota<cppi_i64x", width(), ">(", index(pos), ")")) + ";");
        leave_vector();
      };
      if (accumulators == 1) {
        print_vector_loop(v, lo, hi, [&] { vector_step(vacc); }, scalar_step);
        return;
      }
      // Groups of `accumulators` vectors, vector k into accumulator k; the
      // whole vectors after the last group go to the first one.
      const int64_t group = int64_t{accumulators} * sched_.vector_width;
      print_split_loop(
          v, lo, hi,
          [&](const std::string& from, const std::string& to) {
            const std::string g = v + "_grp", g_end = v + "_grp_end";
            out_.open("");  // g_end is local: another max/min stage may loop over a v of the same name
            out_.line(cat("const int64_t ", g_end, " = ", from, " + (", to, " - ", from, ") / ", group, " * ", group, ";"));
            out_.line("CPPI_NO_AUTOVEC");
            out_.open(cat("for (int64_t ", g, " = ", from, "; ", g, " < ", g_end, "; ", g, " += ", group, ")"));
            for (int k = 0; k < accumulators; ++k) {
              out_.open("");
              out_.line(cat("const int64_t ", v, " = ", g, " + ", int64_t{k} * sched_.vector_width, ";"));
              vector_step(vacc_k(k));
              out_.close();
            }
            out_.close();
            out_.line("CPPI_NO_AUTOVEC");
            out_.open(cat("for (int64_t ", v, " = ", g_end, "; ", v, " < ", to, "; ", v, " += ", width(), ")"));
            vector_step(vacc);
            out_.close();
            out_.close();
          },
          scalar_step);
    };
    if (!cascade) {
      innermost(lo, hi);
      return;
    }
    // A constant innermost loop of at most one block runs whole; a longer or
    // symbolic one runs in blocks. Either way the terms are counted after it.
    const bool whole = lo.value && hi.value && *hi.value - *lo.value <= block;
    const std::string from = whole ? lo.text : v + "_cblk", to = whole ? hi.text : v + "_cblk_end";
    if (whole) {
      out_.open("");
      innermost(lo, hi);
    } else {
      out_.open(cat("for (int64_t ", from, " = ", lo.text, "; ", from, " < ", hi.text, "; ", from, " += ", block, ")"));
      out_.line(cat("const int64_t ", to, " = cppi_min_i<int64_t>(", from, " + ", block, ", ", hi.text, ");"));
      innermost(Bound{from, std::nullopt}, Bound{to, std::nullopt});
    }
    out_.line(cat(terms, " += ", to, " - ", from, ";"));
    out_.open(cat("if (", terms, " >= ", block, ")"));
    flush();
    out_.line(cat(terms, " = 0;"));
    out_.close();
    out_.close();
  };
  if (s.loops.empty()) {
    if (lanes) lane_step();
    else scalar_step();
  } else {
    loops(0);
  }
  if (lanes && !cascade) return vacc;
  if (!horizontal_mode && !cascade) return acc;
  for (int k = 1; k < accumulators; ++k) {
    CValue part{vacc_k(k), t, true, t == DType::Bool ? 4 : 0};
    out_.line(vector_update(s.kind, t, vacc, part, "") + ";");
  }
  const std::string combined = lanes ? base + "_vred" : result_name.empty() ? base + "_red" : result_name;
  if (lanes) {
    out_.line(cat("const ", vstate_type(s.kind, t), " ", combined, " = ", vstate_combine(s.kind, t, total, vacc), ";"));
  } else {
    const std::string block_result = block_state();
    out_.line(cat("const ", state_type(s.kind, t), " ", combined, " = ",
                  cascade ? state_combine(s.kind, t, total, block_result) : block_result, ";"));
  }
  return combined;
}

// --- reductions: states, updates, combines ---------------------------------------------------

std::string CpuKernelPrinter::identity_value(ReductionKind kind, DType t) const {
  ReductionKind value_kind = kind == ReductionKind::ArgMax ? ReductionKind::Max
                             : kind == ReductionKind::ArgMin ? ReductionKind::Min
                                                             : kind;
  return literal(*reduction_identity(value_kind, t)[0].as<Constant>());
}

std::string CpuKernelPrinter::state_type(ReductionKind kind, DType t) const {
  const std::string ct = scalar_type(t);
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return "cppi_arg<" + ct + ">";
    case ReductionKind::Welford: return "cppi_welford<" + ct + ">";
    default: return ct;
  }
}

std::string CpuKernelPrinter::state_identity(ReductionKind kind, DType t) const {
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return "{" + identity_value(kind, t) + ", 0}";
    case ReductionKind::Welford: return "{0, 0, 0}";
    default: return identity_value(kind, t);
  }
}

std::string CpuKernelPrinter::scalar_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                                            const std::string& pos) const {
  if (kind == ReductionKind::Welford) return cat(acc, " = cppi_welford_add(", acc, ", ", v, ")");
  return acc + " = " + state_combine(kind, t, acc,
                                     kind == ReductionKind::ArgMax || kind == ReductionKind::ArgMin
                                         ? cat(state_type(kind, t), "{", v, ", ", pos, "}")
                                         : v);
}

std::string CpuKernelPrinter::state_combine(ReductionKind kind, DType t, const std::string& a,
                                            const std::string& b) const {
  switch (kind) {
    case ReductionKind::Sum: return scalar_binary(BinaryOp::Add, t, a, b);
    case ReductionKind::Prod: return scalar_binary(BinaryOp::Mul, t, a, b);
    case ReductionKind::Max: return scalar_binary(BinaryOp::Maximum, t, a, b);
    case ReductionKind::Min: return scalar_binary(BinaryOp::Minimum, t, a, b);
    case ReductionKind::Any: return "(" + a + " || " + b + ")";
    case ReductionKind::All: return "(" + a + " && " + b + ")";
    case ReductionKind::ArgMax: return "cppi_argmax_combine(" + a + ", " + b + ")";
    case ReductionKind::ArgMin: return "cppi_argmin_combine(" + a + ", " + b + ")";
    case ReductionKind::Welford: return "cppi_welford_combine(" + a + ", " + b + ")";
  }
  fail("unknown reduction kind");
}

std::vector<std::string> CpuKernelPrinter::state_results(ReductionKind kind, const std::string& state) const {
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return {state + ".index"};
    case ReductionKind::Welford: return {state + ".mean", state + ".m2", state + ".weight"};
    default: return {state};
  }
}

std::string CpuKernelPrinter::vstate_type(ReductionKind kind, DType t) const {
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return cat("cppi_varg<", vtype(t), ", cppi_i64x", width(), ">");
    case ReductionKind::Welford: return "cppi_vwelford<" + vtype(t) + ">";
    default: return t == DType::Bool ? mask_type(4) : vtype(t);
  }
}

std::string CpuKernelPrinter::vstate_identity(ReductionKind kind, DType t) const {
  const std::string v = t == DType::Bool ? mask_type(4) : vtype(t);
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin:
      return cat("{cppi_vsplat<", v, ">(", identity_value(kind, t), "), cppi_vsplat<cppi_i64x", width(), ">(0)}");
    case ReductionKind::Welford: return cat("{cppi_vsplat<", v, ">(0), cppi_vsplat<", v, ">(0), cppi_vsplat<", v, ">(0)}");
    default:
      if (t == DType::Bool) {
        const bool ones = kind == ReductionKind::All || kind == ReductionKind::Min;
        return cat("cppi_vsplat<", v, ">(", ones ? "-1" : "0", ")");
      }
      return cat("cppi_vsplat<", v, ">(", identity_value(kind, t), ")");
  }
}

std::string CpuKernelPrinter::vector_update(ReductionKind kind, DType t, const std::string& acc, const CValue& val,
                                            const std::string& pos) {
  const codegen::OperandClass c = codegen::operand_class(t);
  if (t == DType::Bool) {
    const std::string m = as_mask(val, 4);
    switch (kind) {
      case ReductionKind::Max:
      case ReductionKind::Any: return cat(acc, " = ", acc, " | ", m);
      case ReductionKind::Min:
      case ReductionKind::All: return cat(acc, " = ", acc, " & ", m);
      default: fail(cat("vectorised ", to_string(kind), " over bool"));
    }
  }
  const std::string v = as_vector(val);
  switch (kind) {
    case ReductionKind::Sum: return cat(acc, " = ", acc, " + ", v);
    case ReductionKind::Prod: return cat(acc, " = ", acc, " * ", v);
    case ReductionKind::Max:
      return cat(acc, " = ", c == codegen::OperandClass::Float ? "cppi_max(" : "cppi_vmax_int(", acc, ", ", v, ")");
    case ReductionKind::Min:
      return cat(acc, " = ", c == codegen::OperandClass::Float ? "cppi_min(" : "cppi_vmin_int(", acc, ", ", v, ")");
    case ReductionKind::ArgMax: return cat(acc, " = cppi_vargmax_update(", acc, ", ", v, ", ", pos, ")");
    case ReductionKind::ArgMin: return cat(acc, " = cppi_vargmin_update(", acc, ", ", v, ", ", pos, ")");
    case ReductionKind::Welford: return cat(acc, " = cppi_vwelford_add(", acc, ", ", v, ")");
    case ReductionKind::Any:
    case ReductionKind::All: break;
  }
  fail(cat("vectorised ", to_string(kind), " over ", dtype_name(t)));
}

std::string CpuKernelPrinter::vstate_combine(ReductionKind kind, DType t, const std::string& a,
                                             const std::string& b) const {
  if (kind == ReductionKind::Sum && is_floating(t)) return cat("(", a, " + ", b, ")");
  if (kind == ReductionKind::Welford) return cat("cppi_vwelford_combine(", a, ", ", b, ")");
  fail(cat("lane-wise combine of ", to_string(kind), " over ", dtype_name(t)));
}

std::string CpuKernelPrinter::horizontal(ReductionKind kind, DType t, const std::string& acc) const {
  const bool fl = is_floating(t);
  switch (kind) {
    case ReductionKind::Sum: return (fl ? "cppi_vreduce_add(" : "cppi_vreduce_wadd(") + acc + ")";
    case ReductionKind::Prod: return (fl ? "cppi_vreduce_mul(" : "cppi_vreduce_wmul(") + acc + ")";
    case ReductionKind::Max: return (t == DType::Bool ? "cppi_vreduce_any(" : "cppi_vreduce_max(") + acc + ")";
    case ReductionKind::Min: return (t == DType::Bool ? "cppi_vreduce_all(" : "cppi_vreduce_min(") + acc + ")";
    case ReductionKind::Any: return "cppi_vreduce_any(" + acc + ")";
    case ReductionKind::All: return "cppi_vreduce_all(" + acc + ")";
    case ReductionKind::ArgMax: return "cppi_vargmax_reduce(" + acc + ")";
    case ReductionKind::ArgMin: return "cppi_vargmin_reduce(" + acc + ")";
    case ReductionKind::Welford: return "cppi_vwelford_reduce(" + acc + ")";
  }
  fail("unknown reduction kind");
}

}  // namespace cppi::cpu::detail
