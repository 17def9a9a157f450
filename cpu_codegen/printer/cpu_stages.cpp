/// CPU kernel printer: the stages inside the loops (pointwise stores, scans
/// and the order of a kernel's stages), the values a stage hoists before its
/// loops, store forwarding between the masked last vectors of a row's
/// stages (through the slots cpu::choose_forward_slots chose), and the row
/// blocks of rows in lanes as cpu::open_row_blocks records them in the loop
/// IR.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "cpu_codegen/schedule/row_epilogue.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::cpu::detail {

// --- stages ------------------------------------------------------------------------------

void CpuKernelPrinter::print_loop_node(const codegen::Stages& s, const ValueScope& at) {
  locals_.clear();
  if (s.fold_var.empty()) {
    print_stage_range(0, k_.stages.size(), place(at).in_vector(), at);
    return;
  }
  // A piece of the vectorised loop (split_vector_loop_pieces).
  for (size_t i = 0; i < s.folded.size(); ++i) print_pointwise(s.folded[i], i, at);
}

void CpuKernelPrinter::print_stage_range(size_t first, size_t end, bool vector_outer, const ValueScope& outer) {
  IterationRegisters registers;
  Place iteration = place(outer);
  iteration.registers = &registers;
  const ValueScope at(&outer, &iteration);
  for (size_t i = first; i < end;) {
    if (std::holds_alternative<ReductionStage>(k_.stages[i])) {
      const size_t run_end = std::min(end, one_pass_end(loop_input(), i, vector_outer));
      print_reductions(i, run_end, at);
      i = run_end;
    } else if (const auto* scan = std::get_if<ScanStage>(&k_.stages[i])) {
      print_scan(*scan, at);
      ++i;
    } else {
      print_pointwise(std::get<PointwiseStage>(k_.stages[i]), i, at);
      ++i;
    }
  }
}

void CpuKernelPrinter::print_epilogue_in_lanes(const Loop& l, const Bound& lo, const Bound& hi, const ValueScope& at) {
  const size_t first = epilogue_start(k_);
  if (first == k_.stages.size() || sched_.vectorized != VectorizedLoop::InnermostOfEachStage) {
    fail(cat("kernel ", k_.name, ": epilogue_in_lanes needs vectorised stage loops and loop-less last stages"));
  }
  const std::string v = var_name(l), block = v + "_block", rows = v + "_rows";
  const std::string w = width();
  // Its rows print at the kernel's place, with the kernel's forwarding slots.
  Place kernel = kernel_place_;
  kernel.kernel_forward_slots = place(at).kernel_forward_slots;
  const ValueScope kernel_scope(&kernel_scope_, &kernel);
  // The scalars the epilogue reads (the row's reductions), an element per row.
  std::map<std::string, std::pair<DType, std::string>> handed;  // name -> dtype, array
  for (size_t i = first; i < k_.stages.size(); ++i) {
    for (const Expr& e : post_order(stage_values(k_.stages[i]))) {
      if (const auto* ref = e.as<LocalRef>()) handed[ref->name] = {e.dtype(), local_name(ref->name) + "_rows"};
    }
  }
  out_.open(cat("for (int64_t ", block, " = ", lo.text, "; ", block, " < ", hi.text, "; ", block, " += ", w, ")"));
  out_.line(cat("const int64_t ", rows, " = cppi_min_i<int64_t>(", w, ", ", hi.text, " - ", block, ");"));
  if (sched_.reduction_trees) {
    print_reduction_trees(first, v, block, rows);
  } else {
    for (const auto& [name, h] : handed) out_.line(cat(scalar_type(h.first), " ", h.second, "[", w, "];"));
    out_.open(cat("for (int64_t ", v, " = ", block, "; ", v, " < ", block, " + ", rows, "; ++", v, ")"));
    locals_.clear();
    print_stage_range(0, first, false, kernel_scope);
    for (const auto& [name, h] : handed) {
      out_.line(cat(h.second, "[", v, " - ", block, "] = ", local_value(LocalRef(name, h.first)).text, ";"));
    }
    out_.close();
  }
  // Then the epilogue of the block's rows, a row per lane; a partial last
  // block stores only its rows.
  auto epilogue = [&](bool partial) {
    out_.line(cat("const int64_t ", v, " = ", block, ";"));
    Place lanes = kernel.vectorized(v);
    if (partial) lanes.tail_lanes = rows;
    const ValueScope scope(&kernel_scope_, &lanes);
    for (const auto& [name, h] : handed) {
      const std::string vt = vtype(h.first), lanes = h.second + "_v";
      out_.line(cat("const ", vt, " ", lanes, " = ",
                    partial ? cat("cppi_vload_partial<", vt, ">(", h.second, ", ", rows, ")")
                            : cat("cppi_vload<", vt, ">(", h.second, ")"),
                    ";"));
      locals_[name] = CValue{lanes, h.first, true};
    }
    print_stage_range(first, k_.stages.size(), false, scope);
  };
  out_.line(cat("// stages ", first, "-", k_.stages.size() - 1, ": the ", w, " rows' epilogue, a row per lane"));
  out_.open(cat("if (", rows, " == ", w, ")"));
  epilogue(false);
  out_.close();
  out_.open("else");
  epilogue(true);
  out_.close();
  out_.close();
}

void CpuKernelPrinter::print_reduction_trees(size_t end, const std::string& v, const std::string& block,
                                             const std::string& rows) {
  const std::string w = width();
  std::vector<const ReductionStage*> stages;
  for (size_t i = 0; i < end; ++i) {
    const auto* s = std::get_if<ReductionStage>(&k_.stages[i]);
    if (!s || s->results.size() != 1) fail(cat("kernel ", k_.name, ": reduction_trees over stage ", i));
    stages.push_back(s);
    out_.line(cat(scalar_type(s->result_dtypes[0]), " ", local_name(s->results[0]), "_rows[", w, "];"));
  }
  for (size_t i = 0; i < end;) {
    const size_t run_end = std::min(end, one_pass_end(loop_input(), i, false));
    for (size_t j = i; j < run_end; ++j) {
      out_.line(cat(vtype(stages[j]->body.dtype()), " ", local_name(stages[j]->results[0]), "_vaccs[", w, "];"));
    }
    out_.open(cat("for (int64_t ", v, " = ", block, "; ", v, " < ", block, " + ", rows, "; ++", v, ")"));
    // The results of the runs before, this row's element of their arrays.
    locals_.clear();
    for (size_t j = 0; j < i; ++j) {
      const std::string name = local_name(stages[j]->results[0]);
      const DType t = stages[j]->result_dtypes[0];
      out_.line(cat("const ", scalar_type(t), " ", name, " = ", name, "_rows[", v, " - ", block, "];"));
      locals_[stages[j]->results[0]] = CValue{name, t};
    }
    Place row = kernel_place_;
    row.tree_row = cat(v, " - ", block);
    const ValueScope scope(&kernel_scope_, &row);
    print_stage_range(i, run_end, false, scope);
    out_.close();
    // A partial block's missing rows reduce identities; then one tree each.
    for (size_t j = i; j < run_end; ++j) {
      const ReductionStage& s = *stages[j];
      const DType t = s.body.dtype();
      const std::string name = local_name(s.results[0]);
      const char* tree = s.kind == ReductionKind::Sum ? "cppi_vtree_add" : s.kind == ReductionKind::Max ? "cppi_vtree_max"
                                                                                                      : "cppi_vtree_min";
      const std::string r = v + "_pad";
      out_.line(cat("for (int64_t ", r, " = ", rows, "; ", r, " < ", w, "; ++", r, ") ", name, "_vaccs[", r, "] = ",
                    vstate_identity(s.kind, t), ";"));
      out_.line(cat("cppi_vstore(", name, "_rows, ", tree, "(", name, "_vaccs));"));
    }
    i = run_end;
  }
}

void CpuKernelPrinter::print_loop_node(const codegen::RowBlocks& r, const ValueScope& at) {
  Place walking = place(at);
  walking.row_blocks = &r;
  print_loops(r.body, ValueScope(&at, &walking));
}

Place CpuKernelPrinter::open_row_blocks(size_t stage, const Place& at) {
  Place walking = at;
  walking.row_loop.reset();
  const auto& loops = loops_of(k_.stages[stage]);
  if (!at.row_blocks || !at.in_vector() || loops.size() != 1) return walking;
  walking.row_loop = loops[0];
  const std::string& vvar = at.vector_var;
  for (const codegen::RowBlock& b : at.row_blocks->blocks) {
    if (b.stage != stage) continue;
    const std::string array = row_block_array(b), v = vtype(b.buffer->dtype);
    const std::string first = cat("&", pointer_name(b.buffer->name), "[", b.start, "]");
    out_.line(cat(v, " ", array, "[", b.rows, "];  // element r of rows ", vvar, " .. ", vvar, " + ", width(),
                  " - 1 in vector r"));
    if (b.load && at.tail_lanes.empty()) {
      out_.line(cat("cppi_vload_rows<", v, ", ", b.rows, ">(", first, ", ", array, ");"));
    } else if (b.load) {
      out_.line(cat("cppi_vload_rows_partial<", v, ", ", b.rows, ">(", first, ", ", at.tail_lanes, ", ", array, ");"));
    }
  }
  return walking;
}

const codegen::RowBlock* CpuKernelPrinter::row_block_of(const BufferPtr& buffer, const IndexExpr& index_at, bool masked,
                                                        const Place& at) {
  if (!at.row_loop || !at.in_vector() || !at.row_blocks) return nullptr;
  return find_row_block(*at.row_blocks, buffer, index_at, masked, at.vector_var, *at.row_loop, loop_input());
}

void CpuKernelPrinter::print_loop_node(const codegen::StoreRowBlock& s, const ValueScope& at) {
  const codegen::RowBlock& b = s.block;
  const std::string& lanes = place(at).tail_lanes;
  const std::string v = vtype(b.buffer->dtype), first = cat("&", pointer_name(b.buffer->name), "[", b.start, "]");
  if (lanes.empty()) {
    out_.line(cat("cppi_vstore_rows<", v, ", ", b.rows, ">(", first, ", ", row_block_array(b), ");"));
  } else {
    out_.line(cat("cppi_vstore_rows_partial<", v, ", ", b.rows, ">(", first, ", ", row_block_array(b), ", ", lanes,
                  ");"));
  }
}

void CpuKernelPrinter::hoist_stage_invariants(const Stage& s, ValueScope& scope) {
  const auto& loops = loops_of(s);
  if (loops.empty()) return;
  std::set<std::string> stage_vars;
  for (const auto& l : loops) stage_vars.insert(l.var.as<IndexVar>()->name);
  // Nothing that could raise where the loops would not have run.
  auto hoistable = [&](const Expr& e) {
    if (e.kind() == ExprKind::Constant || e.kind() == ExprKind::LocalRef) return false;
    for (const auto& v : ir::free_vars(e)) {
      if (stage_vars.count(v)) return false;
    }
    for (const Expr& n : ir::post_order({e})) {
      if (n.kind() == ExprKind::Load || n.kind() == ExprKind::Random) return false;
    }
    return ir::calls_math_function(e) && !ir::may_raise(e);
  };
  for (const Expr& e : ir::outermost_picks(ir::stage_values(s), hoistable)) value(e, scope);
}

std::map<std::string, std::string> CpuKernelPrinter::declare_forward_slots(size_t stage, const Place& at) {
  std::map<std::string, std::string> slots;
  if (!at.kernel_forward_slots) return slots;
  for (const codegen::ForwardSlot& f : at.kernel_forward_slots->slots) {
    if (f.stage != stage) continue;
    const std::string slot = cat(pointer_name(f.buffer->name), "_fwd", f.number);
    out_.line(cat(vtype(f.buffer->dtype), " ", slot, ";  // its masked last vector, for the stages after"));
    slots[cat(f.buffer->name, "[", f.index, "]")] = slot;  // access_key
  }
  return slots;
}

void CpuKernelPrinter::print_loop_node(const codegen::ForwardSlots& f, const ValueScope& at) {
  Place with_slots = place(at);
  with_slots.kernel_forward_slots = &f;
  print_loops(f.body, ValueScope(&at, &with_slots));
}

void CpuKernelPrinter::print_pointwise(const PointwiseStage& s, size_t index, const ValueScope& at) {
  std::string comment = cat("// stage ", index, ": store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  if (!s.loops.empty()) {
    comment += " over";
    for (const auto& l : s.loops) comment += " " + var_name(l);
  }
  out_.line(comment);
  const auto forward_slots = declare_forward_slots(index, place(at));
  Place walking = open_row_blocks(index, place(at));
  walking.forward_slots = &forward_slots;
  ValueScope hoisted(&at, &walking);
  hoist_stage_invariants(s, hoisted);
  if (s.loops.empty()) {
    ValueScope scope(&hoisted);
    print_stores(s.stores, scope);
    return;
  }
  // The stage's loops as the schedule's passes leave them (stage_loops.cpp).
  print_loops(schedule_stage_loops(s, loop_input()), hoisted);
}

void CpuKernelPrinter::print_scan(const ScanStage& s, const ValueScope& at) {
  const Loop& l = s.loops[0];
  const std::string v = var_name(l);
  std::string comment = cat("// running ", to_string(s.kind), " over ", v, ", stored at every step to");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  out_.line(comment);
  const DType t = s.body.dtype();
  const bool lanes = place(at).in_vector();  // one running value per lane: a scan down columns
  const std::string acc = local_name(s.result);
  if (lanes) {
    out_.line(cat(vstate_type(s.kind, t), " ", acc, " = ", vstate_identity(s.kind, t), ";"));
  } else {
    out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  }
  out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(l).text, "; ++", v, ")"));
  ValueScope scope(&at);
  const CValue value_here = value(s.body, scope);
  out_.line(cat(lanes ? vector_update(s.kind, t, acc, value_here, "") : scalar_update(s.kind, t, acc, value_here.text, ""),
                ";"));
  locals_[s.result] = CValue{acc, t, lanes};
  print_stores(s.stores, scope);
  out_.close();
}

void CpuKernelPrinter::print_stores(const std::vector<Store>& stores, ValueScope& scope) {
  for (const auto& st : stores) {
    // An accumulating store: no other thread adds into its elements (checked
    // in lower_loop_nest) and its vector lanes are distinct elements (stride 1),
    // so a load, an add and a store.
    const CValue v = value(stored_value(st), scope);
    const std::string ptr = pointer_name(st.buffer->name);
    const std::string idx = access_index(st.index, scope);
    const Place& at = place(scope);
    const std::string& vvar = at.vector_var;
    if (!at.in_vector()) {
      out_.line(cat(ptr, "[", idx, "] = ", v.text, ";"));
    } else if (const codegen::RowBlock* b = st.accumulate ? nullptr : row_block_of(st.buffer, st.index, false, at)) {
      out_.line(cat(row_block_array(*b), "[", var_name(*at.row_loop), "] = ", as_vector(v), ";"));
    } else {
      const auto coefficient_of_var = coefficient(st.index, var(vvar));
      const auto stride = coefficient_of_var ? coefficient_of_var->constant() : std::nullopt;
      if (!stride || *stride == 0 || (*stride != 1 && (st.accumulate || !indirect_terms(st.index).empty()))) {
        fail(cat("kernel ", k_.name, ": vectorised store to ", st.buffer->name, "[", st.index,
                 "] is neither contiguous nor of a constant stride in ", vvar));
      }
      std::string data;
      if (st.buffer->dtype == DType::Bool) {
        const std::string m = as_mask(v, 1);
        data = cat("cppi_vconvert<cppi_u8x", width(), ">(", m, " & cppi_vsplat<", mask_type(1), ">(1))");
      } else {
        data = as_vector(v);
      }
      if (*stride != 1) {  // lane by lane (vector_access.h: strided_stores)
        out_.line(cat("cppi_vstore_strided(&", ptr, "[", idx, "], ", data, ", ", *stride,
                      at.tail_lanes.empty() ? std::string() : cat(", ", at.tail_lanes), ");"));
      } else if (at.tail_lanes.empty()) {
        out_.line(cat("cppi_vstore(&", ptr, "[", idx, "], ", data, ");"));
      } else {
        out_.line(cat("cppi_vstore_partial(&", ptr, "[", idx, "], ", data, ", ", at.tail_lanes, ");"));
      }
    }
    scope.forget_loads_of(st.buffer->name);
    forward_store(st, v, at);
  }
}

std::string CpuKernelPrinter::access_key(const BufferPtr& buffer, const IndexExpr& at) {
  return indirect_terms(at).empty() ? cat(buffer->name, "[", index(at), "]") : std::string();
}

void CpuKernelPrinter::forward_store(const Store& st, const CValue& v, const Place& at) {
  // Any store may overwrite what was forwarded (buffers of other names may
  // share memory), except a whole vector's through the same contiguous
  // index before a forwarded masked vector.
  if (!at.registers) return;  // nothing forwarded, nowhere to forward to
  auto& forwarded = at.registers->forwarded;
  const std::string key = access_key(st.buffer, st.index);
  const bool whole_vector_before = !key.empty() && at.in_vector() && at.tail_lanes.empty() && at.whole_vectors_end;
  for (auto it = forwarded.begin(); it != forwarded.end();) {
    const bool keep = whole_vector_before && it->first == key && it->second.var == at.vector_var &&
                      *at.whole_vectors_end <= it->second.first;
    it = keep ? std::next(it) : forwarded.erase(it);
  }
  // A masked last vector of constant bounds that a later stage loads again
  // is forwarded in turn.
  if (key.empty() || !at.in_vector() || !at.masked_rest_first || !at.forward_slots || v.dtype != st.buffer->dtype) {
    return;
  }
  const auto slot = at.forward_slots->find(key);
  if (slot == at.forward_slots->end()) return;
  out_.line(cat(slot->second, " = ", as_vector(v), ";"));
  forwarded[key] = Forwarded{at.vector_var, *at.masked_rest_first, at.tail_lanes, CValue{slot->second, v.dtype, true}};
}

const CValue* CpuKernelPrinter::forwarded_load(const Load& n, const Place& at) {
  if (!at.masked_rest_first || n.mask.defined() || !at.registers) return nullptr;
  const auto& forwarded = at.registers->forwarded;
  const std::string key = access_key(n.buffer, n.index);
  const auto it = key.empty() ? forwarded.end() : forwarded.find(key);
  if (it == forwarded.end()) return nullptr;
  const Forwarded& f = it->second;
  const bool same_lanes = f.var == at.vector_var && f.first == *at.masked_rest_first && f.lanes == at.tail_lanes;
  return same_lanes && f.value.dtype == n.dtype ? &f.value : nullptr;
}

}  // namespace cppi::cpu::detail
