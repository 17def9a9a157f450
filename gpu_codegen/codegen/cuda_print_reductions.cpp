// The CUDA printer's reduction states, updates and combines, shared by every
// mapping that reduces (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"

namespace cppi::gpu::cuda_print {

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
    case DType::BFloat16:
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: break;
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
    case ReductionKind::Max: return cat(acc, " = cppi_fold_max(", acc, ", ", x, ")");
    case ReductionKind::Min: return cat(acc, " = cppi_fold_min(", acc, ", ", x, ")");
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

}  // namespace cppi::gpu::cuda_print
