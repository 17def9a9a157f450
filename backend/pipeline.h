/// \file
/// The pipeline driver: one linear function from an imported ATen graph to a
/// CompiledGraph. Every stage is named, timed and (with a debug dir) dumped.
#pragma once

#include "backend/compiled_graph.h"
#include "backend/graph.h"
#include "backend/options.h"
#include "support/status.h"

namespace cppi {

Expected<CompiledGraph> compile_graph(Graph graph, const Options& options);

}  // namespace cppi
