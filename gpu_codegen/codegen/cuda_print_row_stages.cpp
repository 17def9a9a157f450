// The CUDA printer's stages of a row or column group: the nest
// lower_row_stage_loops builds (row_stage_loops.h), walked. A pass's loop
// over its positions (GpuRowPositions) or a cached row's slots
// (GpuRowSlots) prints around the stages at each, its accumulators before
// it and their combines after it; a row cached in vectors' slot groups
// print their leaves in cuda_print_row_cache.cpp (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/row_stage_loops.h"

namespace cppi::gpu::cuda_print {

const ReductionStage& CudaKernelPrinter::reduction_stage(size_t i) const {
  const auto* s = i < k_.stages.size() ? std::get_if<ReductionStage>(&k_.stages[i]) : nullptr;
  if (!s) fail(cat("kernel ", k_.name, ": stage ", i, " of a row nest is not a reduction"));
  return *s;
}

const PointwiseStage& CudaKernelPrinter::pointwise_stage(size_t i) const {
  const auto* s = i < k_.stages.size() ? std::get_if<PointwiseStage>(&k_.stages[i]) : nullptr;
  if (!s) fail(cat("kernel ", k_.name, ": stage ", i, " of a row nest is not pointwise"));
  return *s;
}

void CudaKernelPrinter::print_row_stage_part(const codegen::TargetPart& p, RowLeaves& leaves) {
  std::vector<size_t> at;
  for (const std::string& a : p.args) at.push_back(std::stoul(a));
  if (p.what == row_stage_part::kAccumulator && at.size() == 1) {
    const ReductionStage& s = reduction_stage(at[0]);
    const DType t = s.body.dtype();
    out_.line(cat(state_type(s.kind, t), " ", accumulator(s), " = ", state_identity(s.kind, t), ";"));
  } else if (p.what == row_stage_part::kUpdateOnce && at.size() == 1) {
    const ReductionStage& s = reduction_stage(at[0]);
    ValueScope scope;
    const CValue v = scalar_value(s.body, scope);
    out_.line(state_update(s.kind, s.body.dtype(), accumulator(s), v.text, "0") + ";");
    declare_results(s, accumulator(s));
  } else if (p.what == row_stage_part::kCombine && at.size() == 2 && at[0] < at[1]) {
    print_pass_combine(at[0], at[1]);
  } else if (p.what == row_stage_part::kStoreOnce && at.size() == 1) {
    const PointwiseStage& s = pointwise_stage(at[0]);
    out_.open(walk_ == RowWalk::ColumnGroups ? "if (tid == 0 && valid)" : "if (tid == 0)");
    ValueScope scope;
    print_stores(s.stores, scope);
    out_.close();
  } else if ((p.what == row_stage_part::kRowInvariants || p.what == row_stage_part::kGroupVectors ||
              p.what == row_stage_part::kLaneValues || p.what == row_stage_part::kStoreVectors) &&
             at.size() == 1 && cached_elements_ > 0) {
    print_cached_store_part(p.what, at[0], leaves);  // cuda_print_row_cache.cpp
  } else {
    fail(cat("kernel ", k_.name, ": no row stage part ", p.what, " of ", p.args.size(), " arguments"));
  }
}

CudaKernelPrinter::StagePass CudaKernelPrinter::stage_pass(size_t first, size_t end) const {
  StagePass pass;
  if (const auto* pw = std::get_if<PointwiseStage>(&k_.stages[first])) {
    pass.bodies.emplace_back();
    pass.stores.push_back(pw->stores);
    pass.used = used_vars(k_.stages[first]);
    return pass;
  }
  const ReductionStage& head = reduction_stage(first);
  for (size_t i = first; i < end; ++i) {
    std::map<std::string, IndexExpr> rename;
    const std::vector<Loop>& loops = loops_of(k_.stages[i]);
    for (size_t l = 0; l < loops.size(); ++l) rename[loops[l].var.as<IndexVar>()->name] = head.loops[l].var;
    for (const auto& v : used_vars(k_.stages[i])) {
      auto it = rename.find(v);
      pass.used.insert(it == rename.end() ? v : it->second.as<IndexVar>()->name);
    }
    std::vector<Store> stores;
    if (const auto* pw = std::get_if<PointwiseStage>(&k_.stages[i])) {
      for (const auto& st : pw->stores) {
        stores.push_back(st.with(substitute(st.index, rename), substitute_indices(st.value, rename)));
      }
      pass.bodies.emplace_back();
    } else {
      pass.bodies.push_back(substitute_indices(std::get<ReductionStage>(k_.stages[i]).body, rename));
    }
    pass.stores.push_back(std::move(stores));
  }
  return pass;
}

void CudaKernelPrinter::print_position_loop(const codegen::For& l) {
  const auto* at = l.body ? std::get_if<codegen::TargetPart>(&l.body->node) : nullptr;
  if (!at || at->what != row_stage_part::kPassAt || at->args.size() != 2 || l.lo.value != 0 ||
      l.threads != threads_per_row_) {
    fail(cat("kernel ", k_.name, ": position loop ", l.var, " from ", l.lo.text, " on ", l.threads,
             " threads a row holds no pass of its stages"));
  }
  const size_t first = std::stoul(at->args[0]), end = std::stoul(at->args[1]);
  if (first >= end || end > k_.stages.size()) fail(cat("kernel ", k_.name, ": no pass of stages ", first, "-", end));
  const StagePass pass = stage_pass(first, end);
  const auto body = [&](ValueScope& scope) { print_pass_at(first, end, pass, scope); };
  if (l.kind == codegen::LoopKind::GpuRowSlots) {
    print_row_slots(l, first, end, body);
  } else {
    print_row_positions(l, first, pass.used, body);
  }
}

void CudaKernelPrinter::print_row_slots(const codegen::For& l, size_t first, size_t end,
                                        const std::function<void(ValueScope&)>& body) {
  if (l.hi.value != cached_elements_ || l.step != g_.cache_vector) {
    fail(cat("kernel ", k_.name, ": slot loop to ", l.hi.text, " in vectors of ", l.step, " is not the row cache's"));
  }
  const Stage& stage_ref = k_.stages[first];
  const auto* red = std::get_if<ReductionStage>(&stage_ref);
  const bool uses_pos = red && (red->kind == ReductionKind::ArgMax || red->kind == ReductionKind::ArgMin);
  const auto& loops = loops_of(stage_ref);
  const int t = l.threads;
  const int e = cached_elements_;
  RowCacheReads reads = row_cache_reads(first);
  for (size_t other = first + 1; other < end; ++other) {
    RowCacheReads more = row_cache_reads(other);
    reads.from_cache.insert(reads.from_cache.end(), more.from_cache.begin(), more.from_cache.end());
    reads.used.insert(more.used.begin(), more.used.end());
  }
  const int64_t n = *product_of(loops).constant();
  const bool guard = n != static_cast<int64_t>(e) * t;
  const int v = static_cast<int>(l.step);
  // What does not change along the row is computed once, before the
  // slots (layer_norm's mean and rstd), as the dumped kernel then reads.
  ValueScope invariant;
  std::vector<Expr> cached_loads;
  for (const auto& fc : reads.from_cache) cached_loads.push_back(fc.first);
  hoist_invariants(stage_values(stage_ref), loop_var_names(loops), invariant, cached_loads);
  out_.line("#pragma unroll");
  out_.open(cat("for (int ", l.var, " = 0; ", l.var, " < ", e, "; ++", l.var, ")"));
  if (guard || uses_pos || !reads.used.empty()) {
    out_.line(v > 1 ? cat("const int64_t pos = (int64_t)(slot / ", v, ") * ", t * v, " + tid * ", v, " + slot % ", v, ";")
                    : cat("const int64_t pos = (int64_t)slot * ", t, " + tid;"));
  }
  if (guard) out_.open(cat("if (pos < ", n, ")"));
  unravel(loops, "pos", &reads.used);
  ValueScope scope(&invariant);
  for (const auto& [x, text] : reads.from_cache) scope.add(x, CValue{text, x.dtype()});
  body(scope);
  if (guard) out_.close();
  out_.close();
}

void CudaKernelPrinter::print_row_positions(const codegen::For& l, size_t first, const std::set<std::string>& used,
                                            const std::function<void(ValueScope&)>& body) {
  const int64_t t = l.threads, splits = l.splits;
  const std::string& v = l.var;
  // Several positions in flight per thread: the loads do not depend on the
  // fold. Spelled out because NVVM unrolls these loops only at full
  // optimisation; under --Ofast-compile a loop kept one load in flight (a
  // softmax over long rows without a row cache was markedly slower).
  out_.line("#pragma unroll 4");
  if (walk_ == RowWalk::ColumnGroups) {
    // A lane past the group's columns starts at the end: nothing to fold.
    out_.open(cat("for (int64_t ", v, " = valid ? ", splits > 1 ? cat("split * ", t, " + tid") : std::string("tid"),
                  " : ", l.hi.text, "; ", v, " < ", l.hi.text, "; ", v, " += ", t * splits, ")"));
  } else if (splits > 1) {
    out_.open(cat("for (int64_t ", v, " = split * ", t, " + tid; ", v, " < ", l.hi.text, "; ", v, " += ", t * splits, ")"));
  } else {
    out_.open(cat("for (int64_t ", v, " = tid; ", v, " < ", l.hi.text, "; ", v, " += ", t, ")"));
  }
  unravel(loops_of(k_.stages[first]), v, &used);
  ValueScope scope;
  body(scope);
  out_.close();
}

void CudaKernelPrinter::print_pass_at(size_t first, size_t end, const StagePass& pass, ValueScope& scope) {
  for (size_t i = first; i < end; ++i) {
    const auto* s = std::get_if<ReductionStage>(&k_.stages[i]);
    if (!s) {
      print_stores(pass.stores[i - first], scope);
      continue;
    }
    const DType t = s->body.dtype();
    const std::string acc = accumulator(*s);
    const CValue v = scalar_value(pass.bodies[i - first], scope);
    if (s->kind == ReductionKind::Welford) {
      // Division-free Welford steps (cuda_support.h): in a cached row a
      // thread's valid slots are a prefix, so slot + 1 is its weight.
      const std::string st = shuffle_type(t);
      const std::string inv = cached_elements_ > 0 ? cat("((", st, ")1 / (", st, ")(slot + 1))")
                                                   : cat("cppi_welford_rcp(", acc, ".weight + (", st, ")1)");
      out_.line(cat(acc, " = cppi_welford_add(", acc, ", ", v.text, ", ", inv, ");"));
      continue;
    }
    out_.line(state_update(s->kind, t, acc, v.text, "pos") + ";");
  }
}

void CudaKernelPrinter::print_pass_combine(size_t first, size_t end) {
  std::vector<std::string> accs;  // "" for a pointwise stage of the pass
  for (size_t i = first; i < end; ++i) {
    const auto* s = std::get_if<ReductionStage>(&k_.stages[i]);
    accs.push_back(s ? accumulator(*s) : std::string());
  }
  const bool column_split = walk_ == RowWalk::ColumnGroups && g_.row_splits > 1;
  for (size_t i = first; i < end; ++i) {
    if (accs[i - first].empty()) continue;
    const auto& s = std::get<ReductionStage>(k_.stages[i]);
    const DType t = s.body.dtype();
    const std::string& acc = accs[i - first];
    const std::string scratch = local_name(s.results[0]) + "_scratch";
    // Two sums of one type next to each other in the pass (the corrected
    // two-pass variance) share a block reduction's barriers: a layer_norm
    // over long rows is slower with two separate ones.
    const auto* next = i + 1 < end && !accs[i + 1 - first].empty()
                           ? std::get_if<ReductionStage>(&k_.stages[i + 1]) : nullptr;
    if (walk_ != RowWalk::ColumnGroups && g_.mapping == GpuMapping::RowPerBlock && g_.row_splits == 1 && next &&
        s.kind == ReductionKind::Sum && next->kind == ReductionKind::Sum && next->body.dtype() == t) {
      out_.line(cat("__shared__ ", state_type(s.kind, t), " ", scratch, "[64];"));
      out_.line(cat("cppi_block_reduce_sum2(", acc, ", ", accs[i + 1 - first], ", ", scratch, ");"));
      declare_results(s, acc);
      declare_results(*next, accs[i + 1 - first]);
      ++i;
      continue;
    }
    if (walk_ == RowWalk::ColumnGroups) {
      out_.line(cat("__shared__ ", state_type(s.kind, t), " ", scratch, "[", g_.block_size, "];"));
      out_.line(cat(acc, " = cppi_column_reduce(", acc, ", ", combine_op(s.kind), ", ", scratch, ");"));
    } else if (g_.mapping == GpuMapping::RowPerWarp) {
      out_.line(cat(acc, " = cppi_warp_reduce(", acc, ", ", combine_op(s.kind), ");"));
    } else {
      out_.line(cat("__shared__ ", state_type(s.kind, t), " ", scratch, "[32];"));
      out_.line(cat(acc, " = cppi_block_reduce(", acc, ", ", combine_op(s.kind), ", ", state_identity(s.kind, t),
                    ", ", scratch, ");"));
      if (g_.row_splits > 1) print_split_combine(s, acc, scratch);
    }
    if (!column_split) declare_results(s, acc);
  }
  if (column_split) {
    // check_schedule: the run is stages [0, end) and every later stage is loop-less.
    print_column_split_combine(end, accs);
    for (size_t i = first; i < end; ++i) declare_results(std::get<ReductionStage>(k_.stages[i]), accs[i - first]);
  }
}

}  // namespace cppi::gpu::cuda_print
