/// lower_loop_nest: a CPU kernel's outer loops as the scheduled loop IR.
#include "codegen/c_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "lowering/ir/index_simplify.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;
using ir::IndexExpr;
using ir::Loop;

codegen::Bound LoopNestInput::extent(const Loop& l) const { return Bound{index(l.extent), l.extent.constant()}; }

void LoopNestInput::fail(const std::string& message) const {
  codegen::printer_error("cpu", cat("kernel ", k.name, ": ", message));
}

namespace {

codegen::Tail tail_of(const ir::CpuSchedule& s) {
  switch (s.tail) {
    case ir::TailKind::ScalarLoop: return codegen::Tail::Scalar;
    case ir::TailKind::Masked: return codegen::Tail::Masked;
    case ir::TailKind::Overlapped: return codegen::Tail::Overlapped;
  }
  return codegen::Tail::Scalar;
}

class Lowering {
 public:
  explicit Lowering(const LoopNestInput& in) : in_(in), k_(in.k), s_(in.s), n_(in.k.outer.size()) {}

  Stmt nest() const;

 private:
  /// The vectorised innermost outer loop `l` over [lo, hi), the stages inside.
  Stmt vector_loop(const Loop& l, const Bound& lo, const Bound& hi) const {
    return stmt(codegen::For{codegen::loop_var(l), lo, hi, codegen::LoopKind::Vector, tail_of(s_), true, false,
                             stmt(codegen::Stages{})});
  }
  Stmt serial(const std::string& var, const Bound& lo, const Bound& hi, Stmt body, bool no_autovec = false) const {
    return stmt(codegen::For{var, lo, hi, codegen::LoopKind::Serial, codegen::Tail::None, no_autovec, false,
                             std::move(body)});
  }
  Stmt part(const char* what, std::vector<std::string> args = {}) const {
    return stmt(codegen::TargetPart{what, std::move(args)});
  }
  /// Outer loops `level` and below, inside the parallel ones.
  Stmt outer_loops(size_t level) const;
  /// The body of a parallel chunk, between its scratch buffers.
  Stmt with_scratch(Stmt body) const {
    if (ir::signature(k_).scratch.empty()) return body;
    return codegen::block({part(part::kScratch), std::move(body), part(part::kFreeScratch)});
  }
  Stmt prefault(const std::string& first, const std::string& end, const std::string& inner) const {
    return s_.prefault_outputs ? part(part::kPrefault, {first, end, inner}) : codegen::block({});
  }
  /// The grain of a parallel loop over the first `p` outer loops: the
  /// schedule's, or with CpuSchedule::grain_work an expression of the sizes.
  std::string grain(size_t p) const;
  Stmt transposed() const;
  /// The rows [first_row, first_row + W) of the second-innermost loop.
  Stmt transposed_tile(const std::string& first_row) const;

  const LoopNestInput& in_;
  const ir::Kernel& k_;
  const ir::CpuSchedule& s_;
  const size_t n_;
};

Stmt Lowering::nest() const {
  const size_t p = static_cast<size_t>(s_.parallel_loops);
  const bool vec_outer = s_.vectorized == ir::VectorizedLoop::InnermostOuter;
  if (p > n_) in_.fail(cat(p, " parallel loops but ", n_, " outer loops"));
  if (vec_outer && n_ == 0) in_.fail("innermost outer loop vectorised but there are no outer loops");
  if (s_.parallel_reduction && p > 0) in_.fail("parallel_reduction with parallel outer loops");
  if (ir::accumulates(k_) && (p > parallel_loops_without_races(k_) || s_.parallel_reduction)) {
    in_.fail(cat(p, " parallel loops, but its accumulating stores could race across them"));
  }
  if (!ir::signature(k_).scratch.empty() && s_.parallel_reduction) in_.fail("kernel-local scratch with parallel_reduction");
  if (s_.transpose_tile) return transposed();
  if (p == 0) return with_scratch(outer_loops(0));
  const std::string grain_text = grain(p);
  if (vec_outer && p == n_) {
    if (n_ != 1) in_.fail("a vectorised outer loop may be parallel only when it is the only one");
    // Parallel over blocks of W iterations, so chunks start on a vector boundary.
    // With an overlapped tail, the blocks are whole vectors and the last
    // chunk also takes the rest: its last vector overlaps only its own.
    const Loop& l = k_.outer[0];
    const Bound e = in_.extent(l);
    const int64_t w = s_.vector_width;
    const bool overlapped = s_.tail == ir::TailKind::Overlapped;
    const std::string blocks = overlapped ? std::to_string(*e.value / w)
                               : e.value  ? std::to_string((*e.value + w - 1) / w)
                                          : cat("cppi_div_up(", e.text, ", ", w, ")");
    const std::string hi = overlapped ? cat("(end == ", blocks, " ? ", e.text, " : end * ", w, ")")
                                      : cat("cppi_min_i<int64_t>(end * ", w, ", ", e.text, ")");
    const std::string first = cat("begin * ", w);
    return stmt(codegen::ParallelChunks{
        blocks, grain_text,
        with_scratch(codegen::block(
            {prefault(first, hi, "1"), vector_loop(l, Bound::symbolic(first), Bound::symbolic(hi))}))});
  }
  std::vector<IndexExpr> extents, inner_extents;
  for (size_t i = 0; i < p; ++i) extents.push_back(k_.outer[i].extent);
  for (size_t i = p; i < n_; ++i) inner_extents.push_back(k_.outer[i].extent);
  Stmt loops;
  if (s_.epilogue_in_lanes && p == n_) {
    if (n_ != 1) in_.fail(cat("an epilogue in lanes under ", n_, " collapsed parallel loops"));
    loops = part(part::kEpilogueInLanes, {"begin", "end"});
  } else {
    std::vector<std::pair<std::string, IndexExpr>> units;
    for (size_t i = 0; i < p; ++i) units.emplace_back(codegen::loop_var(k_.outer[i]), k_.outer[i].extent);
    loops = stmt(codegen::Collapsed{units, outer_loops(p)});
  }
  return stmt(codegen::ParallelChunks{
      in_.index(ir::product(extents)), grain_text,
      with_scratch(codegen::block({prefault("begin", "end", "(" + in_.index(ir::product(inner_extents)) + ")"), loops}))});
}

Stmt Lowering::outer_loops(size_t level) const {
  if (level == n_) return stmt(codegen::Stages{});
  const Loop& l = k_.outer[level];
  if (level == n_ - 1 && s_.vectorized == ir::VectorizedLoop::InnermostOuter) {
    return vector_loop(l, Bound::constant(0), in_.extent(l));
  }
  if (level == n_ - 1 && s_.epilogue_in_lanes) return part(part::kEpilogueInLanes, {"0", in_.extent(l).text});
  return serial(codegen::loop_var(l), Bound::constant(0), in_.extent(l), outer_loops(level + 1));
}

std::string Lowering::grain(size_t p) const {
  if (s_.grain_work <= 0) return std::to_string(std::max<int64_t>(1, s_.grain_size));
  // The work of one iteration of the p parallel loops: the inner outer
  // loops' points times the stages' loop points (a loop-less stage counts 1).
  IndexExpr stages = ir::index_const(0);
  for (const auto& st : k_.stages) {
    std::vector<IndexExpr> extents;
    for (const auto& l : ir::loops_of(st)) extents.push_back(l.extent);
    stages = stages + ir::product(extents);
  }
  std::vector<IndexExpr> inner;
  for (size_t i = p; i < n_; ++i) inner.push_back(k_.outer[i].extent);
  inner.push_back(stages);
  return cat("cppi_max_i<int64_t>(1, cppi_div_up(", s_.grain_work, ", cppi_max_i<int64_t>(1, ",
             in_.index(ir::product(inner)), ")))");
}

Stmt Lowering::transposed() const {
  const size_t p = static_cast<size_t>(s_.parallel_loops);
  if (s_.vectorized != ir::VectorizedLoop::InnermostOuter || n_ < 2 || p > n_ - 1 ||
      s_.tail != ir::TailKind::ScalarLoop || s_.column_block > 0) {
    in_.fail("transpose_tile needs a vectorised innermost outer loop below a serial or parallel one, a scalar tail "
             "and no column tiling");
  }
  const Loop& rows = k_.outer[n_ - 2];
  const Loop& cols = k_.outer[n_ - 1];
  for (const auto& st : k_.stages) {
    const auto* pw = std::get_if<ir::PointwiseStage>(&st);
    if (!pw || !pw->loops.empty()) in_.fail("transpose_tile over a stage with loops");
  }
  const int64_t w = s_.vector_width;
  const Bound rows_extent = in_.extent(rows);
  const std::string tiles = rows_extent.value ? std::to_string((*rows_extent.value + w - 1) / w)
                                              : cat("cppi_div_up(", rows_extent.text, ", ", w, ")");
  const std::string tile_index = codegen::loop_var(rows) + "_tile";
  const std::string first_row = cat(tile_index, " * ", w);
  // The loops between the parallel ones and the tiled pair, then the tiles.
  std::function<Stmt(size_t)> loops = [&](size_t level) {
    if (level == n_ - 2) return serial(tile_index, Bound::constant(0), Bound::symbolic(tiles), transposed_tile(first_row));
    return serial(codegen::loop_var(k_.outer[level]), Bound::constant(0), in_.extent(k_.outer[level]),
                  loops(level + 1));
  };
  if (p == 0) return with_scratch(loops(0));
  std::vector<std::pair<std::string, IndexExpr>> units;
  std::vector<IndexExpr> extents;
  for (size_t i = 0; i < p; ++i) {
    // A parallel rows loop counts in tiles of rows.
    const bool tiled = i == n_ - 2;
    const IndexExpr e =
        tiled ? ir::floordiv(rows.extent + ir::index_const(w - 1), ir::index_const(w)) : k_.outer[i].extent;
    units.emplace_back(tiled ? tile_index : codegen::loop_var(k_.outer[i]), e);
    extents.push_back(e);
  }
  Stmt faults;
  if (p == n_ - 1) {
    // Chunk [begin, end) of (earlier loops x tiles of rows): its first row
    // of the (earlier loops x rows) space, whose outputs it writes densely.
    auto row_of = [&](const std::string& i) {
      return cat("(", i, ") / (", tiles, ") * (", rows_extent.text, ") + cppi_min_i<int64_t>((", i, ") % (", tiles,
                 ") * ", w, ", ", rows_extent.text, ")");
    };
    faults = prefault(row_of("begin"), row_of("end"), "(" + in_.extent(cols).text + ")");
  } else {
    std::vector<IndexExpr> inner_extents;
    for (size_t i = p; i < n_; ++i) inner_extents.push_back(k_.outer[i].extent);
    faults = prefault("begin", "end", "(" + in_.index(ir::product(inner_extents)) + ")");
  }
  Stmt chunk = stmt(codegen::Collapsed{units, p == n_ - 1 ? transposed_tile(first_row) : loops(p)});
  return stmt(codegen::ParallelChunks{in_.index(ir::product(extents)), std::to_string(std::max<int64_t>(1, s_.grain_size)),
                                      with_scratch(codegen::block({faults, chunk}))});
}

Stmt Lowering::transposed_tile(const std::string& first_row) const {
  const Loop& rows = k_.outer[n_ - 2];
  const Loop& cols = k_.outer[n_ - 1];
  const int64_t w = s_.vector_width;
  const std::string r = codegen::loop_var(rows), c = codegen::loop_var(cols), r0 = r + "_first";
  const Bound rows_extent = in_.extent(rows);
  const Bound tile_rows{cat(r0, " + ", w), std::nullopt};
  // Whole vectors of columns: each transposed load's tile, then the tile's
  // rows; the columns after them: the tile's rows, a column at a time.
  const codegen::VectorSplit split = codegen::split_at_whole_vectors(c, Bound::constant(0), in_.extent(cols), w);
  std::vector<Stmt> tile;
  for (const auto& let : split.lets) tile.push_back(stmt(let));
  if (split.main) {
    const Stmt rows_of_tile =
        serial(r, Bound::symbolic(r0), tile_rows,
               stmt(codegen::TileRow{cat("(", r, " - ", r0, ") * ", w), stmt(codegen::Stages{})}));
    tile.push_back(stmt(codegen::For{c, Bound::symbolic(split.main->first), Bound::symbolic(split.main->second),
                                     codegen::LoopKind::Vector, codegen::Tail::None, true, false,
                                     codegen::block({part(part::kTransposeTiles, {r0, c}), rows_of_tile})}));
  }
  if (split.rest) {
    tile.push_back(serial(r, Bound::symbolic(r0), tile_rows,
                          serial(c, Bound::symbolic(split.rest->first), Bound::symbolic(split.rest->second),
                                 stmt(codegen::Stages{}), true)));
  }
  Stmt whole = codegen::block({part(part::kTileBuffers), codegen::block(tile, !split.lets.empty())});
  // With a constant number of rows that tiles evenly, every tile is whole.
  std::vector<Stmt> body = {stmt(codegen::Let{r0, first_row})};
  if (rows_extent.value && *rows_extent.value % w == 0) {
    body.push_back(whole);
  } else {
    Stmt last_rows = codegen::block(
        {stmt(codegen::Comment{"the last rows, fewer than a tile: the plain vector loop"}),
         serial(r, Bound::symbolic(r0), rows_extent, vector_loop(cols, Bound::constant(0), in_.extent(cols)))});
    body.push_back(stmt(codegen::If{cat(r0, " + ", w, " <= ", rows_extent.text), whole, last_rows}));
  }
  return codegen::block(body, true);
}

}  // namespace

Stmt lower_loop_nest(const LoopNestInput& in) { return Lowering(in).nest(); }

}  // namespace cppi::cpu
