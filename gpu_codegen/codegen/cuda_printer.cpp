/// CUDA kernel printer. Shapes of the code it prints (gpu_schedule.h has the
/// contract of each mapping):
///
/// - GridStridePointwise / ColumnReduction:
///     for (int64_t idx = (int64_t)blockIdx.x * B + threadIdx.x; idx < n;
///          idx += (int64_t)gridDim.x * B) { x1 = ...; x0 = ...; stages }
///   with the stages printed serially, as the C printer's scalar path would.
///   With V elements per thread, idx steps by V, each stride-1 access is one
///   cppi_vec<T, V> load or store, and the body runs in an unrolled lane loop
///   (`vl`), the innermost loop variable replaced by x + vl; values that do
///   not depend on it are computed once, before the lane loop.
/// - ColumnReduction with threads_per_column S > 1: a block-strided loop over
///   groups of 32 columns (`idx = base + lane`, `valid = idx < n`); the S
///   slices of a column (`tid` = threadIdx.x / 32) walk the stage loops as a
///   row kernel's threads do (`pos = tid, tid + S, ...`), reductions combine
///   across slices with cppi_column_reduce, loop-less stages run on slice 0.
/// - RowPerWarp / RowPerBlock: a loop over rows (warp- or block-strided),
///   inside which every stage walks its flattened loops with
///   `pos = tid, tid + T, ...` (cached rows: an unrolled `slot` loop over
///   register arrays filled once per row), reductions fold per thread and
///   then combine with cppi_warp_reduce / cppi_block_reduce from the prelude.
#include "gpu_codegen/codegen/cuda_printer.h"

#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cpu_codegen/printer/c_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::gpu {

using namespace ir;
using codegen::CValue;
using codegen::ValueScope;

int PrintedCudaModule::vectorized_kernel_count() const {
  int n = 0;
  for (const auto& k : kernels) n += k.schedule.elements_per_thread > 1 && !k.scalar_twin.empty() ? 1 : 0;
  return n;
}

namespace {

[[noreturn]] void fail(const std::string& message) { throw CompilerError(Error::internal("cuda codegen: " + message)); }

const std::vector<Loop>& loops_of(const Stage& s) {
  return std::visit([](const auto& st) -> const std::vector<Loop>& { return st.loops; }, s);
}

IndexExpr product_of(const std::vector<Loop>& loops) {
  std::vector<IndexExpr> ex;
  for (const auto& l : loops) ex.push_back(l.extent);
  return product(ex);
}

std::string var_name(const Loop& l) { return codegen::c_identifier(l.var.as<IndexVar>()->name); }

std::string shuffle_type(DType t);

bool is_row_mapping(GpuMapping m) { return m == GpuMapping::RowPerWarp || m == GpuMapping::RowPerBlock; }

class CudaKernelPrinter : public codegen::CPrinterBase {
 public:
  CudaKernelPrinter(const Kernel& k, const GpuSchedule& g, std::string name,
                    const std::vector<std::string>& graph_symbols, const CudaPrintOptions& options)
      : CPrinterBase(k.var_ranges()),
        k_(k),
        g_(g),
        name_(std::move(name)),
        graph_symbols_(graph_symbols),
        options_(options) {}

  std::string print(PrintedCudaKernel* info);

 protected:
  std::string pointer_name(const std::string& buffer) const override {
    auto it = pointers_.find(buffer);
    if (it == pointers_.end()) fail(cat("kernel ", k_.name, ": buffer ", buffer, " is not an argument"));
    return it->second;
  }
  /// NVRTC has no __builtin_inff / __builtin_nanf: non-finite floats are bit patterns.
  std::string literal(const Constant& c) const override {
    const double v = c.float_value;
    if ((c.dtype == DType::Float32 || c.dtype == DType::Float64) && !std::isfinite(v)) {
      const bool single = c.dtype == DType::Float32;
      if (std::isnan(v)) return single ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
      if (v > 0) return single ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
      return single ? "__int_as_float(0xff800000)" : "__longlong_as_double(0xfff0000000000000LL)";
    }
    return CPrinterBase::literal(c);
  }
  CValue local_value(const LocalRef& ref) const override {
    auto it = locals_.find(ref.name);
    if (it == locals_.end()) fail(cat("kernel ", k_.name, ": local ", ref.name, " used before its stage"));
    return it->second;
  }
  /// sin(x) and cos(x) of the same x (sin + cos, rotary embeddings) are one
  /// sincos: one argument reduction instead of two, and half the libdevice
  /// code for NVRTC to optimise (H200, sin + cos of 1 GiB: 88% of copy).
  std::optional<CValue> fused_value(const Expr& e, ValueScope& scope) override {
    auto u = e.as<Unary>();
    if (!u || (u->op != UnaryOp::Sin && u->op != UnaryOp::Cos) || !sincos_args_.count(u->operand)) {
      return std::nullopt;
    }
    const DType t = e.dtype();
    if (t != DType::Float32 && t != DType::Float64) return std::nullopt;
    const CValue x = scalar_value(u->operand, scope);
    const std::string s = fresh_name(), c = fresh_name();
    out_.line(cat(scalar_type(t), " ", s, ", ", c, ";"));
    out_.line(cat("cppi_sincos(", x.text, ", &", s, ", &", c, ");"));
    const bool sin = u->op == UnaryOp::Sin;
    scope.add(Unary::make(sin ? UnaryOp::Cos : UnaryOp::Sin, u->operand), CValue{sin ? c : s, t});
    return CValue{sin ? s : c, t};
  }
  /// Records the operands that both sin and cos take somewhere in `roots`.
  void note_sincos(const std::vector<Expr>& roots) {
    std::unordered_set<Expr, ExprStructuralHash, ExprStructuralEqual> sins, coss;
    for (const Expr& e : post_order(roots)) {
      auto u = e.as<Unary>();
      if (u && u->op == UnaryOp::Sin) sins.insert(u->operand);
      if (u && u->op == UnaryOp::Cos) coss.insert(u->operand);
    }
    for (const Expr& x : sins) {
      if (coss.count(x)) sincos_args_.insert(x);
    }
  }

 private:
  void check_schedule() const;
  void print_header();
  std::string parameters(PrintedCudaKernel* info);
  /// Declares the loop variables of `loops` (those in `used`, when given)
  /// from the row-major flat index `flat`.
  void unravel(const std::vector<Loop>& loops, const std::string& flat, const std::set<std::string>* used = nullptr);
  /// Loop variables a stage's values and store indices use.
  std::set<std::string> used_vars(const Stage& s) const;
  std::string extent_text(const IndexExpr& e) const {
    const bool simple = e.as<IndexConst>() || e.as<IndexSymbol>() || e.as<IndexVar>();
    return simple ? index(e) : "(" + index(e) + ")";
  }

  // --- grid-stride mappings ---------------------------------------------------------------
  void print_grid_stride();
  void print_vector_pointwise();
  void print_serial_stages();
  void print_serial_reduction(const ReductionStage& s, size_t i);
  void print_serial_pointwise(const PointwiseStage& s);
  void print_stores(const std::vector<Store>& stores, ValueScope& scope);

  // --- row mappings ---------------------------------------------------------------------------
  void print_rows();
  void print_column_groups();
  /// The stages of one row / column group, in order.
  void print_row_stages();
  void print_row_cache_prologue();
  /// Runs `body` for every position of `loops` this thread owns.
  void for_each_position(size_t stage, const std::function<void(ValueScope&)>& body);
  void print_row_reduction(const ReductionStage& s, size_t i);
  /// Split rows: stores this block's partial; the row's last block folds all.
  void print_split_combine(const ReductionStage& s, const std::string& acc, const std::string& scratch);
  void print_row_pointwise(const PointwiseStage& s, size_t i);

  // --- reductions -------------------------------------------------------------------------------
  std::string state_type(ReductionKind kind, DType t) const;
  std::string state_identity(ReductionKind kind, DType t) const;
  std::string state_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                           const std::string& pos) const;
  std::string combine_op(ReductionKind kind) const;
  void declare_results(const ReductionStage& s, const std::string& acc);
  std::string local_name(const std::string& result) const { return "red_" + codegen::c_identifier(result); }

  const Kernel& k_;
  const GpuSchedule g_;
  const std::string name_;
  const std::vector<std::string>& graph_symbols_;
  const CudaPrintOptions& options_;
  KernelSignature sig_;
  std::unordered_map<std::string, std::string> pointers_;
  std::unordered_map<std::string, CValue> locals_;
  std::vector<CachedLoad> cached_;
  int threads_per_row_ = 0;
  int cached_elements_ = 0;   // E of a cached row; 0 = stages read global memory
  bool column_groups_ = false;  // ColumnReduction with threads_per_column > 1
  bool warp_reduction_ = false, block_reduction_ = false;
  std::vector<std::string> shared_decls_;
  std::unordered_set<Expr, ExprStructuralHash, ExprStructuralEqual> sincos_args_;
};

// --- prologue ---------------------------------------------------------------------------------

void CudaKernelPrinter::check_schedule() const {
  if (k_.device != Device::CUDA) fail(cat("kernel ", k_.name, " is not a CUDA kernel"));
  const int b = g_.block_size;
  if (g_.mapping == GpuMapping::None) fail(cat("kernel ", k_.name, " has no GPU schedule"));
  if (b <= 0 || b % 32 != 0 || b > 1024) fail(cat("kernel ", k_.name, ": block size ", b, " (a multiple of 32, <= 1024)"));
  const int v = g_.elements_per_thread;
  const int slices = g_.threads_per_column;
  if (slices != 1) {
    if (g_.mapping != GpuMapping::ColumnReduction || slices < 2 || slices > 32 || (slices & (slices - 1)) ||
        b != 32 * slices) {
      fail(cat("kernel ", k_.name, ": threads_per_column ", slices, " (ColumnReduction only, a power of two in [2, 32],"
               " block = 32 x it) with block ", b));
    }
  }
  if (g_.row_splits != 1) {
    bool ok = g_.mapping == GpuMapping::RowPerBlock && g_.row_splits >= 2 && v == 0 &&
              product_of(k_.outer).constant().has_value() && !k_.stages.empty();
    if (ok) {
      const auto* red = std::get_if<ReductionStage>(&k_.stages[0]);
      ok = red && !red->loops.empty() &&
           (red->kind == ReductionKind::Sum || red->kind == ReductionKind::Max || red->kind == ReductionKind::Min);
      for (size_t i = 1; ok && i < k_.stages.size(); ++i) ok = loops_of(k_.stages[i]).empty();
    }
    if (!ok) {
      fail(cat("kernel ", k_.name, ": row_splits ", g_.row_splits, " (RowPerBlock with constant rows, not cached, a "
               "looped sum/max/min first and loop-less stages after it)"));
    }
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
      }
    }
  }
}

void CudaKernelPrinter::print_header() {
  out_.line("// kernel: " + name_);
  if (!k_.origins.empty()) {
    std::string line = "// origins:";
    for (const auto& o : k_.origins) line += " " + o;
    out_.line(line);
    for (const auto& o : k_.origins) {
      auto it = options_.origin_source.find(o);
      if (it != options_.origin_source.end()) out_.line("//   " + o + ": " + it->second);
    }
  }
  out_.line(cat("// schedule: mapping=", to_string(g_.mapping), " block=", g_.block_size, " grid=", g_.grid_size,
                " elements_per_thread=", g_.elements_per_thread,
                g_.threads_per_column != 1 ? cat(" threads_per_column=", g_.threads_per_column) : std::string()));
}

std::string CudaKernelPrinter::parameters(PrintedCudaKernel* info) {
  std::string params;
  for (const auto& a : sig_.buffers) {
    const std::string type = std::string(dtype_ctype(a.buffer->dtype));
    const std::string name = (a.written ? "out_" : "in_") + codegen::c_identifier(a.buffer->name);
    pointers_[a.buffer->name] = name;
    params += (params.empty() ? "" : ", ") + (a.written ? type + "* " : "const " + type + "* ") + name;
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
    out_.line(cat("const int64_t ", q, " = ", rest, " / ", e, ";"));
    if (needed(i)) out_.line(cat("const int64_t ", var_name(loops[i]), " = ", rest, " - ", q, " * ", e, ";"));
    rest = q;
  }
  if (needed(0)) out_.line(cat("const int64_t ", var_name(loops[0]), " = ", rest, ";"));
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
  for (const auto& st : std::get<PointwiseStage>(s).stores) {
    add_index(st.index);
    for (const auto& v : ir::free_vars(st.value)) out.insert(v);
  }
  return out;
}

std::string CudaKernelPrinter::print(PrintedCudaKernel* info) {
  check_schedule();
  sig_ = signature(k_);
  info->name = name_;
  info->schedule = g_;
  info->iterations = product_of(k_.outer);
  std::set<std::string> mine = {"idx", "n", "row", "rows", "tid", "pos", "slot", "vl", "base", "lane", "valid", "split", "part"};
  for (const auto& [v, e] : ranges_) {
    if (mine.count(v) || v.rfind("tmp", 0) == 0 || v.rfind("red_", 0) == 0 || v.rfind("cache", 0) == 0) {
      fail(cat("kernel ", k_.name, ": loop variable ", v, " clashes with a name the printer uses"));
    }
  }
  print_header();
  for (const auto& st : k_.stages) {
    if (auto r = std::get_if<ReductionStage>(&st)) {
      note_sincos({r->body});
    } else {
      for (const auto& store : std::get<PointwiseStage>(st).stores) note_sincos({store.value});
    }
  }
  const std::string params = parameters(info);
  if (has_module_state(g_)) {
    // The split rows' partials and arrival counters (zero when the module
    // loads); the runtime serialises this kernel's launches across streams.
    const auto& red = std::get<ReductionStage>(k_.stages[0]);
    const int64_t rows = *product_of(k_.outer).constant();
    out_.line(cat("__device__ ", state_type(red.kind, red.body.dtype()), " ", name_, "_partials[", rows * g_.row_splits,
                  "];"));
    out_.line(cat("__device__ unsigned int ", name_, "_arrivals[", rows, "];"));
  }
  out_.line(cat("extern \"C\" __global__ void __launch_bounds__(", g_.block_size, ")"));
  out_.open(cat(name_, "(", params, ")"));
  if (is_row_mapping(g_.mapping)) {
    print_rows();
  } else if (g_.mapping == GpuMapping::ColumnReduction && g_.threads_per_column > 1) {
    print_column_groups();
  } else if (g_.elements_per_thread > 1) {
    print_vector_pointwise();
  } else {
    print_grid_stride();
  }
  out_.close();
  info->warp_reduction = warp_reduction_;
  info->block_reduction = block_reduction_;
  info->row_cached = is_row_mapping(g_.mapping) && g_.elements_per_thread > 0;
  if (g_.elements_per_thread > 1 && !is_row_mapping(g_.mapping)) {
    // What the vector accesses need, for the launcher to check.
    std::vector<IndexExpr> vars;
    for (const auto& l : k_.outer) vars.push_back(l.var);
    const int64_t w = g_.elements_per_thread;
    VectorCheck extent_check;
    extent_check.divisor = w;
    extent_check.multiples.push_back(k_.outer.back().extent);
    info->vector_checks.push_back(extent_check);
    auto add = [&](const BufferPtr& b, const IndexExpr& idx) {
      for (size_t i = 0; i < sig_.buffers.size(); ++i) {
        if (sig_.buffers[i].buffer->name != b->name) continue;
        VectorCheck c;
        c.buffer_arg = static_cast<int>(i);
        c.alignment = static_cast<int>(w) * dtype_size(b->dtype);
        c.divisor = w;
        auto form = affine_form(idx, vars);
        if (!form) fail(cat("kernel ", k_.name, ": vector access ", idx, " is not affine"));
        c.multiples.push_back(form->offset);
        for (size_t j = 0; j + 1 < form->strides.size(); ++j) c.multiples.push_back(form->strides[j]);
        info->vector_checks.push_back(std::move(c));
      }
    };
    for (const auto& s : k_.stages) {
      for (const auto& st : std::get<PointwiseStage>(s).stores) {
        add(st.buffer, st.index);
        for (const Expr& e : post_order({st.value})) {
          auto l = e.as<Load>();
          if (l && !l->mask.defined() && is_vector_access(k_, l->index)) add(l->buffer, l->index);
        }
      }
    }
  }
  return out_.str();
}

// --- grid-stride mappings --------------------------------------------------------------------

void CudaKernelPrinter::print_grid_stride() {
  const int b = g_.block_size;
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.open(cat("for (int64_t idx = (int64_t)blockIdx.x * ", b, " + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * ", b,
                ")"));
  std::set<std::string> used;
  for (const auto& st : k_.stages) {
    for (const auto& v : used_vars(st)) used.insert(v);
  }
  unravel(k_.outer, "idx", &used);
  print_serial_stages();
  out_.close();
}

void CudaKernelPrinter::print_serial_stages() {
  locals_.clear();
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (auto r = std::get_if<ReductionStage>(&k_.stages[i])) {
      print_serial_reduction(*r, i);
    } else {
      print_serial_pointwise(std::get<PointwiseStage>(k_.stages[i]));
    }
  }
}

void CudaKernelPrinter::print_serial_pointwise(const PointwiseStage& s) {
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == s.loops.size()) {
      ValueScope scope;
      print_stores(s.stores, scope);
      return;
    }
    const Loop& l = s.loops[level];
    const std::string v = var_name(l);
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", index(l.extent), "; ++", v, ")"));
    loops(level + 1);
    out_.close();
  };
  loops(0);
}

void CudaKernelPrinter::print_serial_reduction(const ReductionStage& s, size_t i) {
  const DType t = s.body.dtype();
  const std::string acc = local_name(s.results[0]) + "_acc";
  out_.line(cat("// stage ", i, ": reduce ", to_string(s.kind), " (serial)"));
  out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  IndexExpr pos = 0;
  for (const auto& l : s.loops) pos = pos * l.extent + l.var;
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == s.loops.size()) {
      ValueScope scope;
      const CValue v = scalar_value(s.body, scope);
      out_.line(state_update(s.kind, t, acc, v.text, index(pos)) + ";");
      return;
    }
    const Loop& l = s.loops[level];
    const std::string v = var_name(l);
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", index(l.extent), "; ++", v, ")"));
    loops(level + 1);
    out_.close();
  };
  loops(0);
  declare_results(s, acc);
}

void CudaKernelPrinter::print_stores(const std::vector<Store>& stores, ValueScope& scope) {
  for (const auto& st : stores) {
    const CValue v = scalar_value(st.value, scope);
    out_.line(cat(pointer_name(st.buffer->name), "[", index(st.index, scope), "] = ", v.text, ";"));
    scope.forget_loads_of(st.buffer->name);
  }
}

void CudaKernelPrinter::print_vector_pointwise() {
  const int b = g_.block_size;
  const int w = g_.elements_per_thread;
  const Loop& inner = k_.outer.back();
  const std::string inner_name = inner.var.as<IndexVar>()->name;
  const IndexExpr lane = var("vl");
  ranges_["vl"] = w;
  const std::map<std::string, IndexExpr> shift = {{inner_name, inner.var + lane}};
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.open(cat("for (int64_t idx = ((int64_t)blockIdx.x * ", b, " + threadIdx.x) * ", w,
                "; idx < n; idx += (int64_t)gridDim.x * ", b * w, ")"));
  unravel(k_.outer, "idx");
  ValueScope outer;
  // Vector loads by (buffer, index), each a cppi_vec named vN.
  std::vector<std::pair<Expr, std::string>> vloads;
  auto vector_type = [&](DType t) { return cat("cppi_vec<", dtype_ctype(t), ", ", w, ">"); };
  std::function<void(const Expr&)> hoist = [&](const Expr& e) {
    if (e.as<Constant>() || e.as<LocalRef>()) return;
    if (!free_vars(e).count(inner_name)) {
      scalar_value(e, outer);
      return;
    }
    for (const Expr& o : operands(e)) hoist(o);
  };
  for (const auto& stage : k_.stages) {
    for (const auto& st : std::get<PointwiseStage>(stage).stores) {
      for (const Expr& e : post_order({st.value})) {
        auto l = e.as<Load>();
        if (!l || l->mask.defined() || !is_vector_access(k_, l->index)) continue;
        bool seen = false;
        for (const auto& [x, name] : vloads) seen |= structurally_equal(x, e);
        if (seen) continue;
        const std::string name = fresh_name("v");
        const std::string vt = vector_type(l->dtype);
        out_.line(cat("const ", vt, " ", name, " = *(const ", vt, "*)(", pointer_name(l->buffer->name), " + ",
                      index(l->index), ");"));
        vloads.emplace_back(e, name);
      }
      hoist(st.value);
      const std::string sv = fresh_name("s");
      const std::string vt = vector_type(st.buffer->dtype);
      out_.line(cat(vt, " ", sv, ";"));
      out_.line("#pragma unroll");
      out_.open(cat("for (int vl = 0; vl < ", w, "; ++vl)"));
      ValueScope lanes(&outer);
      for (const auto& [x, name] : vloads) {
        lanes.add(substitute_indices(x, shift), CValue{name + ".v[vl]", x.dtype()});
      }
      const Expr shifted = substitute_indices(st.value, shift);
      note_sincos({shifted});
      const CValue v = scalar_value(shifted, lanes);
      out_.line(cat(sv, ".v[vl] = ", v.text, ";"));
      out_.close();
      out_.line(cat("*(", vt, "*)(", pointer_name(st.buffer->name), " + ", index(st.index), ") = ", sv, ";"));
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

// --- row mappings ------------------------------------------------------------------------------

void CudaKernelPrinter::print_rows() {
  const bool warp = g_.mapping == GpuMapping::RowPerWarp;
  const int b = g_.block_size;
  threads_per_row_ = warp ? 32 : b;
  out_.line(cat("const int64_t rows = ", index(product_of(k_.outer)), ";"));
  if (warp) {
    const int rows_per_block = b / 32;
    out_.line("const int tid = threadIdx.x & 31;");
    out_.open(cat("for (int64_t row = (int64_t)blockIdx.x * ", rows_per_block,
                  " + (threadIdx.x >> 5); row < rows; row += (int64_t)gridDim.x * ", rows_per_block, ")"));
  } else if (g_.row_splits > 1) {
    // Exactly rows x P blocks: no loop over rows (the last block returns early).
    const int splits = g_.row_splits;
    out_.line("const int tid = threadIdx.x;");
    out_.line(cat("const int64_t row = (int64_t)blockIdx.x / ", splits, ";"));
    out_.line(cat("const int64_t split = (int64_t)blockIdx.x - row * ", splits, ";"));
    out_.open("if (row < rows)");
  } else {
    out_.line("const int tid = threadIdx.x;");
    out_.open("for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)");
  }
  std::set<std::string> used;
  for (const auto& st : k_.stages) {
    for (const auto& v : used_vars(st)) used.insert(v);
  }
  unravel(k_.outer, "row", &used);
  locals_.clear();
  cached_elements_ = g_.elements_per_thread;
  if (cached_elements_ > 0) {
    cached_ = row_cached_loads(k_);
    print_row_cache_prologue();
  }
  print_row_stages();
  out_.close();
}

void CudaKernelPrinter::print_column_groups() {
  const int slices = g_.threads_per_column;
  threads_per_row_ = slices;
  column_groups_ = true;
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.line("const int lane = threadIdx.x & 31;");
  out_.line("const int tid = threadIdx.x >> 5;");
  // The loop is uniform across the block (every thread reaches the
  // combines' barriers); lanes past the last column fold nothing.
  out_.open("for (int64_t base = (int64_t)blockIdx.x * 32; base < n; base += (int64_t)gridDim.x * 32)");
  out_.line("const int64_t idx = base + lane;");
  out_.line("const bool valid = idx < n;");
  std::set<std::string> used;
  for (const auto& st : k_.stages) {
    for (const auto& v : used_vars(st)) used.insert(v);
  }
  unravel(k_.outer, "idx", &used);
  locals_.clear();
  cached_elements_ = 0;
  print_row_stages();
  out_.close();
}

void CudaKernelPrinter::print_row_stages() {
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (auto r = std::get_if<ReductionStage>(&k_.stages[i])) {
      print_row_reduction(*r, i);
    } else {
      print_row_pointwise(std::get<PointwiseStage>(k_.stages[i]), i);
    }
  }
}

void CudaKernelPrinter::print_row_cache_prologue() {
  const std::vector<Loop>* loops = nullptr;
  for (const auto& s : k_.stages) {
    if (!loops_of(s).empty()) {
      loops = &loops_of(s);
      break;
    }
  }
  if (!loops || cached_.empty()) return;
  std::vector<Loop> canon;
  for (size_t i = 0; i < loops->size(); ++i) {
    canon.push_back(Loop{row_cache_var(i), (*loops)[i].extent});
    ranges_[row_cache_var(i).as<IndexVar>()->name] = (*loops)[i].extent;
  }
  const int e = g_.elements_per_thread;
  out_.line(cat("// row cache: ", cached_.size(), " loads x ", e, " elements per thread"));
  for (size_t c = 0; c < cached_.size(); ++c) {
    out_.line(cat(dtype_ctype(cached_[c].buffer->dtype), " cache", c, "[", e, "];"));
  }
  const int64_t len = *product_of(*loops).constant();
  out_.line("#pragma unroll");
  out_.open(cat("for (int slot = 0; slot < ", e, "; ++slot)"));
  out_.line(cat("const int64_t pos = (int64_t)slot * ", threads_per_row_, " + tid;"));
  const bool guard = len != static_cast<int64_t>(e) * threads_per_row_;
  if (guard) out_.open(cat("if (pos < ", len, ")"));
  std::set<std::string> used;
  for (const auto& c : cached_) {
    for (const auto& v : free_vars(c.index)) used.insert(v);
  }
  unravel(canon, "pos", &used);
  for (size_t c = 0; c < cached_.size(); ++c) {
    out_.line(cat("cache", c, "[slot] = ", pointer_name(cached_[c].buffer->name), "[", index(cached_[c].index), "];"));
  }
  if (guard) out_.close();
  out_.close();
}

void CudaKernelPrinter::for_each_position(size_t stage, const std::function<void(ValueScope&)>& body) {
  const Stage& stage_ref = k_.stages[stage];
  const auto* red = std::get_if<ReductionStage>(&stage_ref);
  const bool uses_pos = red && (red->kind == ReductionKind::ArgMax || red->kind == ReductionKind::ArgMin);
  const auto& loops = loops_of(k_.stages[stage]);
  const IndexExpr len = product_of(loops);
  const int t = threads_per_row_;
  const int e = cached_elements_;
  if (e > 0) {
    // Loads this stage reads from the row cache.
    std::vector<std::pair<Expr, std::string>> from_cache;
    const Stage& st = k_.stages[stage];
    std::vector<Expr> roots;
    if (auto r = std::get_if<ReductionStage>(&st)) {
      roots.push_back(r->body);
    } else {
      for (const auto& s : std::get<PointwiseStage>(st).stores) roots.push_back(s.value);
    }
    for (const Expr& x : post_order(roots)) {
      auto l = x.as<Load>();
      if (!l || l->mask.defined()) continue;
      const IndexExpr canon = canonical_row_index(k_, stage, l->index);
      for (size_t c = 0; c < cached_.size(); ++c) {
        if (cached_[c].buffer->name == l->buffer->name && cached_[c].index == canon) {
          from_cache.emplace_back(x, cat("cache", c, "[slot]"));
        }
      }
    }
    const int64_t n = *len.constant();
    // Loads served from the cache need no loop variables; the rest may.
    std::set<std::string> used;
    for (const Expr& x : post_order(roots)) {
      bool cached = false;
      for (const auto& fc : from_cache) cached |= fc.first.same_as(x);
      if (cached) continue;
      if (auto l = x.as<Load>()) for (const auto& v : free_vars(l->index)) used.insert(v);
      if (auto iv = x.as<IndexValue>()) for (const auto& v : free_vars(iv->index)) used.insert(v);
      if (auto rn = x.as<Random>()) for (const auto& v : free_vars(rn->offset)) used.insert(v);
    }
    if (auto p = std::get_if<PointwiseStage>(&st)) {
      for (const auto& store : p->stores) for (const auto& v : free_vars(store.index)) used.insert(v);
    }
    const bool guard = n != static_cast<int64_t>(e) * t;
    out_.line("#pragma unroll");
    out_.open(cat("for (int slot = 0; slot < ", e, "; ++slot)"));
    if (guard || uses_pos || !used.empty()) out_.line(cat("const int64_t pos = (int64_t)slot * ", t, " + tid;"));
    if (guard) out_.open(cat("if (pos < ", n, ")"));
    unravel(loops, "pos", &used);
    ValueScope scope;
    for (const auto& [x, text] : from_cache) scope.add(x, CValue{text, x.dtype()});
    body(scope);
    if (guard) out_.close();
    out_.close();
    return;
  }
  if (column_groups_) {
    // Several rows in flight per thread: the loads do not depend on the fold.
    out_.line("#pragma unroll 4");
    out_.open(cat("for (int64_t pos = valid ? tid : ", index(len), "; pos < ", index(len), "; pos += ", t, ")"));
  } else if (g_.row_splits > 1) {
    out_.open(cat("for (int64_t pos = split * ", t, " + tid; pos < ", index(len), "; pos += ",
                  static_cast<int64_t>(t) * g_.row_splits, ")"));
  } else {
    out_.open(cat("for (int64_t pos = tid; pos < ", index(len), "; pos += ", t, ")"));
  }
  const std::set<std::string> used = used_vars(k_.stages[stage]);
  unravel(loops, "pos", &used);
  ValueScope scope;
  body(scope);
  out_.close();
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

void CudaKernelPrinter::print_row_reduction(const ReductionStage& s, size_t i) {
  const DType t = s.body.dtype();
  const std::string acc = local_name(s.results[0]) + "_acc";
  out_.line(cat("// stage ", i, ": reduce ", to_string(s.kind), " over the row"));
  out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  if (s.loops.empty()) {
    ValueScope scope;
    const CValue v = scalar_value(s.body, scope);
    out_.line(state_update(s.kind, t, acc, v.text, "0") + ";");
    declare_results(s, acc);
    return;
  }
  for_each_position(i, [&](ValueScope& scope) {
    const CValue v = scalar_value(s.body, scope);
    if (s.kind == ReductionKind::Welford) {
      // Division-free Welford steps (cuda_support.h): in a cached row a
      // thread's valid slots are a prefix, so slot + 1 is its weight.
      const std::string st = shuffle_type(t);
      const std::string inv = cached_elements_ > 0 ? cat("((", st, ")1 / (", st, ")(slot + 1))")
                                                         : cat("cppi_rcp(", acc, ".weight + (", st, ")1)");
      out_.line(cat(acc, " = cppi_welford_add(", acc, ", ", v.text, ", ", inv, ");"));
      return;
    }
    out_.line(state_update(s.kind, t, acc, v.text, "pos") + ";");
  });
  if (column_groups_) {
    const std::string scratch = local_name(s.results[0]) + "_scratch";
    out_.line(cat("__shared__ ", state_type(s.kind, t), " ", scratch, "[", g_.block_size, "];"));
    out_.line(cat(acc, " = cppi_column_reduce(", acc, ", ", combine_op(s.kind), ", ", scratch, ");"));
  } else if (g_.mapping == GpuMapping::RowPerWarp) {
    warp_reduction_ = true;
    out_.line(cat(acc, " = cppi_warp_reduce(", acc, ", ", combine_op(s.kind), ");"));
  } else {
    warp_reduction_ = true;
    block_reduction_ = true;
    const std::string scratch = local_name(s.results[0]) + "_scratch";
    out_.line(cat("__shared__ ", state_type(s.kind, t), " ", scratch, "[32];"));
    out_.line(cat(acc, " = cppi_block_reduce(", acc, ", ", combine_op(s.kind), ", ", state_identity(s.kind, t), ", ",
                  scratch, ");"));
    if (g_.row_splits > 1) print_split_combine(s, acc, scratch);
  }
  declare_results(s, acc);
}

void CudaKernelPrinter::print_row_pointwise(const PointwiseStage& s, size_t i) {
  std::string comment = cat("// stage ", i, ": store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  out_.line(comment);
  if (s.loops.empty()) {
    out_.open(column_groups_ ? "if (tid == 0 && valid)" : "if (tid == 0)");
    ValueScope scope;
    print_stores(s.stores, scope);
    out_.close();
    return;
  }
  for_each_position(i, [&](ValueScope& scope) { print_stores(s.stores, scope); });
}

// --- reductions: states, updates, combines ------------------------------------------------------

/// The per-thread state of a reduction over `t`: small integers and bools
/// widen to int, which warp shuffles move.
std::string shuffle_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32: return "int";
    case DType::Int64: return "int64_t";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16:
    case DType::BFloat16: break;
  }
  fail(cat("a reduction over ", dtype_name(t), " (lowerings reduce reduced floats in float32)"));
}

std::string CudaKernelPrinter::state_type(ReductionKind kind, DType t) const {
  switch (kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return "cppi_arg<" + shuffle_type(t) + ">";
    case ReductionKind::Welford: return "cppi_welford<" + shuffle_type(t) + ">";
    case ReductionKind::Any:
    case ReductionKind::All: return "int";
    default: return shuffle_type(t);
  }
}

std::string CudaKernelPrinter::state_identity(ReductionKind kind, DType t) const {
  const std::string st = shuffle_type(t);
  auto ident = [&](ReductionKind k) {
    return "(" + st + ")" + literal(*reduction_identity(k, t)[0].as<Constant>());
  };
  switch (kind) {
    case ReductionKind::ArgMax: return cat("cppi_arg_make(", ident(ReductionKind::Max), ", (int64_t)-1)");
    case ReductionKind::ArgMin: return cat("cppi_arg_make(", ident(ReductionKind::Min), ", (int64_t)-1)");
    case ReductionKind::Welford: return cat("cppi_welford_init<", st, ">()");
    case ReductionKind::Any: return "0";
    case ReductionKind::All: return "1";
    default: return ident(kind);
  }
}

std::string CudaKernelPrinter::state_update(ReductionKind kind, DType t, const std::string& acc,
                                            const std::string& v, const std::string& pos) const {
  const std::string st = shuffle_type(t);
  const std::string x = "(" + st + ")" + v;
  switch (kind) {
    case ReductionKind::Sum: return cat(acc, " = ", acc, " + ", x);
    case ReductionKind::Prod: return cat(acc, " = ", acc, " * ", x);
    case ReductionKind::Max: return cat(acc, " = cppi_max(", acc, ", ", x, ")");
    case ReductionKind::Min: return cat(acc, " = cppi_min(", acc, ", ", x, ")");
    case ReductionKind::Any: return cat(acc, " = ", acc, " || ", v);
    case ReductionKind::All: return cat(acc, " = ", acc, " && ", v);
    case ReductionKind::ArgMax: return cat(acc, " = cppi_argmax_combine(", acc, ", cppi_arg_make(", x, ", (int64_t)", pos, "))");
    case ReductionKind::ArgMin: return cat(acc, " = cppi_argmin_combine(", acc, ", cppi_arg_make(", x, ", (int64_t)", pos, "))");
    case ReductionKind::Welford: return cat(acc, " = cppi_welford_update(", acc, ", ", v, ")");
  }
  fail("unknown reduction kind");
}

std::string CudaKernelPrinter::combine_op(ReductionKind kind) const {
  switch (kind) {
    case ReductionKind::Sum: return "cppi_sum_op()";
    case ReductionKind::Prod: return "cppi_prod_op()";
    case ReductionKind::Max: return "cppi_max_op()";
    case ReductionKind::Min: return "cppi_min_op()";
    case ReductionKind::Any: return "cppi_any_op()";
    case ReductionKind::All: return "cppi_all_op()";
    case ReductionKind::ArgMax: return "cppi_argmax_op()";
    case ReductionKind::ArgMin: return "cppi_argmin_op()";
    case ReductionKind::Welford: return "cppi_welford_op()";
  }
  fail("unknown reduction kind");
}

void CudaKernelPrinter::declare_results(const ReductionStage& s, const std::string& acc) {
  std::vector<std::string> values;
  switch (s.kind) {
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: values = {acc + ".index"}; break;
    case ReductionKind::Welford: values = {acc + ".mean", acc + ".m2", acc + ".weight"}; break;
    default: values = {acc};
  }
  for (size_t i = 0; i < s.results.size(); ++i) {
    const DType rt = s.result_dtypes[i];
    const std::string name = local_name(s.results[i]);
    const std::string v = rt == DType::Bool ? "(" + values[i] + " != 0)" : "(" + scalar_type(rt) + ")" + values[i];
    out_.line(cat("const ", scalar_type(rt), " ", name, " = ", v, ";"));
    locals_[s.results[i]] = CValue{name, rt};
  }
}

}  // namespace

Expected<PrintedCudaModule> print_cuda_module(const std::vector<KernelPtr>& kernels,
                                              const std::vector<std::string>& graph_symbols,
                                              const CudaPrintOptions& options) {
  PrintedCudaModule module;
  const std::string preamble = std::string(
      "// Generated by cppinductor (gpu_codegen/codegen).\n#include \"cppinductor_cuda_prelude.cuh\"\n") +
      cuda_codegen_support_source();
  std::string source = preamble;
  std::set<std::string> names;
  try {
    for (const auto& k : kernels) {
      if (!k) return Error::internal("cuda codegen: null kernel");
      if (codegen::c_identifier(k->name) != k->name) {
        return Error::internal(cat("cuda codegen: kernel name ", k->name, " is not a C identifier"));
      }
      const bool vector = k->schedule.gpu.elements_per_thread > 1 && !is_row_mapping(k->schedule.gpu.mapping);
      const std::string twin = vector ? k->name + "_scalar" : "";
      if (!names.insert(k->name).second || (vector && !names.insert(twin).second)) {
        return Error::internal(cat("cuda codegen: two kernels named ", k->name));
      }
      PrintedCudaKernel info;
      CudaKernelPrinter printer(*k, k->schedule.gpu, k->name, graph_symbols, options);
      source += "\n" + printer.print(&info);
      if (vector) {
        GpuSchedule scalar = k->schedule.gpu;
        scalar.elements_per_thread = 1;
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
  return module;
}

}  // namespace cppi::gpu
