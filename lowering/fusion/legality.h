/// \file
/// Fusion legality (the first layer): whether moving nodes together keeps the
/// program's meaning. Every check is a const function of the program and
/// answers with the reason it refuses (Inductor's WhyNoFuse), or nullopt.
///
/// The central question is where a read lands in the writer's iteration
/// space: writer_point() inverts the writer's store index at the reader's
/// load index. A consumer may
/// - recompute the producer (inlining) when every read lands on a point the
///   producer's loops express, at any index (broadcast, transposed, shifted);
/// - share the producer's kernel when every read lands in the same outer
///   iteration (the producer's outer variables map to the consumer's own);
///   a read at another inner point only forces a separate stage.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lowering/fusion/program.h"

namespace cppi::lowering::fusion {

/// The writer's iteration point (one expression per writer loop x0..xn-1,
/// over the reader's variables) whose store to `write_index` is the element
/// `read_index` reads, or nullopt when it cannot be shown to exist. Handles
/// dense store indices in any dimension order (contiguous, permuted,
/// channels-last), symbolic extents, broadcast and reshaped reads.
std::optional<std::vector<ir::IndexExpr>> writer_point(const ir::IndexExpr& write_index,
                                                       const std::vector<ir::IndexExpr>& writer_ranges,
                                                       const ir::IndexExpr& read_index,
                                                       const ir::VarRanges& reader_ranges);

/// writer_point for a read that happens only where `masks` hold (one per
/// load at `read_index`; an undefined one means unmasked: nullopt), over
/// that part of the reader's loops: cat's second input is read at x1 - 1024
/// only where x1 >= 1024, so over x1 in [1024, 2048) it is the writer's
/// point x1 - 1024 (over all of [0, 2048) no point rebuilds the index). The
/// variables every mask confines alike (ir::mask_intervals) are shifted to
/// start at 0 over their interval, the point found, and the shift undone.
/// Whoever uses the point must evaluate it only under the masks.
std::optional<std::vector<ir::IndexExpr>> writer_point_where_loaded(const ir::IndexExpr& write_index,
                                                                    const std::vector<ir::IndexExpr>& writer_ranges,
                                                                    const ir::IndexExpr& read_index,
                                                                    const std::vector<ir::Expr>& masks,
                                                                    const ir::VarRanges& reader_ranges);

/// The point every mapping of a read takes (fusion's legality and the
/// kernel builder's rewrite of a kernel's own results): writer_point, else,
/// for a read under `masks`, writer_point_where_loaded.
std::optional<std::vector<ir::IndexExpr>> read_point(const ir::IndexExpr& write_index,
                                                     const std::vector<ir::IndexExpr>& writer_ranges,
                                                     const ir::IndexExpr& read_index,
                                                     const std::vector<ir::Expr>& masks,
                                                     const ir::VarRanges& reader_ranges);

/// Every distinct access of `buffer` in `reader` with its point in `writer`
/// (read_point over the masks of the loads at that index).
struct ReadMap {
  std::vector<ir::Access> accesses;
  std::vector<std::vector<ir::IndexExpr>> points;
};
std::optional<std::string> why_unmappable(const ir::ComputeNode& writer, const ir::ComputeNode& reader,
                                          const std::string& buffer, ReadMap* out);

/// point[j] is the variable x{j} for every j < depth.
bool is_identity(const std::vector<ir::IndexExpr>& point, size_t depth);

/// Whether `reader` may recompute pointwise `producer` in place of loading
/// its output (fills `map` for inline_producer). Heuristics are not asked.
/// Both run on one device, except a CPU producer of a host scalar from host
/// scalars (computes_host_scalar), which a CUDA reader evaluates itself.
std::optional<std::string> why_not_inline(const Program& p, size_t producer, size_t reader, ReadMap* map);

/// Outer loops of `group` with `node` added, or nullopt with `reason` set
/// when their iteration spaces do not nest.
std::optional<std::vector<ir::IndexExpr>> joined_outer(const Program& p, const Group& group, size_t node,
                                                       std::string* reason);

/// The last slot holding an item (an ATen call, another kernel's node) that
/// `node` depends on or that depends on it, with the reason; nullopt when
/// there is none. Joining a group moves the node up to the group's slot, so
/// only groups at or after that slot are candidates.
struct MoveBarrier {
  size_t slot = 0;
  std::string reason;
};
std::optional<MoveBarrier> latest_conflict(const Program& p, const Grouping& g, size_t node);

/// Whether `node` (later in the program) may join `group`: devices, iteration
/// spaces, reductions over the same axis, every dependency on a member within
/// one outer iteration, and `barrier` (latest_conflict) not after the group.
/// An accumulating scatter (ir::Store::accumulate) joins no reduction and no
/// reader of its target, and on the CPU only other scatters.
std::optional<std::string> why_not_join(const Program& p, const Grouping& g, size_t group, size_t node,
                                        const std::optional<MoveBarrier>& barrier);

/// `node` (pointwise) with its loops reordered so that it reads the results
/// of `group`'s reductions in the group's outer iteration, or nullopt when
/// it reads none of them, or not each at a plain permutation of its loop
/// variables. Softmax over dim 0: the normalising node loops (row, column)
/// and reads the column max at [column]; as (column, row) it runs as an
/// epilogue of the column reduction, its rows a stage loop. Any order of a
/// pointwise node's iterations computes the same values.
std::optional<ir::ComputeNode> permuted_for_group(const Program& p, const Group& group, size_t node);

/// True when `later` depends on `earlier` (or writes what it reads) at other
/// than the same iteration point, so they cannot share one loop body.
bool needs_own_stage(const Program& p, size_t earlier, size_t later);

/// True when every element `reader` loads from `buffer` (written by pointwise
/// `writer`, `depth` outer loops shared) was stored at the same position of
/// the same inner loops: the writer's inner variables map one to one, in
/// order and with equal extents, onto the reader's stage variables (x{depth}..
/// of a pointwise reader, r0.. of a reduction). A backend that splits stage
/// loops across threads runs both on one thread then. Reduction writers
/// (their results become LocalRefs) count as true.
bool same_position(const Program& p, size_t writer, size_t reader, const std::string& buffer, size_t depth);

/// The stages a group's members form under `outer_loops` outer loops:
/// each reduction is one stage; consecutive pointwise members with the same
/// inner loops share one unless needs_own_stage says otherwise. (The
/// kernel builder adds loop-less stages that store reduction results.)
struct PlannedStage {
  bool reduction = false;
  std::vector<ir::IndexExpr> loops;  // extents
  std::vector<int> members;
};
std::vector<PlannedStage> plan_stages(const Program& p, const std::vector<int>& members, size_t outer_loops);

}  // namespace cppi::lowering::fusion
