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
  switch (state_of(kind)) {
    case ReductionState::Value: return shuffle_type(t);
    case ReductionState::Arg: return "cppi_arg<" + shuffle_type(t) + ">";
    case ReductionState::Welford: return "cppi_welford<" + shuffle_type(t) + ">";
  }
  fail("unknown reduction state");
}

std::string CudaKernelPrinter::state_identity(ReductionKind kind, DType t) const {
  const std::string st = shuffle_type(t);
  const Expr identity = fold_identity(kind, t);
  const std::string value = "(" + st + ")" + literal(*identity.as<Constant>());
  switch (state_of(kind)) {
    case ReductionState::Value: return value;
    case ReductionState::Arg: return cat("cppi_arg_make(", value, ", (int64_t)-1)");
    case ReductionState::Welford: return cat("cppi_welford_init<", st, ">()");
  }
  fail("unknown reduction state");
}

std::string CudaKernelPrinter::state_update(ReductionKind kind, DType t, const std::string& acc,
                                            const std::string& v, const std::string& pos) const {
  const std::string st = shuffle_type(t);
  const std::string x = "(" + st + ")" + v;
  switch (state_of(kind)) {
    case ReductionState::Arg:
      return cat(acc, " = cppi_", to_string(kind), "_combine(", acc, ", cppi_arg_make(", x, ", (int64_t)", pos, "))");
    case ReductionState::Welford: return cat(acc, " = cppi_welford_update(", acc, ", ", v, ")");
    case ReductionState::Value: break;
  }
  switch (fold_of(kind)) {
    case BinaryOp::Add: return cat(acc, " = ", acc, " + ", x);
    case BinaryOp::Mul: return cat(acc, " = ", acc, " * ", x);
    case BinaryOp::Maximum: return cat(acc, " = cppi_fold_max(", acc, ", ", x, ")");
    case BinaryOp::Minimum: return cat(acc, " = cppi_fold_min(", acc, ", ", x, ")");
    case BinaryOp::LogicalOr: return cat(acc, " = ", acc, " || ", v);
    case BinaryOp::LogicalAnd: return cat(acc, " = ", acc, " && ", v);
    default: fail(cat("a reduction folding with ", to_string(fold_of(kind))));
  }
}

std::string CudaKernelPrinter::combine_op(ReductionKind kind) const {
  return cat("cppi_", to_string(kind), "_op()");
}

void CudaKernelPrinter::declare_results(const ReductionStage& s, const std::string& acc) {
  std::vector<std::string> values;
  for (const std::string& field : state_fields(s.kind)) values.push_back(acc + field);
  for (size_t i = 0; i < s.results.size(); ++i) {
    const DType rt = s.result_dtypes[i];
    const std::string name = local_name(s.results[i]);
    const std::string v = rt == DType::Bool ? "(" + values[i] + " != 0)" : "(" + scalar_type(rt) + ")" + values[i];
    out_.line(cat("const ", scalar_type(rt), " ", name, " = ", v, ";"));
    locals_[s.results[i]] = CValue{name, rt};
  }
}

}  // namespace cppi::gpu::cuda_print
