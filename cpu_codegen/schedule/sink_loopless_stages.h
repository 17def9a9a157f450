/// \file
/// CPU pass: loop-less stages move after the reductions that follow them.
/// Fusion keeps a kernel's stages in node order, so an epilogue that runs
/// once per outer iteration (all()'s logical_not, a mean's division) can sit
/// between two reductions over loops: reduce, store, reduce, reduce, store.
/// The schedules that run a kernel's leading reductions together (column
/// tiles, their rows split among the threads; reductions folded in one pass
/// over their loops) then see only the first. This pass moves each loop-less
/// pointwise stage after the reductions over loops that follow it, where
/// none of them reads a buffer it stores (reductions store nothing, and a
/// pointwise stage defines no value a later stage reads). A pointwise stage
/// with loops, or a scan, keeps the stages before it before it. Values and
/// stores are unchanged: only the order of stages within one outer
/// iteration. CPU kernels only.
#pragma once

#include "lowering/ir/kernel.h"

namespace cppi::cpu {

/// The kernel with its loop-less pointwise stages after the reductions
/// that follow them (see the file comment), or the same kernel when nothing
/// moves.
ir::KernelPtr sink_loopless_stages(const ir::KernelPtr& kernel);

}  // namespace cppi::cpu
