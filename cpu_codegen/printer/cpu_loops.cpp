/// CPU kernel printer: loop structure (parallel outer loops, vector loops
/// with scalar tails, tiled column reductions) and the stages inside them.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/index_conditions.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::cpu::detail {

// --- loops -------------------------------------------------------------------------------

void CpuKernelPrinter::print_prefault(const std::string& lo, const std::string& hi, const std::string& inner) {
  if (!sched_.prefault_outputs) return;
  // The schedule checked that every store writes its buffer densely in the
  // order of the outer loops, then its stage's loops: outer iterations
  // [lo, hi) write elements [lo, hi) * inner * (the stage's extents).
  std::set<std::string> done;
  for (const auto& st : k_.stages) {
    const auto* p = std::get_if<PointwiseStage>(&st);
    if (!p) continue;
    std::vector<IndexExpr> extents;
    for (const auto& l : p->loops) extents.push_back(l.extent);
    const std::string per_iteration = extents.empty() ? inner : cat(inner, " * ", index(product(extents)));
    for (const auto& store : p->stores) {
      const std::string ptr = pointer_name(store.buffer->name);
      if (!done.insert(ptr).second) continue;
      out_.line(cat("cppi_prefault_for_write(&", ptr, "[", per_iteration, " * (", lo, ")], ", per_iteration, " * ((", hi,
                    ") - (", lo, ")) * (int64_t)sizeof(", ptr, "[0]));"));
    }
  }
}

void CpuKernelPrinter::print_outer() {
  const size_t n = k_.outer.size();
  const size_t p = static_cast<size_t>(sched_.parallel_loops);
  const bool vec_outer = sched_.vectorized == VectorizedLoop::InnermostOuter;
  if (p > n) fail(cat("kernel ", k_.name, ": ", p, " parallel loops but ", n, " outer loops"));
  if (vec_outer && n == 0) fail(cat("kernel ", k_.name, ": innermost outer loop vectorised but there are no outer loops"));
  if (sched_.parallel_reduction && p > 0) fail(cat("kernel ", k_.name, ": parallel_reduction with parallel outer loops"));
  if (accumulates(k_) && (p > parallel_loops_without_races(k_) || sched_.parallel_reduction)) {
    fail(cat("kernel ", k_.name, ": ", p, " parallel loops, but its accumulating stores could race across them"));
  }
  const std::string grain = std::to_string(std::max<int64_t>(1, sched_.grain_size));
  if (!sig_.scratch.empty() && sched_.parallel_reduction) {
    fail(cat("kernel ", k_.name, ": kernel-local scratch with parallel_reduction"));
  }
  if (sched_.transpose_tile) {
    print_transposed_outer();
    return;
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
    // With an overlapped tail, the blocks are whole vectors and the last
    // chunk also takes the rest: its last vector overlaps only its own.
    const Loop& l = k_.outer[0];
    const Bound e = extent(l);
    const int64_t w = sched_.vector_width;
    const bool overlapped = sched_.tail == TailKind::Overlapped;
    const std::string blocks = overlapped ? std::to_string(*e.value / w)
                               : e.value  ? std::to_string((*e.value + w - 1) / w)
                                          : cat("cppi_div_up(", e.text, ", ", w, ")");
    const std::string hi = overlapped ? cat("(end == ", blocks, " ? ", e.text, " : end * ", w, ")")
                                      : cat("cppi_min_i<int64_t>(end * ", w, ", ", e.text, ")");
    out_.open(cat("cppi_parallel_for(0, ", blocks, ", ", grain, ", [&](int64_t begin, int64_t end)"));
    print_scratch_alloc();
    print_prefault(cat("begin * ", w), hi, "1");
    print_outer_vector_loop(l, Bound{cat("begin * ", w), std::nullopt}, Bound{hi, std::nullopt});
    print_scratch_free();
    out_.close("});");
    return;
  }
  std::vector<IndexExpr> extents;
  for (size_t i = 0; i < p; ++i) extents.push_back(k_.outer[i].extent);
  out_.open(cat("cppi_parallel_for(0, ", index(product(extents)), ", ", grain, ", [&](int64_t begin, int64_t end)"));
  print_scratch_alloc();
  std::vector<IndexExpr> inner_extents;
  for (size_t i = p; i < n; ++i) inner_extents.push_back(k_.outer[i].extent);
  print_prefault("begin", "end", "(" + index(product(inner_extents)) + ")");
  std::vector<std::pair<std::string, IndexExpr>> units;
  for (size_t i = 0; i < p; ++i) units.emplace_back(var_name(k_.outer[i]), k_.outer[i].extent);
  open_collapsed_loop(units);
  print_outer_loops(p);
  out_.close();
  print_scratch_free();
  out_.close("});");
}

void CpuKernelPrinter::open_collapsed_loop(const std::vector<std::pair<std::string, IndexExpr>>& units) {
  if (units.size() == 1) {
    const std::string& v = units[0].first;
    out_.open(cat("for (int64_t ", v, " = begin; ", v, " < end; ++", v, ")"));
    return;
  }
  out_.open("for (int64_t i = begin; i < end; ++i)");
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<IndexExpr> later;
    for (size_t j = i + 1; j < units.size(); ++j) later.push_back(units[j].second);
    const IndexExpr inner = product(later);
    auto atom = [&](const IndexExpr& x) {
      const bool simple = x.as<IndexConst>() || x.as<IndexSymbol>() || x.as<IndexVar>();
      return simple ? index(x) : "(" + index(x) + ")";
    };
    std::string v = inner.is_constant(1) ? "i" : cat("i / ", atom(inner));
    if (i > 0) v = cat(inner.is_constant(1) ? v : "(" + v + ")", " % ", atom(units[i].second));
    out_.line(cat("const int64_t ", units[i].first, " = ", v, ";"));
  }
}

void CpuKernelPrinter::print_transposed_outer() {
  const size_t n = k_.outer.size();
  const size_t p = static_cast<size_t>(sched_.parallel_loops);
  if (sched_.vectorized != VectorizedLoop::InnermostOuter || n < 2 || p > n - 1 || sched_.tail != TailKind::ScalarLoop ||
      sched_.column_block > 0) {
    fail(cat("kernel ", k_.name, ": transpose_tile needs a vectorised innermost outer loop below a serial or parallel "
             "one, a scalar tail and no column tiling"));
  }
  const Loop& rows = k_.outer[n - 2];
  const Loop& cols = k_.outer[n - 1];
  const std::string rows_var = rows.var.as<IndexVar>()->name, cols_var = cols.var.as<IndexVar>()->name;
  // The transposed loads, each once, in the order the stores read them.
  transposed_.clear();
  for (const auto& st : k_.stages) {
    const auto* pw = std::get_if<PointwiseStage>(&st);
    if (!pw || !pw->loops.empty()) fail(cat("kernel ", k_.name, ": transpose_tile over a stage with loops"));
    for (const auto& a : reads(st)) {
      if (!transposed_load(a.index, a.masked, cols_var, rows_var)) continue;
      bool seen = false;
      for (const auto& t : transposed_) seen = seen || (t.buffer->name == a.buffer->name && t.index == a.index);
      if (!seen) transposed_.push_back({a.buffer, a.index, cat("tile", transposed_.size(), "_", pointer_name(a.buffer->name))});
    }
  }
  if (transposed_.empty()) fail(cat("kernel ", k_.name, ": transpose_tile without a transposed load"));

  const int64_t w = sched_.vector_width;
  const Bound rows_extent = extent(rows);
  const std::string tiles = rows_extent.value ? std::to_string((*rows_extent.value + w - 1) / w)
                                              : cat("cppi_div_up(", rows_extent.text, ", ", w, ")");
  const std::string tile_index = var_name(rows) + "_tile";
  auto tile_loop = [&] {
    out_.open(cat("for (int64_t ", tile_index, " = 0; ", tile_index, " < ", tiles, "; ++", tile_index, ")"));
    print_transposed_tile(cat(tile_index, " * ", w));
    out_.close();
  };
  // The loops between the parallel ones and the tiled pair.
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == n - 2) {
      tile_loop();
      return;
    }
    const std::string v = var_name(k_.outer[level]);
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(k_.outer[level]).text, "; ++", v, ")"));
    loops(level + 1);
    out_.close();
  };
  if (p == 0) {
    print_scratch_alloc();
    loops(0);
    print_scratch_free();
    return;
  }
  const std::string grain = std::to_string(std::max<int64_t>(1, sched_.grain_size));
  std::vector<std::pair<std::string, IndexExpr>> units;
  std::vector<IndexExpr> extents;
  for (size_t i = 0; i < p; ++i) {
    // A parallel rows loop counts in tiles of rows.
    const bool tiled = i == n - 2;
    const IndexExpr e = tiled ? ir::floordiv(rows.extent + index_const(w - 1), index_const(w)) : k_.outer[i].extent;
    units.emplace_back(tiled ? tile_index : var_name(k_.outer[i]), e);
    extents.push_back(e);
  }
  out_.open(cat("cppi_parallel_for(0, ", index(product(extents)), ", ", grain, ", [&](int64_t begin, int64_t end)"));
  print_scratch_alloc();
  if (p == n - 1) {
    // Chunk [begin, end) of (earlier loops x tiles of rows): its first row
    // of the (earlier loops x rows) space, whose outputs it writes densely.
    auto row_of = [&](const std::string& i) {
      return cat("(", i, ") / (", tiles, ") * (", rows_extent.text, ") + cppi_min_i<int64_t>((", i, ") % (", tiles,
                 ") * ", w, ", ", rows_extent.text, ")");
    };
    print_prefault(row_of("begin"), row_of("end"), "(" + extent(cols).text + ")");
  } else {
    std::vector<IndexExpr> inner_extents;
    for (size_t i = p; i < n; ++i) inner_extents.push_back(k_.outer[i].extent);
    print_prefault("begin", "end", "(" + index(product(inner_extents)) + ")");
  }
  open_collapsed_loop(units);
  if (p == n - 1) {
    print_transposed_tile(cat(tile_index, " * ", w));
  } else {
    loops(p);
  }
  out_.close();
  print_scratch_free();
  out_.close("});");
}

void CpuKernelPrinter::print_transposed_tile(const std::string& first_row) {
  const size_t n = k_.outer.size();
  const Loop& rows = k_.outer[n - 2];
  const Loop& cols = k_.outer[n - 1];
  const int64_t w = sched_.vector_width;
  const std::string r = var_name(rows), c = var_name(cols), r0 = r + "_first";
  const Bound rows_extent = extent(rows);
  // With a constant number of rows that tiles evenly, every tile is whole.
  const bool whole_tiles_only = rows_extent.value && *rows_extent.value % w == 0;
  out_.open("");
  out_.line(cat("const int64_t ", r0, " = ", first_row, ";"));
  if (!whole_tiles_only) out_.open(cat("if (", r0, " + ", w, " <= ", rows_extent.text, ")"));
  for (const auto& t : transposed_) {
    out_.line(cat("alignas(64) ", dtype_ctype(t.buffer->dtype), " ", t.tile, "[", w * w, "];"));
  }
  const std::map<std::string, IndexExpr> at_first_row = {{rows.var.as<IndexVar>()->name, ir::var(r0)}};
  print_split_loop_with_rest(
      c, Bound{"0", 0}, extent(cols),
      [&](const std::string& from, const std::string& to) {
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", c, " = ", from, "; ", c, " < ", to, "; ", c, " += ", w, ")"));
        for (const auto& t : transposed_) {
          auto stride = coefficient(t.index, cols.var);
          out_.line(cat("cppi_transpose_tile<", w, ", ", dtype_size(t.buffer->dtype), ">(&", pointer_name(t.buffer->name),
                        "[", index(substitute(t.index, at_first_row)), "], ", index(*stride), ", ", t.tile, ");"));
        }
        out_.open(cat("for (int64_t ", r, " = ", r0, "; ", r, " < ", r0, " + ", w, "; ++", r, ")"));
        tile_row_ = cat("(", r, " - ", r0, ") * ", w);
        print_stages(true);
        tile_row_.clear();
        out_.close();
        out_.close();
      },
      [&](const std::string& vend, const std::string& end) {
        out_.open(cat("for (int64_t ", r, " = ", r0, "; ", r, " < ", r0, " + ", w, "; ++", r, ")"));
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", c, " = ", vend, "; ", c, " < ", end, "; ++", c, ")"));
        print_stages(false);
        out_.close();
        out_.close();
      });
  if (!whole_tiles_only) {
    out_.close();
    out_.open("else");
    out_.line("// the last rows, fewer than a tile: the plain vector loop");
    out_.open(cat("for (int64_t ", r, " = ", r0, "; ", r, " < ", rows_extent.text, "; ++", r, ")"));
    print_outer_vector_loop(cols, Bound{"0", 0}, extent(cols));
    out_.close();
    out_.close();
  }
  out_.close();
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

void CpuKernelPrinter::print_stage_split_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                              const std::function<void(const std::string&, const std::string&)>& main,
                                              const std::function<void()>& vector_step,
                                              const std::function<void()>& scalar_step) {
  const bool enclosing = in_stage_loop_;
  in_stage_loop_ = true;
  if (sched_.tail != TailKind::Masked) {
    print_split_loop(v, lo, hi, main, scalar_step);
  } else {
    const bool known = lo.value && hi.value;
    auto whole_vectors = [&](const std::string& from, const std::string& to) {
      if (known) whole_vectors_end_ = std::stoll(to);
      main(from, to);
      whole_vectors_end_.reset();
    };
    print_split_loop_with_rest(v, lo, hi, whole_vectors, [&](const std::string& vend, const std::string& end) {
      open_masked_rest(v, vend, end, known);
      out_.line(cat("const int64_t ", v, " = ", vend, ";"));
      if (known) masked_rest_first_ = std::stoll(vend);
      vector_step();
      masked_rest_first_.reset();
      close_masked_rest();
    });
  }
  in_stage_loop_ = enclosing;
}

void CpuKernelPrinter::open_masked_rest(const std::string& v, const std::string& vend, const std::string& end,
                                        bool known) {
  out_.open(known ? std::string() : cat("if (", vend, " < ", end, ")"));  // known: then vend < end
  out_.line(cat("// ", v, " from ", vend, ": one vector, its lanes from ", end, " on turned off"));
  tail_lanes_ = known ? std::to_string(std::stoll(end) - std::stoll(vend)) : cat("(", end, " - ", vend, ")");
}

void CpuKernelPrinter::close_masked_rest() {
  tail_lanes_.clear();
  out_.close();
}

void CpuKernelPrinter::print_stage_vector_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                               const std::function<void()>& vector_step,
                                               const std::function<void()>& scalar_step) {
  print_stage_split_loop(
      v, lo, hi,
      [&](const std::string& from, const std::string& to) {
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", v, " = ", from, "; ", v, " < ", to, "; ", v, " += ", sched_.vector_width, ")"));
        vector_step();
        out_.close();
      },
      vector_step, scalar_step);
}

void CpuKernelPrinter::print_split_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                        const std::function<void(const std::string&, const std::string&)>& main,
                                        const std::function<void()>& tail_body) {
  print_split_loop_with_rest(v, lo, hi, main, [&](const std::string& vend, const std::string& end) {
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", v, " = ", vend, "; ", v, " < ", end, "; ++", v, ")"));
    tail_body();
    out_.close();
  });
}

void CpuKernelPrinter::print_split_loop_with_rest(
    const std::string& v, const Bound& lo, const Bound& hi,
    const std::function<void(const std::string&, const std::string&)>& main,
    const std::function<void(const std::string&, const std::string&)>& rest) {
  const int64_t w = sched_.vector_width;
  if (lo.value && hi.value) {
    const int64_t vend = *lo.value + (*hi.value - *lo.value) / w * w;
    if (vend > *lo.value) main(std::to_string(*lo.value), std::to_string(vend));
    if (vend < *hi.value) rest(std::to_string(vend), std::to_string(*hi.value));
    return;
  }
  out_.open("");
  const std::string lo_name = v + "_lo", vend = v + "_vec_end", hi_name = v + "_end";
  out_.line(cat("const int64_t ", lo_name, " = ", lo.text, ";"));
  out_.line(cat("const int64_t ", hi_name, " = ", hi.text, ";"));
  out_.line(cat("const int64_t ", vend, " = ", lo_name, " + (", hi_name, " - ", lo_name, ") / ", w, " * ", w, ";"));
  main(lo_name, vend);
  rest(vend, hi_name);
  out_.close();
}

void CpuKernelPrinter::print_outer_vector_loop(const Loop& l, const Bound& lo, const Bound& hi) {
  const std::string v = var_name(l);
  if (!sched_.vector_loop_splits.empty()) {
    print_vector_loop_pieces(l, lo, hi);
    return;
  }
  const int64_t w = sched_.vector_width;
  auto whole_vectors = [&](const std::string& from, const std::string& to) {
    if (sched_.column_block > 0) {
      print_tiled_columns(v, from, to);
      return;
    }
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", v, " = ", from, "; ", v, " < ", to, "; ", v, " += ", w, ")"));
    print_stages(true);
    out_.close();
  };
  if (sched_.tail == TailKind::Overlapped) {
    // [lo, hi) holds at least one whole vector (CpuSchedule::tail).
    print_split_loop_with_rest(v, lo, hi, whole_vectors, [&](const std::string& vend, const std::string& end) {
      const bool known = lo.value && hi.value;  // then vend < end
      if (!known) out_.open(cat("if (", vend, " < ", end, ")"));
      out_.line("// the rest: one vector ending at the loop's end, over lanes already done");
      whole_vectors(known ? std::to_string(*hi.value - w) : cat(end, " - ", w), end);
      if (!known) out_.close();
    });
    return;
  }
  if (sched_.tail == TailKind::Masked) {
    // Whole vectors, then one vector whose lanes from the loop's end on are
    // off (x.sum(0) of n x 7: one 8-lane vector per row).
    print_split_loop_with_rest(v, lo, hi, whole_vectors, [&](const std::string& vend, const std::string& end) {
      open_masked_rest(v, vend, end, lo.value && hi.value);
      whole_vectors(vend, end);
      close_masked_rest();
    });
    return;
  }
  auto tail = [&] { print_stages(false); };
  if (sched_.column_block <= 0) {
    print_vector_loop(v, lo, hi, [&] { print_stages(true); }, tail);
    return;
  }
  print_split_loop(v, lo, hi, [&](const std::string& from, const std::string& to) { print_tiled_columns(v, from, to); },
                   tail);
}

void CpuKernelPrinter::print_vector_loop_pieces(const Loop& l, const Bound& lo, const Bound& hi) {
  if (!lo.value || *lo.value != 0 || !hi.value || sched_.tail != TailKind::ScalarLoop || sched_.column_block > 0) {
    fail(cat("kernel ", k_.name, ": vector_loop_splits need the whole constant loop and a scalar tail"));
  }
  const std::string v = var_name(l);
  const std::string var = l.var.as<IndexVar>()->name;
  std::vector<int64_t> ends = sched_.vector_loop_splits;
  ends.push_back(*hi.value);
  int64_t from = 0;
  for (int64_t to : ends) {
    if (to <= from || to > *hi.value) fail(cat("kernel ", k_.name, ": vector_loop_splits out of order or range"));
    const std::vector<PointwiseStage> piece = fold_index_conditions(k_.stages, var, from, to);
    auto stages = [&](bool vector) {
      locals_.clear();
      if (vector) enter_vector(v);
      for (size_t i = 0; i < piece.size(); ++i) print_pointwise(piece[i], i);
      if (vector) leave_vector();
    };
    out_.line(cat("// ", v, " in [", from, ", ", to, "): its index comparisons are constants"));
    print_vector_loop(v, Bound{std::to_string(from), from}, Bound{std::to_string(to), to}, [&] { stages(true); },
                      [&] { stages(false); });
    from = to;
  }
}

void CpuKernelPrinter::print_tiled_columns(const std::string& v, const std::string& from, const std::string& to) {
  if (ir::leading_looped_reductions(k_.stages) == 0 || sched_.row_block <= 0) {
    fail(cat("kernel ", k_.name, ": column_block needs a first stage that reduces over loops, and a row_block"));
  }
  const int64_t w = sched_.vector_width;
  const int64_t span = int64_t{sched_.column_block} * w;
  const std::string blk = v + "_blk", blk_end = v + "_blk_end";
  auto open_vector_loop = [&] {
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", v, " = ", blk, "; ", v, " < ", blk_end, "; ", v, " += ", w, ")"));
  };
  // The lane states of the stages tiled so far, by stage index.
  std::unordered_map<size_t, std::string> slots;
  // Inside a vector loop over the block: the results of the reductions
  // before `stage`, read from their tiles (a softmax's sum of exp(x - max)
  // reads the max of its columns).
  auto bind_earlier_results = [&](size_t stage) {
    locals_.clear();
    for (size_t j = 0; j < stage; ++j) {
      if (const auto* red = std::get_if<ReductionStage>(&k_.stages[j])) bind_lane_results(*red, slots.at(j));
    }
  };

  out_.open(cat("for (int64_t ", blk, " = ", from, "; ", blk, " < ", to, "; ", blk, " += ", span, ")"));
  out_.line(cat("const int64_t ", blk_end, " = cppi_min_i<int64_t>(", blk, " + ", span, ", ", to, ");"));
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (const auto* pw = std::get_if<PointwiseStage>(&k_.stages[i])) {
      if (!pw->loops.empty()) {
        print_tiled_pointwise(*pw, i, v, open_vector_loop, bind_earlier_results);
        continue;
      }
      // A loop-less stage (log_softmax's log of each column's sum), in its
      // place: a later stage may read what it stores.
      open_vector_loop();
      enter_vector(v);
      bind_earlier_results(i);
      print_pointwise(*pw, i);
      leave_vector();
      out_.close();
      continue;
    }
    const auto& s = std::get<ReductionStage>(k_.stages[i]);
    const DType t = s.body.dtype();
    const std::string tile = local_name(s.results[0]) + "_tile";
    const std::string slot = cat(tile, "[(", v, " - ", blk, ") / ", w, "]");
    if (s.loops.empty()) {
      // A loop-less reduction (all() over a size-1 dim of a column
      // statistic), in its place: one step per lane, kept in a tile for the
      // stages after it.
      out_.line(cat("// stage ", i, ", per column: reduce ", to_string(s.kind), " without loops"));
      out_.line(cat(vstate_type(s.kind, t), " ", tile, "[", sched_.column_block, "];"));
      open_vector_loop();
      enter_vector(v);
      bind_earlier_results(i);
      const std::string state = print_reduction_core(s, Bound{"0", 0}, Bound{"1", 1});
      leave_vector();
      out_.line(cat(slot, " = ", state, ";"));
      out_.close();
      slots[i] = slot;
      continue;
    }
    const Loop& first = s.loops[0];
    const std::string r = var_name(first), rblk = r + "_blk", rblk_end = r + "_blk_end";
    const Bound rows = extent(first);
    out_.line(cat("// stage ", i, ", tiled: ", sched_.column_block, " vectors x ", sched_.row_block, " ", r, " at a time"));
    // Cascade (CpuSchedule::cascade_block): the tile restarts every block of
    // terms per lane, merged into a second tile of totals.
    const bool cascade = sched_.cascade_block > 0 && accumulates_in_cascade(s.kind, t);
    const std::string total_tile = tile + "_total", total_slot = cat(total_tile, "[(", v, " - ", blk, ") / ", w, "]");
    const std::string terms = tile + "_terms";
    out_.line(cat(vstate_type(s.kind, t), " ", tile, "[", sched_.column_block, "];"));
    if (cascade) out_.line(cat(vstate_type(s.kind, t), " ", total_tile, "[", sched_.column_block, "];"));
    open_vector_loop();
    out_.line(cat(slot, " = ", vstate_identity(s.kind, t), ";"));
    if (cascade) out_.line(cat(total_slot, " = ", vstate_identity(s.kind, t), ";"));
    out_.close();
    if (cascade) out_.line(cat("int64_t ", terms, " = 0;"));
    out_.open(cat("for (int64_t ", rblk, " = 0; ", rblk, " < ", rows.text, "; ", rblk, " += ", sched_.row_block, ")"));
    out_.line(cat("const int64_t ", rblk_end, " = cppi_min_i<int64_t>(", rblk, " + ", sched_.row_block, ", ", rows.text,
                  ");"));
    open_vector_loop();
    enter_vector(v);
    bind_earlier_results(i);
    const std::string acc = print_reduction_core(s, Bound{rblk, std::nullopt}, Bound{rblk_end, std::nullopt}, "", slot);
    leave_vector();
    out_.line(cat(slot, " = ", acc, ";"));
    out_.close();
    if (cascade) {
      std::string per_row;
      for (size_t l = 1; l < s.loops.size(); ++l) per_row += cat(" * (", extent(s.loops[l]).text, ")");
      out_.line(cat(terms, " += (", rblk_end, " - ", rblk, ")", per_row, ";"));
      out_.open(cat("if (", terms, " >= ", sched_.cascade_block, ")"));
      open_vector_loop();
      out_.line(cat(total_slot, " = ", vstate_combine(s.kind, t, total_slot, slot), ";"));
      out_.line(cat(slot, " = ", vstate_identity(s.kind, t), ";"));
      out_.close();
      out_.line(cat(terms, " = 0;"));
      out_.close();
    }
    out_.close();
    if (cascade) {
      // The stage's result is complete before a later stage reads it.
      open_vector_loop();
      out_.line(cat(slot, " = ", vstate_combine(s.kind, t, total_slot, slot), ";"));
      out_.close();
    }
    slots[i] = slot;
  }
  out_.close();
}

void CpuKernelPrinter::print_tiled_pointwise(const PointwiseStage& s, size_t index, const std::string& v,
                                             const std::function<void()>& open_vector_loop,
                                             const std::function<void(size_t)>& bind_earlier_results) {
  // As a tiled reduction: the first loop in blocks of row_block, each block
  // interchanged with the block's vectors, so what a vector's stores share
  // across rows (softmax's 1 / sum) is computed once per row block.
  const Loop& first = s.loops[0];
  const std::string r = var_name(first), rblk = r + "_blk", rblk_end = r + "_blk_end";
  const Bound rows = extent(first);
  std::string comment = cat("// stage ", index, ", tiled: store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  out_.line(cat(comment, ", ", sched_.column_block, " vectors x ", sched_.row_block, " ", r, " at a time"));
  out_.open(cat("for (int64_t ", rblk, " = 0; ", rblk, " < ", rows.text, "; ", rblk, " += ", sched_.row_block, ")"));
  out_.line(cat("const int64_t ", rblk_end, " = cppi_min_i<int64_t>(", rblk, " + ", sched_.row_block, ", ", rows.text,
                ");"));
  open_vector_loop();
  enter_vector(v);
  bind_earlier_results(index);
  out_.open(cat("for (int64_t ", r, " = ", rblk, "; ", r, " < ", rblk_end, "; ++", r, ")"));
  for (size_t l = 1; l < s.loops.size(); ++l) {
    const std::string inner = var_name(s.loops[l]);
    out_.open(cat("for (int64_t ", inner, " = 0; ", inner, " < ", extent(s.loops[l]).text, "; ++", inner, ")"));
  }
  {
    ValueScope scope(stage_scope_);
    print_stores(s.stores, scope);
  }
  for (size_t l = 0; l < s.loops.size(); ++l) out_.close();
  leave_vector();
  out_.close();
  out_.close();
}

void CpuKernelPrinter::print_stages(bool vector_outer) {
  locals_.clear();
  forwarded_.clear();
  if (vector_outer) enter_vector(var_name(k_.outer.back()));
  for (size_t i = 0; i < k_.stages.size();) {
    if (std::holds_alternative<ReductionStage>(k_.stages[i])) {
      const size_t end = one_pass_end(i, vector_outer);
      print_reductions(i, end);
      i = end;
    } else if (const auto* scan = std::get_if<ScanStage>(&k_.stages[i])) {
      print_scan(*scan);
      ++i;
    } else {
      print_pointwise(std::get<PointwiseStage>(k_.stages[i]), i);
      ++i;
    }
  }
  if (vector_outer) leave_vector();
  forwarded_.clear();
}

void CpuKernelPrinter::hoist_stage_invariants(const Stage& s, ValueScope& scope) {
  const auto& loops = loops_of(s);
  if (loops.empty()) return;
  std::set<std::string> stage_vars;
  for (const auto& l : loops) stage_vars.insert(l.var.as<IndexVar>()->name);
  // Nothing that could raise, unless the loops run: no integer division.
  auto hoistable = [&](const Expr& e) {
    if (e.kind() == ExprKind::Constant || e.kind() == ExprKind::LocalRef) return false;
    for (const auto& v : ir::free_vars(e)) {
      if (stage_vars.count(v)) return false;
    }
    bool worth = false;
    for (const Expr& n : ir::post_order({e})) {
      switch (n.kind()) {
        case ExprKind::Load:
        case ExprKind::Random: return false;
        case ExprKind::Unary:
          if (n.as<Unary>()->op == UnaryOp::NonzeroDivisor) return false;
          worth = worth || ir::is_math_function(n.as<Unary>()->op);
          break;
        case ExprKind::Binary: {
          const Binary* b = n.as<Binary>();
          if (is_integral(b->lhs.dtype()) && (b->op == BinaryOp::FloorDiv || b->op == BinaryOp::TruncDiv ||
                                              b->op == BinaryOp::Fmod || b->op == BinaryOp::Remainder)) {
            return false;
          }
          worth = worth || ir::is_math_function(b->op);
          break;
        }
        default: break;
      }
    }
    return worth;
  };
  std::set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> visit = [&](const Expr& e) {
    if (!seen.insert(e.get()).second) return;
    if (hoistable(e)) {
      value(e, scope);
      return;
    }
    for (const Expr& o : ir::operands(e)) visit(o);
  };
  for (const Expr& v : ir::stage_values(s)) visit(v);
}

void CpuKernelPrinter::declare_forward_slots(const PointwiseStage& s, size_t stage) {
  forward_slots_.clear();
  // One stage loop of constant extent whose last vector is masked: that
  // vector runs once per outer iteration, at fixed elements.
  if (sched_.vectorized != VectorizedLoop::InnermostOfEachStage || sched_.tail != TailKind::Masked ||
      s.loops.size() != 1) {
    return;
  }
  const auto n = s.loops[0].extent.constant();
  if (!n || *n % sched_.vector_width == 0) return;
  std::set<std::string> read_later;
  for (size_t j = stage + 1; j < k_.stages.size(); ++j) {
    for (const auto& a : reads(k_.stages[j])) read_later.insert(a.buffer->name);
  }
  for (const auto& st : s.stores) {
    const DType t = st.buffer->dtype;
    const bool plain = t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
    const std::string key = access_key(st.buffer, st.index);
    if (!plain || !read_later.count(st.buffer->name) || key.empty() || forward_slots_.count(key)) continue;
    const std::string slot = cat(pointer_name(st.buffer->name), "_fwd", forward_slots_.size());
    out_.line(cat(vtype(t), " ", slot, ";  // its masked last vector, for the stages after"));
    forward_slots_[key] = slot;
  }
}

void CpuKernelPrinter::print_pointwise(const PointwiseStage& s, size_t index) {
  std::string comment = cat("// stage ", index, ": store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  if (!s.loops.empty()) {
    comment += " over";
    for (const auto& l : s.loops) comment += " " + var_name(l);
  }
  out_.line(comment);
  declare_forward_slots(s, index);
  ValueScope hoisted(&invariants_);
  hoist_stage_invariants(s, hoisted);
  const ValueScope* enclosing = stage_scope_;
  stage_scope_ = &hoisted;
  const bool vector_stage = sched_.vectorized == VectorizedLoop::InnermostOfEachStage && !s.loops.empty();
  std::function<void(size_t)> loops = [&](size_t level) {
    if (level == s.loops.size()) {
      ValueScope scope(stage_scope_);
      print_stores(s.stores, scope);
      return;
    }
    const Loop& l = s.loops[level];
    const std::string v = var_name(l);
    if (level + 1 == s.loops.size() && vector_stage) {
      print_stage_vector_loop(
          v, Bound{"0", 0}, extent(l),
          [&] {
            enter_vector(v);
            ValueScope scope(stage_scope_);
            print_stores(s.stores, scope);
            leave_vector();
          },
          [&] {
            ValueScope scope(stage_scope_);
            print_stores(s.stores, scope);
          });
      return;
    }
    out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(l).text, "; ++", v, ")"));
    loops(level + 1);
    out_.close();
  };
  if (s.loops.empty()) {
    ValueScope scope(stage_scope_);
    print_stores(s.stores, scope);
  } else {
    loops(0);
  }
  stage_scope_ = enclosing;
  forward_slots_.clear();
}

void CpuKernelPrinter::print_scan(const ScanStage& s) {
  const Loop& l = s.loops[0];
  const std::string v = var_name(l);
  std::string comment = cat("// running ", to_string(s.kind), " over ", v, ", stored at every step to");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  out_.line(comment);
  const DType t = s.body.dtype();
  const bool lanes = in_vector();  // one running value per lane: a scan down columns
  const std::string acc = local_name(s.result);
  if (lanes) {
    out_.line(cat(vstate_type(s.kind, t), " ", acc, " = ", vstate_identity(s.kind, t), ";"));
  } else {
    out_.line(cat(state_type(s.kind, t), " ", acc, " = ", state_identity(s.kind, t), ";"));
  }
  out_.open(cat("for (int64_t ", v, " = 0; ", v, " < ", extent(l).text, "; ++", v, ")"));
  ValueScope scope(stage_scope_);
  const CValue value_here = value(s.body, scope);
  out_.line(cat(lanes ? vector_update(s.kind, t, acc, value_here, "") : scalar_update(s.kind, t, acc, value_here.text, ""),
                ";"));
  locals_[s.result] = CValue{acc, t, lanes};
  print_stores(s.stores, scope);
  out_.close();
}

void CpuKernelPrinter::print_stores(const std::vector<Store>& stores, ValueScope& scope) {
  for (const auto& st : stores) {
    // An accumulating store: no other thread adds into its elements (checked
    // in print_outer) and its vector lanes are distinct elements (stride 1),
    // so a load, an add and a store.
    const CValue v = value(stored_value(st), scope);
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
      if (tail_lanes_.empty()) {
        out_.line(cat("cppi_vstore(&", ptr, "[", idx, "], ", data, ");"));
      } else {
        out_.line(cat("cppi_vstore_partial(&", ptr, "[", idx, "], ", data, ", ", tail_lanes_, ");"));
      }
    }
    scope.forget_loads_of(st.buffer->name);
    forward_store(st, v);
  }
}

std::string CpuKernelPrinter::access_key(const BufferPtr& buffer, const IndexExpr& at) {
  return indirect_terms(at).empty() ? cat(buffer->name, "[", index(at), "]") : std::string();
}

void CpuKernelPrinter::forward_store(const Store& st, const CValue& v) {
  // Any store may overwrite what was forwarded (buffers of other names may
  // share memory), except a whole vector's through the same contiguous
  // index before a forwarded masked vector.
  const std::string key = access_key(st.buffer, st.index);
  const bool whole_vector_before = !key.empty() && in_vector() && tail_lanes_.empty() && whole_vectors_end_;
  for (auto it = forwarded_.begin(); it != forwarded_.end();) {
    const bool keep = whole_vector_before && it->first == key && it->second.var == vvar_ &&
                      *whole_vectors_end_ <= it->second.first;
    it = keep ? std::next(it) : forwarded_.erase(it);
  }
  // A masked last vector of constant bounds that a later stage loads again
  // is forwarded in turn.
  const auto slot = forward_slots_.find(key);
  if (key.empty() || !in_vector() || !masked_rest_first_ || slot == forward_slots_.end() || v.dtype != st.buffer->dtype) {
    return;
  }
  out_.line(cat(slot->second, " = ", as_vector(v), ";"));
  forwarded_[key] = Forwarded{vvar_, *masked_rest_first_, tail_lanes_, CValue{slot->second, v.dtype, true}};
}

const CValue* CpuKernelPrinter::forwarded_load(const Load& n) {
  if (!masked_rest_first_ || n.mask.defined()) return nullptr;
  const std::string key = access_key(n.buffer, n.index);
  const auto it = key.empty() ? forwarded_.end() : forwarded_.find(key);
  if (it == forwarded_.end()) return nullptr;
  const Forwarded& f = it->second;
  const bool same_lanes = f.var == vvar_ && f.first == *masked_rest_first_ && f.lanes == tail_lanes_;
  return same_lanes && f.value.dtype == n.dtype ? &f.value : nullptr;
}

}  // namespace cppi::cpu::detail
