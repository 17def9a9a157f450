/// CPU kernel printer: loop structure (parallel outer loops, vector loops
/// with scalar, overlapped or masked tails, transposed tiles, tiled column
/// reductions); the stages inside them are cpu_stages.cpp's.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/index_conditions.h"
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
  const std::string grain = grain_text(p);
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
    out_.open(cat("cppi_parallel_for(0, ", blocks, ", ", grain, ", [=](int64_t begin, int64_t end)"));
    print_scratch_alloc();
    print_prefault(cat("begin * ", w), hi, "1");
    print_outer_vector_loop(l, Bound{cat("begin * ", w), std::nullopt}, Bound{hi, std::nullopt});
    print_scratch_free();
    out_.close("});");
    return;
  }
  std::vector<IndexExpr> extents;
  for (size_t i = 0; i < p; ++i) extents.push_back(k_.outer[i].extent);
  out_.open(cat("cppi_parallel_for(0, ", index(product(extents)), ", ", grain, ", [=](int64_t begin, int64_t end)"));
  print_scratch_alloc();
  std::vector<IndexExpr> inner_extents;
  for (size_t i = p; i < n; ++i) inner_extents.push_back(k_.outer[i].extent);
  print_prefault("begin", "end", "(" + index(product(inner_extents)) + ")");
  if (sched_.epilogue_in_lanes && p == n) {
    if (n != 1) fail(cat("kernel ", k_.name, ": an epilogue in lanes under ", n, " collapsed parallel loops"));
    print_epilogue_in_lanes(k_.outer[0], Bound{"begin", std::nullopt}, Bound{"end", std::nullopt});
  } else {
    std::vector<std::pair<std::string, IndexExpr>> units;
    for (size_t i = 0; i < p; ++i) units.emplace_back(var_name(k_.outer[i]), k_.outer[i].extent);
    open_collapsed_loop(units);
    print_outer_loops(p);
    out_.close();
  }
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

std::vector<CpuKernelPrinter::TransposedLoad> CpuKernelPrinter::transposed_loads() const {
  std::vector<TransposedLoad> loads;
  const size_t n = k_.outer.size();
  if (!sched_.transpose_tile || n < 2) return loads;
  const std::string rows_var = k_.outer[n - 2].var.as<IndexVar>()->name;
  const std::string cols_var = k_.outer[n - 1].var.as<IndexVar>()->name;
  for (const auto& st : k_.stages) {
    for (const auto& a : reads(st)) {
      if (!transposed_load(a.index, a.masked, cols_var, rows_var)) continue;
      bool seen = false;
      for (const auto& t : loads) seen = seen || (t.buffer->name == a.buffer->name && t.index == a.index);
      if (!seen) loads.push_back({a.buffer, a.index, cat("tile", loads.size(), "_", pointers_.at(a.buffer->name))});
    }
  }
  return loads;
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
  for (const auto& st : k_.stages) {
    const auto* pw = std::get_if<PointwiseStage>(&st);
    if (!pw || !pw->loops.empty()) fail(cat("kernel ", k_.name, ": transpose_tile over a stage with loops"));
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
  out_.open(cat("cppi_parallel_for(0, ", index(product(extents)), ", ", grain, ", [=](int64_t begin, int64_t end)"));
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
        Place tile = kernel_place_;
        tile.tile_row = cat("(", r, " - ", r0, ") * ", w);
        print_stages(ValueScope(&kernel_scope_, &tile), true);
        out_.close();
        out_.close();
      },
      [&](const std::string& vend, const std::string& end) {
        out_.open(cat("for (int64_t ", r, " = ", r0, "; ", r, " < ", r0, " + ", w, "; ++", r, ")"));
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", c, " = ", vend, "; ", c, " < ", end, "; ++", c, ")"));
        print_stages(kernel_scope_, false);
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
    print_stages(kernel_scope_, false);
    return;
  }
  const Loop& l = k_.outer[level];
  if (level == n - 1 && sched_.vectorized == VectorizedLoop::InnermostOuter) {
    print_outer_vector_loop(l, Bound{"0", 0}, extent(l));
    return;
  }
  if (level == n - 1 && sched_.epilogue_in_lanes) {
    print_epilogue_in_lanes(l, Bound{"0", 0}, extent(l));
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
                                              const ValueScope& at, const WholeVectors& main, const Body& vector_step,
                                              const Body& scalar_step) {
  Place in_loop = place(at);
  in_loop.stage_loop = true;
  const ValueScope loop(&at, &in_loop);
  if (sched_.tail != TailKind::Masked) {
    print_split_loop(
        v, lo, hi, [&](const std::string& from, const std::string& to) { main(from, to, loop); },
        [&] { scalar_step(loop); });
    return;
  }
  const bool known = lo.value && hi.value;
  auto whole_vectors = [&](const std::string& from, const std::string& to) {
    Place whole = in_loop;
    if (known) whole.whole_vectors_end = std::stoll(to);
    main(from, to, ValueScope(&loop, &whole));
  };
  print_split_loop_with_rest(v, lo, hi, whole_vectors, [&](const std::string& vend, const std::string& end) {
    Place rest = open_masked_rest(in_loop, v, vend, end, known);
    out_.line(cat("const int64_t ", v, " = ", vend, ";"));
    if (known) rest.masked_rest_first = std::stoll(vend);
    vector_step(ValueScope(&loop, &rest));
    out_.close();
  });
}

Place CpuKernelPrinter::open_masked_rest(const Place& outer, const std::string& v, const std::string& vend,
                                         const std::string& end, bool known) {
  out_.open(known ? std::string() : cat("if (", vend, " < ", end, ")"));  // known: then vend < end
  out_.line(cat("// ", v, " from ", vend, ": one vector, its lanes from ", end, " on turned off"));
  Place rest = outer;
  rest.tail_lanes = known ? std::to_string(std::stoll(end) - std::stoll(vend)) : cat("(", end, " - ", vend, ")");
  return rest;
}

void CpuKernelPrinter::print_stage_vector_loop(const std::string& v, const Bound& lo, const Bound& hi,
                                               const ValueScope& at, const Body& vector_step, const Body& scalar_step) {
  print_stage_split_loop(
      v, lo, hi, at,
      [&](const std::string& from, const std::string& to, const ValueScope& body) {
        out_.line("CPPI_NO_AUTOVEC");
        out_.open(cat("for (int64_t ", v, " = ", from, "; ", v, " < ", to, "; ", v, " += ", sched_.vector_width, ")"));
        vector_step(body);
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
  auto whole_vectors_at = [&](const std::string& from, const std::string& to, const ValueScope& at) {
    if (sched_.column_block > 0) {
      print_tiled_columns(v, from, to, at);
      return;
    }
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", v, " = ", from, "; ", v, " < ", to, "; ", v, " += ", w, ")"));
    print_stages(at, true);
    out_.close();
  };
  auto whole_vectors = [&](const std::string& from, const std::string& to) { whole_vectors_at(from, to, kernel_scope_); };
  if (sched_.tail == TailKind::Overlapped && sched_.column_block > 0 && read_back_buffers(k_).empty()) {
    // [lo, hi) holds at least one whole vector (CpuSchedule::tail); the rest
    // joins the tiles' pass over the rows. Not when a stage reads a buffer
    // the kernel writes: the overlapping vector would read its neighbour's
    // results in place of what they replaced (a column softmax scales its
    // output in place).
    print_tiled_columns(v, lo.text, hi.text, kernel_scope_, true);
    return;
  }
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
      const Place rest = open_masked_rest(kernel_place_, v, vend, end, lo.value && hi.value);
      whole_vectors_at(vend, end, ValueScope(&kernel_scope_, &rest));
      out_.close();
    });
    return;
  }
  auto tail = [&] { print_stages(kernel_scope_, false); };
  if (sched_.column_block <= 0) {
    print_vector_loop(v, lo, hi, [&] { print_stages(kernel_scope_, true); }, tail);
    return;
  }
  print_split_loop(
      v, lo, hi, [&](const std::string& from, const std::string& to) { print_tiled_columns(v, from, to, kernel_scope_); },
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
      const Place lanes = vector ? kernel_place_.vectorized(v) : kernel_place_;
      const ValueScope at(&kernel_scope_, &lanes);
      for (size_t i = 0; i < piece.size(); ++i) print_pointwise(piece[i], i, at);
    };
    out_.line(cat("// ", v, " in [", from, ", ", to, "): its index comparisons are constants"));
    print_vector_loop(v, Bound{std::to_string(from), from}, Bound{std::to_string(to), to}, [&] { stages(true); },
                      [&] { stages(false); });
    from = to;
  }
}

std::string CpuKernelPrinter::grain_text(size_t p) const {
  if (sched_.grain_work <= 0) return std::to_string(std::max<int64_t>(1, sched_.grain_size));
  // The work of one iteration of the p parallel loops: the inner outer
  // loops' points times the stages' loop points (a loop-less stage counts 1).
  IndexExpr stages = index_const(0);
  for (const auto& s : k_.stages) {
    std::vector<IndexExpr> extents;
    for (const auto& l : loops_of(s)) extents.push_back(l.extent);
    stages = stages + product(extents);
  }
  std::vector<IndexExpr> inner;
  for (size_t i = p; i < k_.outer.size(); ++i) inner.push_back(k_.outer[i].extent);
  inner.push_back(stages);
  return cat("cppi_max_i<int64_t>(1, cppi_div_up(", sched_.grain_work, ", cppi_max_i<int64_t>(1, ", index(product(inner)),
             ")))");
}

void CpuKernelPrinter::print_tiled_columns(const std::string& v, const std::string& from, const std::string& to,
                                           const ValueScope& at, bool overlapped_rest) {
  if (ir::leading_looped_reductions(k_.stages) == 0 || sched_.row_block <= 0) {
    fail(cat("kernel ", k_.name, ": column_block needs a first stage that reduces over loops, and a row_block"));
  }
  const int64_t w = sched_.vector_width;
  const int64_t span = int64_t{sched_.column_block} * w;
  const std::string blk = v + "_blk", blk_end = v + "_blk_end", vi = v + "_i", count = v + "_vectors";
  // parallel_reduction with tiles: the kernel's reductions split their rows
  // among the threads (CpuSchedule::column_block); its other stages have no
  // loops (the schedule sees to it).
  const bool split_rows = sched_.parallel_reduction;
  if (split_rows) {
    for (size_t i = ir::leading_looped_reductions(k_.stages); i < k_.stages.size(); ++i)
      if (!loops_of(k_.stages[i]).empty())
        fail(cat("kernel ", k_.name, ": tiled columns whose rows are split need loop-less stages after the reductions"));
  }
  // Tiles are indexed by a vector's place in the block. An overlapped rest
  // is one more vector, ending at the block's end (starting before the
  // block when the block is a fragment): its lanes repeat columns another
  // vector also reduces, in the same order, so both store the same values.
  // As a pass of its own it read every row again (x.sum(0) of 700000 x 24:
  // twice the memory traffic).
  auto open_vector_loop = [&] {
    out_.line("CPPI_NO_AUTOVEC");
    out_.open(cat("for (int64_t ", vi, " = 0; ", vi, " < ", count, "; ++", vi, ")"));
    out_.line(cat("const int64_t ", v, " = ",
                  overlapped_rest ? cat("cppi_min_i<int64_t>(", blk, " + ", w, " * ", vi, ", ", blk_end, " - ", w, ")")
                                  : cat(blk, " + ", w, " * ", vi),
                  ";"));
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
  // (A masked rest is a block shorter than a vector: one.)
  out_.line(cat("const int64_t ", count, " = cppi_div_up(", blk_end, " - ", blk, ", ", w, ");"));
  const TiledBlock block{v, vi, count, split_rows, at};
  const Place lanes = place(at).vectorized(v);
  const ValueScope in_vectors(&at, &lanes);
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (const auto* pw = std::get_if<PointwiseStage>(&k_.stages[i])) {
      if (!pw->loops.empty()) {
        print_tiled_pointwise(*pw, i, block, open_vector_loop, bind_earlier_results);
        continue;
      }
      // A loop-less stage (log_softmax's log of each column's sum), in its
      // place: a later stage may read what it stores.
      open_vector_loop();
      bind_earlier_results(i);
      print_pointwise(*pw, i, in_vectors);
      out_.close();
      continue;
    }
    const auto& s = std::get<ReductionStage>(k_.stages[i]);
    const DType t = s.body.dtype();
    const std::string tile = local_name(s.results[0]) + "_tile";
    const std::string slot = cat(tile, "[", vi, "]");
    if (s.loops.empty()) {
      // A loop-less reduction (all() over a size-1 dim of a column
      // statistic), in its place: one step per lane, kept in a tile for the
      // stages after it.
      out_.line(cat("// stage ", i, ", per column: reduce ", to_string(s.kind), " without loops"));
      out_.line(cat(vstate_type(s.kind, t), " ", tile, "[", sched_.column_block, "];"));
      open_vector_loop();
      bind_earlier_results(i);
      const std::string state = print_reduction_core(s, Bound{"0", 0}, Bound{"1", 1}, in_vectors);
      out_.line(cat(slot, " = ", state, ";"));
      out_.close();
      slots[i] = slot;
      continue;
    }
    print_tiled_reduction(s, i, block, open_vector_loop, bind_earlier_results);
    slots[i] = slot;
  }
  out_.close();
}

void CpuKernelPrinter::print_tiled_reduction(const ReductionStage& s, size_t i, const TiledBlock& block,
                                             const std::function<void()>& open_vector_loop,
                                             const std::function<void(size_t)>& bind_earlier_results) {
  const std::string& vi = block.vector_index;
  const std::string& count = block.vectors;
  const std::string& v = block.var;
  const bool split_rows = block.split_rows;
  const int64_t w = sched_.vector_width;
  const DType t = s.body.dtype();
  const std::string tile = local_name(s.results[0]) + "_tile";
  const std::string slot = cat(tile, "[", vi, "]");
  const Loop& first = s.loops[0];
  const std::string r = var_name(first), rblk = r + "_blk", rblk_end = r + "_blk_end";
  const Bound rows = extent(first);
  out_.line(cat("// stage ", i, ", tiled: ", sched_.column_block, " vectors x ", sched_.row_block, " ", r, " at a time",
                split_rows ? ", the rows split among the threads" : ""));
  // Split rows (parallel_reduction): each chunk of rows tiles into a tile
  // of its own, returned as a struct; the chunks' tiles combine in order
  // and land in the tile the later stages read.
  const std::string vst = vstate_type(s.kind, t), part = tile + "_part", parts = tile + "_parts";
  const std::string row_lo = split_rows ? r + "_chunk_begin" : "0", row_hi = split_rows ? r + "_chunk_end" : rows.text;
  if (split_rows) {
    // The outer loop's vectors (the schedule asks for a constant extent).
    const auto extent = k_.outer.back().extent.constant();
    if (!extent) fail(cat("kernel ", k_.name, ": tiled columns whose rows are split need a constant outer loop"));
    const int64_t vectors = std::min<int64_t>(sched_.column_block, (*extent + w - 1) / w);
    out_.line(cat("struct ", part, " { ", vst, " v[", vectors, "]; };"));
    out_.line(cat(part, " ", tile, "_identity;"));
    out_.line(cat("for (int64_t k = 0; k < ", count, "; ++k) ", tile, "_identity.v[k] = ", vstate_identity(s.kind, t), ";"));
    out_.open(cat("const ", part, " ", parts, " = cppi_parallel_reduce<", part, ">(0, ", rows.text, ", ",
                  std::max<int64_t>(1, sched_.grain_size), ", ", tile, "_identity,\n    [=](int64_t ", row_lo,
                  ", int64_t ", row_hi, ", ", part, ") -> ", part));
  }
  // Cascade (CpuSchedule::cascade_block): the tile restarts every block of
  // terms per lane, merged into levels of totals (cascade_levels).
  const bool cascade = sched_.cascade_block > 0 && accumulates_in_cascade(s.kind, t);
  const int levels = cascade ? cascade_levels(rows.value, sched_.cascade_block) : 0;
  auto total_tile = [&](int l) { return l == 1 ? tile + "_total" : cat(tile, "_total", l); };
  auto total_slot = [&](int l) { return cat(total_tile(l), "[", vi, "]"); };
  auto merges = [&](int l) { return cat(tile, "_merges", l); };
  const std::string terms = tile + "_terms";
  out_.line(cat(vstate_type(s.kind, t), " ", tile, "[", sched_.column_block, "];"));
  for (int l = 1; l <= levels; ++l)
    out_.line(cat(vstate_type(s.kind, t), " ", total_tile(l), "[", sched_.column_block, "];"));
  open_vector_loop();
  out_.line(cat(slot, " = ", vstate_identity(s.kind, t), ";"));
  for (int l = 1; l <= levels; ++l) out_.line(cat(total_slot(l), " = ", vstate_identity(s.kind, t), ";"));
  out_.close();
  if (cascade) out_.line(cat("int64_t ", terms, " = 0;"));
  for (int l = 1; l < levels; ++l) out_.line(cat("int64_t ", merges(l), " = 0;"));
  out_.open(cat("for (int64_t ", rblk, " = ", row_lo, "; ", rblk, " < ", row_hi, "; ", rblk, " += ", sched_.row_block, ")"));
  out_.line(cat("const int64_t ", rblk_end, " = cppi_min_i<int64_t>(", rblk, " + ", sched_.row_block, ", ", row_hi,
                ");"));
  open_vector_loop();
  bind_earlier_results(i);
  const Place lanes = place(block.at).vectorized(v);
  const std::string acc =
      print_reduction_core(s, Bound{rblk, std::nullopt}, Bound{rblk_end, std::nullopt}, ValueScope(&block.at, &lanes), "", slot);
  out_.line(cat(slot, " = ", acc, ";"));
  out_.close();
  if (cascade) {
    std::string per_row;
    for (size_t l = 1; l < s.loops.size(); ++l) per_row += cat(" * (", extent(s.loops[l]).text, ")");
    out_.line(cat(terms, " += (", rblk_end, " - ", rblk, ")", per_row, ";"));
    out_.open(cat("if (", terms, " >= ", sched_.cascade_block, ")"));
    open_vector_loop();
    out_.line(cat(total_slot(1), " = ", vstate_combine(s.kind, t, total_slot(1), slot), ";"));
    out_.line(cat(slot, " = ", vstate_identity(s.kind, t), ";"));
    out_.close();
    out_.line(cat(terms, " = 0;"));
    for (int l = 1; l < levels; ++l) {
      out_.open(cat("if (++", merges(l), " >= ", kCascadeFanIn, ")"));
      open_vector_loop();
      out_.line(cat(total_slot(l + 1), " = ", vstate_combine(s.kind, t, total_slot(l + 1), total_slot(l)), ";"));
      out_.line(cat(total_slot(l), " = ", vstate_identity(s.kind, t), ";"));
      out_.close();
      out_.line(cat(merges(l), " = 0;"));
    }
    for (int l = 1; l < levels; ++l) out_.close();
    out_.close();
  }
  out_.close();
  if (cascade) {
    // The stage's result is complete before a later stage reads it: the
    // levels folded in, lowest first.
    open_vector_loop();
    for (int l = 1; l <= levels; ++l)
      out_.line(cat(slot, " = ", vstate_combine(s.kind, t, total_slot(l), slot), ";"));
    out_.close();
  }
  if (split_rows) {
    out_.line(cat(part, " out;"));
    out_.line(cat("for (int64_t k = 0; k < ", count, "; ++k) out.v[k] = ", tile, "[k];"));
    out_.line("return out;");
    out_.close(cat("}, [&](", part, " a, const ", part, "& b) { for (int64_t k = 0; k < ", count, "; ++k) a.v[k] = ",
                   vstate_combine(s.kind, t, "a.v[k]", "b.v[k]"), "; return a; });"));
    out_.line(cat(vst, " ", tile, "[", sched_.column_block, "];"));
    out_.line(cat("for (int64_t k = 0; k < ", count, "; ++k) ", tile, "[k] = ", parts, ".v[k];"));
  }
}

void CpuKernelPrinter::print_tiled_pointwise(const PointwiseStage& s, size_t index, const TiledBlock& block,
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
  bind_earlier_results(index);
  out_.open(cat("for (int64_t ", r, " = ", rblk, "; ", r, " < ", rblk_end, "; ++", r, ")"));
  for (size_t l = 1; l < s.loops.size(); ++l) {
    const std::string inner = var_name(s.loops[l]);
    out_.open(cat("for (int64_t ", inner, " = 0; ", inner, " < ", extent(s.loops[l]).text, "; ++", inner, ")"));
  }
  {
    const Place lanes = place(block.at).vectorized(block.var);
    ValueScope scope(&block.at, &lanes);
    print_stores(s.stores, scope);
  }
  for (size_t l = 0; l < s.loops.size(); ++l) out_.close();
  out_.close();
  out_.close();
}

}  // namespace cppi::cpu::detail
