// The CUDA printer's row mappings (a row per warp or per block, cached rows,
// rows split across blocks; the loop over the rows a nest lower_row_loops
// builds, row_loops.h) and column groups (a column reduction split across
// row slices; the loop over the columns a nest lower_column_group_loops
// builds, column_group_loops.h), which walk those nests; the stages inside
// a row or group are a nest too, walked in cuda_print_row_stages.cpp, and
// so is a cached row's filling, its leaves printed in
// cuda_print_row_cache.cpp (cuda_kernel_printer.h).
#include "gpu_codegen/codegen/column_group_loops.h"
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/row_cache_loops.h"
#include "gpu_codegen/codegen/row_loops.h"

namespace cppi::gpu::cuda_print {

// --- row mappings ------------------------------------------------------------------------------

void CudaKernelPrinter::print_rows(PrintedCudaKernel* info) {
  // The loop over the rows is a nest, and so are a cached row's filling
  // and the stages' loops over a row's positions or a cached row's slots
  // (row_cache_loops.h, row_stage_loops.h).
  RowLeaves leaves;
  print_row_stmt(lowered_nest(lower_row_loops, "lower_row_loops", info), leaves);
}

void CudaKernelPrinter::print_row_stmt(const codegen::Stmt& s, RowLeaves& leaves) {
  if (const auto* l = std::get_if<codegen::For>(&s->node)) {
    if (l->kind == codegen::LoopKind::GpuColumnGroups) {
      print_column_group_loop(*l, leaves);
    } else if (l->kind == codegen::LoopKind::GpuRowPositions || l->kind == codegen::LoopKind::GpuRowSlots) {
      print_position_loop(*l);
    } else if (l->kind == codegen::LoopKind::GpuRowSlotGroups || l->kind == codegen::LoopKind::GpuLanes) {
      print_slot_loop(*l, leaves);
    } else {
      print_row_loop(*l, leaves);
    }
  } else if (const auto* b = std::get_if<codegen::Block>(&s->node)) {
    for (const codegen::Stmt& c : b->body) print_row_stmt(c, leaves);
  } else if (const auto* let = std::get_if<codegen::Let>(&s->node)) {
    out_.line(cat("const int64_t ", let->name, " = ", let->value, ";"));
  } else if (const auto* c = std::get_if<codegen::If>(&s->node); c && !c->condition.empty() && !c->otherwise) {
    out_.open(cat("if (", c->condition, ")"));
    print_row_stmt(c->then, leaves);
    out_.close();
  } else if (const auto* c = std::get_if<codegen::Comment>(&s->node)) {
    out_.line("// " + c->text);
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node)) {
    print_row_part(*part, leaves);
  } else {
    fail(cat("kernel ", k_.name, ": a row loop nest holds a statement it cannot print"));
  }
}

void CudaKernelPrinter::print_row_part(const codegen::TargetPart& p, RowLeaves& leaves) {
  if (p.what == grid_part::kUsedOuterVars && p.args.size() == 1) {
    unravel_outer(p.args[0]);
  } else if (p.what == grid_part::kUsedOuterVars) {
    fail(cat("kernel ", k_.name, ": no row part ", p.what, " of ", p.args.size(), " arguments"));
  } else if (p.what == row_cache_part::kDeclare || p.what == row_cache_part::kUnravel ||
             p.what == row_cache_part::kLoad || p.what == row_cache_part::kValues) {
    print_row_cache_part(p, leaves);
  } else {
    print_row_stage_part(p, leaves);  // the stages' parts (row_stage_loops.h); fails on any other
  }
}

void CudaKernelPrinter::print_row_loop(const codegen::For& l, RowLeaves& leaves) {
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
  print_row_stmt(l.body, leaves);
  out_.close();
}

void CudaKernelPrinter::print_column_groups(PrintedCudaKernel* info) {
  // The loop over the columns is a nest, and so are the stages' loops over
  // the rows inside a group (row_stage_loops.h).
  RowLeaves leaves;
  print_row_stmt(lowered_nest(lower_column_group_loops, "lower_column_group_loops", info), leaves);
}

void CudaKernelPrinter::print_column_group_loop(const codegen::For& l, RowLeaves& leaves) {
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
  print_row_stmt(l.body, leaves);
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

}  // namespace cppi::gpu::cuda_print
