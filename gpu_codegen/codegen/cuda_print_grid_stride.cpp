// The CUDA printer's grid-stride mappings: pointwise kernels (scalar and
// V-element vectorised) and one-thread-per-column reductions, stages printed
// serially as the C printer's scalar path would (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"

#include <algorithm>

namespace cppi::gpu::cuda_print {

// --- grid-stride mappings --------------------------------------------------------------------

void CudaKernelPrinter::print_grid_stride() {
  const int b = g_.block_size;
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.open(cat("for (int64_t idx = (int64_t)blockIdx.x * ", b, " + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * ", b,
                ")"));
  unravel_outer("idx");
  print_serial_stages();
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
  for (const auto& l : loops) {
    const std::string v = var_name(l);
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

void CudaKernelPrinter::print_scan_fold(const ScanStage& s, const std::string& in_range) {
  const DType t = s.body.dtype();
  const int e = g_.elements_per_thread;
  const std::string st = state_type(s.kind, t);
  out_.line(cat(st, " prefix[", e, "];  // this thread's running values from its first position"));
  out_.line(cat(st, " own = ", state_identity(s.kind, t), ";"));
  out_.line("#pragma unroll");
  out_.open(cat("for (int slot = 0; slot < ", e, "; ++slot)"));
  out_.line(cat("const int64_t ", var_name(s.loops[0]), " = pos + slot;"));
  out_.open(cat("if (", in_range, ")"));
  ValueScope scope;
  const CValue value_here = scalar_value(s.body, scope);
  out_.line(state_update(s.kind, t, "own", value_here.text, "") + ";");
  out_.close();
  out_.line("prefix[slot] = own;");
  out_.close();
}

void CudaKernelPrinter::print_scan_steps(const ScanStage& s, const std::string& past_end) {
  const DType t = s.body.dtype();
  const std::string acc = local_name(s.result);
  out_.line("#pragma unroll");
  out_.open(cat("for (int slot = 0; slot < ", g_.elements_per_thread, "; ++slot)"));
  out_.line(cat("const int64_t ", var_name(s.loops[0]), " = pos + slot;"));
  out_.line(cat("if (", past_end, ") break;"));
  out_.line(cat("const ", state_type(s.kind, t), " ", acc, " = ", combine_op(s.kind), "(before, prefix[slot]);"));
  locals_[s.result] = CValue{acc, t, false, 0};
  ValueScope scope;
  print_stores(s.stores, scope);
  out_.close();
}

void CudaKernelPrinter::print_scan_rows() {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const int e = g_.elements_per_thread, b = g_.block_size;
  const Loop& l = s.loops[0];
  const std::string v = var_name(l), length = extent_text(l.extent);
  auto combine = [&](const std::string& a, const std::string& x) { return cat(op, "(", a, ", ", x, ")"); };
  out_.line(cat("__shared__ ", st, " scan_scratch[32];"));
  out_.line(cat("const int64_t rows = ", index(product_of(k_.outer)), ";"));
  out_.open("for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)");
  unravel_outer("row");
  out_.line(cat(st, " carry = ", identity, ";"));
  out_.open(cat("for (int64_t base = 0; base < ", length, "; base += ", e * b, ")"));
  out_.line(cat("const int64_t pos = base + (int64_t)threadIdx.x * ", e, ";"));
  print_scan_fold(s, cat(v, " < ", length));
  out_.line(cat(st, " total;"));
  out_.line(cat("const ", st, " before = ", combine("carry", cat("cppi_block_exclusive_scan(own, ", op, ", ", identity,
                                                                 ", scan_scratch, &total)")),
                ";"));
  print_scan_steps(s, cat(v, " >= ", length));
  out_.line(cat("carry = ", combine("carry", "total"), ";"));
  out_.close();
  out_.close();
}

void CudaKernelPrinter::print_scan_columns() {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const int e = g_.elements_per_thread, slices = g_.threads_per_column;
  const Loop& l = s.loops[0];
  const std::string v = var_name(l), length = extent_text(l.extent);
  auto combine = [&](const std::string& a, const std::string& x) { return cat(op, "(", a, ", ", x, ")"); };
  out_.line(cat("__shared__ ", st, " scan_scratch[", slices * 32, "];  // [slice][column]"));
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.line("const int lane = threadIdx.x % 32, tid = threadIdx.x / 32;");
  out_.open("for (int64_t group = blockIdx.x; group * 32 < n; group += gridDim.x)");
  out_.line("const int64_t idx = group * 32 + lane;");
  out_.line("const bool valid = idx < n;");
  unravel_outer("idx");
  out_.line(cat(st, " carry = ", identity, ";"));
  out_.open(cat("for (int64_t base = 0; base < ", length, "; base += ", slices * e, ")"));
  out_.line(cat("const int64_t pos = base + (int64_t)tid * ", e, ";"));
  print_scan_fold(s, cat("valid && ", v, " < ", length));
  // The slices' totals of this column, folded in slice order: the first
  // `tid` of them come before this slice, all of them make the chunk.
  out_.line("scan_scratch[tid * 32 + lane] = own;");
  out_.line("__syncthreads();");
  out_.line(cat(st, " before = ", identity, ";"));
  out_.line("for (int k = 0; k < tid; ++k) before = " + combine("before", "scan_scratch[k * 32 + lane]") + ";");
  out_.line(cat(st, " total = before;"));
  out_.line(cat("for (int k = tid; k < ", slices, "; ++k) total = ", combine("total", "scan_scratch[k * 32 + lane]"),
                ";"));
  out_.line("__syncthreads();");
  out_.line("before = " + combine("carry", "before") + ";");
  print_scan_steps(s, cat("!valid || ", v, " >= ", length));
  out_.line(cat("carry = ", combine("carry", "total"), ";"));
  out_.close();
  out_.close();
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
  std::function<void(const Expr&)> hoist = [&](const Expr& e) {
    if (e.as<Constant>() || e.as<LocalRef>()) return;
    if (std::any_of(leave.begin(), leave.end(), [&](const Expr& x) { return x.same_as(e); })) return;
    const std::set<std::string> used = free_vars(e);
    bool invariant = std::none_of(used.begin(), used.end(), [&](const std::string& v) { return vars.count(v) > 0; });
    for (const Expr& x : post_order({e})) {
      const auto* l = x.as<Load>();
      invariant = invariant && !(l && written.count(l->buffer->name));
    }
    if (invariant) {
      scalar_value(e, outer);
      return;
    }
    for (const Expr& o : operands(e)) hoist(o);
  };
  for (const Expr& root : roots) hoist(root);
}

void CudaKernelPrinter::print_vector_pointwise() {
  const int b = g_.block_size;
  const int w = g_.elements_per_thread;
  ranges_["vl"] = w;
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.open(cat("for (int64_t idx = ((int64_t)blockIdx.x * ", b, " + threadIdx.x) * ", w,
                "; idx < n; idx += (int64_t)gridDim.x * ", b * w, ")"));
  unravel(k_.outer, "idx");
  // What moves from lane to lane: by the innermost loop, its variable (x +
  // vl); over the flattened loops, every loop variable, each lane's own copy
  // (print_lane_carry).
  std::set<std::string> varying;
  std::map<std::string, IndexExpr> lane_vars;
  for (size_t j = 0; j < k_.outer.size(); ++j) {
    if (!g_.flat_vector && j + 1 < k_.outer.size()) continue;
    const Loop& l = k_.outer[j];
    const std::string name = l.var.as<IndexVar>()->name;
    varying.insert(name);
    if (g_.flat_vector) {
      ranges_["f" + var_name(l)] = l.extent;
      lane_vars[name] = var("f" + var_name(l));
    } else {
      lane_vars[name] = l.var + var("vl");
    }
  }
  ValueScope outer;
  // Vector loads by (buffer, index), each a cppi_vec named vN.
  std::vector<std::pair<Expr, std::string>> vloads;
  bool lane_copies = false;  // fx declared (by the first store's lane loop)
  auto vector_type = [&](DType t) { return cat("cppi_vec<", dtype_ctype(t), ", ", w, ">"); };
  for (const auto& stage : k_.stages) {
    for (const auto& st : std::get<PointwiseStage>(stage).stores) {
      for (const Expr& e : post_order({st.value})) {
        auto l = e.as<Load>();
        if (!l || !is_vector_load(k_, g_, *l)) continue;
        bool seen = false;
        for (const auto& [x, name] : vloads) seen |= structurally_equal(x, e);
        if (seen) continue;
        const std::string name = fresh_name("v");
        const std::string vt = vector_type(l->dtype);
        const std::string load = cat("*(const ", vt, "*)(", pointer_name(l->buffer->name), " + ", index(l->index), ")");
        if (l->mask.defined()) {
          // The mask is the same for every lane (uniform_mask_bounds): lane 0's decides.
          const CValue m = scalar_value(l->mask, outer);
          out_.line(cat("const ", vt, " ", name, " = ", m.text, " ? ", load, " : ", vt, "{};"));
        } else {
          out_.line(cat("const ", vt, " ", name, " = ", load, ";"));
        }
        vloads.emplace_back(e, name);
      }
      hoist_invariants({st.value}, varying, outer);
      const std::string sv = fresh_name("sv");  // not "s": size symbols are s0, s1, ...
      const std::string vt = vector_type(st.buffer->dtype);
      out_.line(cat(vt, " ", sv, ";"));
      if (g_.flat_vector) {
        for (const auto& l : k_.outer) {
          const std::string name = var_name(l);
          out_.line(cat(lane_copies ? "" : "int64_t ", "f", name, " = ", name, ";"));
        }
        lane_copies = true;
      }
      out_.line("#pragma unroll");
      out_.open(cat("for (int vl = 0; vl < ", w, "; ++vl)"));
      ValueScope lanes(&outer);
      for (const auto& [x, name] : vloads) {
        lanes.add(substitute_indices(x, lane_vars), CValue{name + ".v[vl]", x.dtype()});
      }
      const Expr shifted = substitute_indices(st.value, lane_vars);
      note_sincos({shifted});
      const CValue v = scalar_value(shifted, lanes);
      out_.line(cat(sv, ".v[vl] = ", v.text, ";"));
      if (g_.flat_vector) print_lane_carry();
      out_.close();
      out_.line(cat("cppi_store_vec(", pointer_name(st.buffer->name), " + ", index(st.index), ", ", sv, ");"));
      outer.forget_loads_of(st.buffer->name);
      std::vector<std::pair<Expr, std::string>> kept;
      for (auto& p : vloads) {
        if (!codegen::reads_buffer(p.first, st.buffer->name)) kept.push_back(p);
      }
      vloads = std::move(kept);
    }
  }
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
