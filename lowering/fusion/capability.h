/// \file
/// Backend capability (the third fusion layer): what the CPU or GPU codegen
/// can print. The codegens own the values (FusionOptions carries one per
/// device); fusion asks before it builds a kernel shape the codegen would
/// reject.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cppi::lowering::fusion {

struct BackendCapability {
  /// Stages (reduction and pointwise) in one kernel.
  int max_stages_per_kernel = 16;
  /// More than one reduction stage under one outer loop (softmax, layer_norm).
  bool multiple_reductions = true;
  /// Pointwise stages with their own loops after a reduction stage (the
  /// normalise step of softmax). Without them, epilogues are separate kernels.
  bool reduction_epilogues = true;
  /// Independent nodes (no producer/consumer relation) in one kernel.
  bool horizontal_fusion = true;
  /// ... also when one of them (or the kernel joined) reduces. Off on CUDA:
  /// the two share only the outer loop, and their access orders can clash
  /// (mlp_train's backward fused a column sum with a row-major pointwise,
  /// one of them uncoalesced, and was slower than as two kernels); a
  /// separate kernel costs one launch.
  bool horizontal_reductions = true;
  /// A reduction without outer loops splits its loops across threads, and a
  /// pointwise stage over the same loops that is independent of it runs in
  /// the same pass (ir::pass_run_end), each thread storing the elements it
  /// folds. Without it such a stage would run serially (FusionHeuristics::
  /// epilogues_need_outer_loops). The CUDA schedule splits a sum, max or min
  /// this way across blocks (mse_loss's forward: the loss and the scaled
  /// difference its backward reads, one pass over the inputs).
  bool pointwise_in_split_reductions = false;
  /// A stage may load what an earlier stage of the kernel stored at another
  /// position of its loops (or in a loop-less stage). True when one thread
  /// runs all stages of an outer iteration (the CPU); a backend that splits
  /// stage loops across threads needs a barrier between such stages.
  bool stages_read_other_positions = true;
  /// A pointwise node that reads a reduction's results transposed may join
  /// its kernel with its loops reordered (legality permuted_for_group): the
  /// CPU tiles such column kernels; the CUDA column schedule has no
  /// pointwise stage with loops.
  bool permuted_epilogues = true;

  /// The CUDA printer splits stage loops across a warp's or block's threads
  /// and emits no barrier between stages.
  static BackendCapability cuda_default() {
    BackendCapability c;
    c.stages_read_other_positions = false;
    c.horizontal_reductions = false;
    c.pointwise_in_split_reductions = true;
    c.permuted_epilogues = false;
    return c;
  }
};

/// The shape of a kernel as the capability check sees it.
struct StageShape {
  bool reduction = false;
  size_t loops = 0;
};

/// Why a stage cannot read memory an earlier stage stored, given whether it
/// reads at the same position (legality.h same_position), or nullopt.
std::optional<std::string> why_unsupported_dependency(const BackendCapability& c, bool same_position);

/// Why a kernel with these stages cannot be emitted, or nullopt.
std::optional<std::string> why_unsupported(const BackendCapability& c, const std::vector<StageShape>& stages);

}  // namespace cppi::lowering::fusion
