// The CUDA printer's block mappings of a scan kernel (ir::ScanStage; the
// serial one is a grid-stride stage): a block per row, or 32 columns x row
// slices per block, each walking the scan loop in chunks whose running
// values carry from one to the next; or, split (row_splits P > 1), P blocks
// per row or column group, each taking a contiguous share of the scan
// (cuda_kernel_printer.h, gpu_schedule.h).
#include "gpu_codegen/codegen/cuda_kernel_printer.h"

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

void CudaKernelPrinter::print_scan_row_chunks(bool store) {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t), op = combine_op(s.kind);
  const int e = g_.elements_per_thread, b = g_.block_size;
  const std::string v = var_name(s.loops[0]);
  out_.open(cat("for (int64_t base = start; base < stop; base += ", e * b, ")"));
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
  out_.close();
}

void CudaKernelPrinter::print_scan_rows() {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t);
  const int64_t chunk = int64_t{g_.elements_per_thread} * g_.block_size;
  const int splits = g_.row_splits;
  out_.line(cat("__shared__ ", st, " scan_scratch[32];"));
  if (splits == 1) {
    out_.line(cat("const int64_t rows = ", index(product_of(k_.outer)), ";"));
    out_.open("for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)");
    unravel_outer("row");
    print_scan_share(chunk);
    out_.line(cat(st, " carry = ", identity, ";"));
    print_scan_row_chunks(true);
    out_.close();
    return;
  }
  print_scan_split_start(*product_of(k_.outer).constant());
  print_scan_share(chunk);
  out_.line(cat("const int64_t row = ", div_by("tile", splits), ";"));
  unravel_outer("row");
  out_.line(cat(st, " carry = ", identity, ";"));
  out_.open(cat("if (split + 1 < ", splits, ")"));
  print_scan_row_chunks(false);
  print_scan_publish("tile", "threadIdx.x == 0");
  out_.close();
  print_scan_look_back(cat("row * ", splits), cat("row * ", splits, " + part"), "threadIdx.x", g_.block_size);
  out_.line(cat("cppi_block_exclusive_scan(earlier, ", combine_op(s.kind), ", ", identity, ", scan_scratch, &carry);"));
  print_scan_row_chunks(true);
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

void CudaKernelPrinter::print_scan_column_chunks(bool store) {
  const ScanStage& s = *scan_of(k_);
  const std::string op = combine_op(s.kind);
  const int e = g_.elements_per_thread, slices = g_.threads_per_column;
  const std::string v = var_name(s.loops[0]);
  out_.open(cat("for (int64_t base = start; base < stop; base += ", slices * e, ")"));
  out_.line(cat("const int64_t pos = base + (int64_t)tid * ", e, ";"));
  print_scan_fold(s, cat("valid && ", v, " < stop"), store);
  print_slice_totals("own");
  if (store) {
    out_.line(cat("before = ", op, "(carry, before);"));
    print_scan_steps(s, cat("!valid || ", v, " >= stop"));
  }
  out_.line(cat("carry = ", op, "(carry, total);"));
  out_.close();
}

void CudaKernelPrinter::print_scan_columns() {
  const ScanStage& s = *scan_of(k_);
  const DType t = s.body.dtype();
  const std::string st = state_type(s.kind, t), identity = state_identity(s.kind, t);
  const int slices = g_.threads_per_column, splits = g_.row_splits;
  const int64_t chunk = int64_t{slices} * g_.elements_per_thread;
  out_.line(cat("__shared__ ", st, " scan_scratch[", (slices + 1) * 32, "];  // [slice][column], then the totals"));
  out_.line(cat("const int64_t n = ", index(product_of(k_.outer)), ";"));
  out_.line("const int lane = threadIdx.x % 32, tid = threadIdx.x / 32;");
  if (splits == 1) {
    out_.open("for (int64_t group = blockIdx.x; group * 32 < n; group += gridDim.x)");
  } else {
    print_scan_split_start((*product_of(k_.outer).constant() + 31) / 32);
    out_.line(cat("const int64_t group = ", div_by("tile", splits), ";"));
  }
  out_.line("const int64_t idx = group * 32 + lane;");
  out_.line("const bool valid = idx < n;");
  unravel_outer("idx");
  print_scan_share(chunk);
  out_.line(cat(st, " carry = ", identity, ";"));
  if (splits > 1) {
    out_.open(cat("if (split + 1 < ", splits, ")"));
    print_scan_column_chunks(false);
    print_scan_publish("tile * 32 + lane", "tid == 0");
    out_.close();
    print_scan_look_back(cat("group * ", splits), cat("(group * ", splits, " + part) * 32 + lane"), "tid", slices);
    out_.open("");  // before and total are the chunk loop's names too
    print_slice_totals("earlier");
    out_.line("carry = total;");
    out_.close();
  }
  print_scan_column_chunks(true);
  if (splits == 1) out_.close();
}

}  // namespace cppi::gpu::cuda_print
