/// \file
/// The scheduled loop IR: a kernel's loop nest as statements, between the
/// schedule and the printers (Halide's Stmt after lowering). A target's
/// schedule builds it from the kernel and its schedule description, passes
/// rewrite it one schedule feature at a time (each a function of its own: the
/// CPU's are in cpu_codegen/schedule/loops/), and the printer prints what it
/// is given. CPPINDUCTOR_DEBUG_DIR's loop_ir_scheduled.txt shows it after
/// each pass.
///
/// Bounds and other integers are C text, printed by the target's index
/// printer when the nest is built, with their values when constant. What a
/// loop's body computes is a leaf: the kernel's stages (Stages), a pointwise
/// stage's stores (StageStores), a reduction run's updates (Accumulate), a
/// column tiles' block's reductions in lanes and the results they leave in
/// their tiles (TileReduction, TileResults), a load into a cached row's
/// registers, or a part the target prints whole (an epilogue in lanes).
/// What the stages keep in registers around them is a statement too
/// (RowBlocks, StoreRowBlock, ForwardSlots), and so are a reduction run's
/// accumulators (Accumulators, MergeIntoTotals, FinishAccumulators), a
/// parallel reduction's chunks (ReductionChunks) and a column tiles' block's
/// tiles (TileArrays, SetTileSlots, Counters, TileCascadeDone, TileChunks).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lowering/ir/index_expr.h"
#include "lowering/ir/kernel.h"

namespace cppi::codegen {

/// A loop bound or other int64 as C text, with its value when it is a constant.
struct Bound {
  std::string text;
  std::optional<int64_t> value;
  static Bound constant(int64_t v) { return Bound{std::to_string(v), v}; }
  static Bound symbolic(std::string text) { return Bound{std::move(text), std::nullopt}; }
};

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

enum class LoopKind : uint8_t {
  Serial,  ///< for (v = lo; v < hi; ++v)
  /// Steps by the vector width; its body runs on a vector of iterations (the
  /// vector width is the target's; every vector loop of a kernel has it).
  Vector,
  /// A Vector loop to run in blocks of vectors, its stages' loops
  /// interchanged with the vectors of a block (CPU column tiles: once its
  /// tail is split off, the blocks' nest replaces it).
  VectorTiles,
  // The loops bound to the GPU, last (bound_to_gpu).
  /// Over [lo, hi) on the GPU's grid: thread t of block b runs the body at
  /// (b * threads + t) * step, then every gridDim.x * threads * step
  /// iterations; the body covers `step` consecutive iterations (lo is 0).
  GpuGridStride,
  /// A thread's lanes, [lo, hi), of the GpuGridStride loop around it (or
  /// the slots of the GpuRowSlotGroups iteration around it, lane l its
  /// slot s + l), unrolled, `step` lanes an iteration (2: two lanes'
  /// roundings to 16 bits paired). Its stores gather the lanes into one
  /// vector store each.
  GpuLanes,
  /// Rows [lo, hi) over the GPU's grid, a warp a row: warp w of block b
  /// takes row b * step + w, then every gridDim.x * step rows (step: the
  /// block's warps, `threads` / 32; lo is 0).
  GpuWarpRows,
  /// Rows [lo, hi) over the GPU's grid, a block a row: block b takes row b,
  /// then every gridDim.x rows. With `splits` P > 1 a row is P blocks' and
  /// the grid exactly hi x P blocks: block b takes part b % P of row b / P,
  /// no loop (lo is 0).
  GpuBlockRows,
  /// Columns [lo, hi) over the GPU's grid in groups of `step` (32), a block
  /// a group: lane l of block b takes column b * 32 + l, then every
  /// gridDim.x groups, and the block's `threads` / 32 row slices share each
  /// column. The loop is uniform across the block (its combines' barriers):
  /// a lane past hi runs with nothing to do. With `splits` P > 1 a group is
  /// P blocks' and the grid exactly ceil(hi / 32) x P blocks, no loop (lo
  /// is 0).
  GpuColumnGroups,
  /// Tiles [lo, hi), a block a tile, exactly hi blocks and no loop (lo is
  /// 0): a block takes its tile by ticket, in arrival order, so a tile
  /// waits only for tiles whose blocks have started (a split scan's). The
  /// tiles of a row or group are `splits` consecutive ones, its parts.
  GpuTickets,
  /// Positions [lo, hi) of a row (a column's rows, in a GpuColumnGroups
  /// loop) that the `threads` sharing it walk, several in flight: thread
  /// tid takes tid, then every `threads`. With `splits` P > 1 the row is P
  /// blocks': part `split` starts at split * threads + tid and steps by P *
  /// threads. A lane past a column group's columns starts at hi (lo is 0).
  GpuRowPositions,
  /// A cached row's slots [lo, hi) that each of the `threads` sharing it
  /// holds (GpuSchedule::elements_per_thread), unrolled: slot s holds
  /// position s * threads + tid, or, cached in vectors of `step` V > 1
  /// positions (GpuSchedule::cache_vector), (s / V) * threads * V + tid * V
  /// + s % V; a slot past the row's end holds nothing (lo is 0).
  GpuRowSlots,
  /// A cached row's slots [lo, hi) in groups of `step` V
  /// (GpuSchedule::cache_vector; 1: a slot a group), unrolled: the
  /// iteration at slot s (0, V, 2V, ...) takes slots [s, s + V), the V
  /// consecutive positions from (s / V) * threads * V + tid * V (its body
  /// names the first in a Let, and guards the group with an If where the
  /// row may end before it: a group is in the row whole or not at all;
  /// lo is 0). A GpuLanes loop inside walks the group's slots.
  GpuRowSlotGroups,
  /// A scan chunk's slots [lo, hi) that one thread holds, unrolled, each
  /// `step` consecutive positions (1, or a vector of V, GpuSchedule::
  /// cache_vector): the scan's loop variable at slot s is pos + s * step,
  /// `pos` the thread's first position in the chunk (lo is 0).
  GpuScanSlots,
};

/// Whether a loop of kind `k` is bound to the GPU (only the CUDA printer prints it).
inline bool bound_to_gpu(LoopKind k) { return k >= LoopKind::GpuGridStride; }

/// What a Vector loop still has to do with the iterations past its last
/// whole vector: nothing (they are split off, or the loop runs whole vectors
/// only), a scalar loop, one vector with the lanes past the end off, or one
/// vector ending at the loop's end over lanes done already.
enum class Tail : uint8_t { None, Scalar, Masked, Overlapped };

/// for (int64_t var = lo; var < hi; ...): `kind` says the step. no_autovec:
/// the C compiler must not vectorise it again (CPPI_NO_AUTOVEC).
/// overlapped_rest (VectorTiles): its last block ends at hi over columns its
/// neighbour also does, so any extent of at least one vector runs whole.
/// stage_loop: a loop of a stage inside the kernel's loops (its vectorised
/// one and what its tail became); whole_vectors_before_rest: the whole
/// vectors of such a loop split for a masked last vector, which starts at
/// hi (if any is left): its values know where. step: a Serial loop's
/// stride, its body once per `step` iterations of what it holds (a cascade
/// block, a group of vectors, a block of tiled columns or rows); a GPU
/// loop's, its kind says. threads: a
/// GPU loop's threads per block (not a GpuLanes loop's; a GpuRowPositions,
/// GpuRowSlots or GpuRowSlotGroups loop's threads a row). splits: a
/// GpuBlockRows (GpuColumnGroups) loop's blocks a row (a group), a
/// GpuTickets loop's tiles a row or group, a GpuRowPositions loop's
/// blocks a row.
struct For {
  std::string var;
  Bound lo, hi;
  LoopKind kind = LoopKind::Serial;
  Tail tail = Tail::None;
  bool no_autovec = false;
  bool overlapped_rest = false;
  Stmt body;
  bool stage_loop = false;
  bool whole_vectors_before_rest = false;
  int64_t step = 1;
  int threads = 0;
  int splits = 1;
};

/// cppi_parallel_for(0, count, grain, ...): the body runs once per chunk
/// [begin, end) of [0, count), on the threads (the chunk's bounds named
/// `begin` and `end` in C).
struct ParallelChunks {
  std::string count, grain;
  Stmt body;
  std::string begin = "begin", end = "end";
};

/// One vector: `var` = `at`, the body once, in vector form. A stage loop's
/// masked last vector (the lanes on are the MaskedLanes around it), or a
/// vector of a group (group_vector_accumulators); without `stage_loop`, a
/// vector of a column tiles' block.
struct VectorAt {
  std::string var;
  Bound at;
  Stmt body;
  bool stage_loop = true;
};

/// A pointwise stage's stores, once per iteration of the stage loops around
/// them (the leaf of lower_stage_loops' nest).
struct StageStores {
  std::vector<ir::Store> stores;
};

/// A reduction run's update at one position, or one vector of positions in
/// vector form (the leaf of lower_reduction_loops' nest): each stage's value
/// into its accumulator `accumulator` of the `accumulators` it spreads its
/// vector updates over (CpuSchedule::vector_accumulators; a stage that keeps
/// one takes every update into it).
struct Accumulate {
  int accumulator = 0;
  int accumulators = 1;
};

/// A reduction run's cascade block (CpuSchedule::cascade_block) has added
/// the terms of its innermost loop over [from, to) (C text): they are
/// counted in the run's Accumulators::terms, and once a block's worth is in,
/// `full` runs (a MergeIntoTotals, placed by the target's accumulators pass;
/// null before it).
struct CascadeBlockDone {
  std::string from, to;
  Stmt full;
};

/// A reduction stage's accumulators in its run's nest, named in C: states
/// of reduction `kind` over `dtype` (the stage's body), each starting at the
/// state's identity unless said otherwise.
struct StageAccumulators {
  /// The stage's place in the kernel's stages.
  size_t stage = 0;
  ir::ReductionKind kind = ir::ReductionKind::Sum;
  DType dtype = DType::Float32;
  /// Its scalar state; empty when it keeps none.
  std::string scalar;
  /// Its vector states, vectors[k] taking the updates of accumulator k (an
  /// Accumulate's); empty when it keeps none.
  std::vector<std::string> vectors;
  /// vectors[0]'s first value (C text); empty: the identity.
  std::string init;
  /// A cascade's totals, level 1 first (vector states in lanes, scalar ones
  /// otherwise); empty when the stage does not cascade.
  std::vector<std::string> totals;
  /// Where FinishAccumulators puts the stage's final state: a name it
  /// declares, or with a tree row the array of the block's reduction tree;
  /// empty when a state is final as it stands (no parts to combine).
  std::string result;
};

/// A reduction run's accumulators, declared before `body` (the run's loops,
/// then a FinishAccumulators), in stage order, then the totals, then the
/// counters. lanes: the vector states hold a lane per outer iteration
/// (else they are a stage loop's lanes, reduced across them at the end). A
/// cascade counts the current block's terms in `terms` and each level's
/// merges into the next in merges[l - 1] (empty without a cascade), and
/// merges a block every `block_terms` terms.
struct Accumulators {
  std::vector<StageAccumulators> stages;
  bool lanes = false;
  std::string terms;
  std::vector<std::string> merges;
  int64_t block_terms = 0;
  Stmt body;
};

/// A full cascade block: the accumulators of the run's stages `stages`
/// (places in its Accumulators) merged into their first total and restarted,
/// each level of totals into the next every kCascadeFanIn merges.
struct MergeIntoTotals {
  std::vector<size_t> stages;
};

/// After a reduction run's loops: each stage's vector states merged into
/// the first and its parts combined into its final state (its
/// StageAccumulators::result); with `tree_row` (C text) its merged vector
/// state into that row of its block's reduction tree instead.
struct FinishAccumulators {
  std::string tree_row;
};

/// The loop over a parallel chunk [begin, end) of loops collapsed into one,
/// row-major: each unit's variable (C name) and extent.
struct Collapsed {
  std::vector<std::pair<std::string, ir::IndexExpr>> units;
  Stmt body;
};

/// const int64_t name = value;
struct Let {
  std::string name, value;
};

/// Statements in order; `scoped`: inside braces of their own.
struct Block {
  std::vector<Stmt> body;
  bool scoped = false;
};

/// if (condition) then [else otherwise]; an empty condition is a scoped block.
struct If {
  std::string condition;
  Stmt then, otherwise;
};

struct Comment {
  std::string text;
};

/// The body's vectors have their first `lanes` lanes on (C text), the rest
/// off: a masked last vector.
struct MaskedLanes {
  std::string lanes;
  Stmt body;
};

/// The body's transposed loads read row `row` (C text) of their tiles.
struct TileRow {
  std::string row;
  Stmt body;
};

/// The kernel's stages, once per iteration of the loops around them (in
/// vector form inside a Vector loop). With fold_var, a piece of the
/// vectorised loop fold_var, [fold_from, fold_to): `folded` are the stages
/// with their index conditions on it folded to constants.
struct Stages {
  std::string fold_var;
  int64_t fold_from = 0, fold_to = 0;
  std::vector<ir::PointwiseStage> folded;
};

/// CpuSchedule::row_blocks: rows of buffer `buffer` laid end to end, read
/// or stored by a vector of outer iterations (cpu::row_block_access), held
/// as an array of `rows` vectors (`rows<number>_<its pointer>` in C),
/// vector r holding element r of each lane's row; `start`: the rows' first
/// element (C text). Opened before the loop of stage `stage`, the first
/// that reads or stores it, and loaded there when that stage reads it.
struct RowBlock {
  int number = 0;
  ir::BufferPtr buffer;
  std::string start;
  int64_t rows = 0;
  size_t stage = 0;
  bool load = false;
};

/// The body's stages (a Stages leaf inside a vector loop) walk `blocks`: a
/// stage of one loop reads and stores each access of a block through it,
/// element r at step r of its loop.
struct RowBlocks {
  std::vector<RowBlock> blocks;
  Stmt body;
};

/// After the stages: a row block they stored, back to memory.
struct StoreRowBlock {
  RowBlock block;
};

/// A vector variable that pointwise stage `stage` stores the masked last
/// vector of its store to `buffer` at `index` (C text) into, besides memory,
/// for a later stage's load of the same elements to read (CpuSchedule::tail
/// Masked: the core does not forward a masked store to a masked load of it).
/// `number`: its place among the stage's slots (`<its pointer>_fwd<number>`
/// in C); the target declares it where it prints the stage.
struct ForwardSlot {
  size_t stage = 0;
  int number = 0;
  ir::BufferPtr buffer;
  std::string index;
};

/// The forwarding slots of the kernel's stages, wherever the body prints
/// them (its loops, or a part the target prints whole).
struct ForwardSlots {
  std::vector<ForwardSlot> slots;
  Stmt body;
};

/// A reduction run's first loop in chunks on the threads
/// (CpuSchedule::parallel_reduction): each chunk [begin, end) of [0, count)
/// (at least `grain` long; C text) runs `body`, the run's nest over the
/// chunk from accumulators of its own, and returns `partial`, the state it
/// leaves; the chunks' states, of reduction `kind` over `dtype` (vectors, a
/// lane per outer iteration, with `lanes`), combine in chunk order into
/// `state`.
struct ReductionChunks {
  std::string state, partial;
  ir::ReductionKind kind = ir::ReductionKind::Sum;
  DType dtype = DType::Float32;
  bool lanes = false;
  std::string count, grain, begin, end;
  Stmt body;
};

/// A column tiles' block's arrays of vector states (CpuSchedule::column_block,
/// cpu::lower_column_blocks), declared: `names`, each `slots` states of
/// reduction `kind` over `dtype`, a slot per vector of the block (a reduction
/// stage's tile, which the stages after it read, and its cascade's levels of
/// totals).
struct TileArrays {
  ir::ReductionKind kind = ir::ReductionKind::Sum;
  DType dtype = DType::Float32;
  std::vector<std::string> names;
  int64_t slots = 0;
};

/// One state that SetTileSlots sets: `slot` (C text) to the identity, or
/// with `earlier` to the combine of `earlier` and `later` (the first holding
/// the earlier positions).
struct TileSlotSet {
  std::string slot, earlier, later;
};

/// In a vector of a column tiles' block: slots of a reduction's tiles, states
/// of reduction `kind` over `dtype`, set in order (a tile started, a full
/// cascade block merged into its totals, the totals folded into the tile).
struct SetTileSlots {
  ir::ReductionKind kind = ir::ReductionKind::Sum;
  DType dtype = DType::Float32;
  std::vector<TileSlotSet> sets;
};

/// int64_t counters, declared from 0 (a tiled cascade's terms and merges).
struct Counters {
  std::vector<std::string> names;
};

/// In a vector of a column tiles' block: the results of the reduction stages
/// before the stage that follows, read from their tiles' slots (each stage's
/// place in the kernel's stages, its slot as C text), in place of those read
/// for an earlier stage.
struct TileResults {
  std::vector<std::pair<size_t, std::string>> slots;
};

/// In a vector of a column tiles' block: reduction stage `stage` in lanes,
/// its own nest with its first loop over [lo, hi) (a row block; a loop-less
/// stage's one step), from its tile's slot `slot` (C text) with `from_slot`,
/// else from the identity; its state then goes into the slot.
struct TileReduction {
  size_t stage = 0;
  Bound lo, hi;
  std::string slot;
  bool from_slot = false;
};

/// After a row block of a column tiles' block, a tiled reduction's cascade
/// (CpuSchedule::cascade_block): counter `terms` grows by `added` (C text);
/// once it reaches `block_terms`, `full` runs (the tile merged into its first
/// total) and the count restarts, and levels[l] (a level of totals merged
/// into the next) runs every kCascadeFanIn merges, counted in merges[l].
struct TileCascadeDone {
  std::string terms, added;
  int64_t block_terms = 0;
  Stmt full;
  std::vector<std::string> merges;
  std::vector<Stmt> levels;
};

/// A column tiles' block's reduction stage with its rows in chunks on the
/// threads (CpuSchedule::parallel_reduction): each chunk [begin, end) of
/// [0, count) (at least `grain` long; C text) runs `body` into a tile
/// `tile` of its own and returns its first `used` (C text) slots, states of
/// reduction `kind` over `dtype` in a struct of `vectors`; the chunks'
/// structs combine in chunk order, slot by slot, into the tile of `slots`
/// states that the later stages read.
struct TileChunks {
  ir::ReductionKind kind = ir::ReductionKind::Sum;
  DType dtype = DType::Float32;
  std::string tile;
  int64_t vectors = 0, slots = 0;
  std::string used, count, grain, begin, end;
  Stmt body;
};

/// A target's part printed whole (what it is, and its C-text arguments):
/// the CPU's epilogue in lanes, its transposed-tile loads, scratch buffers,
/// prefaulting.
struct TargetPart {
  std::string what;
  std::vector<std::string> args;
};

struct StmtNode {
  std::variant<For, ParallelChunks, Collapsed, Let, Block, If, Comment, MaskedLanes, TileRow, Stages, TargetPart,
               VectorAt, StageStores, Accumulate, CascadeBlockDone, RowBlocks, StoreRowBlock, ForwardSlots,
               Accumulators, MergeIntoTotals, FinishAccumulators, ReductionChunks, TileArrays, SetTileSlots,
               Counters, TileResults, TileReduction, TileCascadeDone, TileChunks>
      node;
};

template <typename T>
Stmt stmt(T node) {
  return std::make_shared<const StmtNode>(StmtNode{std::move(node)});
}
Stmt block(std::vector<Stmt> body, bool scoped = false);
/// A TargetPart leaf: `what` the target prints, with `args`.
inline Stmt part(std::string what, std::vector<std::string> args = {}) {
  return stmt(TargetPart{std::move(what), std::move(args)});
}

/// `s` with each child statement replaced by `f(child)` (the node itself
/// copied when a child changed; `s` when none did).
Stmt map_children(const Stmt& s, const std::function<Stmt(const Stmt&)>& f);

/// The loop IR as indented text, one statement a line (the debug dump).
std::string to_text(const Stmt& s);

/// A loop over [lo, hi) split at its last whole vector of `width`: where the
/// whole vectors run ([main_from, main_to), absent when there is none) and
/// where the rest runs ([rest_from, rest_to), absent when empty). With
/// constant bounds the split is constant; otherwise `lets` name the bounds
/// and the split point (var_lo, var_end, var_vec_end), and both parts exist.
struct VectorSplit {
  std::vector<Let> lets;
  std::optional<std::pair<std::string, std::string>> main, rest;
};
VectorSplit split_at_whole_vectors(const std::string& var, const Bound& lo, const Bound& hi, int64_t width);

/// The masked last vector of loop `var` from `vend` to `end` (C text;
/// `known`: both constants, vend < end): the condition it runs under (empty
/// when known), what a comment says of it, and how many lanes are on.
struct MaskedRest {
  std::string condition, comment, lanes;
};
MaskedRest masked_rest(const std::string& var, const std::string& vend, const std::string& end, bool known);

}  // namespace cppi::codegen
