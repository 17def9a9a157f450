/// CPU kernel printer: the kernel's loop nest and its stages' own loops as
/// the schedule's passes left them (cpu_codegen/schedule/loops/loop_nest.h),
/// and tiled column blocks; the stages inside them are cpu_stages.cpp's.
#include "cpu_codegen/printer/cpu_kernel_printer.h"

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
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

// --- the loop nest (cpu_codegen/schedule/loops/loop_nest.h) ----------------------------------

void CpuKernelPrinter::print_let(const codegen::Let& let) { out_.line(cat("const int64_t ", let.name, " = ", let.value, ";")); }

void CpuKernelPrinter::print_loops(const codegen::Stmt& s, const ValueScope& at) {
  if (!s) return;
  std::visit([&](const auto& n) { print_loop_node(n, at); }, s->node);
}

void CpuKernelPrinter::print_loop_node(const codegen::For& l, const ValueScope& at) {
  if (l.tail != codegen::Tail::None) fail(cat("kernel ", k_.name, ": the tail of vector loop ", l.var, " is not split off"));
  if (codegen::bound_to_gpu(l.kind)) {
    fail(cat("kernel ", k_.name, ": loop ", l.var, " is bound to the GPU"));
  }
  if (l.kind == codegen::LoopKind::VectorTiles) {
    print_tiled_columns(l.var, l.lo.text, l.hi.text, at, l.overlapped_rest);
    return;
  }
  // A stage's loop: its values know it, and where its whole vectors end
  // before a masked last one.
  std::optional<Place> in_stage;
  if (l.stage_loop) {
    in_stage = place(at);
    in_stage->stage_loop = true;
    if (l.whole_vectors_before_rest && l.hi.value) in_stage->whole_vectors_end = *l.hi.value;
  }
  const ValueScope loop(&at, in_stage ? &*in_stage : nullptr);
  if (l.no_autovec) out_.line("CPPI_NO_AUTOVEC");
  if (l.kind == codegen::LoopKind::Serial) {
    const std::string step = l.step == 1 ? cat("++", l.var) : cat(l.var, " += ", l.step);
    out_.open(cat("for (int64_t ", l.var, " = ", l.lo.text, "; ", l.var, " < ", l.hi.text, "; ", step, ")"));
    print_loops(l.body, loop);
  } else {
    out_.open(cat("for (int64_t ", l.var, " = ", l.lo.text, "; ", l.var, " < ", l.hi.text, "; ", l.var, " += ",
                  sched_.vector_width, ")"));
    const Place lanes = place(loop).vectorized(l.var);
    print_loops(l.body, ValueScope(&loop, &lanes));
  }
  out_.close();
}

void CpuKernelPrinter::print_loop_node(const codegen::VectorAt& v, const ValueScope& at) {
  out_.line(cat("const int64_t ", v.var, " = ", v.at.text, ";"));
  Place rest = place(at).vectorized(v.var);
  rest.stage_loop = true;
  rest.masked_rest_first = v.at.value;
  print_loops(v.body, ValueScope(&at, &rest));
}

void CpuKernelPrinter::print_loop_node(const codegen::StageStores& s, const ValueScope& at) {
  ValueScope scope(&at);
  print_stores(s.stores, scope);
}

void CpuKernelPrinter::print_loop_node(const codegen::ParallelChunks& c, const ValueScope& at) {
  out_.open(cat("cppi_parallel_for(0, ", c.count, ", ", c.grain, ", [=](int64_t ", c.begin, ", int64_t ", c.end, ")"));
  print_loops(c.body, at);
  out_.close("});");
}

void CpuKernelPrinter::print_loop_node(const codegen::Collapsed& c, const ValueScope& at) {
  open_collapsed_loop(c.units);
  print_loops(c.body, at);
  out_.close();
}

void CpuKernelPrinter::print_loop_node(const codegen::Let& let, const ValueScope& at) {
  (void)at;
  print_let(let);
}

void CpuKernelPrinter::print_loop_node(const codegen::Comment& c, const ValueScope& at) {
  (void)at;
  out_.line("// " + c.text);
}

void CpuKernelPrinter::print_loop_node(const codegen::Block& b, const ValueScope& at) {
  if (b.scoped) out_.open("");
  for (const codegen::Stmt& s : b.body) print_loops(s, at);
  if (b.scoped) out_.close();
}

void CpuKernelPrinter::print_loop_node(const codegen::If& i, const ValueScope& at) {
  out_.open(i.condition.empty() ? std::string() : cat("if (", i.condition, ")"));
  print_loops(i.then, at);
  out_.close();
  if (!i.otherwise) return;
  out_.open("else");
  print_loops(i.otherwise, at);
  out_.close();
}

void CpuKernelPrinter::print_loop_node(const codegen::MaskedLanes& m, const ValueScope& at) {
  Place masked = place(at);
  masked.tail_lanes = m.lanes;
  print_loops(m.body, ValueScope(&at, &masked));
}

void CpuKernelPrinter::print_loop_node(const codegen::TileRow& t, const ValueScope& at) {
  Place row = place(at);
  row.tile_row = t.row;
  print_loops(t.body, ValueScope(&at, &row));
}

void CpuKernelPrinter::print_loop_node(const codegen::TargetPart& p, const ValueScope& at) {
  const std::string& what = p.what;
  if (what == part::kScratch) {
    print_scratch_alloc();
  } else if (what == part::kFreeScratch) {
    print_scratch_free();
  } else if (what == part::kPrefault && p.args.size() == 3) {
    print_prefault(p.args[0], p.args[1], p.args[2]);
  } else if (what == part::kEpilogueInLanes && p.args.size() == 2) {
    print_epilogue_in_lanes(k_.outer.back(), Bound{p.args[0], std::nullopt}, Bound{p.args[1], std::nullopt}, at);
  } else if (what == part::kTileBuffers) {
    if (transposed_.empty()) fail(cat("kernel ", k_.name, ": transpose_tile without a transposed load"));
    const int64_t w = sched_.vector_width;
    for (const auto& t : transposed_) {
      out_.line(cat("alignas(64) ", dtype_ctype(t.buffer->dtype), " ", t.tile, "[", w * w, "];"));
    }
  } else if (what == part::kTransposeTiles && p.args.size() == 2) {
    print_transpose_tiles(p.args[0]);
  } else {
    fail(cat("kernel ", k_.name, ": no CPU loop-nest part ", what, " of ", p.args.size(), " arguments"));
  }
}

void CpuKernelPrinter::print_transpose_tiles(const std::string& first_row) {
  const size_t n = k_.outer.size();
  const Loop& rows = k_.outer[n - 2];
  const Loop& cols = k_.outer[n - 1];
  const std::map<std::string, IndexExpr> at_first_row = {{rows.var.as<IndexVar>()->name, ir::var(first_row)}};
  for (const auto& t : transposed_) {
    auto stride = coefficient(t.index, cols.var);
    out_.line(cat("cppi_transpose_tile<", sched_.vector_width, ", ", dtype_size(t.buffer->dtype), ">(&",
                  pointer_name(t.buffer->name), "[", index(substitute(t.index, at_first_row)), "], ", index(*stride),
                  ", ", t.tile, ");"));
  }
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
  // terms per lane, merged into levels of totals (cascade_levels). Not
  // lower_reduction_loops' cascade blocks: these count whole row blocks
  // of the tile, and the column tiles' block is not in the loop IR yet.
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
      print_reduction_core(s, Bound{rblk, std::nullopt}, Bound{rblk_end, std::nullopt}, ValueScope(&block.at, &lanes), slot);
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
