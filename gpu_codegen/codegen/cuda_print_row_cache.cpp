// The CUDA printer's cached rows (cuda_kernel_printer.h): the slot loops of
// a cached row's filling (row_cache_loops.h) and of the vector stores of a
// row cached in vectors (row_stage_loops.h), and the leaves inside them;
// what a stage reads from the cache.
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/row_cache_loops.h"
#include "gpu_codegen/codegen/row_stage_loops.h"
#include "lowering/ir/index_affine.h"

namespace cppi::gpu::cuda_print {

void CudaKernelPrinter::print_slot_loop(const codegen::For& l, RowLeaves& leaves) {
  const bool groups = l.kind == codegen::LoopKind::GpuRowSlotGroups;
  const int64_t hi = groups ? cached_elements_ : g_.cache_vector;
  if (cached_elements_ == 0 || l.lo.value != 0 || l.hi.value != hi ||
      (groups && (l.step != g_.cache_vector || l.threads != threads_per_row_))) {
    fail(cat("kernel ", k_.name, ": slot loop ", l.var, " to ", l.hi.text, " in steps of ", l.step,
             " is not the row cache's"));
  }
  const std::string& v = l.var;
  out_.line("#pragma unroll");
  out_.open(l.step > 1 ? cat("for (int ", v, " = 0; ", v, " < ", hi, "; ", v, " += ", l.step, ")")
                       : cat("for (int ", v, " = 0; ", v, " < ", hi, "; ++", v, ")"));
  print_row_stmt(l.body, leaves);
  out_.close();
}

// --- a cached row's filling ----------------------------------------------------------------------

void CudaKernelPrinter::print_row_cache_part(const codegen::TargetPart& p, RowLeaves& leaves) {
  const std::vector<Loop>* loops = row_cache_loops(k_);
  if (!loops || cached_.loads.empty()) fail(cat("kernel ", k_.name, ": ", p.what, " of a row it does not cache"));
  if (p.what == row_cache_part::kDeclare && p.args.empty()) {
    declare_row_cache(leaves);
  } else if (p.what == row_cache_part::kUnravel && p.args.size() == 1) {
    std::vector<Loop> canon;
    for (size_t i = 0; i < loops->size(); ++i) canon.push_back(Loop{row_cache_var(i), (*loops)[i].extent});
    std::set<std::string> used;
    for (const auto& c : cached_.loads) {
      for (const auto& var : free_vars(c.index)) used.insert(var);
    }
    unravel(canon, p.args[0], &used);
  } else if (p.what == row_cache_part::kLoad && p.args.size() == 1 && std::stoul(p.args[0]) < leaves.cache_at.size()) {
    const size_t c = std::stoul(p.args[0]);
    print_cache_load(c, leaves.cache_at[c]);
  } else if (p.what == row_cache_part::kValues && (p.args.size() == 1 || p.args.size() == 2)) {
    print_row_cache_values(p.args);
  } else {
    fail(cat("kernel ", k_.name, ": no row cache part ", p.what, " of ", p.args.size(), " arguments"));
  }
}

void CudaKernelPrinter::declare_row_cache(RowLeaves& leaves) {
  const int e = cached_elements_;
  out_.line(cat("// row cache: ", cached_.loads.size(), " loads x ", e, " elements per thread"));
  for (size_t c = 0; c < cached_.loads.size(); ++c) {
    out_.line(cat(dtype_ctype(cached_.loads[c].buffer->dtype), " cache", c, "[", e, "];"));
  }
  for (size_t j = 0; j < cached_.values.size(); ++j) {
    out_.line(cat(dtype_ctype(cached_.values[j].dtype()), " vcache", j, "[", e, "];"));
  }
  // Gathered rows (an embedding's) find their position once per row, here:
  // the indirect part of such an index does not move along the row.
  ValueScope row_values;
  leaves.cache_at.clear();
  for (const auto& c : cached_.loads) leaves.cache_at.push_back(index(c.index, row_values));
}

void CudaKernelPrinter::print_cache_load(size_t c, const std::string& at) {
  const int v = g_.cache_vector;
  const std::string ptr = pointer_name(cached_.loads[c].buffer->name);
  if (v == 1) {
    out_.line(cat("cache", c, "[slot] = ", ptr, "[", at, "];"));
    return;
  }
  // A group's V consecutive positions: one 16-byte load (GpuSchedule::cache_vector).
  const std::string vt = cat("cppi_vec<", dtype_ctype(cached_.loads[c].buffer->dtype), ", ", v, ">");
  const std::string name = fresh_name("v");
  out_.line(cat("const ", vt, " ", name, " = *(const ", vt, "*)(", ptr, " + ", at, ");"));
  out_.line("#pragma unroll");
  out_.line(cat("for (int vl = 0; vl < ", v, "; ++vl) cache", c, "[slot + vl] = ", name, ".v[vl];"));
}

void CudaKernelPrinter::print_row_cache_values(const std::vector<std::string>& slots) {
  std::vector<ValueScope> scopes(slots.size());
  for (const Expr& x : post_order(cached_.values)) {
    const auto* l = x.as<Load>();
    const std::optional<size_t> c = l ? cached_.load_at(l->buffer->name, l->index) : std::nullopt;  // canonical
    for (size_t s = 0; c && s < slots.size(); ++s) scopes[s].add(x, CValue{cat("cache", *c, "[", slots[s], "]"), x.dtype()});
  }
  if (slots.size() == 2) {
    for (const Expr& v : cached_.values) pair_roundings(v, v, scopes[0], scopes[1]);
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    for (size_t j = 0; j < cached_.values.size(); ++j) {
      out_.line(cat("vcache", j, "[", slots[s], "] = ", scalar_value(cached_.values[j], scopes[s]).text, ";"));
    }
  }
}

// --- the vector stores of a row cached in vectors -------------------------------------------

void CudaKernelPrinter::print_cached_store_part(const std::string& what, size_t stage, RowLeaves& leaves) {
  const PointwiseStage& s = pointwise_stage(stage);
  if (what == row_stage_part::kRowInvariants) {
    CachedVectorStores& stores = leaves.stores.emplace();
    stores.stage = stage;
    stores.reads = row_cache_reads(stage);
    std::vector<Expr> cached_loads;
    for (const auto& fc : stores.reads.from_cache) cached_loads.push_back(fc.first);
    hoist_invariants(stage_values(k_.stages[stage]), loop_var_names(s.loops), stores.invariant, cached_loads);
    return;
  }
  if (!leaves.stores || leaves.stores->stage != stage) {
    fail(cat("kernel ", k_.name, ": ", what, " ", stage, " before its ", row_stage_part::kRowInvariants));
  }
  CachedVectorStores& stores = *leaves.stores;
  if (what == row_stage_part::kGroupVectors) {
    print_group_vectors(s, stores);
  } else if (what == row_stage_part::kLaneValues) {
    print_lane_values(s, stores);
  } else if (what == row_stage_part::kStoreVectors && stores.offsets.size() == s.stores.size()) {
    for (size_t j = 0; j < s.stores.size(); ++j) {
      out_.line(cat("cppi_store_vec(", pointer_name(s.stores[j].buffer->name), " + ", stores.offsets[j], ", ",
                    stores.values[j], ");"));
    }
  } else {
    fail(cat("kernel ", k_.name, ": no cached store part ", what, " of stage ", stage));
  }
}

void CudaKernelPrinter::print_group_vectors(const PointwiseStage& s, CachedVectorStores& stores) {
  const int v = g_.cache_vector;
  // Other loads stride 1 along the row (layer_norm's weight and bias): one
  // vector each at the group's first position, unravelled in a scope of
  // its own.
  stores.loads.clear();
  std::set<std::string> vload_vars;
  for (const Expr& x : row_vector_loads(stores.stage)) {
    const auto* l = x.as<Load>();
    stores.loads.emplace_back(x, fresh_name("v"));
    for (const auto& name : free_vars(l->index)) vload_vars.insert(name);
    out_.line(cat("cppi_vec<", dtype_ctype(l->dtype), ", ", v, "> ", stores.loads.back().second, ";"));
  }
  if (!stores.loads.empty()) {
    out_.open("");
    unravel(s.loops, "first", &vload_vars);
    for (const auto& [x, name] : stores.loads) {
      const auto* l = x.as<Load>();
      const std::string vt = cat("cppi_vec<", dtype_ctype(l->dtype), ", ", v, ">");
      out_.line(cat(name, " = *(const ", vt, "*)(", pointer_name(l->buffer->name), " + ", index(l->index), ");"));
    }
    out_.close();
  }
  stores.values.clear();
  stores.offsets.clear();
  for (const auto& st : s.stores) {
    stores.values.push_back(fresh_name("sv"));  // not "s": size symbols are s0, s1, ...
    stores.offsets.push_back(fresh_name("at"));
    out_.line(cat("cppi_vec<", dtype_ctype(st.buffer->dtype), ", ", v, "> ", stores.values.back(), ";"));
    out_.line(cat("int64_t ", stores.offsets.back(), " = 0;"));
  }
}

void CudaKernelPrinter::print_lane_values(const PointwiseStage& s, CachedVectorStores& stores) {
  if (stores.values.size() != s.stores.size()) fail(cat("kernel ", k_.name, ": lanes of undeclared vectors"));
  out_.line("const int slot = group + vl;");
  out_.line("const int64_t pos = first + vl;");
  unravel(s.loops, "pos", &stores.reads.used);
  ValueScope scope(&stores.invariant);
  for (const auto& [x, text] : stores.reads.from_cache) scope.add(x, CValue{text, x.dtype()});
  for (const auto& [x, name] : stores.loads) scope.add(x, CValue{name + ".v[vl]", x.dtype()});
  for (size_t j = 0; j < s.stores.size(); ++j) {
    const CValue value = scalar_value(s.stores[j].value, scope);
    out_.line(cat(stores.values[j], ".v[vl] = ", value.text, ";"));
    // Stride 1 along the row (cache_vector_width): lane 0's is the vector's.
    out_.line(cat("if (vl == 0) ", stores.offsets[j], " = ", index(s.stores[j].index, scope), ";"));
  }
}

// --- what a stage reads from the cache ---------------------------------------------------------

CudaKernelPrinter::RowCacheReads CudaKernelPrinter::row_cache_reads(size_t stage) const {
  RowCacheReads out;
  const Stage& st = k_.stages[stage];
  const std::vector<Expr> roots = stage_values(st);
  if (!cached_.values.empty()) {
    auto value_at = [&](const Expr& x) { return cached_.value_at(canonical_row_value(k_, stage, x)); };
    for (const Expr& x : outermost_picks(roots, [&](const Expr& x) { return value_at(x).has_value(); })) {
      out.from_cache.emplace_back(x, cat("vcache", *value_at(x), "[slot]"));
    }
  }
  for (const Expr& x : post_order(roots)) {
    auto l = x.as<Load>();
    if (!l || l->mask.defined()) continue;
    if (auto c = cached_.load_at(l->buffer->name, canonical_row_index(k_, stage, l->index))) {
      out.from_cache.emplace_back(x, cat("cache", *c, "[slot]"));
    }
  }
  // Loads served from the cache need no loop variables; the rest may.
  for (const Expr& x : post_order(roots)) {
    bool cached = false;
    for (const auto& fc : out.from_cache) cached |= fc.first.same_as(x);
    if (cached) continue;
    if (auto l = x.as<Load>()) for (const auto& v : free_vars(l->index)) out.used.insert(v);
    if (auto iv = x.as<IndexValue>()) for (const auto& v : free_vars(iv->index)) out.used.insert(v);
    if (auto rn = x.as<Random>()) for (const auto& v : free_vars(rn->offset)) out.used.insert(v);
  }
  if (auto p = std::get_if<PointwiseStage>(&st)) {
    for (const auto& store : p->stores) for (const auto& v : free_vars(store.index)) out.used.insert(v);
  }
  return out;
}

std::vector<IndexExpr> CudaKernelPrinter::row_vector_vars() const {
  std::vector<IndexExpr> vars;
  for (const auto& l : k_.outer) vars.push_back(l.var);
  for (size_t i = 0; i < row_cache_loops(k_)->size(); ++i) vars.push_back(row_cache_var(i));
  return vars;
}

bool CudaKernelPrinter::row_vector_access(size_t stage, const IndexExpr& index) const {
  const std::vector<IndexExpr> vars = row_vector_vars();
  const auto form = affine_form_over_gathers(canonical_row_index(k_, stage, index), vars);
  if (!form || vars.empty()) return false;
  const auto last = form->strides[vars.size() - 1].constant();
  return last && *last == 1;
}

std::vector<Expr> CudaKernelPrinter::row_vector_loads(size_t stage) const {
  const RowCacheReads reads = row_cache_reads(stage);
  std::vector<Expr> out;
  for (const Expr& x : post_order(stage_values(k_.stages[stage]))) {
    const auto* l = x.as<Load>();
    if (!l || l->mask.defined() || !row_vector_access(stage, l->index)) continue;
    bool seen = false;
    for (const auto& fc : reads.from_cache) seen |= fc.first.same_as(x);
    for (const Expr& y : out) seen |= structurally_equal(y, x);
    if (!seen) out.push_back(x);
  }
  return out;
}

}  // namespace cppi::gpu::cuda_print
