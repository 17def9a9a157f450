// The CUDA printer's row mappings (a row per warp or per block, cached rows,
// rows split across blocks; the loop over the rows a nest lower_row_loops
// builds, row_loops.h) and column groups (a column reduction split across
// row slices; the loop over the columns a nest lower_column_group_loops
// builds, column_group_loops.h), which walk those nests; the stages inside
// a row or group are a nest too, walked in cuda_print_row_stages.cpp
// (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/column_group_loops.h"
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/row_loops.h"
#include "lowering/ir/index_affine.h"

namespace cppi::gpu::cuda_print {

// --- row mappings ------------------------------------------------------------------------------

void CudaKernelPrinter::print_rows(PrintedCudaKernel* info) {
  // The loop over the rows is a nest, and so are the stages' loops over a
  // row's positions or a cached row's slots (row_stage_loops.h); a cached
  // row's filling and its vector stores still print their loops in place
  // (issue #38).
  print_row_stmt(lowered_nest(lower_row_loops, "lower_row_loops", info));
}

void CudaKernelPrinter::print_row_stmt(const codegen::Stmt& s) {
  if (const auto* l = std::get_if<codegen::For>(&s->node)) {
    if (l->kind == codegen::LoopKind::GpuColumnGroups) {
      print_column_group_loop(*l);
    } else if (l->kind == codegen::LoopKind::GpuRowPositions || l->kind == codegen::LoopKind::GpuRowSlots) {
      print_position_loop(*l);
    } else {
      print_row_loop(*l);
    }
  } else if (const auto* b = std::get_if<codegen::Block>(&s->node)) {
    for (const codegen::Stmt& c : b->body) print_row_stmt(c);
  } else if (const auto* let = std::get_if<codegen::Let>(&s->node)) {
    out_.line(cat("const int64_t ", let->name, " = ", let->value, ";"));
  } else if (const auto* c = std::get_if<codegen::Comment>(&s->node)) {
    out_.line("// " + c->text);
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node)) {
    print_row_part(*part);
  } else {
    fail(cat("kernel ", k_.name, ": a row loop nest holds a statement it cannot print"));
  }
}

void CudaKernelPrinter::print_row_part(const codegen::TargetPart& p) {
  if (p.what == grid_part::kUsedOuterVars && p.args.size() == 1) {
    unravel_outer(p.args[0]);
  } else if (p.what == row_part::kFillRowCache && p.args.empty()) {
    print_row_cache_prologue();
  } else if (p.what == grid_part::kUsedOuterVars || p.what == row_part::kFillRowCache) {
    fail(cat("kernel ", k_.name, ": no row part ", p.what, " of ", p.args.size(), " arguments"));
  } else {
    print_row_stage_part(p);  // the stages' parts (row_stage_loops.h); fails on any other
  }
}

void CudaKernelPrinter::print_row_loop(const codegen::For& l) {
  if (l.lo.value != 0 || l.threads <= 0) {
    fail(cat("kernel ", k_.name, ": row loop ", l.var, " from ", l.lo.text, " on ", l.threads, " threads"));
  }
  const std::string& v = l.var;
  if (l.kind == codegen::LoopKind::GpuWarpRows) {
    out_.line("const int tid = threadIdx.x & 31;");
    out_.open(cat("for (int64_t ", v, " = (int64_t)blockIdx.x * ", l.step, " + (threadIdx.x >> 5); ", v, " < ", l.hi.text,
                  "; ", v, " += (int64_t)gridDim.x * ", l.step, ")"));
  } else if (l.kind == codegen::LoopKind::GpuBlockRows && l.splits > 1) {
    // Exactly rows x P blocks: no loop over rows (the last block returns early).
    out_.line("const int tid = threadIdx.x;");
    out_.line(cat("const int64_t ", v, " = ", div_by("(int64_t)blockIdx.x", l.splits), ";"));
    out_.line(cat("const int64_t split = (int64_t)blockIdx.x - ", v, " * ", l.splits, ";"));
    out_.open(cat("if (", v, " < ", l.hi.text, ")"));
  } else if (l.kind == codegen::LoopKind::GpuBlockRows) {
    out_.line("const int tid = threadIdx.x;");
    out_.open(cat("for (int64_t ", v, " = blockIdx.x; ", v, " < ", l.hi.text, "; ", v, " += gridDim.x)"));
  } else {
    fail(cat("kernel ", k_.name, ": loop ", l.var, " is not a row loop"));
  }
  locals_.clear();
  print_row_stmt(l.body);
  out_.close();
}

void CudaKernelPrinter::print_column_groups(PrintedCudaKernel* info) {
  // The loop over the columns is a nest, and so are the stages' loops over
  // the rows inside a group (row_stage_loops.h).
  print_row_stmt(lowered_nest(lower_column_group_loops, "lower_column_group_loops", info));
}

void CudaKernelPrinter::print_column_group_loop(const codegen::For& l) {
  if (l.lo.value != 0 || l.step != 32 || l.threads != 32 * g_.threads_per_column) {
    fail(cat("kernel ", k_.name, ": column-group loop ", l.var, " from ", l.lo.text, " in groups of ", l.step, " on ",
             l.threads, " threads"));
  }
  const std::string& v = l.var;
  out_.line("const int lane = threadIdx.x & 31;");
  out_.line("const int tid = threadIdx.x >> 5;");
  if (l.splits > 1) {
    // Exactly groups x P blocks: no loop over groups (the last block returns early).
    out_.line(cat("const int64_t group = ", div_by("(int64_t)blockIdx.x", l.splits), ";"));
    out_.line(cat("const int64_t split = (int64_t)blockIdx.x - group * ", l.splits, ";"));
    out_.open(cat("if (group * ", l.step, " < ", l.hi.text, ")"));
    out_.line(cat("const int64_t ", v, " = group * ", l.step, " + lane;"));
  } else {
    // The loop is uniform across the block (every thread reaches the
    // combines' barriers); lanes past the last column fold nothing.
    out_.open(cat("for (int64_t base = (int64_t)blockIdx.x * ", l.step, "; base < ", l.hi.text,
                  "; base += (int64_t)gridDim.x * ", l.step, ")"));
    out_.line(cat("const int64_t ", v, " = base + lane;"));
  }
  out_.line(cat("const bool valid = ", v, " < ", l.hi.text, ";"));
  locals_.clear();
  print_row_stmt(l.body);
  out_.close();
}

void CudaKernelPrinter::print_row_cache_prologue() {
  const std::vector<Loop>* loops = row_cache_loops(k_);
  if (!loops || cached_.loads.empty()) return;
  std::vector<Loop> canon;
  for (size_t i = 0; i < loops->size(); ++i) canon.push_back(Loop{row_cache_var(i), (*loops)[i].extent});
  const int e = g_.elements_per_thread;
  out_.line(cat("// row cache: ", cached_.loads.size(), " loads x ", e, " elements per thread"));
  for (size_t c = 0; c < cached_.loads.size(); ++c) {
    out_.line(cat(dtype_ctype(cached_.loads[c].buffer->dtype), " cache", c, "[", e, "];"));
  }
  for (size_t j = 0; j < cached_.values.size(); ++j) {
    out_.line(cat(dtype_ctype(cached_.values[j].dtype()), " vcache", j, "[", e, "];"));
  }
  const int64_t len = *product_of(*loops).constant();
  // Gathered rows (an embedding's) find their position once per row, here:
  // the indirect part of such an index does not move along the row.
  ValueScope row_values;
  std::vector<std::string> at(cached_.loads.size());
  for (size_t c = 0; c < cached_.loads.size(); ++c) at[c] = index(cached_.loads[c].index, row_values);
  // With V-element vectors, a thread's V consecutive slots hold V
  // consecutive positions (GpuSchedule::cache_vector): one 16-byte load each.
  const int v = g_.cache_vector;
  // The slot loops of a cached row still print in place (issue #38).
  out_.line("#pragma unroll");
  out_.open(v > 1 ? cat("for (int slot = 0; slot < ", e, "; slot += ", v, ")")
                  : cat("for (int slot = 0; slot < ", e, "; ++slot)"));
  out_.line(v > 1 ? cat("const int64_t pos = (int64_t)(slot / ", v, ") * ", threads_per_row_ * v, " + tid * ", v, ";")
                  : cat("const int64_t pos = (int64_t)slot * ", threads_per_row_, " + tid;"));
  const bool guard = len != static_cast<int64_t>(e) * threads_per_row_;
  if (guard) out_.open(cat("if (pos < ", len, ")"));  // len % V == 0: the whole vector is in the row
  std::set<std::string> used;
  for (const auto& c : cached_.loads) {
    for (const auto& var : free_vars(c.index)) used.insert(var);
  }
  unravel(canon, "pos", &used);
  for (size_t c = 0; c < cached_.loads.size(); ++c) {
    const std::string ptr = pointer_name(cached_.loads[c].buffer->name);
    if (v == 1) {
      out_.line(cat("cache", c, "[slot] = ", ptr, "[", at[c], "];"));
      continue;
    }
    const std::string vt = cat("cppi_vec<", dtype_ctype(cached_.loads[c].buffer->dtype), ", ", v, ">");
    const std::string name = fresh_name("v");
    out_.line(cat("const ", vt, " ", name, " = *(const ", vt, "*)(", ptr, " + ", at[c], ");"));
    out_.line("#pragma unroll");
    out_.line(cat("for (int vl = 0; vl < ", v, "; ++vl) cache", c, "[slot + vl] = ", name, ".v[vl];"));
  }
  // The values of these positions, while only their loads are live; two
  // positions at a time where their roundings pair (pair_roundings).
  if (!cached_.values.empty() && v == 1) {
    print_row_cache_values({"slot"});
  } else if (!cached_.values.empty()) {
    const bool pairs = v % 2 == 0 && rounds_to_16_bits(cached_.values);
    out_.line("#pragma unroll");
    out_.open(cat("for (int vl = 0; vl < ", v, pairs ? "; vl += 2)" : "; ++vl)"));
    print_row_cache_values(pairs ? std::vector<std::string>{"slot + vl", "slot + vl + 1"}
                                 : std::vector<std::string>{"slot + vl"});
    out_.close();
  }
  if (guard) out_.close();
  out_.close();
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

void CudaKernelPrinter::print_split_combine(const ReductionStage& s, const std::string& acc,
                                            const std::string& scratch) {
  const int splits = g_.row_splits;
  const std::string partials = name_ + "_partials", arrivals = name_ + "_arrivals", last = name_ + "_last";
  out_.line(cat("// the last of the row's ", splits, " blocks combines their partials"));
  out_.line(cat("__shared__ bool ", last, ";"));
  out_.open("if (tid == 0)");
  out_.line(cat(partials, "[row * ", splits, " + split] = ", acc, ";"));
  out_.line("__threadfence();");
  out_.line(cat(last, " = atomicAdd(&", arrivals, "[row], 1u) == ", splits - 1, "u;"));
  out_.close();
  out_.line("__syncthreads();");
  out_.line(cat("if (!", last, ") return;"));
  out_.line("__threadfence();");
  out_.line(cat(acc, " = ", state_identity(s.kind, s.body.dtype()), ";"));
  out_.open(cat("for (int part = tid; part < ", splits, "; part += ", g_.block_size, ")"));
  out_.line(cat(acc, " = ", combine_op(s.kind), "(", acc, ", __ldcg(&", partials, "[row * ", splits, " + part]));"));
  out_.close();
  out_.line(cat(acc, " = cppi_block_reduce(", acc, ", ", combine_op(s.kind), ", ", state_identity(s.kind, s.body.dtype()),
                ", ", scratch, ");"));
  out_.line(cat("if (tid == 0) ", arrivals, "[row] = 0u;  // ready for the next launch"));
}

void CudaKernelPrinter::print_column_split_combine(size_t end, const std::vector<std::string>& accs) {
  const int splits = g_.row_splits;
  const std::string arrivals = name_ + "_arrivals", last = name_ + "_last";
  out_.line(cat("// the last of the column group's ", splits, " blocks combines their partials"));
  out_.open("if (tid == 0 && valid)");
  for (size_t i = 0; i < end; ++i) out_.line(cat(column_partials(i), "[split * n + idx] = ", accs[i], ";"));
  out_.line("__threadfence();");
  out_.close();
  out_.line("__syncthreads();");
  out_.line(cat("__shared__ bool ", last, ";"));
  out_.line(cat("if (threadIdx.x == 0) ", last, " = atomicAdd(&", arrivals, "[group], 1u) == ", splits - 1, "u;"));
  out_.line("__syncthreads();");
  out_.line(cat("if (!", last, ") return;"));
  out_.line("__threadfence();");
  out_.open("if (tid == 0 && valid)");
  for (size_t i = 0; i < end; ++i) {
    const auto& s = std::get<ReductionStage>(k_.stages[i]);
    out_.line(cat(accs[i], " = ", state_identity(s.kind, s.body.dtype()), ";"));
    out_.open(cat("for (int part = 0; part < ", splits, "; ++part)"));
    out_.line(cat(accs[i], " = ", combine_op(s.kind), "(", accs[i], ", __ldcg(&", column_partials(i), "[part * n + idx]));"));
    out_.close();
  }
  out_.close();
  out_.line(cat("if (threadIdx.x == 0) ", arrivals, "[group] = 0u;  // ready for the next launch"));
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

void CudaKernelPrinter::print_cached_vector_stores(const PointwiseStage& s, size_t i) {
  const int t = threads_per_row_, e = cached_elements_, v = g_.cache_vector;
  const int64_t n = *product_of(s.loops).constant();
  const RowCacheReads reads = row_cache_reads(i);
  ValueScope invariant;  // computed once, not per slot
  std::vector<Expr> cached_loads;
  for (const auto& fc : reads.from_cache) cached_loads.push_back(fc.first);
  hoist_invariants(stage_values(k_.stages[i]), loop_var_names(s.loops), invariant, cached_loads);
  // Slot group g holds positions g T V + tid V + [0, V) (print_row_cache_prologue).
  out_.line("#pragma unroll");
  out_.open(cat("for (int group = 0; group < ", e, "; group += ", v, ")"));
  out_.line(cat("const int64_t first = (int64_t)(group / ", v, ") * ", t * v, " + tid * ", v, ";"));
  const bool guard = n != static_cast<int64_t>(e) * t;
  if (guard) out_.open(cat("if (first < ", n, ")"));  // n % V == 0: the whole vector is in the row
  // Other loads stride 1 along the row (layer_norm's weight and bias): one
  // vector each at the group's first position, unravelled in a scope of
  // its own.
  std::vector<std::pair<Expr, std::string>> vloads;
  std::set<std::string> vload_vars;
  for (const Expr& x : row_vector_loads(i)) {
    const auto* l = x.as<Load>();
    vloads.emplace_back(x, fresh_name("v"));
    for (const auto& name : free_vars(l->index)) vload_vars.insert(name);
    out_.line(cat("cppi_vec<", dtype_ctype(l->dtype), ", ", v, "> ", vloads.back().second, ";"));
  }
  if (!vloads.empty()) {
    out_.open("");
    unravel(s.loops, "first", &vload_vars);
    for (const auto& [x, name] : vloads) {
      const auto* l = x.as<Load>();
      const std::string vt = cat("cppi_vec<", dtype_ctype(l->dtype), ", ", v, ">");
      out_.line(cat(name, " = *(const ", vt, "*)(", pointer_name(l->buffer->name), " + ", index(l->index), ");"));
    }
    out_.close();
  }
  std::vector<std::string> values, offsets;
  for (const auto& st : s.stores) {
    values.push_back(fresh_name("sv"));  // not "s": size symbols are s0, s1, ...
    offsets.push_back(fresh_name("at"));
    out_.line(cat("cppi_vec<", dtype_ctype(st.buffer->dtype), ", ", v, "> ", values.back(), ";"));
    out_.line(cat("int64_t ", offsets.back(), " = 0;"));
  }
  out_.line("#pragma unroll");
  out_.open(cat("for (int vl = 0; vl < ", v, "; ++vl)"));
  out_.line("const int slot = group + vl;");
  out_.line("const int64_t pos = first + vl;");
  unravel(s.loops, "pos", &reads.used);
  ValueScope scope(&invariant);
  for (const auto& [x, text] : reads.from_cache) scope.add(x, CValue{text, x.dtype()});
  for (const auto& [x, name] : vloads) scope.add(x, CValue{name + ".v[vl]", x.dtype()});
  for (size_t j = 0; j < s.stores.size(); ++j) {
    const CValue value = scalar_value(s.stores[j].value, scope);
    out_.line(cat(values[j], ".v[vl] = ", value.text, ";"));
    // Stride 1 along the row (cache_vector_width): lane 0's is the vector's.
    out_.line(cat("if (vl == 0) ", offsets[j], " = ", index(s.stores[j].index, scope), ";"));
  }
  out_.close();
  for (size_t j = 0; j < s.stores.size(); ++j) {
    out_.line(cat("cppi_store_vec(", pointer_name(s.stores[j].buffer->name), " + ", offsets[j], ", ", values[j], ");"));
  }
  if (guard) out_.close();
  out_.close();
}

}  // namespace cppi::gpu::cuda_print
