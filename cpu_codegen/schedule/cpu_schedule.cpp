#include "cpu_codegen/schedule/cpu_schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "cpu_codegen/schedule/index_conditions.h"
#include "cpu_codegen/schedule/row_epilogue.h"
#include "cpu_codegen/schedule/vector_access.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::cpu {

using namespace ir;
using detail::AccessCounts;
using detail::describe_loads;
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

/// Whether `buffer`'s first access in the kernel is a pointwise stage that
/// stores it without loading it, and every load of it reads what that store
/// wrote in the same outer iteration (the same index once the loops are
/// renamed to the storing stage's, over equal extents): a scratch the
/// kernel fills before it reads it, as the stash of softmax's exp or a
/// column statistic stored for the stage after it.
bool written_before_read(const Kernel& k, const std::string& buffer) {
  const PointwiseStage* first = nullptr;
  const Store* store = nullptr;
  for (const auto& s : k.stages) {
    bool loads = false;
    for (const auto& a : reads(s)) loads = loads || a.buffer->name == buffer;
    if (!first) {
      const auto* pw = std::get_if<PointwiseStage>(&s);
      if (pw) {
        for (const auto& st : pw->stores) {
          if (st.buffer->name == buffer) store = &st;
        }
      }
      if (loads) return false;
      if (store) first = pw;
      continue;
    }
    if (!loads) continue;
    // A loop-less store (log_softmax's log of a column sum) is read back at
    // its own index; one with loops at the same point of equal loops.
    const auto& loops = loops_of(s);
    std::map<std::string, IndexExpr> renamed;
    if (!first->loops.empty()) {
      if (loops.size() != first->loops.size()) return false;
      for (size_t i = 0; i < loops.size(); ++i) {
        if (!(loops[i].extent == first->loops[i].extent)) return false;
        renamed[loops[i].var.as<IndexVar>()->name] = first->loops[i].var;
      }
    }
    for (const auto& a : reads(s)) {
      if (a.buffer->name == buffer && !(substitute(a.index, renamed) == store->index)) return false;
    }
  }
  return first != nullptr;
}

/// Whether computing an outer iteration twice could read what the first time
/// stored (TailKind::Overlapped): the kernel loads a buffer it stores (an
/// in-place update) that it does not fill itself first (written_before_read).
bool reads_a_buffer_it_writes(const Kernel& k) {
  for (const auto& b : read_back_buffers(k)) {
    if (!written_before_read(k, b)) return true;
  }
  return false;
}

std::string var_name(const Loop& l) { return l.var.as<IndexVar>()->name; }

/// Whether `k`'s stage loops may walk rows in lanes (CpuSchedule::row_blocks):
/// every stage with loops is a reduction or pointwise stage with one loop of
/// constant extent from 2 to fewer than a host vector of floats, and no store
/// accumulates.
bool rows_shorter_than_a_vector(const Kernel& k, const CpuTarget& target) {
  if (accumulates(k)) return false;
  bool any = false;
  for (const auto& s : k.stages) {
    const auto& loops = loops_of(s);
    if (loops.empty()) continue;
    const auto n = loops[0].extent.constant();
    if (std::holds_alternative<ScanStage>(s) || loops.size() != 1 || !n || *n < 2 || *n >= target.vector_bytes / 4) {
      return false;
    }
    any = true;
  }
  return any;
}

/// Whether every buffer that `k` stores as row blocks along `v` may live in
/// registers from its first store to the end of the outer iteration: all
/// its stores and loads are the same rows (one start, one length), and no
/// stage loads it before the first stage that stores it. A buffer stored
/// otherwise is not read as row blocks (they would load what the kernel has
/// not stored yet).
bool row_blocks_stay_in_registers(const Kernel& k, const std::string& v) {
  struct Rows {
    IndexExpr start;
    int64_t length = 0;
    bool operator==(const Rows& o) const { return length == o.length && start == o.start; }
  };
  auto rows_of = [&](const Stage& s, const Access& a) -> std::optional<Rows> {
    const auto& loops = loops_of(s);
    if (loops.size() != 1) return std::nullopt;
    const auto r = row_block_access(a.buffer->dtype, a.index, a.masked, v, loops[0]);
    if (!r) return std::nullopt;
    return Rows{row_block_start(a.index, loops[0]), *r};
  };
  std::map<std::string, std::vector<std::pair<size_t, std::optional<Rows>>>> stores;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    for (const auto& w : writes(k.stages[i])) stores[w.buffer->name].emplace_back(i, rows_of(k.stages[i], w));
  }
  for (const auto& [buffer, list] : stores) {
    // Stored as rows: every store the first one's rows; otherwise none as rows.
    const auto& [first_stage, first] = list[0];
    for (const auto& st : list) {
      if (st.second.has_value() != first.has_value() || (first && !(*st.second == *first))) return false;
    }
    for (size_t i = 0; i < k.stages.size(); ++i) {
      for (const auto& a : reads(k.stages[i])) {
        if (a.buffer->name != buffer) continue;
        const auto rows = rows_of(k.stages[i], a);
        if (!first && rows) return false;
        if (first && (!rows || !(*rows == *first) || i <= first_stage)) return false;
      }
    }
  }
  return true;
}

struct Estimator {
  const CpuTarget& target;
  int64_t operator()(const IndexExpr& e) const {
    IndexBindings b;
    for (const auto& s : free_symbols(e)) b[s] = target.symbol_hint;
    return std::max<int64_t>(1, evaluate(e, b));
  }
  int64_t product(const std::vector<Loop>& loops, size_t begin = 0, size_t end = SIZE_MAX) const {
    int64_t p = 1;
    for (size_t i = begin; i < std::min(end, loops.size()); ++i) p = sat_mul(p, (*this)(loops[i].extent));
    return p;
  }
  static int64_t sat_mul(int64_t a, int64_t b) {
    if (a != 0 && b > INT64_MAX / a) return INT64_MAX;
    return a * b;
  }
};

struct Decision {
  CpuSchedule cpu;
  std::string why;
};

/// True when every store of `k` writes its buffer densely in row-major order
/// of the outer loops and then its stage's loops: index = sum v_i * (product
/// of the later extents), every extent constant, the buffer exactly that many
/// elements. A parallel chunk of outer iterations then writes one contiguous
/// range of each output. `min_output_bytes`: the smallest such output.
bool writes_outputs_densely(const Kernel& k, int64_t* min_output_bytes) {
  *min_output_bytes = INT64_MAX;
  bool any = false;
  for (const auto& st : k.stages) {
    const auto* p = std::get_if<PointwiseStage>(&st);
    if (!p) continue;  // reductions store nothing themselves
    std::vector<Loop> loops = k.outer;
    loops.insert(loops.end(), p->loops.begin(), p->loops.end());
    std::vector<IndexExpr> vars;
    std::vector<int64_t> strides(loops.size(), 1);
    int64_t total = 1;
    for (size_t i = loops.size(); i-- > 0;) {
      auto c = loops[i].extent.constant();
      if (!c || *c <= 0 || total > INT64_MAX / 16 / *c) return false;
      strides[i] = total;
      total *= *c;
    }
    for (const auto& l : loops) vars.push_back(l.var);
    for (const auto& store : p->stores) {
      auto form = affine_form(store.index, vars);
      auto numel = store.buffer->layout.storage_size().constant();
      if (!form || !numel || *numel != total || form->offset.constant() != std::optional<int64_t>(0)) return false;
      for (size_t i = 0; i < vars.size(); ++i) {
        if (form->strides[i].constant() != std::optional<int64_t>(strides[i])) return false;
      }
      *min_output_bytes = std::min(*min_output_bytes, total * dtype_size(store.buffer->dtype));
      any = true;
    }
  }
  return any;
}

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

/// Whether an outer loop's extent is a size symbol. The kernel's work is then
/// only an estimate (symbols count as CpuTarget::symbol_hint), so it is not
/// made serial at compile time: the grain, which cppi_parallel_for checks at
/// run time (a range of at most `grain` iterations runs inline), keeps small
/// sizes on one thread. relu(x) * 2 of a dynamic 16M floats ran on one thread.
bool symbolic_outer(const Kernel& k) {
  for (const auto& l : k.outer) {
    if (!l.extent.constant()) return true;
  }
  return false;
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
      vec_why = cat("scalar: ", counts.bad_stores, " strided stores, ", counts.gathers, " gathers vs ",
                    counts.contiguous, " contiguous loads in ", v);
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

/// The outer iterations of a kernel whose innermost outer loop is
/// vectorised `width` lanes wide, counting a vector of that loop as one.
int64_t outer_vectors(const Kernel& k, const Estimator& est, int width) {
  const size_t n = k.outer.size();
  const int64_t last = est(k.outer[n - 1].extent);
  return Estimator::sat_mul(est.product(k.outer, 0, n - 1), (last + width - 1) / width);
}

/// Whether a kernel of reductions has too few outer iterations (rows) to
/// share evenly among the threads, so each row's reduction loops are split
/// across them instead (parallel_reduction: one cppi_parallel_reduce per
/// reduction and row, each a parallel region). Fewer rows than threads always; otherwise rows that
/// do not divide among the threads (3 rows on 2: one thread takes two), at
/// most 4 per thread, each long enough that a thread's share of it (at least
/// 4 x min_parallel_work) outweighs starting a region. x.mean(1) of 3 x 10^6
/// floats on two threads: 0.56 ms by rows (eager 0.50), 0.40 split.
bool few_long_rows(int64_t rows, int64_t row_work, const CpuTarget& target) {
  const int64_t threads = target.num_threads;
  if (rows < threads) return true;
  return rows % threads != 0 && rows <= 4 * threads && row_work / threads >= 4 * target.min_parallel_work;
}

/// Whether a column reduction with few vectors of columns splits its tiled
/// rows among the threads (parallel_reduction with column_block): one
/// vectorised outer loop of constant extent, two vectors or more and fewer
/// than two per thread (counting an overlapped rest, which must be
/// allowed: nothing read back is written), the kernel's leading stages
/// reductions over loops and the rest loop-less, and every thread's share of
/// the rows at least 4 x min_parallel_work elements. x.sum(0) of 2M x 20
/// floats ran its one tile pass on one thread of two (12.0 ms, Inductor
/// 10.2); split per vector, each vector's parallel region read every row.
bool splits_tiled_rows(const Kernel& k, const CpuSchedule& c, const Estimator& est, const CpuTarget& target) {
  if (c.vectorized != VectorizedLoop::InnermostOuter || c.transpose_tile || c.row_blocks || k.outer.size() != 1 ||
      target.num_threads < 2 || !signature(k).scratch.empty() || reads_a_buffer_it_writes(k)) {
    return false;
  }
  const auto extent = k.outer[0].extent.constant();
  if (!extent || *extent < c.vector_width) return false;
  const size_t tiled = ir::leading_looped_reductions(k.stages);
  if (tiled == 0) return false;
  for (size_t i = tiled; i < k.stages.size(); ++i)
    if (!loops_of(k.stages[i]).empty()) return false;
  // One vector is the lanes' parallel reduction already (not tiled).
  const int64_t vectors = (*extent + c.vector_width - 1) / c.vector_width;
  if (vectors < 2 || vectors >= 2 * int64_t{target.num_threads}) return false;
  const int64_t rows = est(std::get<ReductionStage>(k.stages[0]).loops[0].extent);
  const int64_t share = Estimator::sat_mul(rows / target.num_threads, vectors * c.vector_width);
  return rows > 16 && share >= 4 * target.min_parallel_work;
}

/// Whether every pointwise stage with loops may split its first loop among
/// threads beside the reductions (parallel_reduction): each store writes
/// distinct elements for distinct points of the stage's loops
/// (selects_disjoint_elements, all loops: an inner loop could otherwise
/// meet another chunk's elements), and what the stage loads from a buffer it
/// stores, it loads at the element it stores (softmax's in-place rescale).
/// softmax over 3 rows of 1M floats ran as 2 + 1 rows on two threads
/// (1.89 ms; split 1.41, eager 1.8): its stash and rescale passes stopped the
/// reductions' split.
bool pointwise_loops_split(const Kernel& k) {
  // Within one outer iteration, its variables are constants.
  std::map<std::string, IndexExpr> outer_fixed;
  for (const Loop& l : k.outer) outer_fixed[var_name(l)] = index_const(0);
  VarRanges ranges;
  for (const auto& s : k.stages) {
    const auto* p = std::get_if<PointwiseStage>(&s);
    if (!p || p->loops.empty()) continue;
    std::vector<IndexExpr> vars;
    for (const Loop& l : p->loops) {
      ranges[var_name(l)] = l.extent;
      vars.push_back(l.var);
    }
    std::map<std::string, const Store*> stored;
    for (const auto& st : p->stores) {
      if (st.accumulate || stored.count(st.buffer->name) ||
          !selects_disjoint_elements(substitute(st.index, outer_fixed), vars, ranges)) {
        return false;
      }
      stored[st.buffer->name] = &st;
    }
    for (const auto& a : reads(s)) {
      auto it = stored.find(a.buffer->name);
      if (it != stored.end() && !(a.index == it->second->index)) return false;
    }
  }
  return true;
}

Decision decide(const Kernel& k, const CpuTarget& target) {
  if (const ScanStage* scan = scan_of(k)) return decide_scan(k, *scan, target);
  Decision d;
  Estimator est{target};
  const int64_t outer_iters = est.product(k.outer);
  int64_t stage_work = 0;
  size_t reductions = 0;
  bool pointwise_loops = false;
  bool any_stage_loops = false;
  for (const auto& s : k.stages) {
    stage_work = std::min<int64_t>(INT64_MAX / 2, stage_work + est.product(loops_of(s)));
    if (std::holds_alternative<ReductionStage>(s)) ++reductions;
    else if (!loops_of(s).empty()) pointwise_loops = true;
    if (!loops_of(s).empty()) any_stage_loops = true;
  }
  const int64_t work = Estimator::sat_mul(outer_iters, std::max<int64_t>(1, stage_work));

  // --- vectorisation -----------------------------------------------------------------
  std::string vec_why = "scalar: no contiguous loop";
  int inner_width = 0;
  std::string inner_why;
  bool masked_tail = false;   // the stage loops' last vectors
  bool outer_masked = false;  // the vectorised outer loop's last vector
  bool stage_loops_win = false;  // full stage-loop vectors, unless rows go in lanes
  auto vectorize_stage_loops = [&] {
    d.cpu.vectorized = VectorizedLoop::InnermostOfEachStage;
    d.cpu.vector_width = inner_width;
    // Enough independent adds or compare-selects in flight to hide their
    // latency: amax over 4096x4096 floats, one thread, 3.09 -> 2.72 ms
    // (eager 2.8).
    d.cpu.vector_accumulators = target.vector_accumulators;
    // Stage loops too short for all of them to fill only pay for combining
    // them: sums over 508400 rows of 33 floats, two threads, 5.64 -> 5.22 ms
    // (Inductor 4.77); rows of 17, 5.60 -> 4.88 (Inductor 5.49).
    int64_t longest = 0;
    for (const auto& s : k.stages) {
      const auto& loops = loops_of(s);
      const auto n = loops.empty() ? std::optional<int64_t>(0) : loops.back().extent.constant();
      longest = n ? std::max(longest, *n) : std::numeric_limits<int64_t>::max();
    }
    if (longest < int64_t{target.vector_accumulators} * inner_width) d.cpu.vector_accumulators = 1;
    vec_why = inner_why;
  };
  if (any_stage_loops) {
    AccessCounts counts;
    std::vector<IndexExpr> extents;
    for (const auto& s : k.stages) {
      const auto& loops = loops_of(s);
      if (loops.empty()) continue;
      scan_stage(s, var_name(loops.back()), &counts);
      extents.push_back(loops.back().extent);
    }
    masked_tail = masked_tail_pays(k, target) && masked_tail_safe(k);
    inner_width = worth_vectorizing(counts) ? pick_width(target, counts.max_lane_bytes, extents, masked_tail) : 0;
    inner_why = cat("vectorised the innermost loop of each stage (", describe_loads(counts), ")");
    // A stage loop shorter than a full vector is one narrow vector and a
    // horizontal step per outer iteration; the outer loop, where it reads
    // whole or strided vectors, does a full vector of outer iterations at
    // once and stores them whole. x.unfold(-1, 4, 4).sum(-1) over 2048 x
    // 4096 floats, two threads: 1.58 ms four lanes wide, Inductor 1.12.
    const bool narrow = inner_width > 0 && inner_width < pick_width(target, counts.max_lane_bytes, {});
    // Stage loops that read only strided vectors (a stride of 2 to 4) pass
    // over the same lines once per outer iteration; the outer loop, where it
    // reads whole vectors, passes once. x.sum(0) of 10^6 x 4 floats, two
    // threads: 1.69 ms column by column, 0.81 across the columns (eager 2.8).
    const bool strided_only = counts.contiguous == 0 && counts.strided > 0;
    // Rows shorter than a vector try rows in lanes first, also where their
    // stage loops would take full masked vectors (rows of 9 to 15 floats):
    // var_mean over 10^6 rows of 9, 12, 15 floats, two threads, 10.95,
    // 8.14, 8.56 ms as masked rows, 3.08, 4.82, 5.76 in lanes (Inductor
    // 6.74, 8.37, 8.92).
    if (inner_width > 0 && !narrow && !strided_only && !rows_shorter_than_a_vector(k, target)) {
      vectorize_stage_loops();
    }
    stage_loops_win = inner_width > 0 && !narrow && !strided_only;
  }
  if (d.cpu.vectorized == VectorizedLoop::None && !k.outer.empty()) {
    AccessCounts counts;
    const std::string v = var_name(k.outer.back());
    // Transposed tiles: plain pointwise kernels over two or more loops.
    const bool tileable = k.outer.size() >= 2 && !any_stage_loops && reductions == 0;
    const std::string tile_var = tileable ? var_name(k.outer[k.outer.size() - 2]) : "";
    // Rows shorter than a vector: a vector of W rows reads each stage's
    // rows as R vectors turned in registers (row_blocks), where each row was
    // one narrow vector, a horizontal step and a serial chain of divisions
    // (var_mean over 10^6 rows of 7 floats, two threads: see the schedule
    // header).
    bool rows = any_stage_loops && rows_shorter_than_a_vector(k, target);
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
        d.cpu.vectorized = VectorizedLoop::InnermostOuter;
        d.cpu.vector_width = w;
        d.cpu.transpose_tile = true;
        vec_why = cat("vectorised outer loop ", v, " in ", w, "x", w, " tiles over ", tile_var, " (", counts.contiguous,
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
    outer_masked = target.vector_bytes >= 64 && masked_tail_safe(k, /*lanes_combine=*/false) &&
                   (!extent || *extent < pick_width(target, counts.max_lane_bytes, {}));
    // Without rows in lanes, full stage-loop vectors beat the outer loop.
    int w = d.cpu.transpose_tile || !worth_vectorizing(counts) || (!rows && stage_loops_win)
                ? 0
                : pick_width(target, counts.max_lane_bytes, {k.outer.back().extent}, outer_masked);
    if (w) {
      d.cpu.vectorized = VectorizedLoop::InnermostOuter;
      d.cpu.vector_width = w;
      d.cpu.row_blocks = rows;
      vec_why = cat("vectorised outer loop ", v, rows ? ", rows in lanes" : "", " (", describe_loads(counts), ")");
    } else if (!d.cpu.transpose_tile && (counts.bad_stores || counts.gathers)) {
      vec_why = cat("scalar: ", counts.bad_stores, " strided stores, ", counts.gathers, " gathers vs ", counts.contiguous,
                    " contiguous loads in ", v);
    }
  }
  if (d.cpu.vectorized == VectorizedLoop::None && inner_width > 0) vectorize_stage_loops();
  d.cpu.tail = TailKind::ScalarLoop;
  if (d.cpu.vectorized == VectorizedLoop::InnermostOfEachStage && masked_tail) {
    bool remainder = false;
    for (const auto& s : k.stages) {
      if (loops_of(s).empty()) continue;
      const auto n = loops_of(s).back().extent.constant();
      remainder = remainder || !n || *n % d.cpu.vector_width != 0;
    }
    if (remainder) {
      d.cpu.tail = TailKind::Masked;
      vec_why += "; the last partial vector of each stage loop masked";
    }
  }
  if (d.cpu.vectorized == VectorizedLoop::InnermostOuter && !d.cpu.transpose_tile) {
    auto extent = k.outer.back().extent.constant();
    const int64_t w = d.cpu.vector_width;
    if (outer_masked && (!extent || *extent % w != 0)) {
      d.cpu.tail = TailKind::Masked;
      vec_why += cat("; the last partial vector of ", var_name(k.outer.back()), " masked");
    } else if (extent && *extent > w && *extent % w != 0 && !reads_a_buffer_it_writes(k)) {
      d.cpu.tail = TailKind::Overlapped;
      vec_why += cat("; the last ", *extent % w, " iterations in a vector overlapping the one before");
    }
  }

  // --- parallelism -------------------------------------------------------------------
  std::string par_why;
  const bool vec_outer = d.cpu.vectorized == VectorizedLoop::InnermostOuter;
  const size_t max_parallel = parallel_loops_without_races(k);
  bool split_tiles = false;  // parallel_reduction over the rows of column tiles
  if (accumulates(k) && max_parallel == 0) {
    // Two iterations may add into one element (index_put(accumulate=True)
    // with a repeated index): on one thread the adds cannot race, and they
    // land in iteration order, as eager's serial CPU kernel adds them.
    par_why = "serial: an accumulating store whose outer iterations may add into one element";
  } else if (work < target.min_parallel_work && !symbolic_outer(k)) {
    par_why = cat("serial: ", work, " elements of work");
  } else if (splits_tiled_rows(k, d.cpu, est, target)) {
    // Each tiled reduction's rows, in chunks of at least min_parallel_work
    // elements across the columns.
    const int64_t columns = *k.outer[0].extent.constant();
    split_tiles = true;
    d.cpu.parallel_reduction = true;
    d.cpu.grain_size = std::max<int64_t>(1, (target.min_parallel_work + columns - 1) / columns);
    par_why = cat("column tiles with their rows split among the threads (", columns, " columns)");
  } else if (reductions >= 1 && (!pointwise_loops || (!vec_outer && pointwise_loops_split(k))) &&
             !d.cpu.transpose_tile && !d.cpu.row_blocks &&
             signature(k).scratch.empty() &&
             few_long_rows(vec_outer ? outer_vectors(k, est, d.cpu.vector_width) : outer_iters,
                           Estimator::sat_mul(stage_work, vec_outer ? d.cpu.vector_width : 1), target)) {
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
      per_iter = std::min(per_iter, Estimator::sat_mul(est.product(r->loops, 1), vec_outer ? d.cpu.vector_width : 1));
      if (over.empty()) over = var_name(r->loops[0]);
    }
    if (!over.empty()) {
      d.cpu.parallel_reduction = true;
      d.cpu.grain_size = std::max<int64_t>(1, (target.min_parallel_work + per_iter - 1) / per_iter);
      par_why = cat("parallel reduction over ", over, " (", outer_iters, " outer iterations)");
    } else {
      par_why = "serial: nothing to split";
    }
  } else if (!k.outer.empty()) {
    const size_t n = k.outer.size();
    par_why = split_outer_loops(k, target, work, std::min((vec_outer && n > 1) ? n - 1 : n, max_parallel), &d.cpu);
  } else {
    par_why = "serial: no outer loops";
  }
  d.why = par_why + "; " + vec_why;

  // --- pieces of the vector loop where index comparisons are constant ----------------------
  // torch.cat([x, y], 1).relu() on two 2048 x 1024 floats: every vector
  // built int64 lane indices, compared them twice and checked both masks
  // (width 8, for the int64 lanes): 1.34 ms against relu alone's 0.74.
  const size_t n_outer = k.outer.size();
  const auto vec_extent = n_outer ? k.outer.back().extent.constant() : std::nullopt;
  if (vec_outer && !d.cpu.transpose_tile && d.cpu.parallel_loops < static_cast<int>(n_outer) && vec_extent &&
      !any_stage_loops && reductions == 0) {
    const std::string v = var_name(k.outer.back());
    const std::vector<int64_t> splits = index_condition_splits(k.stages, v, *vec_extent);
    if (!splits.empty()) {
      d.cpu.vector_loop_splits = splits;
      d.cpu.tail = TailKind::ScalarLoop;
      // The width the folded pieces need (the index lanes are gone).
      AccessCounts folded;
      int64_t lo = 0;
      std::vector<int64_t> ends = splits;
      ends.push_back(*vec_extent);
      for (int64_t hi : ends) {
        for (const auto& piece : fold_index_conditions(k.stages, v, lo, hi)) scan_stage(piece, v, &folded);
        lo = hi;
      }
      const int w = pick_width(target, folded.max_lane_bytes, {k.outer.back().extent});
      if (w > 0) d.cpu.vector_width = w;
      d.why += cat("; the vector loop in ", splits.size() + 1, " pieces at its index comparisons");
    }
  }

  // --- prefaulting fresh outputs ------------------------------------------------------------
  // A fresh 64 MB output costs ~16K page faults, most of a pointwise kernel's
  // time on the 2-core dev VM (clone of it: ~15 ms, of which ~13 faulting).
  // Faulting each chunk's range in one madvise(MADV_POPULATE_WRITE) skips the
  // trap per page, and one thread's batch overlaps the other's compute.
  // 4096x4096 floats, 2 threads, % of clone's time: sin + cos 77-79 -> 96-103,
  // gelu(x + b) 73-74 -> 86-90, relu(x + b) * 2 93-97 -> 100-102. Outputs of
  // at least kPrefaultBytes only (the runtime also skips resident pages).
  constexpr int64_t kPrefaultBytes = int64_t{4} << 20;
  int64_t output_bytes = 0;
  if (d.cpu.parallel_loops > 0 && writes_outputs_densely(k, &output_bytes) && output_bytes >= kPrefaultBytes) {
    d.cpu.prefault_outputs = true;
    d.why += "; outputs prefaulted per chunk";
  }

  // --- column-reduction tiling -----------------------------------------------------------
  // One vector per row step uses a 64-byte piece of each row, then comes back
  // for the neighbouring piece after the whole column: 4096x4096 float column
  // sums ran 6x slower than row sums. Blocks of ~4 KiB per row (64 vectors of
  // 16 floats) over 16 rows at a time run at row-sum speed (measured on
  // AVX-512: 15.7 ms -> 2.7 ms vs 2.6 ms for the row sum, one thread).
  // Every stage with loops is tiled, one after another over the same block
  // of columns (softmax over dim 0: the column max, then exp(x - max) stored,
  // its sum, and the stored values scaled), so none of them walks one vector
  // per row: a reduction folds row blocks into the block's accumulators, a
  // pointwise stage walks the block's vectors of each row in turn.
  if (vec_outer && (!d.cpu.parallel_reduction || split_tiles) && !d.cpu.row_blocks) {
    const size_t tiled = ir::leading_looped_reductions(k.stages);
    if (tiled > 0) {
      const int64_t row_block = target.row_block, block_bytes = target.column_block_bytes;
      AccessCounts counts;
      for (const auto& st : k.stages) scan_stage(st, var_name(k.outer.back()), &counts);
      const int64_t vector_bytes = int64_t{d.cpu.vector_width} * counts.max_lane_bytes;
      const int64_t outer_vectors = (est(k.outer.back().extent) + d.cpu.vector_width - 1) / d.cpu.vector_width;
      const auto& rows = std::get<ReductionStage>(k.stages[0]).loops[0].extent;
      if (outer_vectors > 1 && est(rows) > row_block) {
        // A pointwise stage with loops makes the kernel pass over the block
        // again (softmax over dim 0: four passes); a 1 KiB piece of each row
        // keeps the block in L2 between them (two threads, softmax over dim
        // 0 of 1000 x 1000: 0.67-0.82 ms with 4 KiB pieces, 0.52-0.55 with 1 KiB).
        // Several tiled reductions pass over it once each (var over dim 0:
        // the sum, then the deviations' sum and squares; 1000 x 1000, two
        // threads: 0.19-0.23 ms with 4 KiB pieces, Inductor 0.16).
        bool repasses = tiled > 1;
        for (const auto& st : k.stages) repasses = repasses || (std::holds_alternative<PointwiseStage>(st) && !loops_of(st).empty());
        d.cpu.column_block = static_cast<int>(std::max<int64_t>(1, (repasses ? block_bytes / 4 : block_bytes) / vector_bytes));
        d.cpu.row_block = row_block;
        d.why += cat("; column reduction", tiled > 1 ? cat("s (", tiled, ")") : std::string(), " tiled ",
                     d.cpu.column_block, " vectors x ", row_block, " rows");
      }
    }
  }
  // --- the epilogue of W rows in lanes --------------------------------------------------------
  // logsumexp over 10^6 rows of 16 floats, one thread: the row's libm logf
  // took 18% of the time, as long as the kernel's own loops (Inductor runs
  // the log in a loop of its own, a vector of rows at a time).
  // The reductions before it, a tree per block of W rows: var_mean over
  // 10^6 rows of 16 floats, two threads, paid a horizontal reduction's chain
  // of shuffles and adds per row, three times (5.2 ms, Inductor 3.5).
  bool epilogue_math = false;
  if (d.cpu.vectorized == VectorizedLoop::InnermostOfEachStage && !d.cpu.parallel_reduction &&
      (d.cpu.parallel_loops < static_cast<int>(n_outer) || n_outer == 1) &&
      epilogue_in_lanes_fits(k, d.cpu.vector_width, &epilogue_math)) {
    const bool trees = reduction_trees_fit(k, d.cpu);
    if (epilogue_math || trees) {
      d.cpu.epilogue_in_lanes = true;
      d.cpu.reduction_trees = trees;
      d.why += cat("; the epilogue of every ", d.cpu.vector_width, " ", var_name(k.outer.back()), " in lanes");
      if (trees) d.why += ", their reductions in one tree each";
    }
  }

  // --- cascaded accumulation ------------------------------------------------------------
  // Naive float accumulation loses terms once the running total is ~2^24
  // times them: x.mean(0) over 16M rows came out 13% high, x.sum() over 2^28
  // floats 11% low (Inductor and eager cascade). An accumulator that may see
  // more than kCascadeBlock terms (or a symbolic number) merges into a total
  // every kCascadeBlock terms; the error then grows with n / kCascadeBlock.
  //
  // A column reduction's accumulators are its columns, one per lane, so
  // each adds one term per row, and a column sum over a batch of rows (a
  // Linear layer's bias gradient) is exactly the case worth the most: 4096
  // rows summed in one float were 14x further from float64 than eager's
  // cascade (3x with blocks of 256 rows, 1.6x with 64). Its tiles (or its
  // lane accumulators, untiled) restart every kColumnCascadeBlock rows
  // instead; the merge, one add per 64 rows,
  // did not show in a 4096^2 column sum (2.68 ms either way, one thread).
  // Row reductions are within 2-3x of eager at these lengths and keep the
  // longer block.
  constexpr int64_t kCascadeBlock = 4096, kColumnCascadeBlock = 64;
  const int64_t cascade_block = vec_outer ? kColumnCascadeBlock : kCascadeBlock;
  for (const auto& s : k.stages) {
    const auto* r = std::get_if<ReductionStage>(&s);
    if (!r || r->loops.empty() || !accumulates_in_cascade(r->kind, r->body.dtype())) continue;
    std::optional<int64_t> terms = 1;
    for (const auto& l : r->loops) {
      auto c = l.extent.constant();
      terms = c && terms && *c <= INT64_MAX / std::max<int64_t>(1, *terms) ? std::optional<int64_t>(*terms * *c)
                                                                           : std::nullopt;
    }
    if (!terms || *terms > cascade_block) {
      d.cpu.cascade_block = cascade_block;
      d.why += cat("; float accumulation cascaded every ", cascade_block, " terms");
      break;
    }
  }
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
