/// CPU kernel printer. Shapes of the code it prints:
///
/// - Outer loops: the first `parallel_loops` are collapsed into one
///   cppi_parallel_for over their product (chunk bounds begin/end, the loop
///   variables recovered with / and %); the rest are plain for loops.
/// - Vectorised loop (vector_width W): a main loop stepping by W with vector
///   values (prelude vector types; unaligned cppi_vload/cppi_vstore for
///   stride-1 accesses; scalars that do not depend on the loop variable stay
///   scalar and are splat where a vector op needs them; other strides and
///   masked loads are lane-wise gathers), then a scalar tail loop running the
///   same body for the remaining extent % W iterations. Both carry
///   CPPI_NO_AUTOVEC: the compiler must not vectorise them again (that only
///   costs compile time).
///   * InnermostOuter: the innermost outer loop is vectorised; every stage
///     runs on W outer iterations at once, so a reduction over its own loops
///     keeps one accumulator per lane (column sums: no horizontal step).
///     With column_block/row_block (a column reduction), the vector loop runs
///     in blocks of column_block vectors: the accumulators of a block live in
///     an array, and the reduction's first loop, split into blocks of
///     row_block iterations, is interchanged with the vectors of the block;
///     the stages after the reduction then run per vector on its result.
///   * InnermostOfEachStage: each stage's innermost loop is vectorised; a
///     reduction keeps a vector accumulator plus a scalar one for the tail and
///     combines them after the loop (lanes in order, then the tail).
/// - parallel_reduction: the reduction stage's first loop is split with
///   cppi_parallel_reduce; each chunk returns its partial state and the
///   partials are combined in chunk order (deterministic for a thread count).
/// - cascade_block (float sums, Welford): the innermost reduction loop runs
///   in blocks; every cascade_block terms per accumulator lane the
///   accumulators merge into a `_total` state and restart.
/// - argmax/argmin keep {value, index} (first index on ties, NaN wins);
///   Welford keeps {mean, m2, weight} and merges with Chan's formula.
#include "cpu_codegen/printer/cpu_printer.h"

#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "cpu_codegen/printer/c_printer.h"
#include "cpu_codegen/printer/codegen_support.h"
#include "cpu_codegen/printer/op_tables.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/index_affine.h"

namespace cppi::cpu {

using namespace ir;
using codegen::CValue;
using codegen::ValueScope;

int PrintedModule::vectorized_kernel_count() const {
  int n = 0;
  for (const auto& k : kernels) n += k.vectorized ? 1 : 0;
  return n;
}

namespace {

[[noreturn]] void fail(const std::string& message) { throw CompilerError(Error::internal("cpu codegen: " + message)); }

/// A loop bound as C text, with its value when it is a constant.
struct Bound {
  std::string text;
  std::optional<int64_t> value;
};

class CpuKernelPrinter : public codegen::CPrinterBase {
 public:
  CpuKernelPrinter(const Kernel& k, const std::vector<std::string>& graph_symbols, const PrintOptions& options)
      : CPrinterBase(k.var_ranges()), k_(k), sched_(k.schedule.cpu), graph_symbols_(graph_symbols), options_(options) {}

  std::string print(PrintedKernel* info);

 protected:
  std::string pointer_name(const std::string& buffer) const override {
    auto it = pointers_.find(buffer);
    if (it == pointers_.end()) fail(cat("kernel ", k_.name, ": buffer ", buffer, " is not an argument"));
    return it->second;
  }
  CValue local_value(const LocalRef& ref) const override {
    auto it = locals_.find(ref.name);
    if (it == locals_.end()) fail(cat("kernel ", k_.name, ": local ", ref.name, " used before its stage"));
    return it->second;
  }

 private:
  // --- prologue ------------------------------------------------------------------
  void print_header();
  void print_arguments();
  std::string local_name(const std::string& result);

  // --- loops -------------------------------------------------------------------------
  void print_outer();
  void print_outer_loops(size_t level);
  /// Kernel-local scratch: allocated where it is private to one thread (per
  /// parallel chunk, else per call) and freed at the end of that block.
  void print_scratch_alloc();
  void print_scratch_free();
  void print_vector_loop(const std::string& var, const Bound& lo, const Bound& hi, const std::function<void()>& vector_body,
                         const std::function<void()>& tail_body);
  /// print_vector_loop with the main part printed by `main(from, to)`, which
  /// covers [from, to), a whole number of vectors.
  void print_split_loop(const std::string& var, const Bound& lo, const Bound& hi,
                        const std::function<void(const std::string&, const std::string&)>& main,
                        const std::function<void()>& tail_body);
  /// The vectorised innermost outer loop `l` over [lo, hi), all stages inside.
  void print_outer_vector_loop(const Loop& l, const Bound& lo, const Bound& hi);
  /// The column_block/row_block main loop over [from, to) (see the file comment).
  void print_tiled_columns(const std::string& var, const std::string& from, const std::string& to);
  Bound extent(const Loop& l) const {
    auto c = l.extent.constant();
    return Bound{index(l.extent), c};
  }
  static std::string var_name(const Loop& l) { return codegen::c_identifier(l.var.as<IndexVar>()->name); }

  // --- stages --------------------------------------------------------------------------
  void print_stages(bool vector_outer);
  void print_pointwise(const PointwiseStage& s, size_t index);
  void print_stores(const std::vector<Store>& stores, ValueScope& scope);
  void print_reduction(const ReductionStage& s, size_t index);
  /// Prints the accumulation over the stage's loops (the first loop over
  /// [lo0, hi0)) and returns the C name of the final scalar state (horizontal
  /// and scalar modes; horizontal mode declares it as `result_name` when
  /// given) or of the per-lane vector state (lane mode).
  /// In lane mode, the vector state starts from `lane_init` when given.
  std::string print_reduction_core(const ReductionStage& s, const Bound& lo0, const Bound& hi0,
                                   const std::string& result_name = "", const std::string& lane_init = "");

  // --- vector values -------------------------------------------------------------------
  bool in_vector() const { return !vvar_.empty(); }
  void enter_vector(const std::string& var) {
    vvar_ = var;
    varying_memo_.clear();
  }
  void leave_vector() {
    vvar_.clear();
    varying_memo_.clear();
  }
  bool varying(const Expr& e);
  /// `e` in the current mode: a vector if it varies with the vector loop
  /// variable, else a scalar.
  CValue value(const Expr& e, ValueScope& scope);
  CValue vector_node(const Expr& e, ValueScope& scope);
  /// Text of `v` as a vector of its dtype (splat if scalar).
  std::string as_vector(const CValue& v);
  /// Text of a bool `v` as a lane mask of `bytes`-wide lanes.
  std::string as_mask(const CValue& v, int bytes);
  std::string vector_cast(DType from, DType to, const CValue& x);
  std::string lane_lambda(const std::string& body_expr) const;

  // --- types ---------------------------------------------------------------------------
  std::string width() const { return std::to_string(sched_.vector_width); }
  /// Vector type of a value dtype (bool: not a value type, see mask_type).
  std::string vtype(DType t) const;
  std::string mask_type(int bytes) const { return "cppi_i" + std::to_string(bytes * 8) + "x" + width(); }
  /// Lane width in bytes of a dtype's vector (reduced floats: 2).
  static int lane_bytes(DType t) { return t == DType::Bool ? 4 : dtype_size(t); }
  /// Element expression of one lane read from memory (bits for reduced floats).
  std::string lane_element(const Load& n, ValueScope& scope);
  /// index(e, scope) for an access in the (possibly vectorised) body. The
  /// schedule never vectorises along a variable an indirect leaf depends on,
  /// so the leaves are scalars computed once per vector iteration.
  std::string access_index(const IndexExpr& e, ValueScope& scope);

  // --- reductions ------------------------------------------------------------------------
  std::string state_type(ReductionKind kind, DType t) const;
  std::string state_identity(ReductionKind kind, DType t) const;
  std::string scalar_update(ReductionKind kind, DType t, const std::string& acc, const std::string& v,
                            const std::string& pos) const;
  std::string state_combine(ReductionKind kind, DType t, const std::string& a, const std::string& b) const;
  std::vector<std::string> state_results(ReductionKind kind, const std::string& state) const;
  std::string vstate_type(ReductionKind kind, DType t) const;
  std::string vstate_identity(ReductionKind kind, DType t) const;
  std::string vector_update(ReductionKind kind, DType t, const std::string& acc, const CValue& v,
                            const std::string& pos);
  std::string horizontal(ReductionKind kind, DType t, const std::string& acc) const;
  /// Lane-wise merge of two vector states (the kinds that cascade).
  std::string vstate_combine(ReductionKind kind, DType t, const std::string& a, const std::string& b) const;
  std::string identity_value(ReductionKind kind, DType t) const;
  IndexExpr reduction_position(const ReductionStage& s) const;

  const Kernel& k_;
  const CpuSchedule& sched_;
  const std::vector<std::string>& graph_symbols_;
  const PrintOptions& options_;
  KernelSignature sig_;
  std::unordered_map<std::string, std::string> pointers_;
  std::unordered_map<std::string, CValue> locals_;
  std::set<std::string> reserved_;
  std::string vvar_;
  std::unordered_map<const ExprNode*, bool> varying_memo_;
  /// Inside print_tiled_columns: the accumulated lane state of stage 0.
  std::string tiled_state_;
};

// --- prologue --------------------------------------------------------------------------

std::string CpuKernelPrinter::print(PrintedKernel* info) {
  if (k_.device != Device::CPU) fail(cat("kernel ", k_.name, " is not a CPU kernel"));
  if (sched_.tail != TailKind::ScalarLoop && sched_.vectorized != VectorizedLoop::None) {
    fail(cat("kernel ", k_.name, ": tail kind ", to_string(sched_.tail), " is not implemented"));
  }
  if (sched_.vectorized != VectorizedLoop::None) {
    const int w = sched_.vector_width;
    if (w != 4 && w != 8 && w != 16) fail(cat("kernel ", k_.name, ": vector width ", w, " (4, 8 or 16)"));
  }
  sig_ = signature(k_);
  print_header();
  out_.open("extern \"C\" void " + k_.name + "(void* const* buffers, const int64_t* symbols)");
  print_arguments();
  print_outer();
  out_.close();
  info->name = k_.name;
  info->vectorized = sched_.vectorized != VectorizedLoop::None;
  info->vector_width = info->vectorized ? sched_.vector_width : 1;
  info->parallel = sched_.parallel_loops > 0 || sched_.parallel_reduction;
  return out_.str();
}

void CpuKernelPrinter::print_header() {
  out_.line("// kernel: " + k_.name);
  if (!k_.origins.empty()) {
    std::string line = "// origins:";
    for (const auto& o : k_.origins) line += " " + o;
    out_.line(line);
    for (const auto& o : k_.origins) {
      auto it = options_.origin_source.find(o);
      if (it != options_.origin_source.end()) out_.line("//   " + o + ": " + it->second);
    }
  }
  std::string s = cat("// schedule: parallel_loops=", sched_.parallel_loops, " grain=", sched_.grain_size,
                      " parallel_reduction=", sched_.parallel_reduction ? "yes" : "no",
                      " vectorized=", to_string(sched_.vectorized));
  if (sched_.vectorized != VectorizedLoop::None) s += cat(" width=", sched_.vector_width, " tail=", to_string(sched_.tail));
  if (sched_.column_block > 0) s += cat(" column_block=", sched_.column_block, " row_block=", sched_.row_block);
  if (sched_.cascade_block > 0) s += cat(" cascade_block=", sched_.cascade_block);
  out_.line(s);
}

void CpuKernelPrinter::print_arguments() {
  for (const auto& l : k_.outer) reserved_.insert(var_name(l));
  for (const auto& st : k_.stages) {
    std::visit([&](const auto& s) { for (const auto& l : s.loops) reserved_.insert(var_name(l)); }, st);
  }
  for (size_t i = 0; i < sig_.buffers.size(); ++i) {
    const auto& a = sig_.buffers[i];
    const std::string type = std::string(dtype_ctype(a.buffer->dtype));
    const std::string name = (a.written ? "out_" : "in_") + codegen::c_identifier(a.buffer->name);
    pointers_[a.buffer->name] = name;
    reserved_.insert(name);
    if (a.written) {
      out_.line(cat(type, "* ", name, " = (", type, "*)buffers[", i, "];"));
    } else {
      out_.line(cat("const ", type, "* ", name, " = (const ", type, "*)buffers[", i, "];"));
    }
  }
  for (const auto& b : sig_.scratch) {
    const std::string name = "scratch_" + codegen::c_identifier(b->name);
    pointers_[b->name] = name;
    reserved_.insert(name);
  }
  for (const auto& s : sig_.symbols) {
    size_t pos = 0;
    while (pos < graph_symbols_.size() && graph_symbols_[pos] != s) ++pos;
    if (pos == graph_symbols_.size()) {
      throw CompilerError(Error::invalid_input(cat("cpu codegen: kernel ", k_.name, " uses size symbol ", s,
                                                   " that the graph does not list")));
    }
    if (codegen::c_identifier(s) != s) fail(cat("size symbol ", s, " is not a C identifier"));
    reserved_.insert(s);
    out_.line(cat("const int64_t ", s, " = symbols[", pos, "];"));
  }
  if (sig_.symbols.empty()) out_.line("(void)symbols;");
  if (sig_.buffers.empty()) out_.line("(void)buffers;");
}

std::string CpuKernelPrinter::local_name(const std::string& result) {
  std::string name = codegen::c_identifier(result);
  const bool tmp_like = name.rfind("tmp", 0) == 0;
  if (tmp_like || reserved_.count(name)) name = "red_" + name;
  return name;
}

// --- loops -------------------------------------------------------------------------------

void CpuKernelPrinter::print_outer() {
  const size_t n = k_.outer.size();
  const size_t p = static_cast<size_t>(sched_.parallel_loops);
  const bool vec_outer = sched_.vectorized == VectorizedLoop::InnermostOuter;
  if (p > n) fail(cat("kernel ", k_.name, ": ", p, " parallel loops but ", n, " outer loops"));
  if (vec_outer && n == 0) fail(cat("kernel ", k_.name, ": innermost outer loop vectorised but there are no outer loops"));
  if (sched_.parallel_reduction && p > 0) fail(cat("kernel ", k_.name, ": parallel_reduction with parallel outer loops"));
  const std::string grain = std::to_string(std::max<int64_t>(1, sched_.grain_size));
  if (!sig_.scratch.empty() && sched_.parallel_reduction) {
    fail(cat("kernel ", k_.name, ": kernel-local scratch with parallel_reduction"));
  }
  if (p == 0) {
    print_scratch_alloc();
    print_outer_loops(0);
    print_scratch_free();
    return;
  }
  if (vec_outer && p == n) {
    if (n != 1) fail(cat("kernel ", k_.name, ": a vectorised outer loop may be parallel only when it is the only one"));
    // Parallel over blocks of W iterations, so chunks start on a vector boundary.
    const Loop& l = k_.outer[0];
    const Bound e = extent(l);
    const int64_t w = sched_.vector_width;
    const std::string blocks = e.value ? std::to_string((*e.value + w - 1) / w) : cat("cppi_div_up(", e.text, ", ", w, ")");
    out_.open(cat("cppi_parallel_for(0, ", blocks, ", ", grain, ", [&](int64_t begin, int64_t end)"));
    print_scratch_alloc();
    print_outer_vector_loop(l, Bound{cat("begin * ", w), std::nullopt},
                            Bound{cat("cppi_min_i<int64_t>(end * ", w, ", ", e.text, ")"), std::nullopt});
    print_scratch_free();
    out_.close("});");
    return;
  }
  std::vector<IndexExpr> extents;
  for (size_t i = 0; i < p; ++i) extents.push_back(k_.outer[i].extent);
  out_.open(cat("cppi_parallel_for(0, ", index(product(extents)), ", ", grain, ", [&](int64_t begin, int64_t end)"));
  print_scratch_alloc();
  if (p == 1) {
    out_.open(cat("for (int64_t ", var_name(k_.outer[0]), " = begin; ", var_name(k_.outer[0]), " < end; ++",
                  var_name(k_.outer[0]), ")"));
  } else {
    out_.open("for (int64_t i = begin; i < end; ++i)");
    for (size_t i = 0; i < p; ++i) {
      IndexExpr inner = product(std::vector<IndexExpr>(extents.begin() + static_cast<long>(i) + 1, extents.end()));
      auto atom = [&](const IndexExpr& x) {
        const bool simple = x.as<IndexConst>() || x.as<IndexSymbol>() || x.as<IndexVar>();
        return simple ? index(x) : "(" + index(x) + ")";
      };
      std::string v = inner.is_constant(1) ? "i" : cat("i / ", atom(inner));
      if (i > 0) v = cat(inner.is_constant(1) ? v : "(" + v + ")", " % ", atom(extents[i]));
      out_.line(cat("const int64_t ", var_name(k_.outer[i]), " = ", v, ";"));
    }
  }
  print_outer_loops(p);
  out_.close();
  print_scratch_free();
  out_.close("});");
}

void CpuKernelPrinter::print_scratch_alloc() {
  for (const auto& b : sig_.scratch) {
    const std::string type(dtype_ctype(b->dtype));
    out_.line(cat(type, "* ", pointer_name(b->name), " = (", type, "*)malloc(sizeof(", type, ") * (",
                  index(b->layout.storage_size()), "));  // kernel-local ", b->name));
  }
}

void CpuKernelPrinter::print_scratch_free() {
  for (const auto& b : sig_.scratch) out_.line(cat("free(", pointer_name(b->name), ");"));
}

void CpuKernelPrinter::print_outer_loops(size_t level) {
  const size_t n = k_.outer.size();
  if (level == n) {
    print_stages(false);
    return;
  }
  const Loop& l = k_.outer[level];
  if (level == n - 1 && sched_.vectorized == VectorizedLoop::InnermostOuter) {
    print_outer_vector_loop(l, Bound{"0", 0}, extent(l));
    return;
  }
  const std::string v = var_name(l);
  out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(l).text, "; ++", v, ")"));
  print_outer_loops(level + 1);
  out_.close();
}

void CpuKernelPrinter::print_vector_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                         const std::function<void()>& vector_body,
                                         const std::function<void()>& tail_body) {
  const int64_t w = sched_.vector_width;
  print_split_loop(
      v, lo, hi,
      [&](const std::string& from, const std::string& to) {
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", v, " = ", from, "; ", v, " < ", to, "; ", v, " += ", w, ")"));
        vector_body();
        out_.close();
      },
      tail_body);
}

void CpuKernelPrinter::print_split_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                        const std::function<void(const std::string&, const std::string&)>& main,
                                        const std::function<void()>& tail_body) {
  const int64_t w = sched_.vector_width;
  if (lo.value && hi.value) {
    const int64_t vend = *lo.value + (*hi.value - *lo.value) / w * w;
    if (vend > *lo.value) main(std::to_string(*lo.value), std::to_string(vend));
    if (vend < *hi.value) {
      out_.line("CPPI_NO_AUTOVEC");
      out_.open(cat("for (int64_t ", v, " = ", vend, "; ", v, " < ", *hi.value, "; ++", v, ")"));
      tail_body();
      out_.close();
    }
    return;
  }
  out_.open("");
  const std::string lo_name = v + "_lo", vend = v + "_vec_end", hi_name = v + "_end";
  out_.line(cat("const int64_t ", lo_name, " = ", lo.text, ";"));
  out_.line(cat("const int64_t ", hi_name, " = ", hi.text, ";"));
  out_.line(cat("const int64_t ", vend, " = ", lo_name, " + (", hi_name, " - ", lo_name, ") / ", w, " * ", w, ";"));
  main(lo_name, vend);
  out_.line("CPPI_NO_AUTOVEC");
  out_.open(cat("for (int64_t ", v, " = ", vend, "; ", v, " < ", hi_name, "; ++", v, ")"));
  tail_body();
  out_.close();
  out_.close();
}

void CpuKernelPrinter::print_outer_vector_loop(const Loop& l, const Bound& lo, const Bound& hi) {
  const std::string v = var_name(l);
  auto tail = [&] { print_stages(false); };
  if (sched_.column_block <= 0) {
    print_vector_loop(v, lo, hi, [&] { print_stages(true); }, tail);
    return;
  }
  print_split_loop(v, lo, hi, [&](const std::string& from, const std::string& to) { print_tiled_columns(v, from, to); },
                   tail);
}

void CpuKernelPrinter::print_tiled_columns(const std::string& v, const std::string& from, const std::string& to) {
  const auto* s = k_.stages.empty() ? nullptr : std::get_if<ReductionStage>(&k_.stages[0]);
  if (!s || s->loops.empty() || sched_.row_block <= 0) {
    fail(cat("kernel ", k_.name, ": column_block needs a first stage that reduces over loops, and a row_block"));
  }
  for (size_t i = 1; i < k_.stages.size(); ++i) {
    std::visit(
        [&](const auto& st) {
          if (!st.loops.empty()) fail(cat("kernel ", k_.name, ": column_block with loops in stage ", i));
        },
        k_.stages[i]);
  }
  const int64_t w = sched_.vector_width;
  const int64_t span = int64_t{sched_.column_block} * w;
  const DType t = s->body.dtype();
  const std::string blk = v + "_blk", blk_end = v + "_blk_end";
  const std::string tile = local_name(s->results[0]) + "_tile";
  const std::string slot = cat(tile, "[(", v, " - ", blk, ") / ", w, "]");
  const Loop& first = s->loops[0];
  const std::string r = var_name(first), rblk = r + "_blk", rblk_end = r + "_blk_end";
  const Bound rows = extent(first);
  auto open_vector_loop = [&] {
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", v, " = ", blk, "; ", v, " < ", blk_end, "; ", v, " += ", w, ")"));
  };

  out_.open(cat("for (int64_t ", blk, " = ", from, "; ", blk, " < ", to, "; ", blk, " += ", span, ")"));
  out_.line(cat("const int64_t ", blk_end, " = cppi_min_i<int64_t>(", blk, " + ", span, ", ", to, ");"));
  out_.line(cat("// stage 0, tiled: ", sched_.column_block, " vectors x ", sched_.row_block, " ", r, " at a time"));
  // Cascade (CpuSchedule::cascade_block): the tile restarts every block of
  // terms per lane, merged into a second tile of totals.
  const bool cascade = sched_.cascade_block > 0 && accumulates_in_cascade(s->kind, t);
  const std::string total_tile = tile + "_total", total_slot = cat(total_tile, "[(", v, " - ", blk, ") / ", w, "]");
  const std::string terms = tile + "_terms";
  out_.line(cat(vstate_type(s->kind, t), " ", tile, "[", sched_.column_block, "];"));
  if (cascade) out_.line(cat(vstate_type(s->kind, t), " ", total_tile, "[", sched_.column_block, "];"));
  open_vector_loop();
  out_.line(cat(slot, " = ", vstate_identity(s->kind, t), ";"));
  if (cascade) out_.line(cat(total_slot, " = ", vstate_identity(s->kind, t), ";"));
  out_.close();
  if (cascade) out_.line(cat("int64_t ", terms, " = 0;"));
  out_.open(cat("for (int64_t ", rblk, " = 0; ", rblk, " < ", rows.text, "; ", rblk, " += ", sched_.row_block, ")"));
  out_.line(cat("const int64_t ", rblk_end, " = cppi_min_i<int64_t>(", rblk, " + ", sched_.row_block, ", ", rows.text, ");"));
  open_vector_loop();
  locals_.clear();
  enter_vector(v);
  const std::string acc = print_reduction_core(*s, Bound{rblk, std::nullopt}, Bound{rblk_end, std::nullopt}, "", slot);
  leave_vector();
  out_.line(cat(slot, " = ", acc, ";"));
  out_.close();
  if (cascade) {
    std::string per_row;
    for (size_t i = 1; i < s->loops.size(); ++i) per_row += cat(" * (", extent(s->loops[i]).text, ")");
    out_.line(cat(terms, " += (", rblk_end, " - ", rblk, ")", per_row, ";"));
    out_.open(cat("if (", terms, " >= ", sched_.cascade_block, ")"));
    open_vector_loop();
    out_.line(cat(total_slot, " = ", vstate_combine(s->kind, t, total_slot, slot), ";"));
    out_.line(cat(slot, " = ", vstate_identity(s->kind, t), ";"));
    out_.close();
    out_.line(cat(terms, " = 0;"));
    out_.close();
  }
  out_.close();
  open_vector_loop();
  if (cascade) out_.line(cat(slot, " = ", vstate_combine(s->kind, t, total_slot, slot), ";"));
  tiled_state_ = slot;
  print_stages(true);
  tiled_state_.clear();
  out_.close();
  out_.close();
}

// --- stages ----------------------------------------------------------------------------------

void CpuKernelPrinter::print_stages(bool vector_outer) {
  locals_.clear();
  if (vector_outer) enter_vector(var_name(k_.outer.back()));
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (auto r = std::get_if<ReductionStage>(&k_.stages[i])) {
      print_reduction(*r, i);
    } else {
      print_pointwise(std::get<PointwiseStage>(k_.stages[i]), i);
    }
  }
  if (vector_outer) leave_vector();
}

void CpuKernelPrinter::print_pointwise(const PointwiseStage& s, size_t index) {
  std::string comment = cat("// stage ", index, ": store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  if (!s.loops.empty()) {
    comment += " over";
    for (const auto& l : s.loops) comment += " " + var_name(l);
  }
  out_.line(comment);
  const bool vector_stage = sched_.vectorized == VectorizedLoop::InnermostOfEachStage && !s.loops.empty();
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == s.loops.size()) {
      ValueScope scope;
      print_stores(s.stores, scope);
      return;
    }
    const Loop& l = s.loops[level];
    const std::string v = var_name(l);
    if (level + 1 == s.loops.size() && vector_stage) {
      print_vector_loop(
          v, Bound{"0", 0}, extent(l),
          [&] {
            enter_vector(v);
            ValueScope scope;
            print_stores(s.stores, scope);
            leave_vector();
          },
          [&] {
            ValueScope scope;
            print_stores(s.stores, scope);
          });
      return;
    }
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(l).text, "; ++", v, ")"));
    loops(level + 1);
    out_.close();
  };
  if (s.loops.empty()) {
    ValueScope scope;
    print_stores(s.stores, scope);
  } else {
    loops(0);
  }
}

void CpuKernelPrinter::print_stores(const std::vector<Store>& stores, ValueScope& scope) {
  for (const auto& st : stores) {
    const CValue v = value(st.value, scope);
    const std::string ptr = pointer_name(st.buffer->name);
    const std::string idx = access_index(st.index, scope);
    if (!in_vector()) {
      out_.line(cat(ptr, "[", idx, "] = ", v.text, ";"));
    } else {
      auto stride = coefficient(st.index, var(vvar_));
      if (!stride || !stride->is_constant(1)) {
        fail(cat("kernel ", k_.name, ": vectorised store to ", st.buffer->name, "[", st.index,
                 "] is not contiguous in ", vvar_));
      }
      std::string data;
      if (st.buffer->dtype == DType::Bool) {
        const std::string m = as_mask(v, 1);
        data = cat("cppi_vconvert<cppi_u8x", width(), ">(", m, " & cppi_vsplat<", mask_type(1), ">(1))");
      } else {
        data = as_vector(v);
      }
      out_.line(cat("cppi_vstore(&", ptr, "[", idx, "], ", data, ");"));
    }
    scope.forget_loads_of(st.buffer->name);
  }
}

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
    const std::string state =
        index == 0 && !tiled_state_.empty()
            ? tiled_state_
            : print_reduction_core(s, Bound{"0", 0}, s.loops.empty() ? Bound{"1", 1} : extent(s.loops[0]));
    auto results = state_results(s.kind, state);
    for (size_t i = 0; i < names.size(); ++i) {
      CValue v;
      v.dtype = s.result_dtypes[i];
      v.vector = true;
      const std::string type = v.dtype == DType::Bool ? mask_type(4) : vtype(v.dtype);
      if (v.dtype == DType::Bool) v.mask_bytes = 4;
      out_.line(cat("const ", type, " ", names[i], " = ", results[i], ";"));
      v.text = names[i];
      locals_[s.results[i]] = v;
    }
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
  // Cascade (CpuSchedule::cascade_block): the accumulators restart every
  // `block` terms of the innermost loop, their block result merged into a
  // total; a vector lane sees one term per vector iteration. Tiled columns
  // (lane_init) cascade per row block instead (print_tiled_columns).
  const bool cascade =
      sched_.cascade_block > 0 && accumulates_in_cascade(s.kind, t) && !s.loops.empty() && lane_init.empty();
  const int64_t block = sched_.cascade_block * (horizontal_mode ? sched_.vector_width : 1);
  const std::string total = base + "_total", terms = base + "_terms";
  if (cascade) {
    out_.line(lanes ? cat(vstate_type(s.kind, t), " ", total, " = ", vstate_identity(s.kind, t), ";")
                    : cat(state_type(s.kind, t), " ", total, " = ", state_identity(s.kind, t), ";"));
    out_.line(cat("int64_t ", terms, " = 0;"));
  }
  // The block so far, as one state.
  auto block_state = [&] { return horizontal_mode ? state_combine(s.kind, t, horizontal(s.kind, t, vacc), acc) : lanes ? vacc : acc; };
  auto flush = [&] {
    out_.line(cat(total, " = ", lanes ? vstate_combine(s.kind, t, total, block_state())
                                      : state_combine(s.kind, t, total, block_state()), ";"));
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
    auto innermost = [&](const Bound& from, const Bound& to) {
      if (horizontal_mode) {
        print_vector_loop(
            v, from, to,
            [&] {
              enter_vector(v);
              ValueScope scope;
              const CValue val = value(s.body, scope);
              out_.line(vector_update(s.kind, t, vacc, val, cat("cppi_viota<cppi_i64x", width(), ">(", index(pos), ")")) +
                        ";");
              leave_vector();
            },
            scalar_step);
        return;
      }
      out_.open(cat("for (int64_t ", v, " = ", from.text, "; ", v, " < ", to.text, "; ++", v, ")"));
      loops(level + 1);
      out_.close();
    };
    if (level + 1 < s.loops.size()) {
      out_.open(cat("for (int64_t ", v, " = ", lo.text, "; ", v, " < ", hi.text, "; ++", v, ")"));
      loops(level + 1);
      out_.close();
      return;
    }
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

// --- vector values -------------------------------------------------------------------------

std::string CpuKernelPrinter::vtype(DType t) const {
  const int w = sched_.vector_width;
  if (dtype_size(t) == 8 && w > 8) fail(cat("kernel ", k_.name, ": no ", w, "-lane vector of ", dtype_name(t)));
  switch (t) {
    case DType::Float32: return "cppi_f32x" + width();
    case DType::Float64: return "cppi_f64x" + width();
    case DType::Int64: return "cppi_i64x" + width();
    case DType::Int32: return "cppi_i32x" + width();
    case DType::Int16: return "cppi_i16x" + width();
    case DType::Int8: return "cppi_i8x" + width();
    case DType::UInt8: return "cppi_u8x" + width();
    case DType::Float16:
    case DType::BFloat16: return "cppi_u16x" + width();
    case DType::Bool: return mask_type(4);
  }
  fail("unknown dtype");
}

bool CpuKernelPrinter::varying(const Expr& e) {
  auto it = varying_memo_.find(e.get());
  if (it != varying_memo_.end()) return it->second;
  bool r = false;
  switch (e.kind()) {
    case ExprKind::Constant: break;
    case ExprKind::LocalRef: r = local_value(*e.as<LocalRef>()).vector; break;
    case ExprKind::Load: {
      auto n = e.as<Load>();
      r = depends_on(n->index, vvar_) || (n->mask.defined() && varying(n->mask));
      break;
    }
    case ExprKind::IndexValue: r = depends_on(e.as<IndexValue>()->index, vvar_); break;
    case ExprKind::Cast: r = varying(e.as<Cast>()->value); break;
    case ExprKind::Unary: r = varying(e.as<Unary>()->operand); break;
    case ExprKind::Binary: r = varying(e.as<Binary>()->lhs) || varying(e.as<Binary>()->rhs); break;
    case ExprKind::Compare: r = varying(e.as<Compare>()->lhs) || varying(e.as<Compare>()->rhs); break;
    case ExprKind::Where: {
      auto n = e.as<Where>();
      r = varying(n->cond) || varying(n->then_value) || varying(n->else_value);
      break;
    }
    case ExprKind::Random: r = depends_on(e.as<Random>()->offset, vvar_) || varying(e.as<Random>()->seed); break;
  }
  varying_memo_[e.get()] = r;
  return r;
}

CValue CpuKernelPrinter::value(const Expr& e, ValueScope& scope) {
  if (!in_vector() || !varying(e)) return scalar_value(e, scope);
  if (auto l = e.as<LocalRef>()) return local_value(*l);
  if (const CValue* v = scope.find(e)) return *v;
  CValue v = vector_node(e, scope);
  const std::string type = v.dtype == DType::Bool ? mask_type(v.mask_bytes) : vtype(v.dtype);
  v.text = declare(type, v.text);
  scope.add(e, v);
  return v;
}

std::string CpuKernelPrinter::as_vector(const CValue& v) {
  if (v.dtype == DType::Bool) return as_mask(v, 4);
  if (v.vector) return v.text;
  if (is_reduced_float(v.dtype)) return cat("cppi_vsplat<", vtype(v.dtype), ">(", v.text, ".bits)");
  return cat("cppi_vsplat<", vtype(v.dtype), ">(", v.text, ")");
}

std::string CpuKernelPrinter::as_mask(const CValue& v, int bytes) {
  if (v.dtype != DType::Bool) fail("a non-bool value used as a mask");
  if (!v.vector) return cat("cppi_vsplat<", mask_type(bytes), ">(", v.text, " ? -1 : 0)");
  if (v.mask_bytes == bytes) return v.text;
  return cat("cppi_vconvert<", mask_type(bytes), ">(", v.text, ")");
}

std::string CpuKernelPrinter::vector_cast(DType from, DType to, const CValue& x) {
  if (from == to) return as_vector(x);
  if (is_reduced_float(from)) {
    CValue f{cat(from == DType::Float16 ? "cppi_half_to_float(" : "cppi_bf16_to_float(", as_vector(x), ")"),
             DType::Float32, true};
    return to == DType::Float32 ? f.text : vector_cast(DType::Float32, to, f);
  }
  if (is_reduced_float(to)) {
    CValue f{from == DType::Float32 ? as_vector(x) : vector_cast(from, DType::Float32, x), DType::Float32, true};
    return cat(to == DType::Float16 ? "cppi_float_to_half(" : "cppi_float_to_bf16(", f.text, ")");
  }
  if (from == DType::Bool) {
    const int b = dtype_size(to);
    return cat("cppi_vconvert<", vtype(to), ">(", as_mask(x, b), " & cppi_vsplat<", mask_type(b), ">(1))");
  }
  if (to == DType::Bool) return cat("(", as_vector(x), " != cppi_vsplat<", vtype(from), ">(0))");
  return cat("cppi_vconvert<", vtype(to), ">(", as_vector(x), ")");
}

std::string CpuKernelPrinter::lane_lambda(const std::string& body_expr) const {
  return cat("[&](int64_t ", vvar_, ") { return ", body_expr, "; }");
}

std::string CpuKernelPrinter::access_index(const IndexExpr& e, ValueScope& scope) {
  if (in_vector()) {
    for (const auto& leaf : indirect_terms(e)) {
      if (depends_on(leaf, vvar_)) fail(cat("kernel ", k_.name, ": indirect index ", leaf, " varies along the vectorised ", vvar_));
    }
  }
  return index(e, scope);
}

std::string CpuKernelPrinter::lane_element(const Load& n, ValueScope& scope) {
  const std::string access = pointer_name(n.buffer->name) + "[" + access_index(n.index, scope) + "]";
  if (is_reduced_float(n.dtype)) return access + ".bits";
  if (n.dtype == DType::Bool) return "(uint8_t)" + access;
  return access;
}

CValue CpuKernelPrinter::vector_node(const Expr& e, ValueScope& scope) {
  CValue r;
  r.dtype = e.dtype();
  r.vector = true;
  if (r.dtype == DType::Bool) r.mask_bytes = 4;
  const std::string w = width();
  switch (e.kind()) {
    case ExprKind::Constant:
    case ExprKind::LocalRef: break;  // never varying / handled by value()
    case ExprKind::Load: {
      auto n = e.as<Load>();
      const std::string mem_type = n->dtype == DType::Bool ? "cppi_u8x" + w : vtype(n->dtype);
      std::string loaded;
      if (n->mask.defined()) {
        const CValue m = value(n->mask, scope);
        const std::string mask = m.vector ? m.text : as_mask(m, 4);
        loaded = cat("cppi_vgen_masked<", mem_type, ">(", mask, ", ", vvar_, ", ", lane_lambda(lane_element(*n, scope)), ")");
      } else {
        auto stride = coefficient(n->index, var(vvar_));
        if (stride && stride->is_constant(1)) {
          loaded = cat("cppi_vload<", mem_type, ">(&", pointer_name(n->buffer->name), "[", access_index(n->index, scope), "])");
        } else {
          loaded = cat("cppi_vgen<", mem_type, ">(", vvar_, ", ", lane_lambda(lane_element(*n, scope)), ")");
        }
      }
      if (n->dtype == DType::Bool) {
        r.mask_bytes = 1;
        r.text = cat("(", loaded, " != cppi_vsplat<", mem_type, ">(0))");
      } else {
        r.text = loaded;
      }
      return r;
    }
    case ExprKind::IndexValue: {
      const IndexExpr& idx = e.as<IndexValue>()->index;
      auto stride = coefficient(idx, var(vvar_));
      if (stride && stride->is_constant(1)) {
        r.text = cat("cppi_viota<cppi_i64x", w, ">(", access_index(idx, scope), ")");
      } else {
        r.text = cat("cppi_vgen<cppi_i64x", w, ">(", vvar_, ", ", lane_lambda("(int64_t)(" + access_index(idx, scope) + ")"), ")");
      }
      return r;
    }
    case ExprKind::Cast: {
      auto n = e.as<Cast>();
      const CValue x = value(n->value, scope);
      r.text = vector_cast(n->value.dtype(), n->dtype, x);
      if (r.dtype == DType::Bool) r.mask_bytes = lane_bytes(n->value.dtype());
      return r;
    }
    case ExprKind::Unary: {
      auto n = e.as<Unary>();
      const DType t = n->operand.dtype();
      const CValue x = value(n->operand, scope);
      const auto cls = codegen::operand_class(t);
      const char* tmpl = codegen::vector_unary_template(n->op, cls);
      if (t == DType::Bool) {
        if (!tmpl) fail(cat("no vector form of ", to_string(n->op), " on bool"));
        r.mask_bytes = x.mask_bytes;
        r.text = codegen::expand_template(tmpl, {x.text}, "bool");
        return r;
      }
      const std::string operand = as_vector(x);
      if (tmpl) {
        r.text = codegen::expand_template(tmpl, {operand}, scalar_type(t), vtype(t), mask_type(dtype_size(t)));
      } else {
        const std::string lane = scalar_unary(n->op, t, "a");
        if (r.dtype == DType::Bool) {
          r.text = cat("(cppi_vmap1(", operand, ", [](", scalar_type(t), " a) { return (", scalar_type(t), ")", lane,
                       "; }) != cppi_vsplat<", vtype(t), ">(0))");
        } else {
          r.text = cat("cppi_vmap1(", operand, ", [](", scalar_type(t), " a) { return ", lane, "; })");
        }
      }
      if (r.dtype == DType::Bool) r.mask_bytes = dtype_size(t);
      return r;
    }
    case ExprKind::Binary: {
      auto n = e.as<Binary>();
      const DType t = n->lhs.dtype();
      const CValue a = value(n->lhs, scope), b = value(n->rhs, scope);
      const char* tmpl = codegen::vector_binary_template(n->op, codegen::operand_class(t));
      if (t == DType::Bool) {
        if (!tmpl) fail(cat("no vector form of ", to_string(n->op), " on bool"));
        const int bytes = a.vector ? a.mask_bytes : b.mask_bytes;
        r.mask_bytes = bytes;
        r.text = codegen::expand_template(tmpl, {as_mask(a, bytes), as_mask(b, bytes)}, "bool");
        return r;
      }
      const std::string x = as_vector(a), y = as_vector(b);
      if (tmpl) {
        r.text = codegen::expand_template(tmpl, {x, y}, scalar_type(t), vtype(t), mask_type(dtype_size(t)));
      } else {
        const std::string st = scalar_type(t);
        r.text = cat("cppi_vmap2(", x, ", ", y, ", [](", st, " a, ", st, " b) { return ", scalar_binary(n->op, t, "a", "b"),
                     "; })");
      }
      return r;
    }
    case ExprKind::Compare: {
      auto n = e.as<Compare>();
      const DType t = n->lhs.dtype();
      const CValue a = value(n->lhs, scope), b = value(n->rhs, scope);
      if (t == DType::Bool) {
        const int bytes = a.vector ? a.mask_bytes : b.mask_bytes;
        const std::string one = cat("cppi_vsplat<", mask_type(bytes), ">(1)");
        r.mask_bytes = bytes;
        r.text = cat("((", as_mask(a, bytes), " & ", one, ") ", c_operator(n->op), " (", as_mask(b, bytes), " & ", one, "))");
        return r;
      }
      r.mask_bytes = dtype_size(t);
      r.text = cat("(", as_vector(a), " ", c_operator(n->op), " ", as_vector(b), ")");
      return r;
    }
    case ExprKind::Where: {
      auto n = e.as<Where>();
      const CValue c = value(n->cond, scope), a = value(n->then_value, scope), b = value(n->else_value, scope);
      if (r.dtype == DType::Bool) {
        const int bytes = c.vector ? c.mask_bytes : 4;
        r.mask_bytes = bytes;
        r.text = cat("cppi_vselect(", as_mask(c, bytes), ", ", as_mask(a, bytes), ", ", as_mask(b, bytes), ")");
        return r;
      }
      r.text = cat("cppi_vselect(", as_mask(c, lane_bytes(r.dtype)), ", ", as_vector(a), ", ", as_vector(b), ")");
      return r;
    }
    case ExprKind::Random: {
      auto n = e.as<Random>();
      if (varying(n->seed)) fail("a random seed that varies across vector lanes");
      const std::string seed = value(n->seed, scope).text;
      const bool uniform = n->random_kind == RandomKind::Uniform;
      if (auto step = philox_lane_step(n->offset, vvar_)) {
        // Lane 0's counter is the offset at the vector's first iteration.
        r.text = cat(uniform ? "cppi_vrand<" : "cppi_vrandn<", vtype(DType::Float32), ">(", seed, ", ",
                     access_index(n->offset, scope), ", ", *step, "u)");
      } else {
        r.text = cat("cppi_vgen<", vtype(DType::Float32), ">(", vvar_, ", ",
                     lane_lambda(cat(uniform ? "cppi_rand(" : "cppi_randn(", seed, ", ", access_index(n->offset, scope), ")")),
                     ")");
      }
      return r;
    }
  }
  fail(cat("cannot print ", to_string(e.kind()), " as a vector"));
}

}  // namespace

Expected<PrintedModule> print_cpu_module(const std::vector<KernelPtr>& kernels,
                                         const std::vector<std::string>& graph_symbols, const PrintOptions& options) {
  PrintedModule module;
  std::string source = "// Generated by cppinductor (cpu_codegen/printer).\n#include \"cppinductor_prelude.h\"\n";
  source += codegen_support_source();
  std::set<std::string> names;
  try {
    for (const auto& k : kernels) {
      if (!k) return Error::internal("cpu codegen: null kernel");
      if (codegen::c_identifier(k->name) != k->name) {
        return Error::internal(cat("cpu codegen: kernel name ", k->name, " is not a C identifier"));
      }
      if (!names.insert(k->name).second) return Error::internal(cat("cpu codegen: two kernels named ", k->name));
      PrintedKernel info;
      CpuKernelPrinter printer(*k, graph_symbols, options);
      source += "\n" + printer.print(&info);
      module.kernels.push_back(info);
    }
  } catch (const CompilerError& e) {
    return e.error();
  }
  module.source = std::move(source);
  return module;
}

}  // namespace cppi::cpu
