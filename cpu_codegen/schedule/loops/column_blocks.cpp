/// lower_column_blocks (CpuSchedule::column_block): each loop tile_columns
/// marked, as the loop over its blocks of column_block vectors and, in a
/// block, the kernel's stages one after another: a reduction's rows
/// row_block at a time into its tile (a vector state per vector of the
/// block, which the stages after it read), each row block interchanged with
/// the block's vectors, cascaded and split among the threads as the schedule
/// says; a pointwise stage's loops the same way, outside the loop over the
/// block's vectors, so that each step walks a contiguous piece of a row.
#include "cpu_codegen/schedule/loops/loop_nest.h"

#include "codegen/c_printer.h"
#include "lowering/ir/stage_loops.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;

namespace {

/// The nest of one tiled loop: the names its statements share, and the
/// tiles of the stages built so far.
class BlockNest {
 public:
  BlockNest(const codegen::For& l, const LoopNestInput& in)
      : in_(in),
        l_(l),
        blk_(l.var + "_blk"),
        blk_end_(l.var + "_blk_end"),
        vi_(l.var + "_i"),
        count_(l.var + "_vectors") {}

  /// The loop over the blocks.
  Stmt blocks();

 private:
  Stmt stage(size_t i);
  Stmt pointwise(const ir::PointwiseStage& s, size_t i) const;
  Stmt loopless_reduction(const ir::ReductionStage& s, size_t i);
  Stmt reduction(const ir::ReductionStage& s, size_t i);
  /// `body` for each vector of the block.
  Stmt each_vector(std::vector<Stmt> body) const;
  /// The results of the reductions so far, read from their tiles.
  Stmt results_before() const { return stmt(codegen::TileResults{slots_}); }
  /// A stage's first loop `r` over [lo, hi) in row blocks, each running `body`.
  Stmt row_blocks(const std::string& r, const Bound& lo, const Bound& hi, std::vector<Stmt> body) const;
  /// Tiled reduction `s`'s cascade after a row block of `r`: the tile into
  /// the first of `levels` totals every cascade_block terms, each level
  /// into the next every kCascadeFanIn merges.
  Stmt cascade_done(const ir::ReductionStage& s, const std::string& r, int levels) const;
  /// Reduction `s`'s rows in chunks on the threads, each running `body`
  /// into a tile of its own.
  Stmt row_chunks(const ir::ReductionStage& s, Stmt body) const;
  std::string tile(const ir::ReductionStage& s) const { return in_.result_name(s.results[0]) + "_tile"; }
  std::string slot(const std::string& array) const { return cat(array, "[", vi_, "]"); }
  static std::string total(const std::string& tile, int level) {
    return level == 1 ? tile + "_total" : cat(tile, "_total", level);
  }

  const LoopNestInput& in_;
  const codegen::For& l_;
  const std::string blk_, blk_end_, vi_, count_;
  /// The tiles of the reductions so far: stage, its slot.
  std::vector<std::pair<size_t, std::string>> slots_;
};

Stmt BlockNest::blocks() {
  const std::vector<ir::Stage>& stages = in_.k.stages;
  if (ir::leading_looped_reductions(stages) == 0 || in_.s.row_block <= 0) {
    in_.fail("column_block needs a first stage that reduces over loops, and a row_block");
  }
  // parallel_reduction with tiles: the kernel's reductions split their rows
  // among the threads; its other stages have no loops (the schedule sees to
  // it).
  for (size_t i = ir::leading_looped_reductions(stages); in_.s.parallel_reduction && i < stages.size(); ++i) {
    if (!ir::loops_of(stages[i]).empty()) {
      in_.fail("tiled columns whose rows are split need loop-less stages after the reductions");
    }
  }
  const int64_t w = in_.s.vector_width, span = int64_t{in_.s.column_block} * w;
  std::vector<Stmt> body = {
      stmt(codegen::Let{blk_end_, cat("cppi_min_i<int64_t>(", blk_, " + ", span, ", ", l_.hi.text, ")")}),
      // (A masked rest is a block shorter than a vector: one.)
      stmt(codegen::Let{count_, cat("cppi_div_up(", blk_end_, " - ", blk_, ", ", w, ")")})};
  for (size_t i = 0; i < stages.size(); ++i) body.push_back(stage(i));
  codegen::For loop{blk_, l_.lo, l_.hi, codegen::LoopKind::Serial, codegen::Tail::None, false, false,
                    codegen::block(std::move(body))};
  loop.step = span;
  return stmt(loop);
}

Stmt BlockNest::stage(size_t i) {
  const ir::Stage& st = in_.k.stages[i];
  if (const auto* p = std::get_if<ir::PointwiseStage>(&st)) return pointwise(*p, i);
  const auto* r = std::get_if<ir::ReductionStage>(&st);
  if (!r) in_.fail("tiled columns over a scan");
  return r->loops.empty() ? loopless_reduction(*r, i) : reduction(*r, i);
}

// Tiles are indexed by a vector's place in the block. An overlapped rest
// is one more vector, ending at the block's end (starting before the block
// when the block is a fragment): its lanes repeat columns another vector
// also reduces, in the same order, so both store the same values. As a
// pass of its own it read every row again (x.sum(0) of 700000 x 24: twice
// the memory traffic).
Stmt BlockNest::each_vector(std::vector<Stmt> body) const {
  const int64_t w = in_.s.vector_width;
  const std::string at = l_.overlapped_rest
                             ? cat("cppi_min_i<int64_t>(", blk_, " + ", w, " * ", vi_, ", ", blk_end_, " - ", w, ")")
                             : cat(blk_, " + ", w, " * ", vi_);
  codegen::VectorAt vector{l_.var, Bound::symbolic(at), codegen::block(std::move(body))};
  vector.stage_loop = false;
  return stmt(codegen::For{vi_, Bound::constant(0), Bound::symbolic(count_), codegen::LoopKind::Serial,
                           codegen::Tail::None, true, false, stmt(vector)});
}

Stmt BlockNest::row_blocks(const std::string& r, const Bound& lo, const Bound& hi, std::vector<Stmt> body) const {
  const std::string rblk = r + "_blk", rblk_end = r + "_blk_end";
  body.insert(body.begin(),
              stmt(codegen::Let{rblk_end, cat("cppi_min_i<int64_t>(", rblk, " + ", in_.s.row_block, ", ", hi.text, ")")}));
  codegen::For loop{rblk, lo, hi, codegen::LoopKind::Serial, codegen::Tail::None, false, false,
                    codegen::block(std::move(body))};
  loop.step = in_.s.row_block;
  return stmt(loop);
}

// A pointwise stage with loops as a tiled reduction: the first loop in
// blocks of row_block, each block interchanged with the block's vectors, so
// what a vector's stores share across rows (softmax's 1 / sum) is computed
// once per row block. A loop-less one (log_softmax's log of each column's
// sum) runs in its place per vector: a later stage may read what it stores.
Stmt BlockNest::pointwise(const ir::PointwiseStage& s, size_t i) const {
  if (s.loops.empty()) {
    return each_vector({results_before(), stmt(codegen::TargetPart{part::kPointwiseStage, {std::to_string(i)}})});
  }
  const std::string r = codegen::loop_var(s.loops[0]);
  std::string comment = cat("stage ", i, ", tiled: store");
  for (const auto& st : s.stores) comment += " " + st.buffer->name;
  comment += cat(", ", in_.s.column_block, " vectors x ", in_.s.row_block, " ", r, " at a time");
  Stmt rows = stmt(codegen::StageStores{s.stores});
  for (size_t l = s.loops.size(); l-- > 1;) {
    rows = stmt(codegen::For{codegen::loop_var(s.loops[l]), Bound::constant(0), in_.extent(s.loops[l]),
                             codegen::LoopKind::Serial, codegen::Tail::None, false, false, rows});
  }
  rows = stmt(codegen::For{r, Bound::symbolic(r + "_blk"), Bound::symbolic(r + "_blk_end"), codegen::LoopKind::Serial,
                           codegen::Tail::None, false, false, rows});
  return codegen::block({stmt(codegen::Comment{comment}),
                         row_blocks(r, Bound::constant(0), in_.extent(s.loops[0]), {each_vector({results_before(), rows})})});
}

// A loop-less reduction (all() over a size-1 dim of a column statistic),
// in its place: one step per lane, kept in a tile for the stages after it.
Stmt BlockNest::loopless_reduction(const ir::ReductionStage& s, size_t i) {
  const std::string t = tile(s);
  Stmt body = codegen::block(
      {stmt(codegen::Comment{cat("stage ", i, ", per column: reduce ", ir::to_string(s.kind), " without loops")}),
       stmt(codegen::TileArrays{s.kind, s.body.dtype(), {t}, in_.s.column_block}),
       each_vector({results_before(), stmt(codegen::TileReduction{i, Bound::constant(0), Bound::constant(1), slot(t),
                                                                   false})})});
  slots_.emplace_back(i, slot(t));
  return body;
}

Stmt BlockNest::reduction(const ir::ReductionStage& s, size_t i) {
  const std::string t = tile(s), r = codegen::loop_var(s.loops[0]);
  const Bound rows = in_.extent(s.loops[0]);
  const bool split_rows = in_.s.parallel_reduction;
  const std::string comment = cat("stage ", i, ", tiled: ", in_.s.column_block, " vectors x ", in_.s.row_block, " ", r,
                                  " at a time", split_rows ? ", the rows split among the threads" : "");
  // Cascade (CpuSchedule::cascade_block): the tile restarts every block of
  // terms per lane, merged into levels of totals (cascade_levels). Not
  // lower_reduction_loops' cascade blocks: these count whole row blocks of
  // the tile.
  const bool cascade = in_.s.cascade_block > 0 && ir::accumulates_in_cascade(s.kind, s.body.dtype());
  const int levels = cascade ? cascade_levels(rows.value, in_.s.cascade_block) : 0;
  std::vector<std::string> arrays{t};
  std::vector<codegen::TileSlotSet> start{{slot(t), "", ""}};
  for (int l = 1; l <= levels; ++l) {
    arrays.push_back(total(t, l));
    start.push_back({slot(total(t, l)), "", ""});
  }
  std::vector<Stmt> body{stmt(codegen::TileArrays{s.kind, s.body.dtype(), arrays, in_.s.column_block}),
                         each_vector({stmt(codegen::SetTileSlots{s.kind, s.body.dtype(), start})})};
  if (cascade) {
    std::vector<std::string> counters{t + "_terms"};
    for (int l = 1; l < levels; ++l) counters.push_back(cat(t, "_merges", l));
    body.push_back(stmt(codegen::Counters{counters}));
  }
  const Bound row_lo = split_rows ? Bound::symbolic(r + "_chunk_begin") : Bound::constant(0);
  const Bound row_hi = split_rows ? Bound::symbolic(r + "_chunk_end") : rows;
  std::vector<Stmt> row_block{each_vector(
      {results_before(), stmt(codegen::TileReduction{i, Bound::symbolic(r + "_blk"), Bound::symbolic(r + "_blk_end"),
                                                      slot(t), true})})};
  if (cascade) row_block.push_back(cascade_done(s, r, levels));
  body.push_back(row_blocks(r, row_lo, row_hi, std::move(row_block)));
  if (cascade) {
    // The stage's result is complete before a later stage reads it: the
    // levels folded in, lowest first.
    std::vector<codegen::TileSlotSet> fold;
    for (int l = 1; l <= levels; ++l) fold.push_back({slot(t), slot(total(t, l)), slot(t)});
    body.push_back(each_vector({stmt(codegen::SetTileSlots{s.kind, s.body.dtype(), fold})}));
  }
  slots_.emplace_back(i, slot(t));
  Stmt rows_nest = codegen::block(std::move(body));
  return codegen::block({stmt(codegen::Comment{comment}), split_rows ? row_chunks(s, rows_nest) : rows_nest});
}

Stmt BlockNest::cascade_done(const ir::ReductionStage& s, const std::string& r, int levels) const {
  const std::string t = tile(s);
  std::string added = cat("(", r, "_blk_end - ", r, "_blk)");
  for (size_t l = 1; l < s.loops.size(); ++l) added += cat(" * (", in_.extent(s.loops[l]).text, ")");
  auto merge = [&](const std::string& from, const std::string& into) {
    return each_vector({stmt(codegen::SetTileSlots{
        s.kind, s.body.dtype(), {{slot(into), slot(into), slot(from)}, {slot(from), "", ""}}})});
  };
  codegen::TileCascadeDone done{t + "_terms", added, in_.s.cascade_block, merge(t, total(t, 1)), {}, {}};
  for (int l = 1; l < levels; ++l) {
    done.merges.push_back(cat(t, "_merges", l));
    done.levels.push_back(merge(total(t, l), total(t, l + 1)));
  }
  return stmt(std::move(done));
}

// Split rows (parallel_reduction): each chunk of rows tiles into a tile of
// its own, returned as a struct; the chunks' tiles combine in order and land
// in the tile the later stages read.
Stmt BlockNest::row_chunks(const ir::ReductionStage& s, Stmt body) const {
  // The outer loop's vectors (the schedule asks for a constant extent).
  const auto extent = in_.k.outer.back().extent.constant();
  if (!extent) in_.fail("tiled columns whose rows are split need a constant outer loop");
  const int64_t w = in_.s.vector_width;
  const std::string t = tile(s), r = codegen::loop_var(s.loops[0]);
  codegen::TileChunks chunks;
  chunks.kind = s.kind;
  chunks.dtype = s.body.dtype();
  chunks.tile = t;
  chunks.vectors = std::min<int64_t>(in_.s.column_block, (*extent + w - 1) / w);
  chunks.slots = in_.s.column_block;
  chunks.used = count_;
  chunks.count = in_.extent(s.loops[0]).text;
  chunks.grain = std::to_string(std::max<int64_t>(1, in_.s.grain_size));
  chunks.begin = r + "_chunk_begin";
  chunks.end = r + "_chunk_end";
  chunks.body = std::move(body);
  return stmt(std::move(chunks));
}

Stmt lower_in(const Stmt& s, const LoopNestInput& in) {
  if (const auto* l = std::get_if<codegen::For>(&s->node); l && l->kind == codegen::LoopKind::VectorTiles) {
    return BlockNest(*l, in).blocks();
  }
  return codegen::map_children(s, [&](const Stmt& c) { return lower_in(c, in); });
}

}  // namespace

codegen::Stmt lower_column_blocks(const codegen::Stmt& s, const LoopNestInput& in) {
  return in.s.column_block > 0 ? lower_in(s, in) : s;
}

}  // namespace cppi::cpu
