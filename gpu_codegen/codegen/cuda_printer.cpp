// The CUDA printer's entry point (print_cuda_module) and the parts of a
// kernel every mapping shares: schedule checks, header, parameters, the
// kernel's frame and the launch facts it records. The mappings' bodies are
// printed by cuda_print_grid_stride.cpp, cuda_print_rows.cpp and
// cuda_print_scans.cpp; the class is in cuda_kernel_printer.h.
#include "gpu_codegen/codegen/cuda_printer.h"

#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule_candidates.h"
#include "lowering/ir/index_affine.h"

namespace cppi::gpu {

using namespace ir;

int PrintedCudaModule::vectorized_kernel_count() const {
  int n = 0;
  for (const auto& k : kernels) n += k.schedule.elements_per_thread > 1 && !k.scalar_twin.empty() ? 1 : 0;
  return n;
}

namespace cuda_print {

// --- prologue ---------------------------------------------------------------------------------

void CudaKernelPrinter::check_schedule() const {
  if (k_.device != Device::CUDA) fail(cat("kernel ", k_.name, " is not a CUDA kernel"));
  const int b = g_.block_size;
  if (g_.mapping == GpuMapping::None) fail(cat("kernel ", k_.name, " has no GPU schedule"));
  if (b <= 0 || b % 32 != 0 || b > 1024) fail(cat("kernel ", k_.name, ": block size ", b, " (a multiple of 32, <= 1024)"));
  const int v = g_.elements_per_thread;
  const int slices = g_.threads_per_column;
  if (scan_of(k_)) {
    const bool serial = g_.mapping == GpuMapping::GridStridePointwise && v == 1 && slices == 1;
    const int cv = g_.cache_vector;
    const bool rows = g_.mapping == GpuMapping::RowPerBlock && v >= 1 && v <= 16 && slices == 1 &&
                      (cv == 1 || (cv <= 16 && (cv & (cv - 1)) == 0 && v % cv == 0));
    const bool columns = g_.mapping == GpuMapping::ColumnReduction && v >= 1 && v <= 16 && slices >= 1 &&
                         slices <= 32 && (slices & (slices - 1)) == 0 && b == 32 * slices && !k_.outer.empty();
    const bool split_ok = g_.row_splits == 1 || ((rows || columns) && g_.row_splits >= 2 &&
                                                 product_of(k_.outer).constant().has_value());
    if ((!serial && !rows && !columns) || !split_ok || (cv != 1 && !rows) || g_.flat_vector) {
      fail(cat("kernel ", k_.name, ": a scan runs as GridStridePointwise (one element a thread), RowPerBlock "
               "(cache_vector a power of two dividing elements_per_thread) or ColumnReduction (32 columns x a power "
               "of two of slices), elements_per_thread in [1, 16]; split across blocks (row_splits > 1) only as a "
               "block mapping with a constant outer extent"));
    }
    return;
  }
  if (slices != 1) {
    if (g_.mapping != GpuMapping::ColumnReduction || slices < 2 || slices > 32 || (slices & (slices - 1)) ||
        b != 32 * slices) {
      fail(cat("kernel ", k_.name, ": threads_per_column ", slices, " (ColumnReduction only, a power of two in [2, 32],"
               " block = 32 x it) with block ", b));
    }
  }
  if (g_.row_splits != 1) {
    // Rows: one looped reduction first, with the pointwise stages of its
    // pass. Column groups: a run of independent looped reductions first (one
    // pass, partials of each). Loop-less stages after.
    const bool rows = g_.mapping == GpuMapping::RowPerBlock && v == 0;
    const bool columns = g_.mapping == GpuMapping::ColumnReduction && slices > 1;
    bool ok = (rows || columns) && g_.row_splits >= 2 && product_of(k_.outer).constant().has_value() &&
              !k_.stages.empty() && !loops_of(k_.stages[0]).empty();
    const size_t looped = ok ? (rows ? pass_run_end(k_, 0) : reduction_run_end(k_, 0)) : 0;
    for (size_t i = 0; ok && i < k_.stages.size(); ++i) {
      const auto* red = std::get_if<ReductionStage>(&k_.stages[i]);
      if (i >= looped) {
        ok = loops_of(k_.stages[i]).empty();
      } else if (rows && i > 0) {
        ok = red == nullptr;
      } else {
        ok = red && (red->kind == ReductionKind::Sum || red->kind == ReductionKind::Max ||
                     red->kind == ReductionKind::Min);
      }
    }
    if (!ok) {
      fail(cat("kernel ", k_.name, ": row_splits ", g_.row_splits, " (RowPerBlock, not cached, or ColumnReduction "
               "with row slices; constant outer extent; looped sums/max/min first (rows: one, with the pointwise "
               "stages of its pass), loop-less stages after them)"));
    }
  }
  if (g_.cache_vector != 1) {
    const int cv = g_.cache_vector;
    if (!is_row_mapping(g_.mapping) || v <= 0 || cv < 2 || cv > 16 || (cv & (cv - 1)) || v % cv != 0) {
      fail(cat("kernel ", k_.name, ": cache_vector ", cv, " (cached rows only, a power of two dividing E = ", v, ")"));
    }
  }
  if (g_.flat_vector && (v == 1 || g_.mapping != GpuMapping::GridStridePointwise)) {
    fail(cat("kernel ", k_.name, ": flat_vector without a vectorised pointwise mapping"));
  }
  if (g_.mapping == GpuMapping::GridStridePointwise || g_.mapping == GpuMapping::ColumnReduction) {
    if (v != 1 && v != 2 && v != 4 && v != 8 && v != 16) fail(cat("kernel ", k_.name, ": elements_per_thread ", v));
    if (v > 1) {
      if (g_.mapping != GpuMapping::GridStridePointwise || k_.outer.empty()) {
        fail(cat("kernel ", k_.name, ": vectorised only as a pointwise kernel with outer loops"));
      }
      for (const auto& s : k_.stages) {
        if (!loops_of(s).empty() || std::holds_alternative<ReductionStage>(s)) {
          fail(cat("kernel ", k_.name, ": a vectorised pointwise kernel has loop-less pointwise stages only"));
        }
      }
    }
  } else {
    if (v < 0) fail(cat("kernel ", k_.name, ": elements_per_thread ", v));
    if (v > 0) {
      const int t = g_.mapping == GpuMapping::RowPerWarp ? 32 : b;
      for (const auto& s : k_.stages) {
        const auto& loops = loops_of(s);
        if (loops.empty()) continue;
        auto len = product_of(loops).constant();
        if (!len || *len > static_cast<int64_t>(v) * t) {
          fail(cat("kernel ", k_.name, ": cached row of length ", product_of(loops), " exceeds ", v, " x ", t));
        }
        const auto inner = loops.back().extent.constant();
        if (g_.cache_vector > 1 && (*len % g_.cache_vector != 0 || !inner || *inner % g_.cache_vector != 0)) {
          fail(cat("kernel ", k_.name, ": cache_vector ", g_.cache_vector, " does not divide the row's loops"));
        }
      }
    }
  }
}

RowWalk row_walk(const Kernel& k, const GpuSchedule& g) {
  if (scan_of(k) && g.mapping != GpuMapping::GridStridePointwise) return RowWalk::None;
  if (is_row_mapping(g.mapping)) return RowWalk::Rows;
  if (g.mapping == GpuMapping::ColumnReduction && g.threads_per_column > 1) return RowWalk::ColumnGroups;
  return RowWalk::None;
}

ir::VarRanges cuda_var_ranges(const Kernel& k, const GpuSchedule& g) {
  ir::VarRanges ranges = k.var_ranges();
  if (g.mapping == GpuMapping::GridStridePointwise && g.elements_per_thread > 1) {
    ranges["vl"] = g.elements_per_thread;
    if (g.flat_vector) {
      for (const auto& l : k.outer) ranges["f" + var_name(l)] = l.extent;
    }
  }
  const std::vector<Loop>* loops = row_walk(k, g) == RowWalk::Rows && g.elements_per_thread > 0 ? row_cache_loops(k) : nullptr;
  for (size_t i = 0; loops && i < loops->size(); ++i) ranges[row_cache_var(i).as<IndexVar>()->name] = (*loops)[i].extent;
  return ranges;
}

int threads_per_row(RowWalk walk, const GpuSchedule& g) {
  switch (walk) {
    case RowWalk::Rows: return g.mapping == GpuMapping::RowPerWarp ? 32 : g.block_size;
    case RowWalk::ColumnGroups: return g.threads_per_column;
    case RowWalk::None: break;
  }
  return 0;
}

std::unordered_map<std::string, std::string> CudaKernelPrinter::argument_pointers(const KernelSignature& sig) {
  std::unordered_map<std::string, std::string> names;
  for (const auto& a : sig.buffers) names[a.buffer->name] = (a.written ? "out_" : "in_") + codegen::c_identifier(a.buffer->name);
  return names;
}

std::string CudaKernelPrinter::parameters(PrintedCudaKernel* info) {
  std::string params;
  for (const auto& a : sig_.buffers) {
    const std::string type = std::string(dtype_ctype(a.buffer->dtype));
    const std::string& name = pointers_.at(a.buffer->name);
    const bool by_value = is_host_scalar(*a.buffer, Device::CUDA);
    if (by_value && a.written) fail(cat("kernel ", k_.name, " writes ", a.buffer->name, " in CPU memory"));
    info->by_value.push_back(by_value);
    params += (params.empty() ? "" : ", ") +
              (by_value ? "const " + type + " " + name + "_value"
                        : (a.written ? type + "* " : "const " + type + "* ") + name);
  }
  info->buffer_args = static_cast<int>(sig_.buffers.size());
  for (const auto& s : sig_.symbols) {
    size_t pos = 0;
    while (pos < graph_symbols_.size() && graph_symbols_[pos] != s) ++pos;
    if (pos == graph_symbols_.size()) {
      throw CompilerError(Error::invalid_input(
          cat("cuda codegen: kernel ", k_.name, " uses size symbol ", s, " that the graph does not list")));
    }
    if (codegen::c_identifier(s) != s) fail(cat("size symbol ", s, " is not a C identifier"));
    info->symbols.push_back(s);
    info->symbol_positions.push_back(static_cast<int>(pos));
    params += (params.empty() ? "" : ", ") + std::string("int64_t ") + s;
  }
  return params;
}

void CudaKernelPrinter::print_host_scalars(const PrintedCudaKernel& info) {
  for (size_t i = 0; i < sig_.buffers.size(); ++i) {
    if (!info.by_value[i]) continue;
    const auto& a = sig_.buffers[i];
    const std::string name = pointer_name(a.buffer->name);
    // Loads index the value as the buffer's one element.
    out_.line(cat("const ", dtype_ctype(a.buffer->dtype), "* ", name, " = &", name, "_value;"));
  }
}

void CudaKernelPrinter::unravel(const std::vector<Loop>& loops, const std::string& flat,
                                const std::set<std::string>* used) {
  if (loops.empty()) return;
  auto needed = [&](size_t i) { return !used || used->count(loops[i].var.as<IndexVar>()->name) > 0; };
  std::vector<bool> any_upto(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) any_upto[i] = needed(i) || (i > 0 && any_upto[i - 1]);
  std::string rest = flat;
  for (size_t i = loops.size() - 1; i > 0; --i) {
    if (!any_upto[i]) return;
    const std::string q = fresh_name("q");
    const std::string e = extent_text(loops[i].extent);
    out_.line(cat("const int64_t ", q, " = ", nonnegative_div(rest, loops[i].extent, e), ";"));
    if (needed(i)) out_.line(cat("const int64_t ", var_name(loops[i]), " = ", rest, " - ", q, " * ", e, ";"));
    rest = q;
  }
  if (needed(0)) out_.line(cat("const int64_t ", var_name(loops[0]), " = ", rest, ";"));
}

std::string CudaKernelPrinter::nonnegative_div(const std::string& x, const IndexExpr& d,
                                               const std::string& d_text) const {
  const std::optional<int64_t> c = d.constant();
  if (!c) return CPrinterBase::nonnegative_div(x, d, d_text);  // a size symbol: divided at run time
  if (*c == 1) return x;
  if ((*c & (*c - 1)) == 0) return cat("((int64_t)((uint64_t)", x, " >> ", __builtin_ctzll(*c), "))");
  const DivisionMagic m = division_magic(*c);
  return cat("cppi_udiv_magic(", x, ", ", m.magic, "ull, ", m.shift, ")");
}

std::string CudaKernelPrinter::nonnegative_mod(const std::string& x, const IndexExpr& d,
                                               const std::string& d_text) const {
  const std::optional<int64_t> c = d.constant();
  if (!c) return CPrinterBase::nonnegative_mod(x, d, d_text);
  if (*c == 1) return "((int64_t)0)";
  if ((*c & (*c - 1)) == 0) return cat("(", x, " & ", *c - 1, ")");
  return cat("(", x, " - ", nonnegative_div(x, d, d_text), " * ", *c, ")");
}

std::set<std::string> CudaKernelPrinter::used_vars(const Stage& s) const {
  std::set<std::string> out;
  auto add_index = [&](const IndexExpr& e) {
    for (const auto& v : free_vars(e)) out.insert(v);
  };
  if (auto r = std::get_if<ReductionStage>(&s)) {
    for (const auto& v : ir::free_vars(r->body)) out.insert(v);
    return out;
  }
  const auto* scan = std::get_if<ScanStage>(&s);
  if (scan) {
    for (const auto& v : ir::free_vars(scan->body)) out.insert(v);
  }
  for (const auto& st : scan ? scan->stores : std::get<PointwiseStage>(s).stores) {
    add_index(st.index);
    for (const auto& v : ir::free_vars(st.value)) out.insert(v);
  }
  return out;
}

void CudaKernelPrinter::unravel_outer(const std::string& flat) {
  std::set<std::string> used;
  for (const auto& st : k_.stages) {
    for (const auto& v : used_vars(st)) used.insert(v);
  }
  unravel(k_.outer, flat, &used);
}

codegen::Stmt CudaKernelPrinter::lowered_nest(NestLowering lower, const char* pass, PrintedCudaKernel* info) {
  codegen::Stmt nest = lower(k_, g_, [&](const IndexExpr& e) { return index(e); });
  if (options_.loop_ir_dumps) info->loop_ir = cat("// ", name_, " after ", pass, "\n", codegen::to_text(nest));
  return nest;
}

std::string CudaKernelPrinter::print(PrintedCudaKernel* info) {
  check_schedule();
  info->name = name_;
  info->schedule = g_;
  info->iterations = product_of(k_.outer);
  std::set<std::string> mine = {"idx", "n", "row", "rows", "tid", "pos", "slot", "vl", "base", "lane", "valid", "split", "part",
                                 "group", "carry", "before", "total", "own", "prefix", "earlier", "start", "stop",
                                 "span", "epoch", "tile"};
  for (const auto& [v, e] : k_.var_ranges()) {
    if (mine.count(v) || v.rfind("tmp", 0) == 0 || v.rfind("red_", 0) == 0 || v.rfind("cache", 0) == 0 || v.rfind("vcache", 0) == 0) {
      fail(cat("kernel ", k_.name, ": loop variable ", v, " clashes with a name the printer uses"));
    }
  }
  codegen::print_kernel_header(out_, name_, k_, options_, describe_gpu_schedule(g_));
  const std::string params = parameters(info);
  if (has_module_state(g_)) {
    // The split rows' or column groups' partials and arrival counters (zero
    // when the module loads); the runtime serialises this kernel's launches
    // across streams.
    const int64_t outer = *product_of(k_.outer).constant();
    if (const ScanStage* scan = scan_of(k_)) {
      // Blocks take tickets in arrival order; a block's total is ready for
      // launch e once its flag is above e.
      const bool rows = g_.mapping == GpuMapping::RowPerBlock;
      const int64_t tiles = (rows ? outer : (outer + 31) / 32) * g_.row_splits;
      out_.line(cat("__device__ unsigned long long ", name_, "_tickets;"));
      out_.line(cat("__device__ unsigned long long ", name_, "_ready[", tiles, "];"));
      out_.line(cat("__device__ ", state_type(scan->kind, scan->body.dtype()), " ", name_, "_totals[",
                    tiles * (rows ? 1 : 32), "];"));
    } else if (g_.mapping == GpuMapping::RowPerBlock) {
      const auto& red = std::get<ReductionStage>(k_.stages[0]);
      out_.line(cat("__device__ ", state_type(red.kind, red.body.dtype()), " ", name_, "_partials[",
                    outer * g_.row_splits, "];"));
      out_.line(cat("__device__ unsigned int ", name_, "_arrivals[", outer, "];"));
    } else {
      for (size_t i = 0, end = reduction_run_end(k_, 0); i < end; ++i) {
        const auto& red = std::get<ReductionStage>(k_.stages[i]);
        out_.line(cat("__device__ ", state_type(red.kind, red.body.dtype()), " ", column_partials(i), "[",
                      outer * g_.row_splits, "];"));
      }
      out_.line(cat("__device__ unsigned int ", name_, "_arrivals[", (outer + 31) / 32, "];"));
    }
  }
  const int resident = resident_blocks_assumed(k_, g_);
  out_.line(cat("extern \"C\" __global__ void __launch_bounds__(", g_.block_size,
                resident > 0 ? cat(", ", resident) : std::string(), ")"));
  out_.open(cat(name_, "(", params, ")"));
  print_host_scalars(*info);
  if (const ScanStage* scan = scan_of(k_); scan && g_.mapping != GpuMapping::GridStridePointwise) {
    print_scans(info);
    out_.close();
    if (g_.cache_vector > 1) {
      // The vectors along the scan: its length, and each vector access's
      // offset, outer strides and base pointer.
      const std::vector<IndexExpr> vars = scan_access_vars(k_);
      VectorCheck length_check;
      length_check.divisor = g_.cache_vector;
      length_check.multiples.push_back(scan->loops[0].extent);
      info->vector_checks.push_back(length_check);
      for (const Expr& x : scan_vector_loads(k_)) {
        const auto* l = x.as<Load>();
        add_vector_check(info, l->buffer, l->index, vars, g_.cache_vector);
      }
      for (const auto& st : scan->stores) add_vector_check(info, st.buffer, st.index, vars, g_.cache_vector);
    }
    return out_.str();
  }
  if (walk_ == RowWalk::Rows) {
    print_rows(info);
  } else if (walk_ == RowWalk::ColumnGroups) {
    print_column_groups(info);
  } else {
    print_grid_stride(info);
  }
  out_.close();
  // Whether the body combines across a block (shared memory) or a warp
  // (shuffles; a block's combine uses them too): what it calls.
  const std::string text = out_.str();
  const std::string body = text.substr(std::min(text.find("__global__"), text.size()));
  info->block_reduction = body.find("cppi_block_reduce") != std::string::npos;
  info->warp_reduction = info->block_reduction || body.find("cppi_warp_reduce(") != std::string::npos;
  info->row_cached = is_row_mapping(g_.mapping) && g_.elements_per_thread > 0;
  // What the vector accesses need, for the launcher to check.
  if (info->row_cached && g_.cache_vector > 1) {
    // Cached loads, over the outer and the canonical row variables; looped
    // stores (cache_vector_width: stride 1 along the row) and the loads
    // their stages read as vectors (a row cached in vectors' slot groups).
    const std::vector<IndexExpr> vars = row_vector_vars();
    for (const auto& c : cached_.loads) add_vector_check(info, c.buffer, c.index, vars, g_.cache_vector);
    for (size_t i = 0; i < k_.stages.size(); ++i) {
      const auto* p = std::get_if<PointwiseStage>(&k_.stages[i]);
      if (!p || p->loops.empty()) continue;
      for (const auto& st : p->stores) {
        add_vector_check(info, st.buffer, canonical_row_index(k_, i, st.index), vars, g_.cache_vector);
      }
      for (const Expr& x : row_vector_loads(i)) {
        const auto* l = x.as<Load>();
        add_vector_check(info, l->buffer, canonical_row_index(k_, i, l->index), vars, g_.cache_vector);
      }
    }
  }
  if (g_.elements_per_thread > 1 && !is_row_mapping(g_.mapping)) {
    std::vector<IndexExpr> vars;
    for (const auto& l : k_.outer) vars.push_back(l.var);
    const int w = g_.elements_per_thread;
    VectorCheck extent_check;
    extent_check.divisor = w;
    extent_check.multiples.push_back(g_.flat_vector ? product_of(k_.outer) : k_.outer.back().extent);
    info->vector_checks.push_back(extent_check);
    for (const auto& s : k_.stages) {
      for (const auto& st : std::get<PointwiseStage>(s).stores) {
        add_vector_check(info, st.buffer, st.index, vars, w, g_.flat_vector);
        for (const Expr& e : post_order({st.value})) {
          auto l = e.as<Load>();
          if (!l || !is_vector_load(k_, g_, *l)) continue;
          add_vector_check(info, l->buffer, l->index, vars, w, g_.flat_vector);
          if (l->mask.defined()) {
            VectorCheck bounds;
            bounds.divisor = w;
            bounds.multiples = *uniform_mask_bounds(k_, l->mask, w);
            if (!bounds.multiples.empty()) info->vector_checks.push_back(std::move(bounds));
          }
        }
      }
    }
  }
  return text;
}

void CudaKernelPrinter::add_vector_check(PrintedCudaKernel* info, const BufferPtr& buffer, const IndexExpr& index,
                                         const std::vector<IndexExpr>& vars, int width, bool dense) const {
  // Flat vectors run over every variable: a gathered position moves within one.
  auto form = dense ? affine_form(index, vars) : affine_form_over_gathers(index, vars);
  if (!form) fail(cat("kernel ", k_.name, ": vector access ", index, " is not affine"));
  const auto last = vars.empty() ? std::nullopt : form->strides[vars.size() - 1].constant();
  if (!dense && (!last || *last != 1)) {
    fail(cat("kernel ", k_.name, ": vector access ", index, " is not stride 1 in the last loop"));
  }
  for (size_t i = 0; i < sig_.buffers.size(); ++i) {
    if (sig_.buffers[i].buffer->name != buffer->name) continue;
    VectorCheck c;
    c.buffer_arg = static_cast<int>(i);
    c.alignment = width * dtype_size(buffer->dtype);
    c.divisor = width;
    c.multiples.push_back(form->offset);
    // Every stride but the vector's own, gathered positions' included.
    for (size_t j = 0; !dense && j < form->strides.size(); ++j) {
      if (j + 1 != vars.size()) c.multiples.push_back(form->strides[j]);
    }
    info->vector_checks.push_back(std::move(c));
  }
}

}  // namespace cuda_print

using cuda_print::CudaKernelPrinter;
using cuda_print::is_row_mapping;

Expected<PrintedCudaModule> print_cuda_module(const std::vector<KernelPtr>& kernels,
                                              const std::vector<std::string>& graph_symbols,
                                              const CudaPrintOptions& options) {
  PrintedCudaModule module;
  const std::string preamble = cat("// Generated by cppinductor (gpu_codegen/codegen).\n#include \"",
                                   kCudaCodegenHeaderName, "\"\n");
  std::string source = preamble;
  std::set<std::string> names;
  try {
    for (const auto& k : kernels) {
      if (!k) return Error::internal("cuda codegen: null kernel");
      if (codegen::c_identifier(k->name) != k->name) {
        return Error::internal(cat("cuda codegen: kernel name ", k->name, " is not a C identifier"));
      }
      const GpuSchedule& g = k->schedule.gpu;
      const bool vector = is_row_mapping(g.mapping) ? g.elements_per_thread > 0 && g.cache_vector > 1
                                                    : g.elements_per_thread > 1;
      const std::string twin = vector ? k->name + "_scalar" : "";
      if (!names.insert(k->name).second || (vector && !names.insert(twin).second)) {
        return Error::internal(cat("cuda codegen: two kernels named ", k->name));
      }
      PrintedCudaKernel info;
      CudaKernelPrinter printer(*k, k->schedule.gpu, k->name, graph_symbols, options);
      module.kernel_sources.push_back("\n" + printer.print(&info));
      source += module.kernel_sources.back();
      if (vector) {
        GpuSchedule scalar = k->schedule.gpu;
        if (is_row_mapping(scalar.mapping)) {
          scalar.cache_vector = 1;
        } else {
          scalar.elements_per_thread = 1;
          scalar.flat_vector = false;
        }
        PrintedCudaKernel twin_info;
        CudaKernelPrinter twin_printer(*k, scalar, twin, graph_symbols, options);
        // Its own translation unit, compiled only when a launch needs it:
        // NVRTC's time grows with the code it optimises, and aligned inputs
        // (the usual case) never run the twin.
        info.scalar_twin_source = preamble + "\n" + twin_printer.print(&twin_info);
        info.scalar_twin = twin;
      }
      module.kernels.push_back(std::move(info));
    }
  } catch (const CompilerError& e) {
    return e.error();
  }
  module.source = std::move(source);
  module.preamble = preamble;
  return module;
}

}  // namespace cppi::gpu
