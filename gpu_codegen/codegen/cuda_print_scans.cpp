// The CUDA printer's block mappings of a scan kernel (ir::ScanStage; the
// serial one is a grid-stride stage): a block per row, or 32 columns x row
// slices per block, each walking the scan loop in chunks whose running
// values carry from one to the next; or, split (row_splits P > 1), P blocks
// per row or column group, each taking a contiguous share of the scan
// (cuda_kernel_printer.h, gpu_schedule.h). It walks the nest
// lower_scan_loops builds (scan_loops.h), a chunk's fold, scan of the
// threads' folds, stores and carry as lower_scan_chunk_loops builds them
// (scan_chunk_loops.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/grid_stride_loops.h"
#include "gpu_codegen/codegen/scan_chunk_loops.h"
#include "gpu_codegen/codegen/scan_loops.h"

namespace cppi::gpu::cuda_print {

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
  print_scan_stmt(lowered_nest(lower_scan_loops, "lower_scan_loops", info), nullptr);
}

void CudaKernelPrinter::print_scan_stmt(const codegen::Stmt& s, ScanChunkValues* chunk) {
  if (const auto* l = std::get_if<codegen::For>(&s->node)) {
    print_scan_loop(*l, chunk);
  } else if (const auto* b = std::get_if<codegen::Block>(&s->node); b && !b->scoped) {
    for (const codegen::Stmt& c : b->body) print_scan_stmt(c, chunk);
  } else if (const auto* let = std::get_if<codegen::Let>(&s->node)) {
    out_.line(cat("const int64_t ", let->name, " = ", let->value, ";"));
  } else if (const auto* cond = std::get_if<codegen::If>(&s->node); cond && !cond->otherwise) {
    out_.open(cat("if (", cond->condition, ")"));
    print_scan_stmt(cond->then, chunk);
    out_.close();
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node); part && chunk) {
    print_scan_chunk_part(*part, *chunk);
  } else if (const auto* part = std::get_if<codegen::TargetPart>(&s->node)) {
    print_scan_part(*part);
  } else {
    fail(cat("kernel ", k_.name, ": a scan's loop nest holds a statement it cannot print"));
  }
}

void CudaKernelPrinter::print_scan_loop(const codegen::For& l, ScanChunkValues* chunk) {
  const std::string& v = l.var;
  if (l.kind == codegen::LoopKind::Serial && !chunk) {
    // The loop over the block's chunks: each chunk's names are its own.
    out_.open(cat("for (int64_t ", v, " = ", l.lo.text, "; ", v, " < ", l.hi.text, "; ", v, " += ", l.step, ")"));
    ScanChunkValues values;
    print_scan_stmt(l.body, &values);
    out_.close();
    return;
  }
  if (chunk) {
    print_scan_slots(l, *chunk);
    return;
  }
  if (l.lo.value != 0 || l.threads != g_.block_size) {
    fail(cat("kernel ", k_.name, ": scan loop ", v, " from ", l.lo.text, " on ", l.threads, " threads"));
  } else if (l.kind == codegen::LoopKind::GpuBlockRows && l.splits == 1) {
    out_.open(cat("for (int64_t ", v, " = blockIdx.x; ", v, " < ", l.hi.text, "; ", v, " += gridDim.x)"));
  } else if (l.kind == codegen::LoopKind::GpuColumnGroups && l.splits == 1 && l.step == 32) {
    out_.open(cat("for (int64_t group = blockIdx.x; group * 32 < ", l.hi.text, "; group += gridDim.x)"));
    print_group_column(v, "group", l.hi.text);
  } else if (l.kind == codegen::LoopKind::GpuTickets && l.splits > 1 && l.hi.value && *l.hi.value % l.splits == 0) {
    // One tile a block, no loop: its statements follow in the kernel's scope.
    print_scan_split_start(*l.hi.value / l.splits);
    print_scan_stmt(l.body, nullptr);
    return;
  } else {
    fail(cat("kernel ", k_.name, ": loop ", v, " is not a scan loop"));
  }
  print_scan_stmt(l.body, nullptr);
  out_.close();
}

void CudaKernelPrinter::print_scan_slots(const codegen::For& l, ScanChunkValues& chunk) {
  const std::string& v = l.var;
  if (l.kind != codegen::LoopKind::GpuScanSlots || l.lo.value != 0 || !l.hi.value) {
    fail(cat("kernel ", k_.name, ": loop ", v, " is not a scan chunk's loop over its slots"));
  }
  out_.line("#pragma unroll");
  out_.open(cat("for (int ", v, " = 0; ", v, " < ", l.hi.text, "; ++", v, ")"));
  const std::string first = l.step == 1 ? v : cat(v, " * ", l.step);
  out_.line(cat("const int64_t ", var_name(scan_of(k_)->loops[0]), " = pos + ", first, ";"));
  print_scan_stmt(l.body, &chunk);
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

void CudaKernelPrinter::print_scan_chunk_part(const codegen::TargetPart& p, ScanChunkValues& chunk) {
  namespace part = scan_chunk_part;
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const std::string block_scan = cat("cppi_block_exclusive_scan(own, ", op, ", ", identity, ", scan_scratch, &total)");
  const int v = g_.cache_vector;
  const size_t args = p.args.size();
  if (p.what == part::kVectorLoads && args == 1) {
    for (const Expr& x : scan_vector_loads(k_)) {
      chunk.loads.emplace_back(x, fresh_name("v"));
      out_.line(cat("cppi_vec<", dtype_ctype(x.dtype()), ", ", v, "> ", chunk.loads.back().second, "[", p.args[0],
                    "] = {};"));
    }
  } else if (p.what == part::kRunningValues && args == 1) {
    out_.line(cat(st, " prefix[", p.args[0], "];  // this thread's running values from its first position"));
  } else if (p.what == part::kOwn && args == 0) {
    out_.line(cat(st, " own = ", identity, ";"));
  } else if (p.what == part::kKeepRunning && args == 1) {
    out_.line(cat("prefix[", p.args[0], "] = own;"));
  } else if (p.what == part::kLeaveIf && args == 1) {
    out_.line(cat("if (", p.args[0], ") break;"));
  } else if (p.what == part::kBlockScan && args == 0) {
    out_.line(cat(st, " total;"));
    out_.line(block_scan + ";");
  } else if (p.what == part::kBlockScanFromCarry && args == 0) {
    out_.line(cat(st, " total;"));
    out_.line(cat("const ", st, " before = ", op, "(carry, ", block_scan, ");"));
  } else if (p.what == part::kSliceScan && args == 0) {
    print_slice_totals("own");
  } else if (p.what == part::kBeforeFromCarry && args == 0) {
    out_.line(cat("before = ", op, "(carry, before);"));
  } else if (p.what == part::kStoredVectors && args == 1) {
    for (const Store& store : s.stores) {
      chunk.stored.push_back(fresh_name("sv"));  // not "s": size symbols are s0, s1, ...
      out_.line(
          cat("cppi_vec<", dtype_ctype(store.buffer->dtype), ", ", v, "> ", chunk.stored.back(), "[", p.args[0], "];"));
    }
  } else if (p.what == part::kCarryTotal && args == 0) {
    out_.line(cat("carry = ", op, "(carry, total);"));
  } else if (args == 1) {
    print_scan_slot_part(p, chunk);
  } else {
    fail(cat("kernel ", k_.name, ": no scan chunk part ", p.what, " of ", args, " arguments"));
  }
}

void CudaKernelPrinter::print_scan_slot_part(const codegen::TargetPart& p, const ScanChunkValues& chunk) {
  namespace part = scan_chunk_part;
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string& at = p.args[0];
  const int v = g_.cache_vector;
  if (p.what == part::kLoadVectors) {
    for (const auto& [x, name] : chunk.loads) {
      const auto* l = x.as<Load>();
      out_.line(cat(name, "[", at, "] = *(const cppi_vec<", dtype_ctype(x.dtype()), ", ", v, ">*)(",
                    pointer_name(l->buffer->name), " + ", index(l->index), ");"));
    }
  } else if (p.what == part::kFoldAt) {
    ValueScope scope;
    for (const auto& [x, name] : chunk.loads) {
      scope.add(x, CValue{cat(name, "[", at, " / ", v, "].v[", at, " % ", v, "]"), x.dtype()});
    }
    out_.line(state_update(s.kind, t, "own", scalar_value(s.body, scope).text, "") + ";");
  } else if (p.what == part::kStoreAt) {
    const std::string acc = local_name(s.result);
    out_.line(cat("const ", state_type(s.kind, t), " ", acc, " = ", combine_op(s.kind), "(before, prefix[", at, "]);"));
    locals_[s.result] = CValue{acc, t, false, 0};
    ValueScope scope;
    if (chunk.stored.empty()) {
      print_stores(s.stores, scope);
      return;
    }
    for (size_t j = 0; j < s.stores.size(); ++j) {
      const CValue value = scalar_value(s.stores[j].value, scope);
      out_.line(cat(chunk.stored[j], "[", at, " / ", v, "].v[", at, " % ", v, "] = ", value.text, ";"));
    }
  } else if (p.what == part::kStoreVectors) {
    for (size_t j = 0; j < s.stores.size(); ++j) {
      const Store& st = s.stores[j];
      out_.line(cat("cppi_store_vec(", pointer_name(st.buffer->name), " + ", index(st.index), ", ", chunk.stored[j], "[",
                    at, "]);"));
    }
  } else {
    fail(cat("kernel ", k_.name, ": no scan chunk part ", p.what, " of 1 argument"));
  }
}

}  // namespace cppi::gpu::cuda_print
