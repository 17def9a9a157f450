/// CPU kernel printer: reduction stages (scalar, horizontal, lane and
/// parallel modes) and the reduction states, updates and combines they print.
/// A run's loops and accumulators are cpu::schedule_reduction_loops' nest
/// (loop_nest.h): the printer prints its accumulators' declarations, updates,
/// merges and final states where the nest places them.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "codegen/op_tables.h"
#include "lowering/ir/expr_visitor.h"

namespace cppi::cpu::detail {

IndexExpr CpuKernelPrinter::reduction_position(const ReductionStage& s) const {
  IndexExpr pos = 0;
  for (const auto& l : s.loops) pos = pos * l.extent + l.var;
  return pos;
}

void CpuKernelPrinter::print_reductions(size_t first, size_t end, const ValueScope& at) {
  std::vector<const ReductionStage*> run;
  for (size_t i = first; i < end; ++i) {
    const auto& s = std::get<ReductionStage>(k_.stages[i]);
    std::string comment = cat("// stage ", i, ": reduce ", to_string(s.kind), " over");
    for (const auto& l : s.loops) comment += " " + var_name(l);
    comment += " ->";
    for (const auto& r : s.results) comment += " " + r;
    out_.line(comment);
    run.push_back(&s);
  }
  if (run.size() > 1) out_.line(cat("// stages ", first, "-", end - 1, " fold in one pass over their loops"));
  // Row blocks are vector_outer: a run of one.
  const Place walking = open_row_blocks(first, place(at));
  ValueScope hoisted(&at, &walking);
  for (const ReductionStage* s : run) hoist_stage_invariants(*s, hoisted);
  print_reduction_run(run, hoisted);
}

void CpuKernelPrinter::print_reduction_run(const std::vector<const ReductionStage*>& run, const ValueScope& at) {
  const ReductionStage& head = *run.front();
  // Lane mode: W independent reductions, one per outer iteration.
  const bool lanes = place(at).in_vector();
  if (lanes && run.size() != 1) fail(cat("kernel ", k_.name, ": a one-pass run in lane mode"));
  // parallel_reduction: the run's nest over a chunk (cpu::split_reduction_chunks).
  const bool chunks = sched_.parallel_reduction && !head.loops.empty();
  const auto [lo, hi] = chunks ? chunk_bounds(head.loops[0])
                               : std::pair{Bound{"0", 0}, head.loops.empty() ? Bound{"1", 1} : extent(head.loops[0])};
  // A one-value reduction's combined result is declared under its own name
  // (not a chunk's: it returns it).
  const std::vector<std::string> states = print_reduction_core(run, lo, hi, at, !lanes && !chunks);
  if (lanes) {
    bind_lane_results(head, states.front());
    return;
  }
  if (!place(at).tree_row.empty()) return;  // the block's trees bind the results (print_reduction_trees)
  for (size_t j = 0; j < run.size(); ++j) {
    const ReductionStage& s = *run[j];
    auto results = state_results(s.kind, states[j]);
    for (size_t i = 0; i < s.results.size(); ++i) {
      const std::string name = local_name(s.results[i]);
      if (results[i] != name) out_.line(cat("const ", scalar_type(s.result_dtypes[i]), " ", name, " = ", results[i], ";"));
      locals_[s.results[i]] = CValue{name, s.result_dtypes[i]};
    }
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
                                                   const ValueScope& at, const std::string& lane_init) {
  return print_reduction_core(std::vector<const ReductionStage*>{&s}, lo0, hi0, at, false, lane_init).front();
}

/// print_reduction_core's work for one call: the run's nest
/// (cpu::schedule_reduction_loops) with its accumulators as
/// cpu::place_accumulators places them (codegen::Accumulators: a scalar
/// state `acc` in scalar mode and for horizontal mode's scalar tail, vector
/// states `vacc`, `vacc_1`, ... in lane and horizontal modes, and with a
/// cascade levels of `total`s), their updates, a full cascade block's merge
/// into the totals, and the final states.
class ReductionCore {
 public:
  ReductionCore(CpuKernelPrinter& p, const ReductionRun& run, const ValueScope& at)
      : p_(p),
        run_(run),
        at_(at),
        // The run's stages share their loops (one_pass_end), hence the position.
        pos_(p.reduction_position(*run.stages.front())) {}

  /// The run's nest, the first loop over [lo0, hi0); returns each stage's
  /// final state (see print_reduction_core).
  std::vector<std::string> accumulate(const Bound& lo0, const Bound& hi0);
  /// The nest's nodes, in their scope `at`.
  void declare(const codegen::Accumulators& a, const ValueScope& at);
  void update(const codegen::Accumulate& a, const ValueScope& body);
  void cascade_block_done(const codegen::CascadeBlockDone& d, const ValueScope& at);
  void merge_into_totals(const codegen::MergeIntoTotals& m);
  void finish(const codegen::FinishAccumulators& f);
  void chunks(const codegen::ReductionChunks& c, const ValueScope& at);

 private:
  using Stage = codegen::StageAccumulators;
  static const Place& place(const ValueScope& scope) { return CpuKernelPrinter::place(scope); }
  const codegen::Accumulators& accumulators() const;
  /// Horizontal mode: vector states reduced across their lanes at the end.
  bool horizontal(const Stage& a) const { return !accumulators().lanes && !a.vectors.empty(); }
  std::string state_type(const Stage& a) const {
    return accumulators().lanes ? p_.vstate_type(a.kind, a.dtype) : p_.state_type(a.kind, a.dtype);
  }
  std::string identity(const Stage& a) const {
    return accumulators().lanes ? p_.vstate_identity(a.kind, a.dtype) : p_.state_identity(a.kind, a.dtype);
  }
  std::string combine(const Stage& a, const std::string& x, const std::string& y) const {
    return accumulators().lanes ? p_.vstate_combine(a.kind, a.dtype, x, y) : p_.state_combine(a.kind, a.dtype, x, y);
  }
  void merge_vectors(const Stage& a, bool reset);
  std::string block_state(const Stage& a) const;
  /// One position in scalar form, in `body` (the loop's scope).
  void scalar_step(const ValueScope& body);
  void lane_step(const ValueScope& body);
  /// Horizontal mode: a vector of positions into accumulator k, in `body`
  /// (the vector's scope).
  void vector_step(int k, const ValueScope& body);
  const ReductionStage& stage_of(const Stage& a) const { return std::get<ReductionStage>(p_.k_.stages[a.stage]); }

  CpuKernelPrinter& p_;
  const ReductionRun& run_;
  /// Where the run prints: the stages' invariants, at the place of their loops.
  const ValueScope& at_;
  const IndexExpr pos_;
  /// The run's accumulators while their body prints.
  const codegen::Accumulators* accumulators_ = nullptr;
  std::vector<std::string> states_;
};

const codegen::Accumulators& ReductionCore::accumulators() const {
  if (!accumulators_) fail(cat("kernel ", p_.k_.name, ": a reduction's accumulators used outside their nest"));
  return *accumulators_;
}

// In stage order, then the totals (CpuSchedule::cascade_block: the
// accumulators restart every block, their block result merged into a
// total), then the counters.
void ReductionCore::declare(const codegen::Accumulators& a, const ValueScope& at) {
  auto& out = p_.out_;
  accumulators_ = &a;
  for (const Stage& s : a.stages) {
    if (!s.scalar.empty()) {
      out.line(cat(p_.state_type(s.kind, s.dtype), " ", s.scalar, " = ", p_.state_identity(s.kind, s.dtype), ";"));
    }
    for (size_t k = 0; k < s.vectors.size(); ++k) {
      const std::string init = k == 0 && !s.init.empty() ? s.init : p_.vstate_identity(s.kind, s.dtype);
      out.line(cat(p_.vstate_type(s.kind, s.dtype), " ", s.vectors[k], " = ", init, ";"));
    }
  }
  for (const Stage& s : a.stages) {
    for (const std::string& total : s.totals) out.line(cat(state_type(s), " ", total, " = ", identity(s), ";"));
  }
  if (!a.terms.empty()) out.line(cat("int64_t ", a.terms, " = 0;"));
  for (const std::string& m : a.merges) out.line(cat("int64_t ", m, " = 0;"));
  p_.print_loops(a.body, at);
  accumulators_ = nullptr;
}

/// Folds vector states 1.. into the first, pairwise; with `reset` they
/// restart for the next cascade block.
void ReductionCore::merge_vectors(const Stage& a, bool reset) {
  const int n = static_cast<int>(a.vectors.size());
  for (int step = 1; step < n; step *= 2) {
    for (int k = 0; k + step < n; k += 2 * step) {
      const CValue part{a.vectors[k + step], a.dtype, true, a.dtype == DType::Bool ? 4 : 0};
      p_.out_.line(p_.vector_update(a.kind, a.dtype, a.vectors[k], part, "") + ";");
    }
  }
  if (!reset) return;
  for (int k = 1; k < n; ++k) p_.out_.line(cat(a.vectors[k], " = ", p_.vstate_identity(a.kind, a.dtype), ";"));
}

/// The block so far, as one state (vector states merged).
std::string ReductionCore::block_state(const Stage& a) const {
  if (!horizontal(a)) return accumulators().lanes ? a.vectors[0] : a.scalar;
  const std::string h = p_.horizontal(a.kind, a.dtype, a.vectors[0]);
  return a.scalar.empty() ? h : p_.state_combine(a.kind, a.dtype, h, a.scalar);
}

/// A full cascade block: its state into the first total, each level into
/// the next every kCascadeFanIn merges.
void ReductionCore::merge_into_totals(const codegen::MergeIntoTotals& m) {
  auto& out = p_.out_;
  const codegen::Accumulators& accs = accumulators();
  for (size_t i : m.stages) {
    const Stage& a = accs.stages[i];
    merge_vectors(a, true);
    out.line(cat(a.totals[0], " = ", combine(a, a.totals[0], block_state(a)), ";"));
    if (!a.vectors.empty()) out.line(cat(a.vectors[0], " = ", p_.vstate_identity(a.kind, a.dtype), ";"));
    if (!a.scalar.empty()) out.line(cat(a.scalar, " = ", p_.state_identity(a.kind, a.dtype), ";"));
  }
  for (size_t l = 0; l < accs.merges.size(); ++l) {
    out.open(cat("if (++", accs.merges[l], " >= ", kCascadeFanIn, ")"));
    for (size_t i : m.stages) {
      const Stage& a = accs.stages[i];
      out.line(cat(a.totals[l + 1], " = ", combine(a, a.totals[l + 1], a.totals[l]), ";"));
      out.line(cat(a.totals[l], " = ", identity(a), ";"));
    }
    out.line(cat(accs.merges[l], " = 0;"));
  }
  for (size_t l = 0; l < accs.merges.size(); ++l) out.close();
}

// One position: every stage's body in one scope, so a value two stages share
// (the element, x - mean) is computed once.
void ReductionCore::scalar_step(const ValueScope& body) {
  ValueScope scope(&body);
  for (const Stage& a : accumulators().stages) {
    const CValue v = p_.value(stage_of(a).body, scope);
    p_.out_.line(p_.scalar_update(a.kind, a.dtype, a.scalar, v.text, p_.index(pos_)) + ";");
  }
}

void ReductionCore::lane_step(const ValueScope& body) {
  ValueScope scope(&body);
  for (const Stage& a : accumulators().stages) {
    const CValue v = p_.value(stage_of(a).body, scope);
    p_.out_.line(p_.vector_update(a.kind, a.dtype, a.vectors[0], v,
                                  cat("cppi_vsplat<cppi_i64x", p_.width(), ">(", p_.index(pos_), ")")) +
                 ";");
  }
}

/// Horizontal mode: vector k of a group goes to each stage's accumulator k
/// (to its only one when it keeps one).
void ReductionCore::vector_step(int k, const ValueScope& body) {
  ValueScope scope(&body);
  const std::string& tail_lanes = place(body).tail_lanes;
  for (const Stage& a : accumulators().stages) {
    CValue val = p_.value(stage_of(a).body, scope);
    if (!tail_lanes.empty()) val = p_.identity_where_tail_is_off(a.kind, a.dtype, val, tail_lanes);
    const std::string& acc = a.vectors.size() == 1 ? a.vectors[0] : a.vectors.at(static_cast<size_t>(k));
    p_.out_.line(p_.vector_update(a.kind, a.dtype, acc, val,
                                  cat("cppi_viota<cppi_i64x", p_.width(), ">(", p_.index(pos_), ")")) +
                 ";");
  }
}

void ReductionCore::update(const codegen::Accumulate& a, const ValueScope& body) {
  if (accumulators().lanes) {
    lane_step(body);
  } else if (place(body).in_vector()) {
    vector_step(a.accumulator, body);
  } else {
    scalar_step(body);
  }
}

void ReductionCore::cascade_block_done(const codegen::CascadeBlockDone& d, const ValueScope& at) {
  auto& out = p_.out_;
  const codegen::Accumulators& accs = accumulators();
  out.line(cat(accs.terms, " += ", d.to, " - ", d.from, ";"));
  out.open(cat("if (", accs.terms, " >= ", accs.block_terms, ")"));
  p_.print_loops(d.full, at);
  out.line(cat(accs.terms, " = 0;"));
  out.close();
}

void ReductionCore::finish(const codegen::FinishAccumulators& f) {
  auto& out = p_.out_;
  const codegen::Accumulators& accs = accumulators();
  for (const Stage& a : accs.stages) {
    if (!f.tree_row.empty()) {
      merge_vectors(a, false);
      out.line(cat(a.result, "[", f.tree_row, "] = ", a.vectors[0], ";"));
      states_.push_back("");
      continue;
    }
    if (a.result.empty()) {
      states_.push_back(accs.lanes ? a.vectors[0] : a.scalar);
      continue;
    }
    merge_vectors(a, false);
    // The block so far, then the levels of totals, lowest first.
    std::string result = block_state(a);
    for (const std::string& total : a.totals) result = combine(a, total, result);
    out.line(cat("const ", state_type(a), " ", a.result, " = ", result, ";"));
    states_.push_back(a.result);
  }
}

// Each chunk from the identity (cppi_parallel_reduce); their states combine
// in chunk order.
void ReductionCore::chunks(const codegen::ReductionChunks& c, const ValueScope& at) {
  auto& out = p_.out_;
  const std::string st = c.lanes ? p_.vstate_type(c.kind, c.dtype) : p_.state_type(c.kind, c.dtype);
  const std::string identity = c.lanes ? p_.vstate_identity(c.kind, c.dtype) : p_.state_identity(c.kind, c.dtype);
  const std::string typed_identity = identity[0] == '{' ? st + identity : "(" + st + ")" + identity;
  const std::string combined =
      c.lanes ? p_.vstate_combine(c.kind, c.dtype, "a", "b") : p_.state_combine(c.kind, c.dtype, "a", "b");
  out.open(cat("const ", st, " ", c.state, " = cppi_parallel_reduce<", st, ">(0, ", c.count, ", ", c.grain, ", ",
               typed_identity, ",\n    [=](int64_t ", c.begin, ", int64_t ", c.end, ", ", st, ") -> ", st));
  p_.print_loops(c.body, at);
  out.line("return " + c.partial + ";");
  out.close(cat("}, [](", st, " a, ", st, " b) { return ", combined, "; });"));
  states_ = {c.state};
}

std::vector<std::string> ReductionCore::accumulate(const Bound& lo0, const Bound& hi0) {
  // The nest's accumulator nodes and updates print through this run
  // (print_loop_node), found in their scope's Place.
  Place accumulating = place(at_);
  accumulating.reduction = this;
  p_.print_loops(schedule_reduction_loops(run_, lo0, hi0, p_.loop_input()), ValueScope(&at_, &accumulating));
  if (states_.size() != run_.stages.size()) fail(cat("kernel ", p_.k_.name, ": a reduction run left unfinished"));
  return states_;
}

void CpuKernelPrinter::print_loop_node(const codegen::Accumulators& a, const ValueScope& at) {
  reduction_printing(at).declare(a, at);
}

void CpuKernelPrinter::print_loop_node(const codegen::Accumulate& a, const ValueScope& at) {
  reduction_printing(at).update(a, at);
}

void CpuKernelPrinter::print_loop_node(const codegen::CascadeBlockDone& d, const ValueScope& at) {
  reduction_printing(at).cascade_block_done(d, at);
}

void CpuKernelPrinter::print_loop_node(const codegen::MergeIntoTotals& m, const ValueScope& at) {
  reduction_printing(at).merge_into_totals(m);
}

void CpuKernelPrinter::print_loop_node(const codegen::FinishAccumulators& f, const ValueScope& at) {
  reduction_printing(at).finish(f);
}

void CpuKernelPrinter::print_loop_node(const codegen::ReductionChunks& c, const ValueScope& at) {
  reduction_printing(at).chunks(c, at);
}

ReductionCore& CpuKernelPrinter::reduction_printing(const ValueScope& at) const {
  if (!place(at).reduction) fail(cat("kernel ", k_.name, ": a reduction's update outside its loops"));
  return *place(at).reduction;
}

std::vector<std::string> CpuKernelPrinter::print_reduction_core(const std::vector<const ReductionStage*>& run,
                                                                const Bound& lo0, const Bound& hi0,
                                                                const ValueScope& at, bool named_results,
                                                                const std::string& lane_init) {
  // In lanes (under a vectorised outer loop); from a tile (lane_init) in the
  // column tiles' block.
  ReductionRun r = reduction_run(run, place(at).in_vector(), !lane_init.empty(), loop_input());
  r.lane_init = lane_init;
  r.tree_row = place(at).tree_row;
  r.named_results = named_results;
  return ReductionCore(*this, r, at).accumulate(lo0, hi0);
}

// --- reductions: states, updates, combines ---------------------------------------------------

std::string CpuKernelPrinter::identity_value(ReductionKind kind, DType t) const {
  return literal(*fold_identity(kind, t).as<Constant>());
}

std::string CpuKernelPrinter::state_type(ReductionKind kind, DType t) const {
  const std::string ct = scalar_type(t);
  switch (state_of(kind)) {
    case ReductionState::Value: return ct;
    case ReductionState::Arg: return "cppi_arg<" + ct + ">";
    case ReductionState::Welford: return "cppi_welford<" + ct + ">";
  }
  fail("unknown reduction state");
}

std::string CpuKernelPrinter::state_identity(ReductionKind kind, DType t) const {
  switch (state_of(kind)) {
    case ReductionState::Value: return identity_value(kind, t);
    case ReductionState::Arg: return "{" + identity_value(kind, t) + ", 0}";
    case ReductionState::Welford: return "{0, 0, 0}";
  }
  fail("unknown reduction state");
}

std::string CpuKernelPrinter::scalar_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                                            const std::string& pos) const {
  switch (state_of(kind)) {
    case ReductionState::Value: return acc + " = " + state_combine(kind, t, acc, v);
    case ReductionState::Arg:
      return acc + " = " + state_combine(kind, t, acc, cat(state_type(kind, t), "{", v, ", ", pos, "}"));
    case ReductionState::Welford: return cat(acc, " = cppi_welford_add(", acc, ", ", v, ")");
  }
  fail("unknown reduction state");
}

std::string CpuKernelPrinter::state_combine(ReductionKind kind, DType t, const std::string& a,
                                            const std::string& b) const {
  // A fold is no math function (ir::is_math_function): plain C everywhere.
  if (state_of(kind) == ReductionState::Value) return c_binary(fold_of(kind), t, a, b);
  return cat("cppi_", to_string(kind), "_combine(", a, ", ", b, ")");
}

std::vector<std::string> CpuKernelPrinter::state_results(ReductionKind kind, const std::string& state) const {
  std::vector<std::string> out;
  for (const std::string& field : state_fields(kind)) out.push_back(state + field);
  return out;
}

std::string CpuKernelPrinter::vstate_type(ReductionKind kind, DType t) const {
  switch (state_of(kind)) {
    case ReductionState::Value: return t == DType::Bool ? mask_type(4) : vtype(t);
    case ReductionState::Arg: return cat("cppi_varg<", vtype(t), ", cppi_i64x", width(), ">");
    case ReductionState::Welford: return "cppi_vwelford<" + vtype(t) + ">";
  }
  fail("unknown reduction state");
}

namespace {

/// Whether a fold over bool lanes starts from true (min, all) rather than
/// false (max, any): its mask lanes start all set.
bool bool_fold_starts_true(ReductionKind kind) {
  return fold_identity(kind, DType::Bool).as<Constant>()->int_value != 0;
}

}  // namespace

std::string CpuKernelPrinter::vstate_identity(ReductionKind kind, DType t) const {
  const std::string v = t == DType::Bool ? mask_type(4) : vtype(t);
  switch (state_of(kind)) {
    case ReductionState::Value:
      if (t != DType::Bool) return cat("cppi_vsplat<", v, ">(", identity_value(kind, t), ")");
      return cat("cppi_vsplat<", v, ">(", bool_fold_starts_true(kind) ? "-1" : "0", ")");
    case ReductionState::Arg:
      return cat("{cppi_vsplat<", v, ">(", identity_value(kind, t), "), cppi_vsplat<cppi_i64x", width(), ">(0)}");
    case ReductionState::Welford:
      return cat("{cppi_vsplat<", v, ">(0), cppi_vsplat<", v, ">(0), cppi_vsplat<", v, ">(0)}");
  }
  fail("unknown reduction state");
}

namespace {

/// How bool lanes (masks) fold: or for max and any, and for min and all.
const char* bool_lane_op(ReductionKind kind) {
  switch (fold_of(kind)) {
    case BinaryOp::Maximum:
    case BinaryOp::LogicalOr: return "|";
    case BinaryOp::Minimum:
    case BinaryOp::LogicalAnd: return "&";
    default: fail(cat("lane-wise ", to_string(kind), " over bool"));
  }
}

}  // namespace

std::string CpuKernelPrinter::vector_update(ReductionKind kind, DType t, const std::string& acc, const CValue& val,
                                            const std::string& pos) {
  if (t == DType::Bool) return cat(acc, " = ", acc, " ", bool_lane_op(kind), " ", as_mask(val, 4));
  const std::string v = as_vector(val);
  switch (state_of(kind)) {
    case ReductionState::Arg: return cat(acc, " = cppi_v", to_string(kind), "_update(", acc, ", ", v, ", ", pos, ")");
    case ReductionState::Welford: return cat(acc, " = cppi_vwelford_add(", acc, ", ", v, ")");
    case ReductionState::Value: break;
  }
  const bool fl = codegen::operand_class(t) == codegen::OperandClass::Float;
  switch (fold_of(kind)) {
    case BinaryOp::Add: return cat(acc, " = ", acc, " + ", v);
    case BinaryOp::Mul: return cat(acc, " = ", acc, " * ", v);
    case BinaryOp::Maximum: return cat(acc, " = ", fl ? "cppi_max(" : "cppi_vmax_int(", acc, ", ", v, ")");
    case BinaryOp::Minimum: return cat(acc, " = ", fl ? "cppi_min(" : "cppi_vmin_int(", acc, ", ", v, ")");
    default: fail(cat("vectorised ", to_string(kind), " over ", dtype_name(t)));
  }
}

std::string CpuKernelPrinter::vstate_combine(ReductionKind kind, DType t, const std::string& a,
                                             const std::string& b) const {
  if (t == DType::Bool) return cat("(", a, " ", bool_lane_op(kind), " ", b, ")");
  switch (state_of(kind)) {
    // `a` holds the earlier positions: `b` replaces it where an update with
    // b's value would (greater, or the first NaN), ties keep a's position.
    case ReductionState::Arg:
      return cat("cppi_v", to_string(kind), "_update(", a, ", (", b, ").value, (", b, ").index)");
    case ReductionState::Welford: return cat("cppi_vwelford_combine(", a, ", ", b, ")");
    case ReductionState::Value: break;
  }
  const bool fl = codegen::operand_class(t) == codegen::OperandClass::Float;
  switch (fold_of(kind)) {
    case BinaryOp::Add: return cat("(", a, " + ", b, ")");
    case BinaryOp::Mul: return cat("(", a, " * ", b, ")");
    case BinaryOp::Maximum: return cat(fl ? "cppi_max(" : "cppi_vmax_int(", a, ", ", b, ")");
    case BinaryOp::Minimum: return cat(fl ? "cppi_min(" : "cppi_vmin_int(", a, ", ", b, ")");
    default: fail(cat("lane-wise combine of ", to_string(kind), " over ", dtype_name(t)));
  }
}

CValue CpuKernelPrinter::identity_where_tail_is_off(ReductionKind kind, DType t, const CValue& v,
                                                   const std::string& lanes) {
  if (t == DType::Bool) {
    // Off lanes hold the fold's identity: false for any and max, true for all and min.
    const std::string m = as_mask(v, 4), on = tail_mask(4, lanes);
    return CValue{bool_fold_starts_true(kind) ? cat("(", m, " | ~", on, ")") : cat("(", m, " & ", on, ")"), DType::Bool, true, 4};
  }
  return CValue{cat("cppi_vselect(", tail_mask(lane_bytes(t), lanes), ", ", as_vector(v), ", cppi_vsplat<", vtype(t), ">(",
                    identity_value(kind, t), "))"),
                t, true};
}

std::string CpuKernelPrinter::horizontal(ReductionKind kind, DType t, const std::string& acc) const {
  if (state_of(kind) != ReductionState::Value) return cat("cppi_v", to_string(kind), "_reduce(", acc, ")");
  const bool fl = is_floating(t), bool_lanes = t == DType::Bool;
  switch (fold_of(kind)) {
    case BinaryOp::Add: return (fl ? "cppi_vreduce_add(" : "cppi_vreduce_wadd(") + acc + ")";
    case BinaryOp::Mul: return (fl ? "cppi_vreduce_mul(" : "cppi_vreduce_wmul(") + acc + ")";
    case BinaryOp::Maximum: return (bool_lanes ? "cppi_vreduce_any(" : "cppi_vreduce_max(") + acc + ")";
    case BinaryOp::Minimum: return (bool_lanes ? "cppi_vreduce_all(" : "cppi_vreduce_min(") + acc + ")";
    case BinaryOp::LogicalOr: return "cppi_vreduce_any(" + acc + ")";
    case BinaryOp::LogicalAnd: return "cppi_vreduce_all(" + acc + ")";
    default: fail(cat("a horizontal ", to_string(kind)));
  }
}

}  // namespace cppi::cpu::detail
