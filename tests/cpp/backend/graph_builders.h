// Pieces of hand-built graphs for the backend tests.
#pragma once

#include "lowering/graph/graph.h"

namespace cppi::testing {

/// An argument naming graph node `i`.
inline Arg node_arg(int i) {
  Arg a;
  a.kind = Arg::Kind::Node;
  a.i = i;
  return a;
}

}  // namespace cppi::testing
