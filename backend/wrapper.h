/// \file
/// The wrapper plan: turns a fused program into the CompiledGraph's steps —
/// which slot holds each buffer, which kernel step allocates which output,
/// and when each slot dies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/compiled_graph.h"
#include "lowering/lowered_graph.h"
#include "support/status.h"

namespace cppi {

/// Appends one step per program item to `cg.steps` (kernels numbered in
/// program order, matching `kernels`), assigns slots to internal buffers and
/// plans allocations: a buffer is allocated by the first kernel that writes
/// it unless the graph hands it in (a placeholder) or ATen produces it.
Status build_wrapper_steps(const lowering::FusedGraph& fused, CompiledGraph& cg);

/// Frees each slot right after its last reader, so peak memory matches
/// eager's (the backward graph holds many saved activations). Graph outputs
/// are never freed.
void plan_frees(CompiledGraph& cg);

/// The slots a step reads: a kernel's buffers, an ATen step's node arguments.
std::vector<int> slots_read(const Graph& g, const Step& s);

/// The last step that reads or writes each slot (-1: none).
std::vector<int> last_uses(const CompiledGraph& cg);

/// The slots the graph returns.
std::vector<int> output_slots(const Graph& g);

/// A readable listing of the steps (wrapper_plan.txt).
std::string describe_steps(const CompiledGraph& cg);

}  // namespace cppi
