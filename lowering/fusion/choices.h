/// \file
/// Fusion heuristics (the "choices" layer): what is worth doing among the
/// fusions that legality allows. Pure functions of their arguments, no
/// legality and no backend knowledge, so they are tested on their own.
///
/// Recompute cost: inlining a pointwise producer into its readers evaluates
/// its body once per read instead of once per element. Like Inductor's
/// realize thresholds (realize_reads_threshold = 4,
/// realize_opcount_threshold = 30) we inline a cheap producer everywhere, a
/// moderately expensive one into a few reads, and an expensive one only
/// into a single read; otherwise the producer is stored and its readers load
/// it (in the same kernel when legality allows).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lowering/ir/expr.h"
#include "support/status.h"

namespace cppi::lowering::fusion {

struct FusionHeuristics {
  /// At or below this cost a producer is inlined into any number of reads.
  int cheap_cost = 8;
  /// A producer that loads more than this many whole buffers (element for
  /// element, not broadcast) is stored when it is read at more than one
  /// place, however cheap its arithmetic: each read would load them all
  /// again. Inlining compounds along a chain (a residual stream x1 = x0 + a,
  /// x2 = x1 + b, ..., each read by a norm and by the next add): without a
  /// bound the n-th norm reloads every earlier addend, O(n^2) traffic. Like
  /// Inductor's realize_reads_threshold (4).
  int max_shared_producer_loads = 4;
  /// The same bound for a CUDA producer. A GPU norm is bound by its
  /// traffic, so the chain is cut where storing moves fewer bytes: a norm
  /// that recomputes x + a1 + ... + aj moves j + 2 buffers, one that stores
  /// the sum and its normalised row j + 3, and the next norm starts from 2
  /// again. Cut at 2 whole loads, a chain costs 4 buffers a norm; at 4, it
  /// costs 4.75 (3, 4, 5, then 7 where the sum is stored).
  int cuda_max_shared_producer_loads = 2;
  /// Up to this many reads a producer of at most `expensive_cost` is inlined.
  int max_recompute_reads = 4;
  int expensive_cost = 40;
  /// CPU: a producer whose value varies along the innermost loop of a reader
  /// and repeats along an outer one (a column statistic read by every row of
  /// a [N, C] loop: log(sum) of a log_softmax over dim 0) cannot be hoisted
  /// out of the reader's loops, so it is recomputed for all N rows. Above
  /// this cost (a load and three cheap operations) it is stored once
  /// instead (log_softmax over dim 0 of 1024x1024 otherwise spends a large
  /// part of its time on a log per element). Only where the outer loops
  /// repeat it at least `outer_broadcast_repeats` times (or a symbolic
  /// number): a few repeats cost less than the kernel that would store it.
  int outer_broadcast_cost = 4;
  int64_t outer_broadcast_repeats = 16;
  /// CPU: a producer read in an order that takes its innermost dim outward
  /// (a permute) recomputes, for every element, the work that does not
  /// depend on that dim, which its own kernel hoists out of its innermost
  /// loop. Above this cost (a log and a few integer operations: the bucket of
  /// T5's relative position bias, computed per head) it is stored once.
  int turned_outward_cost = 12;
  /// A producer above cheap_cost read at more than one place is stored
  /// once when a reader reads it contiguously along its innermost loop but
  /// the producer's own loads cross that loop (a permuted read: a stride
  /// other than 0 and +-1 along it): each recompute would gather its inputs
  /// lane by lane again. gelu(x) permuted
  /// to channels-last and layer-normed (wav2vec2's feature projection,
  /// 8 x 512 x 511 floats): the norm's four passes recomputed gelu from
  /// strided loads, a scalar kernel several times slower than eager's. On
  /// CUDA the same read makes each lane of a warp load its own 32-byte
  /// sector (Whisper's gelu(conv) + positions, read by every layer's norms
  /// along the channels the convolution strides by the sequence length).
  bool store_gathered_producers = true;
  /// ...on CUDA only for a producer of at least this many elements (or a
  /// symbolic number): a small one (a rotary embedding's angles, read by its
  /// cos and its sin in one kernel) costs less to gather again than a
  /// kernel launch of its own.
  int64_t cuda_min_gathered_producer_elements = int64_t{1} << 20;
  /// A reduction without outer loops runs serially in its kernel (or splits
  /// itself across threads): pointwise stages with loops do not join it,
  /// they would lose their parallel loop...
  bool epilogues_need_outer_loops = true;
  /// ...unless the stage has at most this many elements, which the CPU
  /// schedule runs on one thread anyway (its min_parallel_work).
  int64_t serial_stage_elements = 32768;
  /// Nodes in one kernel at most (Inductor's max_fusion_size): bounds
  /// compile time and register pressure.
  int max_fusion_size = 64;
  /// A pointwise node that reads a reduction's results transposed (softmax
  /// over dim 0 normalising each column) joins the reduction's kernel with
  /// its loops reordered (legality permuted_for_group) when its stage, the
  /// loops left under the reduction's outer ones, has at most this many
  /// elements: the kernel's later passes over a block of columns then find
  /// its rows in cache, and softmax's exp is computed once. Longer columns
  /// span too many rows (pages) per block: softmax over dim 0 of 1000 x 1008
  /// or 512 x 4096 is faster as one kernel, 4096 x 4096 slower. 0: never.
  int64_t max_permuted_stage_elements = 1024;
  /// ...and only when the block's rows do not pile onto the same L2 sets.
  /// Rows `stride` bytes apart repeat their set every l2_set_period bytes
  /// (the L2's size over its ways: 2 MiB / 16 here), so rows x gcd(stride,
  /// period) / period of them land on each set; beyond l2_ways the later
  /// passes miss: softmax over dim 0 of 1024 x 1024 (stride 4 KiB: 32 rows
  /// per set) gains nothing as one kernel, where 1000 x 1000 (stride 4000
  /// bytes) does.
  int64_t l2_set_period = 128 * 1024;
  int64_t l2_ways = 16;
};

/// Weighted operation count of one evaluation of `e` (shared nodes once):
/// loads 1, cheap arithmetic 1, division and square roots 2,
/// transcendental functions (exp, log, sin, erf, pow, ...) 4, constants 0.
int recompute_cost(const ir::Expr& e);

/// recompute_cost of the parts of `e` that do not depend on loop variable
/// `var` (its largest such subexpressions, loads' indirect indices
/// included): what a loop over `var` innermost computes once, after
/// loop-invariant hoisting, and an outer loop over it recomputes.
int invariant_cost(const ir::Expr& e, const std::string& var);

/// Whether evaluating `e` in another kernel may give other last bits: it
/// calls a math function (exp, log, erf, sin, pow, ...) whose vector variants
/// of different widths and scalar version agree only to an ulp or so.
bool varies_across_kernels(const ir::Expr& e);

/// Whether `e` compares for exact equality (eq / ne) a value computed from a
/// load of `buffer`: amax/amin backward's `x == amax(x)` must see the very
/// bits the reduction saw, so x may not be recomputed for it elsewhere.
bool compares_exactly(const ir::Expr& e, const std::string& buffer);

/// Why a producer of cost `cost` read at `reads` places should not be
/// inlined, or nullopt when inlining is worth it. `broadcast`: some read
/// repeats one producer element across a loop of the reader (a [C] producer
/// read in an [N, C] loop), so inlining recomputes each element many times;
/// tolerated up to `expensive_cost`, as Inductor does for cheap broadcasts.
/// `outer_broadcast`: some read repeats it along an outer loop of a reader
/// whose innermost loop it varies along (see outer_broadcast_cost).
std::optional<std::string> why_not_recompute(const FusionHeuristics& h, int cost, int reads, bool broadcast = false,
                                             bool outer_broadcast = false);

/// Why a producer that loads `whole_loads` whole buffers should not be
/// inlined into `reads` places (see max_shared_producer_loads; `cuda`: its
/// CUDA bound).
std::optional<std::string> why_not_reload(const FusionHeuristics& h, int whole_loads, int reads, bool cuda = false);

/// Why a pointwise stage with inner loops should not join a kernel whose
/// outer loops are `outer` (empty: no loop to parallelise over).
/// `stage_elements` is the product of the stage's loop extents when they are
/// constant.
std::optional<std::string> why_not_loops_without_outer(const FusionHeuristics& h, size_t outer_loops,
                                                       size_t stage_loops, std::optional<int64_t> stage_elements);

/// Why independent loops (no shared buffer) should not share a kernel: one
/// stores contiguously along its innermost loop and the other does not, so
/// the kernel could not be vectorised although one of them alone could.
std::optional<std::string> why_not_fuse_independent(bool kernel_stores_contiguous, bool node_stores_contiguous);

/// Why a node should not join a reduction's kernel with its loops reordered
/// (see max_permuted_stage_elements and l2_set_period): `cost` its value's
/// recompute_cost, `stage_elements` as above, `rows` the extent of the
/// stage's first loop and `row_stride_bytes` how far its stores move along
/// it (nullopt: not constant). A node of at most cheap_cost saves too little
/// to repay the extra pass over each block: log_softmax over dim 0
/// (x - max - log(sum), cost 5) is no faster as one kernel; softmax
/// (exp(x - max) / sum, cost 10) and (x - mean) / std (cost 9: the mean's
/// division per element) gain.
std::optional<std::string> why_not_permute(const FusionHeuristics& h, int cost, std::optional<int64_t> stage_elements,
                                           std::optional<int64_t> rows, std::optional<int64_t> row_stride_bytes);

/// Why a kernel should not grow to `nodes` nodes.
std::optional<std::string> why_not_grow(const FusionHeuristics& h, size_t nodes);

/// Preference among legal fusions of a node into an existing kernel: a
/// producer in the kernel beats a shared input, which beats none.
enum class Affinity { None = 1, SharedRead = 2, Producer = 3 };

}  // namespace cppi::lowering::fusion
