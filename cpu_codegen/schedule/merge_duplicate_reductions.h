/// \file
/// CPU pass: one pass over the data for reductions a kernel computes twice.
/// A fused column normalisation (x - x.mean(0)) / x.std(0) reduces sum(x)
/// for the mean and again for the variance (the two come from different FX
/// nodes, and fusion keeps a stage per reduction node); each stage is a
/// pass over the whole input. This pass drops a reduction stage that
/// repeats an earlier one and points its readers at the earlier results.
///
/// A later stage repeats an earlier one when both reduce with the same kind
/// over loops of equal extents, their bodies are structurally equal once the
/// later stage's loop variables are renamed to the earlier one's, and no
/// stage between them writes a buffer the body reads (so both see the same
/// data). Values are unchanged: the dropped stage would have computed the
/// same terms in the same order (the schedule is decided afterwards, from
/// the remaining stages). CPU kernels only.
#pragma once

#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// The kernel without repeated reduction stages (see the file comment), or
/// the same kernel when it has none.
ir::KernelPtr merge_duplicate_reductions(const ir::KernelPtr& kernel);

}  // namespace cppi::cpu
