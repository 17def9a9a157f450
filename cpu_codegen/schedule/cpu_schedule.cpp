#include "cpu_codegen/schedule/cpu_schedule.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>

#include "cpu_codegen/schedule/index_conditions.h"
#include "cpu_codegen/schedule/kernel_facts.h"
#include "cpu_codegen/schedule/row_epilogue.h"
#include "cpu_codegen/schedule/vector_access.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::cpu {

using namespace ir;
using detail::AccessCounts;
using detail::describe_loads;
using detail::Estimator;
using detail::few_long_rows;
using detail::outer_vectors;
using detail::pointwise_loops_split;
using detail::reads_a_buffer_it_writes;
using detail::row_blocks_stay_in_registers;
using detail::rows_shorter_than_a_vector;
using detail::splits_tiled_rows;
using detail::symbolic_outer;
using detail::var_name;
using detail::writes_outputs_densely;
using detail::masked_tail_pays;
using detail::masked_tail_safe;
using detail::pick_width;
using detail::scan_stage;
using detail::worth_vectorizing;

CpuTarget CpuTarget::host(const CpuIsaTarget& isa) {
  CpuTarget t;
  t.vector_bytes = isa.vector_bytes;
  t.num_threads = std::max(1u, std::thread::hardware_concurrency());
  return t;
}

size_t parallel_loops_without_races(const Kernel& k) {
  if (!accumulates(k)) return k.outer.size();
  VarRanges ranges;
  auto name = [](const Loop& l) { return l.var.as<IndexVar>()->name; };
  for (const Loop& l : k.outer) ranges[name(l)] = l.extent;
  std::map<std::string, int> stores_to;
  for (const auto& s : k.stages) {
    if (const auto* p = std::get_if<PointwiseStage>(&s)) {
      for (const auto& st : p->stores) ++stores_to[st.buffer->name];
    }
    for (const Loop& l : loops_of(s)) ranges[name(l)] = l.extent;
  }
  for (size_t n = k.outer.size(); n > 0; --n) {
    std::vector<IndexExpr> vars;
    for (size_t i = 0; i < n; ++i) vars.push_back(k.outer[i].var);
    bool disjoint = true;
    for (const auto& s : k.stages) {
      const auto* p = std::get_if<PointwiseStage>(&s);
      if (!p) continue;
      for (const auto& st : p->stores) {
        if (!st.accumulate) continue;
        // Two stores into one buffer could meet across the parallel loops.
        disjoint = disjoint && stores_to[st.buffer->name] == 1 && selects_disjoint_elements(st.index, vars, ranges);
      }
    }
    if (disjoint) return n;
  }
  return 0;
}

namespace {

struct Decision {
  CpuSchedule cpu;
  std::string why;
};

/// Collapses the fewest leading outer loops, at most `max_loops`, whose
/// iterations reach 4 x threads into the parallel loop, with a grain that
/// gives each chunk at least min_parallel_work of the kernel's `work`. The
/// vectorised loop (InnermostOuter, among them only when it is the one outer
/// loop) counts in vectors, the tiled one (transpose_tile) in tiles of rows.
/// Returns why, for the schedule's remark.
std::string split_outer_loops(const Kernel& k, const CpuTarget& target, int64_t work, size_t max_loops,
                              CpuSchedule* cpu) {
  const Estimator est{target};
  const size_t n = k.outer.size();
  size_t p = 0;
  int64_t iters = 1;
  while (p < max_loops && iters < 4 * static_cast<int64_t>(target.num_threads)) {
    iters = Estimator::sat_mul(iters, est(k.outer[p].extent));
    ++p;
  }
  if (p == 0) return "serial: the only outer loop is vectorised across several loops";
  cpu->parallel_loops = static_cast<int>(p);
  int64_t units = iters;
  if ((cpu->vectorized == VectorizedLoop::InnermostOuter && p == n) || (cpu->transpose_tile && p == n - 1))
    units = (iters + cpu->vector_width - 1) / cpu->vector_width;
  const int64_t per_unit = std::max<int64_t>(1, work / std::max<int64_t>(1, units));
  cpu->grain_size = std::max<int64_t>(1, (target.min_parallel_work + per_unit - 1) / per_unit);
  // Work per iteration that depends on size symbols: the grain from the
  // sizes at run time (a parallel iteration over whole rows, not vectors).
  bool symbolic_unit = false;
  for (size_t i = p; i < n; ++i) symbolic_unit = symbolic_unit || !k.outer[i].extent.constant();
  for (const auto& s : k.stages)
    for (const auto& l : loops_of(s)) symbolic_unit = symbolic_unit || !l.extent.constant();
  if (symbolic_unit && units == iters && !cpu->transpose_tile) {
    cpu->grain_work = target.min_parallel_work;
    return cat("parallel over ", p, " outer loop", p > 1 ? "s" : "", ", grain ", target.min_parallel_work,
               " elements of the sizes at run time");
  }
  return cat("parallel over ", p, " outer loop", p > 1 ? "s" : "", ", grain ", cpu->grain_size);
}

/// A scan kernel: its outer points are independent, its one loop serial.
/// The innermost outer loop is vectorised when the scan runs along another
/// dim (cumsum over rows: each lane a column's running value); the outer
/// loops run in parallel as a pointwise kernel's would.
Decision decide_scan(const Kernel& k, const ScanStage& scan, const CpuTarget& target) {
  Decision d;
  Estimator est{target};
  const int64_t work = Estimator::sat_mul(est.product(k.outer), est(scan.loops[0].extent));
  std::string vec_why = "scalar: no outer loop";
  if (!k.outer.empty()) {
    AccessCounts counts;
    const std::string v = var_name(k.outer.back());
    scan_stage(k.stages[0], v, &counts);
    const int w = worth_vectorizing(counts) ? pick_width(target, counts.max_lane_bytes, {k.outer.back().extent}) : 0;
    if (w) {
      d.cpu.vectorized = VectorizedLoop::InnermostOuter;
      d.cpu.vector_width = w;
      vec_why = cat("vectorised outer loop ", v, " (", describe_loads(counts), ")");
    } else {
      vec_why = cat("scalar: ", counts.bad_stores + counts.strided_stores, " strided stores, ", counts.gathers,
                    " gathers vs ", counts.contiguous, " contiguous loads in ", v);
    }
  }
  const bool vec_outer = d.cpu.vectorized == VectorizedLoop::InnermostOuter;
  std::string par_why;
  if (work < target.min_parallel_work && !symbolic_outer(k)) {
    par_why = cat("serial: ", work, " elements of work");
  } else if (k.outer.empty()) {
    par_why = "serial: one scan";
  } else {
    const size_t n = k.outer.size();
    par_why = split_outer_loops(k, target, work, (vec_outer && n > 1) ? n - 1 : n, &d.cpu);
  }
  d.why = cat(par_why, "; ", vec_why, "; a running ", to_string(scan.kind), " along ", var_name(scan.loops[0]));
  return d;
}

/// What decide()'s rules read: the kernel, the target, and its work.
struct Facts {
  const Kernel& k;
  const CpuTarget& target;
  Estimator est;
  int64_t outer_iters = 0;
  int64_t stage_work = 0;  // the stages' iterations per outer iteration
  int64_t work = 0;
  size_t reductions = 0;
  bool pointwise_loops = false;  // a pointwise stage with loops
  bool any_stage_loops = false;
};

Facts facts_of(const Kernel& k, const CpuTarget& target) {
  Facts f{k, target, Estimator{target}};
  f.outer_iters = f.est.product(k.outer);
  f.stage_work = detail::stage_work(k, f.est);
  f.work = detail::kernel_work(k, f.est);
  for (const auto& s : k.stages) {
    if (std::holds_alternative<ReductionStage>(s)) ++f.reductions;
    else if (!loops_of(s).empty()) f.pointwise_loops = true;
    if (!loops_of(s).empty()) f.any_stage_loops = true;
  }
  return f;
}

// --- vectorisation -----------------------------------------------------------------------

/// How the stages' innermost loops would vectorise: their width (0: not
/// worth it), why, and whether they end in masked vectors and beat the outer
/// loop (full vectors that read contiguous rows).
struct StageLoops {
  int width = 0;
  std::string why;
  bool masked_tail = false;
  bool win = false;  // full stage-loop vectors, unless rows go in lanes
};

/// Vectorises each stage's innermost loop (InnermostOfEachStage).
void take_stage_loops(const Facts& f, const StageLoops& stage, CpuSchedule* c, std::string* vec_why) {
  c->vectorized = VectorizedLoop::InnermostOfEachStage;
  c->vector_width = stage.width;
  // Enough independent adds or compare-selects in flight to hide their
  // latency: with one accumulator each vector waits on the previous one's
  // max or add (a 4096x4096 amax is faster with several).
  c->vector_accumulators = f.target.vector_accumulators;
  // Stage loops too short for all of them to fill only pay for combining
  // them (row sums over many short rows, of 17 or 33 floats, are faster
  // with one).
  int64_t longest = 0;
  for (const auto& s : f.k.stages) {
    const auto& loops = loops_of(s);
    const auto n = loops.empty() ? std::optional<int64_t>(0) : loops.back().extent.constant();
    longest = n ? std::max(longest, *n) : std::numeric_limits<int64_t>::max();
  }
  if (longest < int64_t{f.target.vector_accumulators} * stage.width) c->vector_accumulators = 1;
  *vec_why = stage.why;
}

/// The stage loops' vectors; takes them at once unless narrow, strided
/// only, or over rows short enough to go in lanes (the outer loop's rules
/// come first then).
StageLoops stage_loop_vectors(const Facts& f, CpuSchedule* c, std::string* vec_why) {
  StageLoops stage;
  if (!f.any_stage_loops) return stage;
  const Kernel& k = f.k;
  AccessCounts counts;
  std::vector<IndexExpr> extents;
  for (const auto& s : k.stages) {
    const auto& loops = loops_of(s);
    if (loops.empty()) continue;
    scan_stage(s, var_name(loops.back()), &counts);
    extents.push_back(loops.back().extent);
  }
  stage.masked_tail = masked_tail_pays(k, f.target) && masked_tail_safe(k);
  stage.width = worth_vectorizing(counts) ? pick_width(f.target, counts.max_lane_bytes, extents, stage.masked_tail) : 0;
  stage.why = cat("vectorised the innermost loop of each stage (", describe_loads(counts), ")");
  // A stage loop shorter than a full vector is one narrow vector and a
  // horizontal step per outer iteration; the outer loop, where it reads
  // whole or strided vectors, does a full vector of outer iterations at
  // once and stores them whole (x.unfold(-1, 4, 4).sum(-1) over 2048 x
  // 4096 floats is slow four lanes wide).
  const bool narrow = stage.width > 0 && stage.width < pick_width(f.target, counts.max_lane_bytes, {});
  // Stage loops that read only strided vectors (a stride of 2 to 4) pass
  // over the same lines once per outer iteration; the outer loop, where it
  // reads whole vectors, passes once (x.sum(0) of 10^6 x 4 floats is
  // faster across the columns than column by column).
  const bool strided_only = counts.contiguous == 0 && counts.strided > 0;
  // Rows shorter than a vector try rows in lanes first, also where their
  // stage loops would take full masked vectors (rows of 9 to 15 floats):
  // a masked row still pays a horizontal step per row, which a vector of
  // rows in lanes does not (var_mean over 10^6 such rows).
  if (stage.width > 0 && !narrow && !strided_only && !rows_shorter_than_a_vector(k, f.target)) {
    take_stage_loops(f, stage, c, vec_why);
  }
  stage.win = stage.width > 0 && !narrow && !strided_only;
  return stage;
}

/// Vectorises the innermost outer loop where it reads whole vectors, as
/// transposed tiles, or as rows in lanes. Returns whether its last partial
/// vector may be masked.
bool outer_loop_vectors(const Facts& f, const StageLoops& stage, CpuSchedule* c, std::string* vec_why) {
  const Kernel& k = f.k;
  const CpuTarget& target = f.target;
  AccessCounts counts;
  const std::string v = var_name(k.outer.back());
  // Transposed tiles: plain pointwise kernels over two or more loops.
  const bool tileable = k.outer.size() >= 2 && !f.any_stage_loops && f.reductions == 0;
  const std::string tile_var = tileable ? var_name(k.outer[k.outer.size() - 2]) : "";
  // Rows shorter than a vector: a vector of W rows reads each stage's
  // rows as R vectors turned in registers (row_blocks), where each row was
  // one narrow vector, a horizontal step and a serial chain of divisions
  // (var_mean over 10^6 rows of 7 floats, two threads: see the schedule
  // header).
  bool rows = f.any_stage_loops && rows_shorter_than_a_vector(k, target);
  for (const auto& s : k.stages) scan_stage(s, v, &counts, tile_var, rows);
  if (rows) {
    const int full = pick_width(target, counts.max_lane_bytes, {});
    bool fit = counts.row_blocks + counts.row_block_stores > 0 && row_blocks_stay_in_registers(k, v);
    for (const auto& s : k.stages) {
      if (!loops_of(s).empty()) fit = fit && *loops_of(s)[0].extent.constant() < full;
    }
    if (!fit) {
      rows = false;
      counts = AccessCounts{};
      for (const auto& s : k.stages) scan_stage(s, v, &counts, tile_var);
    }
  }
  if (counts.transposed > 0) {
    AccessCounts tiled = counts;
    tiled.contiguous += counts.transposed;
    bool rewritten = false;
    for (const auto& b : written_buffers(k)) rewritten = rewritten || counts.transposed_buffers.count(b) > 0;
    const int w = worth_vectorizing(tiled) && !rewritten
                      ? pick_width(target, counts.max_lane_bytes,
                                   {k.outer.back().extent, k.outer[k.outer.size() - 2].extent})
                      : 0;
    if (w) {
      c->vectorized = VectorizedLoop::InnermostOuter;
      c->vector_width = w;
      c->transpose_tile = true;
      *vec_why = cat("vectorised outer loop ", v, " in ", w, "x", w, " tiles over ", tile_var, " (", counts.contiguous,
                     " contiguous, ", counts.transposed, " transposed, ", counts.broadcast, " broadcast, ",
                     counts.gathers, " gathered loads)");
    }
    counts.gathers += counts.transposed;  // as the plain vector loop would read them
  }
  // An outer loop shorter than a host vector, or of symbolic extent, may
  // end in one masked vector where masked moves exist (AVX-512): x.sum(0)
  // of 10^6 x 7 floats was a 4-lane vector and a second one overlapping
  // it, two passes over the rows; now one 8-lane pass.
  const auto extent = k.outer.back().extent.constant();
  const bool outer_masked = target.vector_bytes >= 64 && masked_tail_safe(k, /*lanes_combine=*/false) &&
                            (!extent || *extent < pick_width(target, counts.max_lane_bytes, {}));
  // Without rows in lanes, full stage-loop vectors beat the outer loop.
  int w = c->transpose_tile || !worth_vectorizing(counts) || (!rows && stage.win)
              ? 0
              : pick_width(target, counts.max_lane_bytes, {k.outer.back().extent}, outer_masked);
  if (w) {
    c->vectorized = VectorizedLoop::InnermostOuter;
    c->vector_width = w;
    c->row_blocks = rows;
    *vec_why = cat("vectorised outer loop ", v, rows ? ", rows in lanes" : "", " (", describe_loads(counts), ")");
  } else if (!c->transpose_tile && (counts.bad_stores || counts.strided_stores || counts.gathers)) {
    *vec_why = cat("scalar: ", counts.bad_stores + counts.strided_stores, " strided stores, ", counts.gathers,
                   " gathers vs ", counts.contiguous, " contiguous loads in ", v);
  }
  return outer_masked;
}

/// The vector loops' last partial vectors: a scalar loop, masked, or (outer
/// loops of constant extent) a vector overlapping the one before.
void choose_tails(const Facts& f, bool stage_masked, bool outer_masked, CpuSchedule* c, std::string* vec_why) {
  const Kernel& k = f.k;
  c->tail = TailKind::ScalarLoop;
  if (c->vectorized == VectorizedLoop::InnermostOfEachStage && stage_masked) {
    bool remainder = false;
    for (const auto& s : k.stages) {
      if (loops_of(s).empty()) continue;
      const auto n = loops_of(s).back().extent.constant();
      remainder = remainder || !n || *n % c->vector_width != 0;
    }
    if (remainder) {
      c->tail = TailKind::Masked;
      *vec_why += "; the last partial vector of each stage loop masked";
    }
  }
  if (c->vectorized == VectorizedLoop::InnermostOuter && !c->transpose_tile) {
    auto extent = k.outer.back().extent.constant();
    const int64_t w = c->vector_width;
    if (outer_masked && (!extent || *extent % w != 0)) {
      c->tail = TailKind::Masked;
      *vec_why += cat("; the last partial vector of ", var_name(k.outer.back()), " masked");
    } else if (extent && *extent > w && *extent % w != 0 && !reads_a_buffer_it_writes(k)) {
      c->tail = TailKind::Overlapped;
      *vec_why += cat("; the last ", *extent % w, " iterations in a vector overlapping the one before");
    }
  }
}

// --- parallelism -------------------------------------------------------------------------

/// Which loops run on several threads, with what grain; `split_tiles`: the
/// rows of column tiles are split (parallel_reduction). Returns why.
std::string parallelise(const Facts& f, CpuSchedule* c, bool* split_tiles) {
  const Kernel& k = f.k;
  const CpuTarget& target = f.target;
  const bool vec_outer = c->vectorized == VectorizedLoop::InnermostOuter;
  const size_t max_parallel = parallel_loops_without_races(k);
  if (accumulates(k) && max_parallel == 0) {
    // Two iterations may add into one element (index_put(accumulate=True)
    // with a repeated index): on one thread the adds cannot race, and they
    // land in iteration order, as eager's serial CPU kernel adds them.
    return "serial: an accumulating store whose outer iterations may add into one element";
  }
  if (f.work < target.min_parallel_work && !symbolic_outer(k)) return cat("serial: ", f.work, " elements of work");
  if (splits_tiled_rows(k, *c, f.est, target)) {
    // Each tiled reduction's rows, in chunks of at least min_parallel_work
    // elements across the columns.
    const int64_t columns = *k.outer[0].extent.constant();
    *split_tiles = true;
    c->parallel_reduction = true;
    c->grain_size = std::max<int64_t>(1, (target.min_parallel_work + columns - 1) / columns);
    return cat("column tiles with their rows split among the threads (", columns, " columns)");
  }
  if (f.reductions >= 1 && (!f.pointwise_loops || (!vec_outer && pointwise_loops_split(k))) && !c->transpose_tile &&
      !c->row_blocks && signature(k).scratch.empty() &&
      few_long_rows(vec_outer ? outer_vectors(k, f.est, c->vector_width) : f.outer_iters,
                    Estimator::sat_mul(f.stage_work, vec_outer ? c->vector_width : 1), target)) {
    // Each reduction stage's loop is split in turn (a softmax row's max, then
    // its sum of exp): the shortest sets the grain. Under a vectorised outer
    // loop each step of a reduction loop is a vector of outer iterations,
    // and each thread keeps a vector of partial states: x.sum(0) of 10^6 x 7
    // floats ran on one thread.
    int64_t per_iter = INT64_MAX;
    std::string over;
    for (const auto& s : k.stages) {
      auto r = std::get_if<ReductionStage>(&s);
      if (!r || r->loops.empty()) continue;
      per_iter = std::min(per_iter, Estimator::sat_mul(f.est.product(r->loops, 1), vec_outer ? c->vector_width : 1));
      if (over.empty()) over = var_name(r->loops[0]);
    }
    if (over.empty()) return "serial: nothing to split";
    c->parallel_reduction = true;
    c->grain_size = std::max<int64_t>(1, (target.min_parallel_work + per_iter - 1) / per_iter);
    return cat("parallel reduction over ", over, " (", f.outer_iters, " outer iterations)");
  }
  if (k.outer.empty()) return "serial: no outer loops";
  const size_t n = k.outer.size();
  return split_outer_loops(k, target, f.work, std::min((vec_outer && n > 1) ? n - 1 : n, max_parallel), c);
}

// --- the settings that refine the loops chosen above ---------------------------------------

/// Pieces of the vector loop where index comparisons are constant.
/// torch.cat([x, y], 1).relu() on two 2048 x 1024 floats: every vector
/// built int64 lane indices, compared them twice and checked both masks
/// (width 8, for the int64 lanes), far slower than relu alone.
void split_at_index_conditions(const Facts& f, Decision* d) {
  const Kernel& k = f.k;
  const size_t n_outer = k.outer.size();
  const auto vec_extent = n_outer ? k.outer.back().extent.constant() : std::nullopt;
  if (d->cpu.vectorized != VectorizedLoop::InnermostOuter || d->cpu.transpose_tile ||
      d->cpu.parallel_loops >= static_cast<int>(n_outer) || !vec_extent || f.any_stage_loops || f.reductions != 0) {
    return;
  }
  const std::string v = var_name(k.outer.back());
  const std::vector<int64_t> splits = index_condition_splits(k.stages, v, *vec_extent);
  if (splits.empty()) return;
  d->cpu.vector_loop_splits = splits;
  d->cpu.tail = TailKind::ScalarLoop;
  // The width the folded pieces need (the index lanes are gone).
  AccessCounts folded;
  int64_t lo = 0;
  std::vector<int64_t> ends = splits;
  ends.push_back(*vec_extent);
  for (int64_t hi : ends) {
    for (const auto& piece : fold_index_conditions(k.stages, v, lo, hi)) scan_stage(piece, v, &folded);
    lo = hi;
  }
  const int w = pick_width(f.target, folded.max_lane_bytes, {k.outer.back().extent});
  if (w > 0) d->cpu.vector_width = w;
  d->why += cat("; the vector loop in ", splits.size() + 1, " pieces at its index comparisons");
}

/// Prefaulting fresh outputs. A fresh 64 MB output costs ~16K page faults,
/// which can be most of a cheap pointwise kernel's time (a clone is mostly
/// faulting). Faulting each chunk's range in one
/// madvise(MADV_POPULATE_WRITE) skips the trap per page, and one thread's
/// batch overlaps the other's compute (sin + cos, gelu(x + b) and
/// relu(x + b) * 2 over 4096x4096 floats come closer to a clone's speed).
/// Outputs of at least kPrefaultBytes only (the runtime also skips resident
/// pages).
void prefault_fresh_outputs(const Facts& f, Decision* d) {
  constexpr int64_t kPrefaultBytes = int64_t{4} << 20;
  int64_t output_bytes = 0;
  if (d->cpu.parallel_loops > 0 && writes_outputs_densely(f.k, &output_bytes) && output_bytes >= kPrefaultBytes) {
    d->cpu.prefault_outputs = true;
    d->why += "; outputs prefaulted per chunk";
  }
}

/// Column-reduction tiling. One vector per row step uses a 64-byte piece of
/// each row, then comes back for the neighbouring piece after the whole
/// column, so 4096x4096 float column sums ran far slower than row sums.
/// Blocks of ~4 KiB per row (64 vectors of 16 floats) over 16 rows at a
/// time read whole cache lines and run at row-sum speed. Every stage with
/// loops is tiled, one after another
/// over the same block of columns (softmax over dim 0: the column max, then
/// exp(x - max) stored, its sum, and the stored values scaled), so none of
/// them walks one vector per row: a reduction folds row blocks into the
/// block's accumulators, a pointwise stage walks the block's vectors of each
/// row in turn.
void tile_column_reductions(const Facts& f, bool split_tiles, Decision* d) {
  const Kernel& k = f.k;
  if (d->cpu.vectorized != VectorizedLoop::InnermostOuter || (d->cpu.parallel_reduction && !split_tiles) ||
      d->cpu.row_blocks) {
    return;
  }
  const size_t tiled = ir::leading_looped_reductions(k.stages);
  if (tiled == 0) return;
  const int64_t row_block = f.target.row_block, block_bytes = f.target.column_block_bytes;
  AccessCounts counts;
  for (const auto& st : k.stages) scan_stage(st, var_name(k.outer.back()), &counts);
  const int64_t vector_bytes = int64_t{d->cpu.vector_width} * counts.max_lane_bytes;
  const int64_t outer_vectors = (f.est(k.outer.back().extent) + d->cpu.vector_width - 1) / d->cpu.vector_width;
  const auto& rows = std::get<ReductionStage>(k.stages[0]).loops[0].extent;
  if (outer_vectors <= 1 || f.est(rows) <= row_block) return;
  // A pointwise stage with loops makes the kernel pass over the block
  // again (softmax over dim 0: four passes); a 1 KiB piece of each row
  // keeps the block in L2 between them, where 4 KiB pieces fall out of it
  // (softmax over dim 0 of 1000 x 1000). Several tiled reductions pass
  // over it once each (var over dim 0: the sum, then the deviations' sum
  // and squares) and take the smaller pieces too.
  bool repasses = tiled > 1;
  for (const auto& st : k.stages) repasses = repasses || (std::holds_alternative<PointwiseStage>(st) && !loops_of(st).empty());
  d->cpu.column_block = static_cast<int>(std::max<int64_t>(1, (repasses ? block_bytes / 4 : block_bytes) / vector_bytes));
  d->cpu.row_block = row_block;
  d->why += cat("; column reduction", tiled > 1 ? cat("s (", tiled, ")") : std::string(), " tiled ",
                d->cpu.column_block, " vectors x ", row_block, " rows");
}

/// The epilogue of W rows in lanes. A scalar epilogue per row calls libm
/// once per row, which costs as much as the kernel's own loops where rows
/// are short (logsumexp over 10^6 rows of 16 floats); in lanes it is one
/// vector call per W rows (Inductor runs the log in a loop of its own, a
/// vector of rows at a time). The reductions before it, a tree per block of
/// W rows: otherwise each row pays a horizontal reduction's chain of
/// shuffles and adds for each of its reductions (var_mean over rows of 16
/// floats: three per row).
void epilogue_rows_in_lanes(const Facts& f, Decision* d) {
  const Kernel& k = f.k;
  const size_t n_outer = k.outer.size();
  bool epilogue_math = false;
  if (d->cpu.vectorized != VectorizedLoop::InnermostOfEachStage || d->cpu.parallel_reduction ||
      (d->cpu.parallel_loops >= static_cast<int>(n_outer) && n_outer != 1) ||
      !epilogue_in_lanes_fits(k, d->cpu.vector_width, &epilogue_math)) {
    return;
  }
  const bool trees = reduction_trees_fit(k, d->cpu);
  if (!epilogue_math && !trees) return;
  d->cpu.epilogue_in_lanes = true;
  d->cpu.reduction_trees = trees;
  d->why += cat("; the epilogue of every ", d->cpu.vector_width, " ", var_name(k.outer.back()), " in lanes");
  if (trees) d->why += ", their reductions in one tree each";
}

/// Cascaded accumulation. Naive float accumulation loses terms once the
/// running total is ~2^24 times them: x.mean(0) over 16M rows came out 13%
/// high, x.sum() over 2^28 floats 11% low (Inductor and eager cascade). An
/// accumulator that may see more than kCascadeBlock terms (or a symbolic
/// number) merges into a total every kCascadeBlock terms; the error then
/// grows with n / kCascadeBlock.
///
/// A column reduction's accumulators are its columns, one per lane, so each
/// adds one term per row, and a column sum over a batch of rows (a Linear
/// layer's bias gradient) is exactly the case worth the most: 4096 rows
/// summed in one float were 14x further from float64 than eager's cascade
/// (3x with blocks of 256 rows, 1.6x with 64). Its tiles (or its lane
/// accumulators, untiled) restart every kColumnCascadeBlock rows instead;
/// the merge, one add per 64 rows, costs no measurable time in a 4096^2
/// column sum. Row reductions are within 2-3x of
/// eager at these lengths and keep the longer block.
void cascade_accumulation(const Facts& f, Decision* d) {
  constexpr int64_t kCascadeBlock = 4096, kColumnCascadeBlock = 64;
  const int64_t cascade_block =
      d->cpu.vectorized == VectorizedLoop::InnermostOuter ? kColumnCascadeBlock : kCascadeBlock;
  for (const auto& s : f.k.stages) {
    const auto* r = std::get_if<ReductionStage>(&s);
    if (!r || r->loops.empty() || !accumulates_in_cascade(r->kind, r->body.dtype())) continue;
    std::optional<int64_t> terms = 1;
    for (const auto& l : r->loops) {
      auto c = l.extent.constant();
      terms = c && terms && *c <= INT64_MAX / std::max<int64_t>(1, *terms) ? std::optional<int64_t>(*terms * *c)
                                                                           : std::nullopt;
    }
    if (!terms || *terms > cascade_block) {
      d->cpu.cascade_block = cascade_block;
      d->why += cat("; float accumulation cascaded every ", cascade_block, " terms");
      return;
    }
  }
}

Decision decide(const Kernel& k, const CpuTarget& target) {
  if (const ScanStage* scan = scan_of(k)) return decide_scan(k, *scan, target);
  const Facts f = facts_of(k, target);
  Decision d;
  std::string vec_why = "scalar: no contiguous loop";
  const StageLoops stage = stage_loop_vectors(f, &d.cpu, &vec_why);
  bool outer_masked = false;
  if (d.cpu.vectorized == VectorizedLoop::None && !k.outer.empty()) outer_masked = outer_loop_vectors(f, stage, &d.cpu, &vec_why);
  if (d.cpu.vectorized == VectorizedLoop::None && stage.width > 0) take_stage_loops(f, stage, &d.cpu, &vec_why);
  choose_tails(f, stage.masked_tail, outer_masked, &d.cpu, &vec_why);
  bool split_tiles = false;
  d.why = parallelise(f, &d.cpu, &split_tiles) + "; " + vec_why;
  split_at_index_conditions(f, &d);
  prefault_fresh_outputs(f, &d);
  tile_column_reductions(f, split_tiles, &d);
  epilogue_rows_in_lanes(f, &d);
  cascade_accumulation(f, &d);
  return d;
}

}  // namespace

KernelPtr schedule_for_cpu(const KernelPtr& kernel, const CpuTarget& target) {
  Schedule s = kernel->schedule;
  Decision d = decide(*kernel, target);
  s.cpu = d.cpu;
  s.why = d.why;
  return kernel->with_schedule(s);
}

std::string explain_cpu_schedule(const Kernel& kernel, const CpuTarget& target) {
  return kernel.name + ": " + decide(kernel, target).why;
}

}  // namespace cppi::cpu
