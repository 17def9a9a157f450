/// place_accumulators: a reduction run's accumulators in its nest. Which
/// states each stage keeps (a scalar one, vector ones, a cascade's levels of
/// totals and the counters), what they are named and start from, where a
/// full cascade block merges them into the totals and what the end of the
/// run combines them into were decided while printing the run; they depend
/// only on the kernel, its schedule and where the run prints, so the nest
/// carries them and the target prints them.
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Stmt;
using codegen::stmt;

namespace {

/// The stage's place in the kernel's stages (StageAccumulators::stage).
size_t stage_index(const ir::ReductionStage& s, const LoopNestInput& in) {
  for (size_t i = 0; i < in.k.stages.size(); ++i) {
    if (std::get_if<ir::ReductionStage>(&in.k.stages[i]) == &s) return i;
  }
  in.fail("a reduction run's stage is not the kernel's");
}

/// Levels of totals (cascade_levels), from the stage's whole extent (a
/// parallel chunk's share is at most that).
int levels_of(const ReductionRun& r) {
  if (r.cascade_terms == 0) return 0;
  std::optional<int64_t> all_terms = int64_t{1};
  for (const auto& l : r.stages.front()->loops) {
    const auto n = l.extent.constant();
    all_terms = n && all_terms ? std::optional<int64_t>(*all_terms * *n) : std::nullopt;
  }
  return cascade_levels(all_terms, r.cascade_terms);
}

/// Where stage `j`'s final state goes (StageAccumulators::result).
std::string result_of(const ReductionRun& r, size_t j, const codegen::StageAccumulators& a, const std::string& base,
                      const LoopNestInput& in) {
  const ir::ReductionStage& s = *r.stages[j];
  if (!r.tree_row.empty()) {
    // The row's vector is its whole state: masked tails, or whole vectors
    // only (the scalar state stays the identity), and no cascade.
    const ir::ReductionStage& head = *r.stages.front();
    const auto n = head.loops.back().extent.constant();
    const bool whole_vectors = head.loops.size() == 1 && n && *n % in.s.vector_width == 0;
    if (!r.horizontal || r.cascades[j] || (!a.scalar.empty() && !whole_vectors)) {
      in.fail("a reduction tree needs a vector state");
    }
    return base + "_vaccs";
  }
  if (!r.cascades[j] && (r.lanes || !r.horizontal)) return "";  // one state, final as it stands
  if (r.lanes) return base + "_vred";
  // A one-value reduction's combined result is declared under its own name.
  const bool simple = ir::num_results(s.kind) == 1 && s.kind != ir::ReductionKind::ArgMax &&
                      s.kind != ir::ReductionKind::ArgMin;
  return r.named_results && simple ? base : base + "_red";
}

codegen::StageAccumulators stage_accumulators(const ReductionRun& r, size_t j, int levels, const LoopNestInput& in) {
  const ir::ReductionStage& s = *r.stages[j];
  const std::string base = in.result_name(s.results[0]);
  codegen::StageAccumulators a;
  a.stage = stage_index(s, in);
  a.kind = s.kind;
  a.dtype = s.body.dtype();
  if (r.lanes) {
    a.vectors = {base + "_vacc"};
    a.init = r.lane_init;
  } else {
    // A masked tail (TailKind::Masked) leaves no scalar steps in horizontal mode.
    if (!r.horizontal || in.s.tail != ir::TailKind::Masked) a.scalar = base + "_acc";
    // Vector states only where vectors run: a loop-less stage in scalar mode
    // may be of a dtype with no vector at the kernel's width (an int64 prod
    // after an int32 amin's 16 lanes).
    for (int k = 0; r.horizontal && k < r.accumulators[j]; ++k) {
      a.vectors.push_back(k == 0 ? base + "_vacc" : cat(base, "_vacc_", k));
    }
  }
  for (int l = 1; r.cascades[j] && l <= levels; ++l) a.totals.push_back(l == 1 ? base + "_total" : cat(base, "_total_", l));
  a.result = result_of(r, j, a, base, in);
  return a;
}

/// Each CascadeBlockDone of `s`, merging the stages `cascading` when full.
Stmt merge_full_blocks(const Stmt& s, const std::vector<size_t>& cascading) {
  if (const auto* d = std::get_if<codegen::CascadeBlockDone>(&s->node)) {
    return stmt(codegen::CascadeBlockDone{d->from, d->to, stmt(codegen::MergeIntoTotals{cascading})});
  }
  return codegen::map_children(s, [&](const Stmt& c) { return merge_full_blocks(c, cascading); });
}

}  // namespace

codegen::Stmt place_accumulators(const codegen::Stmt& s, const ReductionRun& r, const LoopNestInput& in) {
  const int levels = levels_of(r);
  codegen::Accumulators a;
  a.lanes = r.lanes;
  std::vector<size_t> cascading;
  for (size_t j = 0; j < r.stages.size(); ++j) {
    a.stages.push_back(stage_accumulators(r, j, levels, in));
    if (r.cascades[j]) cascading.push_back(j);
  }
  // The counters are the first stage's (one cascade for the run).
  const std::string base = in.result_name(r.stages.front()->results[0]);
  if (r.cascade_terms > 0) {
    a.terms = base + "_terms";
    a.block_terms = r.cascade_terms;
    for (int l = 1; l < levels; ++l) a.merges.push_back(cat(base, "_merges", l));
  }
  const Stmt nest = cascading.empty() ? s : merge_full_blocks(s, cascading);
  a.body = codegen::block({nest, stmt(codegen::FinishAccumulators{r.tree_row})});
  return stmt(std::move(a));
}

}  // namespace cppi::cpu
