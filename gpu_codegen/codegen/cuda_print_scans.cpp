// The CUDA printer's block mappings of a scan kernel (ir::ScanStage; the
// serial one is a grid-stride stage): a block per row, or 32 columns x row
// slices per block, each walking the scan loop in chunks whose running
// values carry from one to the next; or, split (row_splits P > 1), P blocks
// per row or column group, each taking a contiguous share of the scan
// (cuda_kernel_printer.h, gpu_schedule.h). It walks the nest
// lower_scan_loops builds (scan_loops.h); a chunk prints whole.
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/scan_loops.h"

namespace cppi::gpu::cuda_print {

void CudaKernelPrinter::print_scan_fold(const ScanStage& s, const std::string& in_range, bool keep_prefix) {
  const DType t = s.body.dtype();
  const int e = g_.elements_per_thread, v = g_.cache_vector;
  const std::string st = state_type(s.kind, t), r = var_name(s.loops[0]);
  // Vectors of V positions (cache_vector): loaded before the fold, whole
  // ones or none (the scan's length is a multiple of V, checked at launch).
  std::vector<std::pair<Expr, std::string>> vloads;
  if (v > 1) {
    for (const Expr& x : scan_vector_loads(k_)) {
      vloads.emplace_back(x, fresh_name("v"));
      out_.line(cat("cppi_vec<", dtype_ctype(x.dtype()), ", ", v, "> ", vloads.back().second, "[", e / v, "] = {};"));
    }
  }
  if (!vloads.empty()) {
    out_.line("#pragma unroll");
    out_.open(cat("for (int group = 0; group < ", e / v, "; ++group)"));
    out_.line(cat("const int64_t ", r, " = pos + group * ", v, ";"));
    out_.line(cat("if (!(", in_range, ")) break;"));
    for (const auto& [x, name] : vloads) {
      const auto* l = x.as<Load>();
      out_.line(cat(name, "[group] = *(const cppi_vec<", dtype_ctype(x.dtype()), ", ", v, ">*)(",
                    pointer_name(l->buffer->name), " + ", index(l->index), ");"));
    }
    out_.close();
  }
  if (keep_prefix) out_.line(cat(st, " prefix[", e, "];  // this thread's running values from its first position"));
  out_.line(cat(st, " own = ", state_identity(s.kind, t), ";"));
  out_.line("#pragma unroll");
  out_.open(cat("for (int slot = 0; slot < ", e, "; ++slot)"));
  out_.line(cat("const int64_t ", r, " = pos + slot;"));
  out_.open(cat("if (", in_range, ")"));
  ValueScope scope;
  for (const auto& [x, name] : vloads) scope.add(x, CValue{cat(name, "[slot / ", v, "].v[slot % ", v, "]"), x.dtype()});
  const CValue value_here = scalar_value(s.body, scope);
  out_.line(state_update(s.kind, t, "own", value_here.text, "") + ";");
  out_.close();
  if (keep_prefix) out_.line("prefix[slot] = own;");
  out_.close();
}

void CudaKernelPrinter::print_scan_steps(const ScanStage& s, const std::string& past_end) {
  const DType t = s.body.dtype();
  const int e = g_.elements_per_thread, v = g_.cache_vector;
  const std::string acc = local_name(s.result), r = var_name(s.loops[0]);
  std::vector<std::string> values;  // cache_vector: each store's values, stored as vectors after
  for (size_t j = 0; v > 1 && j < s.stores.size(); ++j) {
    values.push_back(fresh_name("sv"));
    out_.line(cat("cppi_vec<", dtype_ctype(s.stores[j].buffer->dtype), ", ", v, "> ", values.back(), "[", e / v, "];"));
  }
  out_.line("#pragma unroll");
  out_.open(cat("for (int slot = 0; slot < ", e, "; ++slot)"));
  out_.line(cat("const int64_t ", r, " = pos + slot;"));
  out_.line(cat("if (", past_end, ") break;"));
  out_.line(cat("const ", state_type(s.kind, t), " ", acc, " = ", combine_op(s.kind), "(before, prefix[slot]);"));
  locals_[s.result] = CValue{acc, t, false, 0};
  ValueScope scope;
  if (v == 1) {
    print_stores(s.stores, scope);
    out_.close();
    return;
  }
  for (size_t j = 0; j < s.stores.size(); ++j) {
    out_.line(cat(values[j], "[slot / ", v, "].v[slot % ", v, "] = ", scalar_value(s.stores[j].value, scope).text, ";"));
  }
  out_.close();
  out_.line("#pragma unroll");
  out_.open(cat("for (int group = 0; group < ", e / v, "; ++group)"));
  out_.line(cat("const int64_t ", r, " = pos + group * ", v, ";"));
  out_.line(cat("if (", past_end, ") break;"));
  for (size_t j = 0; j < s.stores.size(); ++j) {
    const Store& st = s.stores[j];
    out_.line(cat("cppi_store_vec(", pointer_name(st.buffer->name), " + ", index(st.index), ", ", values[j], "[group]);"));
  }
  out_.close();
}

void CudaKernelPrinter::print_scan_split_start(int64_t units) {
  const int64_t tiles = units * g_.row_splits;
  out_.line("__shared__ unsigned long long ticket;");
  out_.line(cat("if (threadIdx.x == 0) ticket = atomicAdd(&", name_, "_tickets, 1ull);"));
  out_.line("__syncthreads();");
  out_.line(cat("// Tickets in arrival order: the blocks a block waits for have started. Launch e holds tickets "
                "[e, e + 1) x ", tiles, "."));
  out_.line(cat("const unsigned long long epoch = ", div_by("(int64_t)ticket", tiles), ";"));
  out_.line(cat("const int64_t tile = (int64_t)ticket - (int64_t)epoch * ", tiles, ";"));
  out_.line(cat("const int64_t split = ", mod_by("tile", g_.row_splits), ";"));
}

void CudaKernelPrinter::print_scan_share(int64_t chunk) {
  const ScanStage& s = *scan_of(k_);
  const std::string length = extent_text(s.loops[0].extent);
  const int splits = g_.row_splits;
  if (splits == 1) {
    out_.line(cat("const int64_t start = 0, stop = ", length, ";"));
    return;
  }
  out_.line(cat("const int64_t span = ", div_by(cat("(", div_by(cat("(", length, " + ", splits - 1, ")"), splits), " + ", chunk - 1, ")"), chunk),
                " * ", chunk, ";  // whole chunks"));
  out_.line(cat("const int64_t start = split * span, stop = start + span < ", length, " ? start + span : ", length,
                ";"));
}

void CudaKernelPrinter::print_scan_publish(const std::string& total_slot, const std::string& writer) {
  const std::string totals = name_ + "_totals", ready = name_ + "_ready";
  out_.line("// this block's total, for the blocks after it in its row or group");
  out_.open(cat("if (", writer, ")"));
  out_.line(cat(totals, "[", total_slot, "] = carry;"));
  out_.line("__threadfence();");
  out_.close();
  out_.line("__syncthreads();");
  out_.line(cat("if (threadIdx.x == 0) *(volatile unsigned long long*)&", ready, "[tile] = epoch + 1;"));
}

void CudaKernelPrinter::print_scan_look_back(const std::string& first_tile, const std::string& total_slot,
                                             const std::string& thread, int threads) {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  out_.line("// the totals of the splits before this one, each thread folding a strided share of them");
  out_.line(cat(state_type(s.kind, t), " earlier = ", state_identity(s.kind, t), ";"));
  out_.open(cat("for (int64_t part = ", thread, "; part < split; part += ", threads, ")"));
  out_.line(cat("while (*(volatile unsigned long long*)&", name_, "_ready[", first_tile, " + part] <= epoch) {}"));
  out_.line("__threadfence();");
  out_.line(cat("earlier = ", combine_op(s.kind), "(earlier, __ldcg(&", name_, "_totals[", total_slot, "]));"));
  out_.close();
}

void CudaKernelPrinter::print_scans(PrintedCudaKernel* info) {
  print_scan_stmt(lowered_nest(lower_scan_loops, "lower_scan_loops", info));
}

void CudaKernelPrinter::print_scan_stmt(const codegen::Stmt& s) {
  if (const auto* l = std::get_if<codegen::For>(&s->node)) {
    print_scan_loop(*l);
  } else if (const auto* b = std::get_if<codegen::Block>(&s->node); b && !b->scoped) {
    for (const codegen::Stmt& c : b->body) print_scan_stmt(c);
  } else if (const auto* let = std::get_if<codegen::Let>(&s->node)) {
    out_.line(cat("const int64_t ", let->name, " = ", let->value, ";"));
  } else if (const auto* cond = std::get_if<codegen::If>(&s->node); cond && !cond->otherwise) {
    out_.open(cat("if (", cond->condition, ")"));
    print_scan_stmt(cond->then);
    out_.close();
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node)) {
    print_scan_part(*part);
  } else {
    fail(cat("kernel ", k_.name, ": a scan's loop nest holds a statement it cannot print"));
  }
}

void CudaKernelPrinter::print_scan_loop(const codegen::For& l) {
  const std::string& v = l.var;
  if (l.kind == codegen::LoopKind::Serial) {
    out_.open(cat("for (int64_t ", v, " = ", l.lo.text, "; ", v, " < ", l.hi.text, "; ", v, " += ", l.step, ")"));
  } else if (l.lo.value != 0 || l.threads != g_.block_size) {
    fail(cat("kernel ", k_.name, ": scan loop ", v, " from ", l.lo.text, " on ", l.threads, " threads"));
  } else if (l.kind == codegen::LoopKind::GpuBlockRows && l.splits == 1) {
    out_.open(cat("for (int64_t ", v, " = blockIdx.x; ", v, " < ", l.hi.text, "; ", v, " += gridDim.x)"));
  } else if (l.kind == codegen::LoopKind::GpuColumnGroups && l.splits == 1 && l.step == 32) {
    out_.open(cat("for (int64_t group = blockIdx.x; group * 32 < ", l.hi.text, "; group += gridDim.x)"));
    print_group_column(v, "group", l.hi.text);
  } else if (l.kind == codegen::LoopKind::GpuTickets && l.splits > 1 && l.hi.value && *l.hi.value % l.splits == 0) {
    // One tile a block, no loop: its statements follow in the kernel's scope.
    print_scan_split_start(*l.hi.value / l.splits);
    print_scan_stmt(l.body);
    return;
  } else {
    fail(cat("kernel ", k_.name, ": loop ", v, " is not a scan loop"));
  }
  print_scan_stmt(l.body);
  out_.close();
}

void CudaKernelPrinter::print_group_column(const std::string& column, const std::string& group,
                                           const std::string& columns) {
  out_.line(cat("const int64_t ", column, " = ", group, " * 32 + lane;"));
  out_.line(cat("const bool valid = ", column, " < ", columns, ";"));
}

void CudaKernelPrinter::print_scan_part(const codegen::TargetPart& p) {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t);
  const bool rows = g_.mapping == GpuMapping::RowPerBlock;
  const int slices = g_.threads_per_column;
  const size_t args = p.args.size();
  if (p.what == scan_part::kScratch && args == 0) {
    out_.line(rows ? cat("__shared__ ", st, " scan_scratch[32];")
                   : cat("__shared__ ", st, " scan_scratch[", (slices + 1) * 32, "];  // [slice][column], then the totals"));
  } else if (p.what == scan_part::kColumnThreads && args == 0) {
    out_.line("const int lane = threadIdx.x % 32, tid = threadIdx.x / 32;");
  } else if (p.what == scan_part::kUnitOfTile && args == 1) {
    out_.line(cat("const int64_t ", p.args[0], " = ", div_by("tile", g_.row_splits), ";"));
  } else if (p.what == scan_part::kGroupColumn && args == 2) {
    print_group_column("idx", p.args[0], p.args[1]);
  } else if (p.what == grid_part::kUsedOuterVars && args == 1) {
    unravel_outer(p.args[0]);
  } else if (p.what == scan_part::kShare && args == 0) {
    print_scan_share(int64_t{g_.elements_per_thread} * (rows ? g_.block_size : slices));
  } else if (p.what == scan_part::kCarry && args == 0) {
    out_.line(cat(st, " carry = ", identity, ";"));
  } else if ((p.what == scan_part::kChunk || p.what == scan_part::kChunkStores) && args == 0) {
    const bool store = p.what == scan_part::kChunkStores;
    rows ? print_scan_row_chunk(store) : print_scan_column_chunk(store);
  } else if (p.what == scan_part::kPublish && args == 2) {
    print_scan_publish(p.args[0], p.args[1]);
  } else if (p.what == scan_part::kLookBack && args == 4) {
    print_scan_look_back(p.args[0], p.args[1], p.args[2], std::stoi(p.args[3]));
  } else if (p.what == scan_part::kCarryFromEarlier && args == 0 && rows) {
    out_.line(cat("cppi_block_exclusive_scan(earlier, ", combine_op(s.kind), ", ", identity, ", scan_scratch, &carry);"));
  } else if (p.what == scan_part::kCarryFromEarlier && args == 0) {
    out_.open("");  // before and total are the chunk loop's names too
    print_slice_totals("earlier");
    out_.line("carry = total;");
    out_.close();
  } else {
    fail(cat("kernel ", k_.name, ": no scan part ", p.what, " of ", args, " arguments"));
  }
}

void CudaKernelPrinter::print_scan_row_chunk(bool store) {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const int e = g_.elements_per_thread;
  const std::string v = var_name(s.loops[0]);
  out_.line(cat("const int64_t pos = base + (int64_t)threadIdx.x * ", e, ";"));
  print_scan_fold(s, cat(v, " < stop"), store);
  out_.line(cat(st, " total;"));
  const std::string scan = cat("cppi_block_exclusive_scan(own, ", op, ", ", identity, ", scan_scratch, &total)");
  if (store) {
    out_.line(cat("const ", st, " before = ", op, "(carry, ", scan, ");"));
    print_scan_steps(s, cat(v, " >= stop"));
  } else {
    out_.line(scan + ";");
  }
  out_.line(cat("carry = ", op, "(carry, total);"));
}

void CudaKernelPrinter::print_slice_totals(const std::string& value) {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const int slices = g_.threads_per_column;
  // The slices' values of this column, folded in slice order by the first
  // warp, which leaves each slice's exclusive prefix in its place and the
  // total in row `slices`: one fold per column, not one per thread, and few
  // registers (folding in every thread took up to 64 under
  // --Ofast-compile=min, halving the resident blocks).
  out_.line("scan_scratch[tid * 32 + lane] = " + value + ";");
  out_.line("__syncthreads();");
  out_.open("if (tid == 0)");
  out_.line(cat(st, " acc = ", identity, ";"));
  out_.line("#pragma unroll 8");
  out_.open(cat("for (int k = 0; k < ", slices, "; ++k)"));
  out_.line(cat("const ", st, " v = scan_scratch[k * 32 + lane];"));
  out_.line("scan_scratch[k * 32 + lane] = acc;");
  out_.line(cat("acc = ", op, "(acc, v);"));
  out_.close();
  out_.line(cat("scan_scratch[", slices * 32, " + lane] = acc;"));
  out_.close();
  out_.line("__syncthreads();");
  out_.line(cat(st, " before = scan_scratch[tid * 32 + lane], total = scan_scratch[", slices * 32, " + lane];"));
  out_.line("__syncthreads();");
}

void CudaKernelPrinter::print_scan_column_chunk(bool store) {
  const ScanStage& s = *scan_of(k_);
  const std::string op = combine_op(s.kind);
  const int e = g_.elements_per_thread;
  const std::string v = var_name(s.loops[0]);
  out_.line(cat("const int64_t pos = base + (int64_t)tid * ", e, ";"));
  print_scan_fold(s, cat("valid && ", v, " < stop"), store);
  print_slice_totals("own");
  if (store) {
    out_.line(cat("before = ", op, "(carry, before);"));
    print_scan_steps(s, cat("!valid || ", v, " >= stop"));
  }
  out_.line(cat("carry = ", op, "(carry, total);"));
}

}  // namespace cppi::gpu::cuda_print
