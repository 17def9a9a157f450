// The CUDA printer's block mappings of a scan kernel (ir::ScanStage; the
// serial one is a grid-stride stage): a block per row, or 32 columns x row
// slices per block, each walking the scan loop in chunks whose running
// values carry from one to the next (cuda_kernel_printer.h, gpu_schedule.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"

namespace cppi::gpu::cuda_print {

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

}  // namespace cppi::gpu::cuda_print
