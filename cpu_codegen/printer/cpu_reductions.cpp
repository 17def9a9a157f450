/// CPU kernel printer: reduction stages (scalar, horizontal, lane and
/// parallel modes) and the reduction states, updates and combines they print.
/// A run's loops are cpu::schedule_reduction_loops' (loop_nest.h): the
/// printer declares the accumulators, prints the nest with its updates, and
/// reads the final states.
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

  if (place(at).in_vector()) {
    // Lane mode: W independent reductions, one per outer iteration.
    if (run.size() != 1) fail(cat("kernel ", k_.name, ": a one-pass run in lane mode"));
    const std::string state =
        sched_.parallel_reduction && !head.loops.empty()
            ? print_parallel_reduction(head, at)
            : print_reduction_core(head, Bound{"0", 0}, head.loops.empty() ? Bound{"1", 1} : extent(head.loops[0]), at);
    bind_lane_results(head, state);
    return;
  }

  std::vector<std::string> states;
  if (sched_.parallel_reduction && !head.loops.empty()) {
    if (run.size() != 1) fail(cat("kernel ", k_.name, ": a one-pass run in a parallel reduction"));
    states.push_back(print_parallel_reduction(head, at));
  } else {
    // A one-value reduction's combined result is declared under its own name.
    std::vector<std::string> result_names;
    for (const ReductionStage* s : run) {
      const bool simple =
          num_results(s->kind) == 1 && s->kind != ReductionKind::ArgMax && s->kind != ReductionKind::ArgMin;
      result_names.push_back(simple ? local_name(s->results[0]) : "");
    }
    states = print_reduction_core(run, Bound{"0", 0}, head.loops.empty() ? Bound{"1", 1} : extent(head.loops[0]), at,
                                  result_names);
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

std::string CpuKernelPrinter::print_parallel_reduction(const ReductionStage& s, const ValueScope& at) {
  // Chunks of the first loop run on the threads, each from the identity;
  // their states combine in chunk order. Under a vectorised outer loop the
  // states are vectors, a lane per outer iteration. (The chunks are not a
  // node of the run's nest yet: each chunk declares and returns its own
  // accumulators, which the printer keeps around the nest.)
  const bool lanes = place(at).in_vector();
  const DType t = s.body.dtype();
  const Loop& loop = s.loops[0];
  const std::string st = lanes ? vstate_type(s.kind, t) : state_type(s.kind, t);
  const std::string identity = lanes ? vstate_identity(s.kind, t) : state_identity(s.kind, t);
  const std::string typed_identity = identity[0] == '{' ? st + identity : "(" + st + ")" + identity;
  const std::string combined = lanes ? vstate_combine(s.kind, t, "a", "b") : state_combine(s.kind, t, "a", "b");
  const std::string state = local_name(s.results[0]) + "_state";
  const auto [b, e] = chunk_bounds(loop);
  out_.open(cat("const ", st, " ", state, " = cppi_parallel_reduce<", st, ">(0, ", extent(loop).text, ", ",
                std::max<int64_t>(1, sched_.grain_size), ", ", typed_identity, ",\n    [=](int64_t ", b.text,
                ", int64_t ", e.text, ", ", st, ") -> ", st));
  const std::string partial = print_reduction_core(s, b, e, at);
  out_.line("return " + partial + ";");
  out_.close(cat("}, [](", st, " a, ", st, " b) { return ", combined, "; });"));
  return state;
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
                                                   const ValueScope& at, const std::string& result_name,
                                                   const std::string& lane_init) {
  return print_reduction_core(std::vector<const ReductionStage*>{&s}, lo0, hi0, at, {result_name}, lane_init).front();
}

/// print_reduction_core's work for one call: each stage's accumulators (a
/// scalar state `acc` in scalar mode and for horizontal mode's scalar tail,
/// vector states `vacc`, `vacc_1`, ... in lane and horizontal modes, and
/// with a cascade levels of `total`s), the updates and cascade blocks of the
/// loops that feed them (cpu::lower_reduction_loops builds the loops), and
/// the final states.
class ReductionCore {
 public:
  ReductionCore(CpuKernelPrinter& p, const ReductionRun& run, const ValueScope& at)
      : p_(p),
        run_(run),
        at_(at),
        head_(*run.stages.front()),
        // The run's stages share their loops (one_pass_end), hence the position.
        pos_(p.reduction_position(head_)),
        // A masked tail (TailKind::Masked) leaves no scalar steps in horizontal mode.
        scalar_acc_(!run.horizontal || p.sched_.tail != TailKind::Masked) {
    for (size_t i = 0; i < run.stages.size(); ++i) add(i);
  }

  /// Declares the states (from `lane_init` in lane mode when given), the
  /// cascade's totals and its counters.
  void declare(const std::string& lane_init);
  /// The accumulation over the run's loops, the first over [lo0, hi0).
  void accumulate(const Bound& lo0, const Bound& hi0);
  /// Each stage's final state (see print_reduction_core).
  std::vector<std::string> results(const std::vector<std::string>& result_names);
  /// The nest's leaves, in `body` (their scope).
  void update(const codegen::Accumulate& a, const ValueScope& body);
  void cascade_block_done(const codegen::CascadeBlockDone& d);

 private:
  struct Accumulation {
    const ReductionStage* s;
    DType t;
    std::string base, acc, vacc, total;
    int accumulators;
    bool cascade;
    std::string vacc_k(int k) const { return k == 0 || accumulators == 1 ? vacc : cat(vacc, "_", k); }
    std::string total_l(int l) const { return l == 1 ? total : cat(total, "_", l); }
  };

  static const Place& place(const ValueScope& scope) { return CpuKernelPrinter::place(scope); }
  void add(size_t stage);
  std::string merges(int l) const { return cat(accs_.front().base, "_merges", l); }
  std::string combine(const Accumulation& a, const std::string& x, const std::string& y) const {
    return run_.lanes ? p_.vstate_combine(a.s->kind, a.t, x, y) : p_.state_combine(a.s->kind, a.t, x, y);
  }
  std::string identity(const Accumulation& a) const {
    return run_.lanes ? p_.vstate_identity(a.s->kind, a.t) : p_.state_identity(a.s->kind, a.t);
  }
  void merge_accumulators(const Accumulation& a, bool reset);
  std::string block_state(const Accumulation& a) const;
  void flush();
  /// One position in scalar form, in `body` (the loop's scope).
  void scalar_step(const ValueScope& body);
  void lane_step(const ValueScope& body);
  /// Horizontal mode: a vector of positions into accumulator k, in `body`
  /// (the vector's scope).
  void vector_step(int k, const ValueScope& body);

  CpuKernelPrinter& p_;
  const ReductionRun& run_;
  /// Where the run prints: the stages' invariants, at the place of their loops.
  const ValueScope& at_;
  const ReductionStage& head_;
  const IndexExpr pos_;
  const bool scalar_acc_;
  std::vector<Accumulation> accs_;
  int levels_ = 0;
  std::string terms_;
};

// Cascade (CpuSchedule::cascade_block): the accumulators restart every
// run_.cascade_terms terms of the innermost loop, their block result merged
// into a total (lower_reduction_loops counts the blocks). Tiled columns cascade
// per row block instead (print_tiled_columns).
void ReductionCore::add(size_t stage) {
  const ReductionStage& s = *run_.stages[stage];
  Accumulation a;
  a.s = &s;
  a.t = s.body.dtype();
  a.base = p_.local_name(s.results[0]);
  a.acc = a.base + "_acc";
  a.vacc = a.base + "_vacc";
  a.total = a.base + "_total";
  a.accumulators = run_.accumulators[stage];
  a.cascade = run_.cascades[stage];
  accs_.push_back(a);
}

void ReductionCore::declare(const std::string& lane_init) {
  auto& out = p_.out_;
  for (const auto& a : accs_) {
    // Vector states only where vectors run: a loop-less stage in scalar mode
    // may be of a dtype with no vector at the kernel's width (an int64 prod
    // after an int32 amin's 16 lanes).
    const bool vectors = run_.lanes || run_.horizontal;
    const std::string vst = vectors ? p_.vstate_type(a.s->kind, a.t) : "";
    const std::string vid = vectors ? p_.vstate_identity(a.s->kind, a.t) : "";
    if (run_.lanes) {
      out.line(cat(vst, " ", a.vacc, " = ", lane_init.empty() ? vid : lane_init, ";"));
    } else {
      if (scalar_acc_) out.line(cat(p_.state_type(a.s->kind, a.t), " ", a.acc, " = ", p_.state_identity(a.s->kind, a.t), ";"));
      if (run_.horizontal) {
        for (int k = 0; k < a.accumulators; ++k) out.line(cat(vst, " ", a.vacc_k(k), " = ", vid, ";"));
      }
    }
  }
  // Levels of totals (cascade_levels), from the stage's whole extent (a
  // parallel chunk's share is at most that).
  std::optional<int64_t> all_terms = int64_t{1};
  for (const auto& l : head_.loops) {
    const auto n = l.extent.constant();
    all_terms = n && all_terms ? std::optional<int64_t>(*all_terms * *n) : std::nullopt;
  }
  const bool any_cascade = run_.cascade_terms > 0;
  levels_ = any_cascade ? cascade_levels(all_terms, run_.cascade_terms) : 0;
  for (const auto& a : accs_) {
    if (!a.cascade) continue;
    for (int l = 1; l <= levels_; ++l) {
      out.line(run_.lanes ? cat(p_.vstate_type(a.s->kind, a.t), " ", a.total_l(l), " = ", identity(a), ";")
                      : cat(p_.state_type(a.s->kind, a.t), " ", a.total_l(l), " = ", identity(a), ";"));
    }
  }
  terms_ = accs_.front().base + "_terms";
  if (any_cascade) out.line(cat("int64_t ", terms_, " = 0;"));
  for (int l = 1; l < levels_; ++l) out.line(cat("int64_t ", merges(l), " = 0;"));
}

/// Folds accumulators 1.. into the first, pairwise; with `reset` they
/// restart for the next cascade block.
void ReductionCore::merge_accumulators(const Accumulation& a, bool reset) {
  for (int step = 1; step < a.accumulators; step *= 2) {
    for (int k = 0; k + step < a.accumulators; k += 2 * step) {
      const CValue part{a.vacc_k(k + step), a.t, true, a.t == DType::Bool ? 4 : 0};
      p_.out_.line(p_.vector_update(a.s->kind, a.t, a.vacc_k(k), part, "") + ";");
    }
  }
  if (!reset) return;
  for (int k = 1; k < a.accumulators; ++k) {
    p_.out_.line(cat(a.vacc_k(k), " = ", p_.vstate_identity(a.s->kind, a.t), ";"));
  }
}

/// The block so far, as one state (accumulators merged).
std::string ReductionCore::block_state(const Accumulation& a) const {
  if (!run_.horizontal) return run_.lanes ? a.vacc : a.acc;
  const std::string h = p_.horizontal(a.s->kind, a.t, a.vacc);
  return scalar_acc_ ? p_.state_combine(a.s->kind, a.t, h, a.acc) : h;
}

/// A cascade block is done: its state into the first total, each level into
/// the next every kCascadeFanIn merges.
void ReductionCore::flush() {
  auto& out = p_.out_;
  for (const auto& a : accs_) {
    if (!a.cascade) continue;
    merge_accumulators(a, true);
    out.line(cat(a.total, " = ", combine(a, a.total, block_state(a)), ";"));
    if (run_.lanes || run_.horizontal) out.line(cat(a.vacc, " = ", p_.vstate_identity(a.s->kind, a.t), ";"));
    if (!run_.lanes && scalar_acc_) out.line(cat(a.acc, " = ", p_.state_identity(a.s->kind, a.t), ";"));
  }
  for (int l = 1; l < levels_; ++l) {
    out.open(cat("if (++", merges(l), " >= ", kCascadeFanIn, ")"));
    for (const auto& a : accs_) {
      if (!a.cascade) continue;
      out.line(cat(a.total_l(l + 1), " = ", combine(a, a.total_l(l + 1), a.total_l(l)), ";"));
      out.line(cat(a.total_l(l), " = ", identity(a), ";"));
    }
    out.line(cat(merges(l), " = 0;"));
  }
  for (int l = 1; l < levels_; ++l) out.close();
}

// One position: every stage's body in one scope, so a value two stages share
// (the element, x - mean) is computed once.
void ReductionCore::scalar_step(const ValueScope& body) {
  ValueScope scope(&body);
  for (const auto& a : accs_) {
    const CValue v = p_.value(a.s->body, scope);
    p_.out_.line(p_.scalar_update(a.s->kind, a.t, a.acc, v.text, p_.index(pos_)) + ";");
  }
}

void ReductionCore::lane_step(const ValueScope& body) {
  ValueScope scope(&body);
  for (const auto& a : accs_) {
    const CValue v = p_.value(a.s->body, scope);
    p_.out_.line(p_.vector_update(a.s->kind, a.t, a.vacc, v,
                                  cat("cppi_vsplat<cppi_i64x", p_.width(), ">(", p_.index(pos_), ")")) +
                 ";");
  }
}

/// Horizontal mode: vector k of a group goes to each stage's accumulator k.
void ReductionCore::vector_step(int k, const ValueScope& body) {
  ValueScope scope(&body);
  const std::string& tail_lanes = place(body).tail_lanes;
  for (const auto& a : accs_) {
    CValue val = p_.value(a.s->body, scope);
    if (!tail_lanes.empty()) val = p_.identity_where_tail_is_off(a.s->kind, a.t, val, tail_lanes);
    p_.out_.line(p_.vector_update(a.s->kind, a.t, a.vacc_k(k), val,
                                  cat("cppi_viota<cppi_i64x", p_.width(), ">(", p_.index(pos_), ")")) +
                 ";");
  }
}

void ReductionCore::update(const codegen::Accumulate& a, const ValueScope& body) {
  if (run_.lanes) {
    lane_step(body);
  } else if (place(body).in_vector()) {
    vector_step(a.accumulator, body);
  } else {
    scalar_step(body);
  }
}

void ReductionCore::cascade_block_done(const codegen::CascadeBlockDone& d) {
  auto& out = p_.out_;
  out.line(cat(terms_, " += ", d.to, " - ", d.from, ";"));
  out.open(cat("if (", terms_, " >= ", run_.cascade_terms, ")"));
  flush();
  out.line(cat(terms_, " = 0;"));
  out.close();
}

void ReductionCore::accumulate(const Bound& lo0, const Bound& hi0) {
  // The Accumulate and CascadeBlockDone leaves print through this run
  // (print_loop_node), found in their scope's Place.
  Place accumulating = place(at_);
  accumulating.reduction = this;
  p_.print_loops(schedule_reduction_loops(run_, lo0, hi0, p_.loop_input()), ValueScope(&at_, &accumulating));
}

void CpuKernelPrinter::print_loop_node(const codegen::Accumulate& a, const ValueScope& at) {
  reduction_printing(at).update(a, at);
}

void CpuKernelPrinter::print_loop_node(const codegen::CascadeBlockDone& d, const ValueScope& at) {
  reduction_printing(at).cascade_block_done(d);
}

ReductionCore& CpuKernelPrinter::reduction_printing(const ValueScope& at) const {
  if (!place(at).reduction) fail(cat("kernel ", k_.name, ": a reduction's update outside its loops"));
  return *place(at).reduction;
}

std::vector<std::string> ReductionCore::results(const std::vector<std::string>& result_names) {
  auto& out = p_.out_;
  std::vector<std::string> states;
  for (size_t j = 0; j < accs_.size(); ++j) {
    const Accumulation& a = accs_[j];
    const std::string& tree_row = place(at_).tree_row;
    if (!tree_row.empty()) {
      // The row's vector is its whole state: masked tails, or whole vectors
      // only (the scalar state stays the identity), and no cascade.
      const auto n = head_.loops.back().extent.constant();
      const bool whole_vectors = head_.loops.size() == 1 && n && *n % p_.sched_.vector_width == 0;
      if (!run_.horizontal || a.cascade || (scalar_acc_ && !whole_vectors)) {
        fail(cat("kernel ", p_.k_.name, ": a reduction tree needs a vector state"));
      }
      merge_accumulators(a, false);
      out.line(cat(a.base, "_vaccs[", tree_row, "] = ", a.vacc, ";"));
      states.push_back("");
      continue;
    }
    if (!a.cascade && (run_.lanes || !run_.horizontal)) {
      states.push_back(run_.lanes ? a.vacc : a.acc);
      continue;
    }
    merge_accumulators(a, false);
    const std::string name = j < result_names.size() ? result_names[j] : "";
    const std::string combined = run_.lanes ? a.base + "_vred" : name.empty() ? a.base + "_red" : name;
    // The block so far, then the levels of totals, lowest first.
    std::string result = run_.lanes ? a.vacc : block_state(a);
    if (a.cascade)
      for (int l = 1; l <= levels_; ++l) result = combine(a, a.total_l(l), result);
    out.line(cat("const ", run_.lanes ? p_.vstate_type(a.s->kind, a.t) : p_.state_type(a.s->kind, a.t), " ", combined,
                 " = ", result, ";"));
    states.push_back(combined);
  }
  return states;
}

std::vector<std::string> CpuKernelPrinter::print_reduction_core(const std::vector<const ReductionStage*>& run,
                                                                const Bound& lo0, const Bound& hi0,
                                                                const ValueScope& at,
                                                                const std::vector<std::string>& result_names,
                                                                const std::string& lane_init) {
  // In lanes (under a vectorised outer loop); from a tile (lane_init) in the
  // column tiles' block.
  const ReductionRun r = reduction_run(run, place(at).in_vector(), !lane_init.empty(), loop_input());
  ReductionCore core(*this, r, at);
  core.declare(lane_init);
  core.accumulate(lo0, hi0);
  return core.results(result_names);
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
