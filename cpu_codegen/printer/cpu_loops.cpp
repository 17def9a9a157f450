/// CPU kernel printer: the kernel's loop nest and its stages' own loops as
/// the schedule's passes left them (cpu_codegen/schedule/loops/loop_nest.h),
/// tiled column blocks included; the stages inside them are cpu_stages.cpp's.
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
  if (l.kind == codegen::LoopKind::VectorTiles) fail(cat("kernel ", k_.name, ": the column tiles of loop ", l.var, " are not built"));
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
  rest.stage_loop = v.stage_loop;
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
  } else if (what == part::kPointwiseStage && p.args.size() == 1) {
    const size_t stage = std::stoul(p.args[0]);
    print_pointwise(std::get<PointwiseStage>(k_.stages.at(stage)), stage, at);
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

// --- the column tiles' block (cpu::lower_column_blocks) ------------------------------------

void CpuKernelPrinter::print_loop_node(const codegen::TileArrays& t, const ValueScope& at) {
  (void)at;
  for (const std::string& name : t.names) out_.line(cat(vstate_type(t.kind, t.dtype), " ", name, "[", t.slots, "];"));
}

void CpuKernelPrinter::print_loop_node(const codegen::SetTileSlots& s, const ValueScope& at) {
  (void)at;
  for (const codegen::TileSlotSet& set : s.sets) {
    const std::string value = set.earlier.empty() ? vstate_identity(s.kind, s.dtype)
                                                  : vstate_combine(s.kind, s.dtype, set.earlier, set.later);
    out_.line(cat(set.slot, " = ", value, ";"));
  }
}

void CpuKernelPrinter::print_loop_node(const codegen::Counters& c, const ValueScope& at) {
  (void)at;
  for (const std::string& name : c.names) out_.line(cat("int64_t ", name, " = 0;"));
}

void CpuKernelPrinter::print_loop_node(const codegen::TileResults& r, const ValueScope& at) {
  (void)at;
  locals_.clear();
  for (const auto& [stage, slot] : r.slots) bind_lane_results(std::get<ReductionStage>(k_.stages.at(stage)), slot);
}

void CpuKernelPrinter::print_loop_node(const codegen::TileReduction& r, const ValueScope& at) {
  const auto& s = std::get<ReductionStage>(k_.stages.at(r.stage));
  const std::string state = print_reduction_core(s, r.lo, r.hi, at, r.from_slot ? r.slot : "");
  out_.line(cat(r.slot, " = ", state, ";"));
}

void CpuKernelPrinter::print_loop_node(const codegen::TileCascadeDone& d, const ValueScope& at) {
  out_.line(cat(d.terms, " += ", d.added, ";"));
  out_.open(cat("if (", d.terms, " >= ", d.block_terms, ")"));
  print_loops(d.full, at);
  out_.line(cat(d.terms, " = 0;"));
  for (size_t l = 0; l < d.merges.size(); ++l) {
    out_.open(cat("if (++", d.merges[l], " >= ", kCascadeFanIn, ")"));
    print_loops(d.levels.at(l), at);
    out_.line(cat(d.merges[l], " = 0;"));
  }
  for (size_t l = 0; l < d.merges.size(); ++l) out_.close();
  out_.close();
}

// Each chunk's tile returned as a struct; the structs combine in chunk
// order (cppi_parallel_reduce), then land in the tile the later stages read.
void CpuKernelPrinter::print_loop_node(const codegen::TileChunks& c, const ValueScope& at) {
  const std::string vst = vstate_type(c.kind, c.dtype), part = c.tile + "_part", parts = c.tile + "_parts";
  const std::string identity = c.tile + "_identity", each = cat("for (int64_t k = 0; k < ", c.used, "; ++k) ");
  out_.line(cat("struct ", part, " { ", vst, " v[", c.vectors, "]; };"));
  out_.line(cat(part, " ", identity, ";"));
  out_.line(cat(each, identity, ".v[k] = ", vstate_identity(c.kind, c.dtype), ";"));
  out_.open(cat("const ", part, " ", parts, " = cppi_parallel_reduce<", part, ">(0, ", c.count, ", ", c.grain, ", ",
                identity, ",\n    [=](int64_t ", c.begin, ", int64_t ", c.end, ", ", part, ") -> ", part));
  print_loops(c.body, at);
  out_.line(cat(part, " out;"));
  out_.line(cat(each, "out.v[k] = ", c.tile, "[k];"));
  out_.line("return out;");
  out_.close(cat("}, [&](", part, " a, const ", part, "& b) { ", each, "a.v[k] = ",
                 vstate_combine(c.kind, c.dtype, "a.v[k]", "b.v[k]"), "; return a; });"));
  out_.line(cat(vst, " ", c.tile, "[", c.slots, "];"));
  out_.line(cat(each, c.tile, "[k] = ", parts, ".v[k];"));
}

}  // namespace cppi::cpu::detail
