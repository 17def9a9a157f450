/// \file
/// Kernels compiling on a background thread. A graph's CPU kernels can compile
/// while Dynamo and AOTAutograd finish the graph around them (guards, runtime
/// wrappers); the first call waits for them.
#pragma once

#include "support/status.h"

namespace cppi {

class PendingCompile {
 public:
  virtual ~PendingCompile() = default;
  /// Blocks until the compile has finished; its error if it failed. Safe to
  /// call from several threads; every call gives the same answer.
  virtual Status wait() const = 0;
  /// Wall seconds the compile took, once wait() has returned.
  virtual double seconds() const = 0;
};

}  // namespace cppi
