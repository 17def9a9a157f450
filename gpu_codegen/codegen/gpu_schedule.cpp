#include "gpu_codegen/codegen/gpu_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "gpu_codegen/runtime/cuda_module.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/fold_conditions.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::gpu {

using namespace ir;

Expected<GpuTarget> GpuTarget::current() {
  auto props = current_device_properties();
  if (!props.ok()) return props.error();
  GpuTarget t;
  t.multiprocessors = props->multiprocessors;
  t.max_threads_per_block = props->max_threads_per_block;
  t.compute_capability = props->compute_capability;
  return t;
}

namespace {

constexpr int kPointwiseBlock = 128;
constexpr int kColumnBlock = 128;
constexpr int kRowPerWarpBlock = 128;
constexpr int64_t kMaxWarpRow = 1024;
// Stage loops of at most this many iterations run in one thread each.
constexpr int64_t kThreadRow = 16;
// ... when there are at least this many outer iterations to spread.
constexpr int64_t kThreadRowMinOuter = 1 << 16;
constexpr int kRowCacheRegisters = 64;
constexpr int kVectorBytes = 16;
constexpr int kMaxColumnSlices = 32;
constexpr int kMaxCachedRowBlock = 512;
constexpr int kSmallCachedRowBlock = 256;
constexpr int64_t kResidentThreadsPerSm = 2048;
constexpr int64_t kMaxColumnSplits = 32;
// Blocks per multiprocessor a split row's grid is sized for.
constexpr int kSplitRowBlocksPerSm = 2;

/// Every Load node reachable from the stage's values.
std::vector<const Load*> loads_of(const Stage& s) {
  std::vector<const Load*> out;
  for (const Expr& e : post_order(stage_values(s))) {
    if (auto l = e.as<Load>()) out.push_back(l);
  }
  return out;
}

bool has_random(const Kernel& k) {
  for (const auto& s : k.stages) {
    for (const Expr& e : post_order(stage_values(s))) {
      if (e.kind() == ExprKind::Random) return true;
    }
  }
  return false;
}

std::optional<int64_t> hinted(const IndexExpr& e, int64_t hint) {
  std::set<std::string> syms = free_symbols(e);
  IndexBindings b;
  for (const auto& s : syms) b[s] = hint;
  try {
    return evaluate(e, b);
  } catch (const CompilerError&) {
    return std::nullopt;
  }
}

IndexExpr product_of(const std::vector<Loop>& loops) {
  std::vector<IndexExpr> ex;
  for (const auto& l : loops) ex.push_back(l.extent);
  return product(ex);
}

bool is_stride(const IndexExpr& index, const IndexExpr& v, int64_t s) {
  auto c = coefficient(index, v);
  return c && c->is_constant(s);
}

struct PointwiseVector {
  int width = 1;
  bool flat = false;
};

/// The vectorisation of a GridStridePointwise kernel: width 1 when it
/// cannot vectorise. By the innermost loop when its extent allows (vector
/// loads of accesses that are contiguous only along it, broadcast biases
/// among them); else over the flattened loops when every store is dense
/// (a pad of 8192 x 4093 to 4101 columns runs at a copy's speed flat, far
/// slower scalar).
PointwiseVector pointwise_vector(const Kernel& k) {
  // Accumulating stores add one element at a time (atomicAdd).
  if (k.outer.empty() || has_random(k) || accumulates(k)) return {};
  for (const bool flat : {false, true}) {
    GpuSchedule g;
    g.mapping = GpuMapping::GridStridePointwise;
    g.flat_vector = flat;
    int widest = 1;
    bool stores = false, all_stores = true;
    for (const auto& s : k.stages) {
      if (std::holds_alternative<ReductionStage>(s)) return {};
      for (const auto& st : std::get<PointwiseStage>(s).stores) {
        all_stores = all_stores && is_vector_access(k, g, st.index);
        widest = std::max(widest, dtype_size(st.buffer->dtype));
        stores = true;
      }
      for (const Load* l : loads_of(s)) {
        if (!l->mask.defined() && is_vector_access(k, g, l->index)) widest = std::max(widest, dtype_size(l->dtype));
      }
    }
    if (!stores || !all_stores) continue;
    const int width = kVectorBytes / widest;
    if (width < 2) return {};
    // A symbolic extent is checked at launch (the scalar twin runs when it is not a multiple).
    const auto extent = flat ? product_of(k.outer).constant() : k.outer.back().extent.constant();
    if (extent && *extent % width != 0) continue;
    return {width, flat};
  }
  return {};
}

/// Dense row-major over the outer loops (an offset aside): V consecutive
/// flattened iterations touch V consecutive elements.
bool is_flat_access(const Kernel& k, const IndexExpr& index) {
  if (k.outer.empty() || has_indirect(index)) return false;
  std::vector<IndexExpr> vars;
  for (const auto& l : k.outer) vars.push_back(l.var);
  auto form = affine_form(index, vars);
  if (!form) return false;
  IndexExpr dense = 1;
  for (size_t j = k.outer.size(); j-- > 0;) {
    const IndexExpr& extent = k.outer[j].extent;
    if (extent.is_constant(1)) continue;  // its variable is always 0
    if (!simplify(form->strides[j] - dense).is_constant(0)) return false;
    dense = simplify(dense * extent);
  }
  return true;
}

/// Whether the loads of the stages with loops run along the kernel's outer
/// loop rather than along the stages' loops (a column reduction). A load that
/// does not move in its stage's loops (a row's target or maximum, read for
/// every element) is read once per outer point whichever way threads are laid
/// out, so it does not count: counted, the row maximum and sum of a softmax
/// backward outvoted its two row reads and made it a column kernel.
bool is_column_kernel(const Kernel& k) {
  if (k.outer.empty()) return false;
  const IndexExpr& outer = k.outer.back().var;
  int along_stage = 0, along_outer = 0;
  for (const auto& s : k.stages) {
    const auto& loops = loops_of(s);
    if (loops.empty()) continue;
    for (const Load* l : loads_of(s)) {
      bool moves = false;
      for (const auto& lp : loops) moves |= depends_on(l->index, lp.var.as<IndexVar>()->name);
      if (!moves) continue;
      along_stage += is_stride(l->index, loops.back().var, 1) ? 1 : 0;
      along_outer += is_stride(l->index, outer, 1) ? 1 : 0;
    }
  }
  return along_outer > along_stage;
}

/// Whether a stage with loops reads a buffer the kernel writes: splitting its
/// loops across threads would then need barriers between stages.
bool reads_own_writes_in_loops(const Kernel& k) {
  const std::set<std::string> written = written_buffers(k);
  for (const auto& s : k.stages) {
    if (loops_of(s).empty()) continue;
    for (const Load* l : loads_of(s)) {
      if (written.count(l->buffer->name)) return true;
    }
  }
  return false;
}

/// Whether a reduction's partial, stored for another block to fold, is one
/// plain number: a sum, max or min of a 32- or 64-bit int or float.
bool plain_partial(const ReductionStage& red) {
  switch (red.kind) {
    case ReductionKind::Sum:
    case ReductionKind::Max:
    case ReductionKind::Min: break;
    default: return false;
  }
  const DType t = red.body.dtype();
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
}

/// Whether a stage with loops stores (a looped pointwise stage, as
/// layer_norm's normalised row), rather than the kernel only reducing its
/// rows and storing the results from loop-less stages.
bool stores_in_a_loop(const Kernel& k) {
  for (const auto& s : k.stages) {
    if (std::holds_alternative<PointwiseStage>(s) && !loops_of(s).empty()) return true;
  }
  return false;
}

/// Blocks to split each row of a RowPerBlock kernel across, 1 for none.
/// Only for few, long rows (a full reduction: one row) of the shape
/// "one looped reduction first, with the pointwise stages of its pass
/// (ir::pass_run_end), then loop-less stages", with a partial that is one
/// plain number: a block per row would leave most of the GPU idle
/// (mse_loss's mean over 8192 x 2048 as one block runs on one SM).
int row_splits(const Kernel& k, const GpuTarget& target, int threads, int64_t length_hint) {
  const std::optional<int64_t> rows = product_of(k.outer).constant();
  if (!rows || *rows * 4 > target.multiprocessors || k.stages.empty()) return 1;
  const auto* red = std::get_if<ReductionStage>(&k.stages[0]);
  if (!red || red->loops.empty() || !plain_partial(*red)) return 1;
  const size_t pass = pass_run_end(k, 0);
  for (size_t i = 1; i < k.stages.size(); ++i) {
    if (i < pass ? !std::holds_alternative<PointwiseStage>(k.stages[i]) : !loops_of(k.stages[i]).empty()) return 1;
  }
  // Two blocks per multiprocessor over all rows, each folding at least 16
  // elements per thread, at most one partial per thread of the last block.
  int64_t splits = std::min<int64_t>(kSplitRowBlocksPerSm * target.multiprocessors / *rows, threads);
  splits = std::min<int64_t>(splits, length_hint / (16 * static_cast<int64_t>(threads)));
  return splits >= 2 ? static_cast<int>(splits) : 1;
}

/// Blocks to split each group of 32 columns across (a ColumnReduction with
/// `slices` row slices), 1 for none. For few columns, each reduced over many
/// rows, when the kernel is "a run of independent sums/max/min over the same
/// rows, then loop-less stages": 1024 columns make only 32 blocks for 132
/// multiprocessors.
int column_splits(const Kernel& k, const GpuTarget& target, int slices, int64_t length_hint) {
  const std::optional<int64_t> columns = product_of(k.outer).constant();
  if (!columns || k.stages.empty()) return 1;
  const size_t looped = reduction_run_end(k, 0);
  for (size_t i = 0; i < k.stages.size(); ++i) {
    if (i >= looped) {
      if (!loops_of(k.stages[i]).empty()) return 1;
      continue;
    }
    const auto* red = std::get_if<ReductionStage>(&k.stages[i]);
    if (!red || red->loops.empty() || !plain_partial(*red)) return 1;
  }
  // Resident threads of the whole GPU in blocks of 32 x slices, shared by
  // the column groups; each thread still folds at least 16 rows.
  const int64_t groups = (*columns + 31) / 32;
  const int64_t blocks = static_cast<int64_t>(target.multiprocessors) * kResidentThreadsPerSm / (32 * slices);
  int64_t splits = std::min<int64_t>(blocks / groups, length_hint / (16 * static_cast<int64_t>(slices)));
  splits = std::min<int64_t>(splits, kMaxColumnSplits);
  return splits >= 2 ? static_cast<int>(splits) : 1;
}

/// GpuSchedule::cache_vector for a row cached in E slots per thread: 16
/// bytes of the widest cached element, halved until it divides E, the row
/// length and the innermost stage loop, when every cached load is affine
/// with stride 1 along that loop, a gathered row's too (its alignment is
/// checked at launch). 1 = scalar slots.
int cache_vector_width(const Kernel& k, int e, int64_t length) {
  const std::vector<CachedLoad> cached = row_cached_loads(k);
  const std::vector<Loop>* loops = row_cache_loops(k);
  if (cached.empty() || !loops) return 1;
  const std::optional<int64_t> inner = loops->back().extent.constant();
  if (!inner) return 1;
  std::vector<IndexExpr> vars;
  for (const auto& l : k.outer) vars.push_back(l.var);
  for (size_t i = 0; i < loops->size(); ++i) vars.push_back(row_cache_var(i));
  int widest = 1;
  for (const auto& c : cached) {
    if (!is_stride(c.index, vars.back(), 1) || !affine_form_over_gathers(c.index, vars)) return 1;
    widest = std::max(widest, dtype_size(c.buffer->dtype));
  }
  // Looped stores go out as vectors too (a slot group's, row_stage_loops.h), so
  // each must be stride 1 along the row as well; a stage may not read what
  // the kernel writes, since a group's stores follow all its lanes.
  if (reads_own_writes_in_loops(k)) return 1;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    const auto* p = std::get_if<PointwiseStage>(&k.stages[i]);
    if (!p || p->loops.empty()) continue;
    for (const auto& st : p->stores) {
      const IndexExpr canon = canonical_row_index(k, i, st.index);
      if (!is_stride(canon, vars.back(), 1) || !affine_form_over_gathers(canon, vars)) return 1;
      widest = std::max(widest, dtype_size(st.buffer->dtype));
    }
  }
  int v = kVectorBytes / widest;
  while (v > 1 && (e % v != 0 || length % v != 0 || *inner % v != 0)) v /= 2;
  return v;
}

int pow2_near(int64_t x) {
  int p = 1;
  while (p < x && p < (1 << 20)) p <<= 1;
  if (p > 1 && (p - x) > (x - p / 2)) p >>= 1;
  return p;
}

/// A scan kernel (gpu_schedule.h). Along the contiguous dim, a block per
/// row; `kScanElements` positions a thread per chunk, so a chunk of E x T
/// positions costs one block scan of the threads' totals.
constexpr int kScanElements = 4;
constexpr int kScanBlock = 128;
constexpr int kMaxScanBlock = 512;
// A split scan's block takes at least this many chunks of its row or
// column group: it reads them twice, and looks back between the passes.
constexpr int64_t kMinScanChunksPerSplit = 4;
// Fewer splits do not pay for the second read.
constexpr int64_t kMinScanSplits = 4;
// At most this many blocks in a split scan's grid (module-level totals,
// one per block and column).
constexpr int64_t kMaxScanTiles = int64_t{1} << 16;

/// Blocks to split each of `units` rows or column groups of a scan across
/// (threads_per_block each, walking chunks of `chunk` positions), 1 for
/// none: enough blocks to fill the resident threads, each with
/// kMinScanChunksPerSplit chunks or more, when that is at least
/// kMinScanSplits. Split, the input is read twice: that pays many times
/// over for a few long rows or columns (64 columns of 65536 rows, one row
/// of 4M), but not for rows that nearly fill the GPU already (256 rows of
/// 65536 with 2 splits is slower), hence kMinScanSplits.
int scan_splits(const GpuTarget& target, std::optional<int64_t> units, int threads_per_block, int64_t chunk,
                int64_t length) {
  if (!units || *units <= 0) return 1;
  const int64_t resident = int64_t{target.multiprocessors} * kResidentThreadsPerSm;
  int64_t splits = resident / (*units * threads_per_block);
  splits = std::min(splits, length / (kMinScanChunksPerSplit * chunk));
  splits = std::min(splits, kMaxScanTiles / *units);
  return splits >= kMinScanSplits ? static_cast<int>(splits) : 1;
}

/// The vector width of a RowPerBlock scan with E = kScanElements: 16 bytes
/// over the widest of its stores and scan_vector_loads, when every store is
/// stride 1 along the scan and affine; 1 for none.
int scan_vector_width(const Kernel& k, const ScanStage& scan) {
  const std::vector<IndexExpr> vars = scan_access_vars(k);
  int widest = 1;
  for (const auto& st : scan.stores) {
    if (st.accumulate || !is_stride(st.index, vars.back(), 1) || !affine_form(st.index, vars)) return 1;
    widest = std::max(widest, dtype_size(st.buffer->dtype));
  }
  for (const Expr& l : scan_vector_loads(k)) widest = std::max(widest, dtype_size(l.dtype()));
  return std::clamp(kVectorBytes / widest, 1, kScanElements);
}

GpuSchedule decide_scan(const Kernel& k, const ScanStage& scan, const GpuTarget& target, std::string* why) {
  GpuSchedule g;
  const Loop& loop = scan.loops[0];
  bool along_rows = true;
  for (const auto& st : scan.stores) along_rows = along_rows && is_stride(st.index, loop.var, 1);
  const int64_t length = hinted(loop.extent, target.symbol_hint).value_or(target.symbol_hint);
  bool columns = !along_rows && !k.outer.empty();
  for (const auto& st : scan.stores) columns = columns && is_stride(st.index, k.outer.back().var, 1);
  if (columns) {
    // One thread per column walking all the rows cannot fill the GPU (a
    // 4096 x 4096 column scan has 4096 threads), so the rows are sliced.
    const int64_t points = hinted(product_of(k.outer), target.symbol_hint).value_or(target.symbol_hint);
    int slices = 1;
    while (slices < kMaxColumnSlices && points * slices < int64_t{target.multiprocessors} * kResidentThreadsPerSm &&
           int64_t{2} * slices * kScanElements <= length) {
      slices *= 2;
    }
    g.mapping = GpuMapping::ColumnReduction;
    g.threads_per_column = slices;
    g.block_size = 32 * slices;
    g.elements_per_thread = kScanElements;
    *why = cat("scan down columns: blocks of 32 columns x ", slices, " row slices, chunks of ", slices, " x ",
               kScanElements, " rows, the slices' totals scanned in shared memory");
    const std::optional<int64_t> columns = product_of(k.outer).constant();
    g.row_splits = scan_splits(target, columns ? std::optional<int64_t>((*columns + 31) / 32) : std::nullopt,
                               g.block_size, int64_t{slices} * kScanElements, length);
    if (g.row_splits > 1) *why += cat("; few columns: each group's rows split across ", g.row_splits, " blocks");
    return g;
  }
  if (!along_rows) {
    g.mapping = GpuMapping::GridStridePointwise;
    g.block_size = kPointwiseBlock;
    *why = "scan: a thread per outer point walks the scan serially (no dim its accesses are contiguous in)";
    return g;
  }
  g.mapping = GpuMapping::RowPerBlock;
  g.elements_per_thread = kScanElements;
  // Small blocks while the rows fill the GPU (rows of 1024 or 4096 are
  // faster at 128 threads than at 512); up to kMaxScanBlock for fewer,
  // longer rows (1024 rows of 16384 take 512), which fill it less.
  const int64_t rows = hinted(product_of(k.outer), target.symbol_hint).value_or(target.symbol_hint);
  const int64_t resident = int64_t{target.multiprocessors} * kResidentThreadsPerSm;
  int threads = 32;
  while (threads < kScanBlock && int64_t{threads} * kScanElements < length) threads *= 2;
  while (threads < kMaxScanBlock && int64_t{threads} * kScanElements < length && rows * threads < resident) {
    threads *= 2;
  }
  g.block_size = threads;
  g.cache_vector = scan_vector_width(k, scan);
  *why = cat("scan: a block per row in chunks of ", threads, " threads x ", kScanElements,
             " positions, the chunk's running value carried into the next");
  if (g.cache_vector > 1) *why += cat(", loads and stores stride 1 along it in vectors of ", g.cache_vector);
  g.row_splits = scan_splits(target, product_of(k.outer).constant(), threads, int64_t{threads} * kScanElements, length);
  if (g.row_splits > 1) *why += cat("; few rows: each split across ", g.row_splits, " blocks");
  return g;
}

/// A column kernel (is_column_kernel): a thread per column, or column
/// groups of 32 columns x row slices combined in shared memory, split across
/// blocks when the groups are few.
GpuSchedule decide_columns(const Kernel& k, const GpuTarget& target, std::string* why) {
  GpuSchedule g;
  g.mapping = GpuMapping::ColumnReduction;
  g.block_size = kColumnBlock;
  if (reads_own_writes_in_loops(k)) {
    *why = "stage loops are strided, the innermost outer loop is contiguous; a looped stage reads what the "
           "kernel writes: one thread per column";
    return g;
  }
  const int64_t columns = hinted(product_of(k.outer), target.symbol_hint).value_or(target.symbol_hint);
  int64_t length = 1;
  for (const auto& s : k.stages) {
    length = std::max(length, hinted(product_of(loops_of(s)), target.symbol_hint).value_or(target.symbol_hint));
  }
  // Enough row slices to fill the GPU (resident threads / columns), at
  // most 32 (a 1024-thread block), and no more than length / 16 so each
  // slice still folds a run of rows.
  const int64_t fill = static_cast<int64_t>(target.multiprocessors) * kResidentThreadsPerSm / std::max<int64_t>(columns, 1);
  int r = 1;
  while (r < target.max_column_slices && 2 * r <= fill && 2 * r * 16 <= length) r *= 2;
  if (r < 2) {
    *why = "stage loops are strided, the innermost outer loop is contiguous; short columns or many of them: one "
           "thread per column";
    return g;
  }
  g.threads_per_column = r;
  g.block_size = 32 * r;
  *why = cat("stage loops are strided, the innermost outer loop is contiguous: 32 columns x ", r,
             " row slices per block, combined in shared memory");
  g.row_splits = target.split_rows ? column_splits(k, target, r, length) : 1;
  if (g.row_splits > 1) *why += cat("; few columns: each group split across ", g.row_splits, " blocks");
  return g;
}

/// A row kernel: a row per warp or per block, cached in registers when it
/// fits, split across blocks when rows are few and long.
GpuSchedule decide_rows(const Kernel& k, const GpuTarget& target, std::string* why) {
  GpuSchedule g;
  IndexExpr longest = 1;
  int64_t longest_hint = 1;
  for (const auto& s : k.stages) {
    IndexExpr l = product_of(loops_of(s));
    int64_t h = hinted(l, target.symbol_hint).value_or(target.symbol_hint);
    if (h > longest_hint) {
      longest_hint = h;
      longest = l;
    }
  }
  const std::optional<int64_t> length = longest.constant();
  const std::optional<int64_t> rows = product_of(k.outer).constant();
  // Whether the row fits the register cache with `t` threads per row.
  const RowCache cache = row_cache(k);
  const int64_t cached_loads = static_cast<int64_t>(cache.live_arrays);
  auto cacheable = [&](int64_t t) {
    return length && cached_loads > 0 && uniform_stage_loops(k.stages) &&
           (*length + t - 1) / t * cached_loads <= kRowCacheRegisters;
  };
  // A short row that a warp cannot cache but a block can goes to a block:
  // one pass over global memory beats warp-only combines that pass over it
  // again (layer_norm backward over 16K rows of 1024, four row loads).
  const bool warp_row = length && *length <= kMaxWarpRow &&
                        (cacheable(32) || !cacheable(std::clamp(pow2_near(*length / 16), 128, 1024)));
  int threads;
  if (warp_row) {
    g.mapping = GpuMapping::RowPerWarp;
    g.block_size = kRowPerWarpBlock;
    threads = 32;
  } else {
    g.mapping = GpuMapping::RowPerBlock;
    if (!length) {
      threads = 256;
    } else if (rows && *rows < target.multiprocessors) {
      threads = target.max_threads_per_block;
    } else {
      threads = std::clamp(pow2_near(*length / 16), 128, target.max_threads_per_block);
      // A row cached in registers takes 512 threads rather than 1024 when
      // two such blocks still fit an SM: one row's block reduction then
      // overlaps another row's loads (layer_norm and var_mean over
      // 16384-long rows: 512 x 32 rather than 1024 x 16). A cache of more
      // than half the budget leaves one 512-thread block per SM, which is
      // worse than 1024 threads caching half as much (cross_entropy's max
      // and exp-sum over 8192 rows of 32000: 512 x 63 takes 84 registers,
      // 1024 x 32 takes 52).
      const int64_t e = (*length + kMaxCachedRowBlock - 1) / kMaxCachedRowBlock;
      if (threads > kMaxCachedRowBlock && cached_loads > 0 && uniform_stage_loops(k.stages) &&
          e * cached_loads <= kRowCacheRegisters / 2) {
        threads = kMaxCachedRowBlock;
      }
      // A kernel that only reduces the cached row (no looped stage stores)
      // halves again to 256 threads when the doubled cache fits the budget:
      // at 80 registers three such blocks fit an SM, one more row in flight
      // than two 512-thread blocks give (var_mean over 16384 x 16384). A
      // looped store stage needs registers of its own: layer_norm's kernel
      // at 256 threads takes 92 and only two blocks fit, which is slower, so
      // it keeps 512.
      const int64_t e_small = (*length + kSmallCachedRowBlock - 1) / kSmallCachedRowBlock;
      if (threads == kMaxCachedRowBlock && cached_loads > 0 && uniform_stage_loops(k.stages) &&
          !stores_in_a_loop(k) && e_small * cached_loads <= kRowCacheRegisters) {
        threads = kSmallCachedRowBlock;
      }
    }
    if (target.row_block_shift > 0) threads = std::min(threads << target.row_block_shift, target.max_threads_per_block);
    if (target.row_block_shift < 0) threads = std::max(threads >> -target.row_block_shift, 64);
    g.block_size = threads;
  }
  g.elements_per_thread = 0;
  std::string cache_why = "rows of symbolic length stream from global memory";
  if (length) {
    const int64_t e = (*length + threads - 1) / threads;
    const size_t cached = cache.live_arrays;
    if (!uniform_stage_loops(k.stages)) {
      cache_why = "stages loop over different extents: multi-pass";
    } else if (cached == 0) {
      cache_why = "nothing to cache: multi-pass";
    } else if (e * static_cast<int64_t>(cached) > kRowCacheRegisters) {
      cache_why = cat("row needs ", e * static_cast<int64_t>(cached), " registers per thread (> ",
                      kRowCacheRegisters, "): multi-pass");
    } else {
      g.elements_per_thread = static_cast<int>(e);
      g.cache_vector = cache_vector_width(k, g.elements_per_thread, *length);
      const size_t values = cache.values.size();
      std::string what = cat(cached, " loads");
      if (values > 0) {
        what = cat(values, values == 1 ? " value" : " values", " computed from ", cache.loads.size(), " loads");
        if (cached > values) what += cat(" and ", cached - values, " loads");
      }
      cache_why = cat("row cached in registers: ", what, " x ", e, " elements per thread",
                      g.cache_vector > 1 ? cat(" (", g.cache_vector, "-element vector loads)") : std::string(),
                      ", single pass");
    }
  }
  *why = cat(g.mapping == GpuMapping::RowPerWarp ? "row per warp" : "row per block", " (row length ",
             length ? std::to_string(*length) : to_string(longest), ", ", threads, " threads per row); ", cache_why);
  if (g.mapping == GpuMapping::RowPerBlock && g.elements_per_thread == 0 && target.split_rows) {
    g.row_splits = row_splits(k, target, threads, longest_hint);
    if (g.row_splits > 1) *why += cat("; few rows: each split across ", g.row_splits, " blocks");
  }
  return g;
}

GpuSchedule decide(const Kernel& k, const GpuTarget& target, std::string* why) {
  if (const ScanStage* scan = scan_of(k)) return decide_scan(k, *scan, target, why);
  GpuSchedule g;
  bool any_loops = false, any_reduction = false;
  for (const auto& s : k.stages) {
    any_loops |= !loops_of(s).empty();
    any_reduction |= std::holds_alternative<ReductionStage>(s);
  }
  if (!any_loops) {
    g.mapping = GpuMapping::GridStridePointwise;
    g.block_size = target.pointwise_block;
    const PointwiseVector v = any_reduction ? PointwiseVector{} : pointwise_vector(k);
    g.elements_per_thread = v.width;
    g.flat_vector = v.flat;
    *why = g.elements_per_thread > 1
               ? cat("pointwise: ", g.elements_per_thread, " contiguous elements per thread (16-byte accesses",
                     v.flat ? ", over the flattened loops)" : ")")
               : "pointwise: scalar (no contiguous, vectorisable innermost access)";
    return g;
  }
  // A pooling window or a sum of a few neighbours: a warp (or a block) per
  // output leaves most of its lanes idle and combines across them for a
  // handful of values (avg_pool2d(x, 2) on 64x128x112x112 is many times
  // slower that way). One thread per outer iteration walks the loops itself.
  bool thread_rows = hinted(product_of(k.outer), target.symbol_hint).value_or(0) >= kThreadRowMinOuter;
  for (const auto& s : k.stages) {
    const auto length = product_of(loops_of(s)).constant();
    thread_rows = thread_rows && length && *length <= kThreadRow;
  }
  if (thread_rows) {
    g.mapping = GpuMapping::ColumnReduction;
    g.block_size = kColumnBlock;
    *why = cat("stage loops of at most ", kThreadRow, " iterations: one thread per outer iteration");
    return g;
  }
  if (is_column_kernel(k)) return decide_columns(k, target, why);
  return decide_rows(k, target, why);
}

}  // namespace

bool is_vector_access(const Kernel& k, const GpuSchedule& g, const IndexExpr& index) {
  if (g.flat_vector) return is_flat_access(k, index);
  // An indirect (gathered) row offset has no known alignment: scalar access.
  if (k.outer.empty() || has_indirect(index) || !is_stride(index, k.outer.back().var, 1)) return false;
  std::vector<IndexExpr> vars;
  for (const auto& l : k.outer) vars.push_back(l.var);
  return affine_form(index, vars).has_value();
}

std::optional<std::vector<IndexExpr>> uniform_mask_bounds(const Kernel& k, const Expr& mask, int width) {
  if (k.outer.empty()) return std::nullopt;
  const std::string inner = k.outer.back().var.as<IndexVar>()->name;
  const VarRanges ranges = k.var_ranges();
  std::vector<IndexExpr> bounds;
  bool uniform = true;
  std::function<void(const Expr&)> visit = [&](const Expr& e) {
    if (!uniform || !free_vars(e).count(inner)) return;  // the same for every lane
    if (auto c = e.as<Compare>()) {
      auto vc = var_comparison(*c, ranges);
      auto bound = vc && vc->var == inner ? change_point(*vc) : std::nullopt;
      if (!bound) {
        uniform = false;
      } else if (auto b = bound->constant()) {
        uniform = *b % width == 0;
      } else {
        bounds.push_back(*bound);
      }
      return;
    }
    auto u = e.as<Unary>();
    auto b = e.as<Binary>();
    if (e.dtype() == DType::Bool && u && (u->op == UnaryOp::LogicalNot || u->op == UnaryOp::BitwiseNot)) {
      visit(u->operand);
    } else if (e.dtype() == DType::Bool && b &&
               (b->op == BinaryOp::LogicalAnd || b->op == BinaryOp::BitwiseAnd || b->op == BinaryOp::LogicalOr ||
                b->op == BinaryOp::BitwiseOr)) {
      visit(b->lhs);
      visit(b->rhs);
    } else {
      uniform = false;
    }
  };
  visit(mask);
  if (!uniform) return std::nullopt;
  return bounds;
}

std::vector<IndexExpr> scan_access_vars(const Kernel& k) {
  std::vector<IndexExpr> vars;
  for (const auto& l : k.outer) vars.push_back(l.var);
  if (const ScanStage* scan = scan_of(k)) vars.push_back(scan->loops[0].var);
  return vars;
}

std::vector<Expr> scan_vector_loads(const Kernel& k) {
  std::vector<Expr> out;
  const ScanStage* scan = scan_of(k);
  if (!scan) return out;
  const std::vector<IndexExpr> vars = scan_access_vars(k);
  const std::set<std::string> written = written_buffers(k);
  for (const Expr& e : post_order({scan->body})) {
    const auto* l = e.as<Load>();
    if (!l || l->mask.defined() || written.count(l->buffer->name) || !is_stride(l->index, vars.back(), 1) ||
        !affine_form(l->index, vars)) {
      continue;
    }
    if (std::none_of(out.begin(), out.end(), [&](const Expr& o) { return ExprStructuralEqual{}(o, e); })) {
      out.push_back(e);
    }
  }
  return out;
}

bool is_vector_load(const Kernel& k, const GpuSchedule& g, const Load& load) {
  if (!is_vector_access(k, g, load.index)) return false;
  if (!load.mask.defined()) return true;
  return !g.flat_vector && dtype_size(load.dtype) * g.elements_per_thread <= kVectorBytes &&
         uniform_mask_bounds(k, load.mask, g.elements_per_thread).has_value();
}

namespace {

/// The kernel to print and its schedule: with its stored row values
/// forwarded (forward_row_stores) where that lets the row be cached, else
/// as it is.
std::pair<KernelPtr, GpuSchedule> decide_forwarding(const KernelPtr& kernel, const GpuTarget& target,
                                                    std::string* why) {
  const KernelPtr forwarded = forward_row_stores(kernel);
  if (forwarded != kernel) {
    std::string forwarded_why;
    const GpuSchedule g = decide(*forwarded, target, &forwarded_why);
    const bool rows = g.mapping == GpuMapping::RowPerWarp || g.mapping == GpuMapping::RowPerBlock;
    if (rows && g.elements_per_thread > 0) {
      *why = forwarded_why + "; what a stage stores, later stages compute rather than read back";
      return {forwarded, g};
    }
  }
  const GpuSchedule g = decide(*kernel, target, why);
  return {kernel, g};
}

}  // namespace

KernelPtr schedule_for_gpu(const KernelPtr& kernel, const GpuTarget& target) {
  if (kernel->device != Device::CUDA) {
    throw CompilerError(Error::internal(cat("gpu schedule: kernel ", kernel->name, " is not a CUDA kernel")));
  }
  std::string why;
  const auto [k, g] = decide_forwarding(kernel, target, &why);
  Schedule s = k->schedule;
  s.gpu = g;
  s.why = why;
  return k->with_schedule(s);
}

std::string explain_gpu_schedule(const Kernel& kernel, const GpuTarget& target) {
  std::string why;
  const GpuSchedule g = decide_forwarding(std::make_shared<Kernel>(kernel), target, &why).second;
  return cat(kernel.name, ": ", to_string(g.mapping), " block=", g.block_size,
             " elements_per_thread=", g.elements_per_thread, " — ", why);
}

bool has_module_state(const GpuSchedule& g) {
  return (g.mapping == GpuMapping::RowPerBlock || g.mapping == GpuMapping::ColumnReduction) && g.row_splits > 1;
}

int resident_blocks_assumed(const Kernel& k, const GpuSchedule& g) {
  if (g.mapping == GpuMapping::RowPerBlock && g.row_splits > 1) return kSplitRowBlocksPerSm;
  const bool column_slices = g.mapping == GpuMapping::ColumnReduction && g.threads_per_column > 1;
  const bool streamed_rows = g.mapping == GpuMapping::RowPerBlock && g.elements_per_thread == 0;
  const bool static_sizes = signature(k).symbols.empty();
  if ((column_slices || streamed_rows) && static_sizes && g.block_size > 0)
    return static_cast<int>(kResidentThreadsPerSm / g.block_size);
  return 0;
}

}  // namespace cppi::gpu
