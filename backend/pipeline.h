/// \file
/// The pipeline driver: one linear function from an imported ATen graph to a
/// CompiledGraph. Every stage is named, timed and (with a debug dir) dumped.
#pragma once

#include "backend/compiled_graph.h"
#include "lowering/graph/graph.h"
#include "lowering/graph/options.h"
#include "support/status.h"

namespace cppi {

Expected<CompiledGraph> compile_graph(Graph graph, const Options& options);

/// Waits for the kernels of `cg` that still compile in the background, then
/// records their stage time ("cpu_compile"); their compiler error, if any
/// (every call returns it again). At once when nothing is pending.
Status finish_compile(CompiledGraph& cg);

/// The CUDA source the pipeline would compile for `graph`, scheduled for a
/// default target (an H200) and never sent to NVRTC or a device: lets tests
/// on machines without a GPU run the CUDA schedule and printer on real
/// lowered graphs. The graph's tensors should be on CUDA.
Expected<std::string> generate_cuda_source(Graph graph, const Options& options);

}  // namespace cppi
