/// CPU kernel printer: the module (print_cpu_module) and each kernel's
/// prologue. The printer class and the shapes of the code it prints are in
/// cpu_kernel_printer.h.
#include "cpu_codegen/printer/cpu_printer.h"

#include <set>

#include "cpu_codegen/printer/codegen_support.h"
#include "cpu_codegen/printer/cpu_kernel_printer.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "cpu_codegen/schedule/schedule_candidates.h"
#include "lowering/ir/expr_visitor.h"

namespace cppi::cpu {

int PrintedModule::vectorized_kernel_count() const {
  int n = 0;
  for (const auto& k : kernels) n += k.vectorized ? 1 : 0;
  return n;
}

namespace detail {

// --- prologue --------------------------------------------------------------------------

std::string CpuKernelPrinter::print(PrintedKernel* info) {
  if (k_.device != Device::CPU) fail(cat("kernel ", k_.name, " is not a CPU kernel"));
  if (sched_.tail == TailKind::Overlapped && sched_.vectorized != VectorizedLoop::None) {
    // At least one whole vector before the overlapping one (CpuSchedule::tail).
    auto e = k_.outer.empty() ? std::nullopt : k_.outer.back().extent.constant();
    if (sched_.vectorized != VectorizedLoop::InnermostOuter || !e || *e < sched_.vector_width) {
      fail(cat("kernel ", k_.name, ": an overlapped tail needs a vectorised innermost outer loop of at least one vector"));
    }
  }
  if (sched_.tail == TailKind::Masked &&
      (sched_.vectorized == VectorizedLoop::None || sched_.transpose_tile || !sched_.vector_loop_splits.empty())) {
    fail(cat("kernel ", k_.name, ": a masked tail needs vectorised stage loops or a vectorised outer loop, untiled and "
             "in one piece"));
  }
  if (sched_.row_blocks && (sched_.vectorized != VectorizedLoop::InnermostOuter || sched_.transpose_tile ||
                            sched_.column_block > 0 || sched_.parallel_reduction || !sched_.vector_loop_splits.empty())) {
    fail(cat("kernel ", k_.name, ": row blocks need a vectorised outer loop, untiled, in one piece, not split across "
             "threads"));
  }
  if (sched_.vectorized != VectorizedLoop::None) {
    const int w = sched_.vector_width;
    if (w != 4 && w != 8 && w != 16) fail(cat("kernel ", k_.name, ": vector width ", w, " (4, 8 or 16)"));
  }
  codegen::print_kernel_header(out_, k_.name, k_, options_, describe_cpu_schedule(sched_));
  out_.open("extern \"C\" void " + k_.name + "(void* const* buffers, const int64_t* symbols)");
  print_arguments();
  print_invariants();
  const ScheduledLoops loops = schedule_loop_nest(loop_input(), options_.loop_ir_dumps);
  print_loops(loops.nest, kernel_scope_);
  out_.close();
  for (const auto& [pass, text] : loops.dumps) info->loop_ir += cat("// ", k_.name, " after ", pass, "\n", text);
  info->name = k_.name;
  info->vectorized = sched_.vectorized != VectorizedLoop::None;
  info->vector_width = info->vectorized ? sched_.vector_width : 1;
  info->parallel = sched_.parallel_loops > 0 || sched_.parallel_reduction;
  return out_.str();
}

std::unordered_map<std::string, std::string> CpuKernelPrinter::argument_pointers(const KernelSignature& sig) {
  std::unordered_map<std::string, std::string> names;
  for (const auto& a : sig.buffers) {
    names[a.buffer->name] = (a.written ? "out_" : "in_") + codegen::c_identifier(a.buffer->name);
  }
  for (const auto& b : sig.scratch) names[b->name] = "scratch_" + codegen::c_identifier(b->name);
  return names;
}

void CpuKernelPrinter::print_arguments() {
  for (const auto& l : k_.outer) reserved_.insert(var_name(l));
  for (const auto& st : k_.stages) {
    std::visit([&](const auto& s) { for (const auto& l : s.loops) reserved_.insert(var_name(l)); }, st);
  }
  for (size_t i = 0; i < sig_.buffers.size(); ++i) {
    const auto& a = sig_.buffers[i];
    const std::string type = std::string(dtype_ctype(a.buffer->dtype));
    const std::string& name = pointers_.at(a.buffer->name);
    reserved_.insert(name);
    if (a.written) {
      out_.line(cat(type, "* ", name, " = (", type, "*)buffers[", i, "];"));
    } else {
      out_.line(cat("const ", type, "* ", name, " = (const ", type, "*)buffers[", i, "];"));
    }
  }
  for (const auto& b : sig_.scratch) reserved_.insert(pointers_.at(b->name));
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

namespace {

/// Whether `e` may be computed once at the kernel's entry, and is worth it:
/// no loop variable or reduction result, no random draw, and a load or a
/// math call to save. Its loads read buffers the kernel does not write, of a
/// constant, nonzero number of elements, at plain indices: the entry runs
/// even when the loops do not, and must not touch an empty buffer or check
/// an indirect index eager would never have read.
bool hoistable(const Expr& e, const std::set<std::string>& written) {
  if (e.kind() == ExprKind::Constant || !ir::free_vars(e).empty()) return false;
  bool worth = false;
  for (const Expr& n : ir::post_order({e})) {
    switch (n.kind()) {
      case ExprKind::Random:
      case ExprKind::LocalRef: return false;
      case ExprKind::Load: {
        const Load* l = n.as<Load>();
        const auto numel = l->buffer->layout.numel().constant();
        if (written.count(l->buffer->name) || !numel || *numel < 1 || !ir::indirect_values(l->index).empty()) {
          return false;
        }
        worth = true;
        break;
      }
      case ExprKind::Unary: worth = worth || ir::is_math_function(n.as<Unary>()->op); break;
      case ExprKind::Binary: worth = worth || ir::is_math_function(n.as<Binary>()->op); break;
      default: break;
    }
  }
  return worth;
}

}  // namespace

void CpuKernelPrinter::print_invariants() {
  std::set<std::string> written;
  for (const auto& a : sig_.buffers)
    if (a.written) written.insert(a.buffer->name);
  for (const auto& b : sig_.scratch) written.insert(b->name);
  std::vector<Expr> values;
  for (const auto& stage : k_.stages)
    for (const Expr& v : ir::stage_values(stage)) values.push_back(v);
  const std::vector<Expr> found = ir::outermost_picks(values, [&](const Expr& e) { return hoistable(e, written); });
  if (found.empty()) return;
  out_.line("// loop-invariant values, computed once");
  for (const Expr& e : found) scalar_value(e, invariants_);
}

std::string CpuKernelPrinter::local_name(const std::string& result) const {
  std::string name = codegen::c_identifier(result);
  const bool tmp_like = name.rfind("tmp", 0) == 0;
  if (tmp_like || reserved_.count(name)) name = "red_" + name;
  return name;
}

}  // namespace detail

using detail::CpuKernelPrinter;

Expected<PrintedModule> print_cpu_module(const std::vector<ir::KernelPtr>& kernels,
                                         const std::vector<std::string>& graph_symbols, const PrintOptions& options) {
  PrintedModule module;
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
      module.kernel_sources.push_back(printer.print(&info));
      module.kernels.push_back(info);
    }
  } catch (const CompilerError& e) {
    return e.error();
  }
  std::vector<const std::string*> all;
  for (const std::string& s : module.kernel_sources) all.push_back(&s);
  module.source = cpu_module_source(all);
  return module;
}

std::string cpu_module_source(const std::vector<const std::string*>& kernel_sources) {
  std::string source =
      cat("// Generated by cppinductor (cpu_codegen/printer).\n#include \"", kCpuCodegenHeaderName, "\"\n");
  for (const std::string* k : kernel_sources) source += "\n" + *k;
  return source;
}

}  // namespace cppi::cpu
