/// \file
/// The lowering registry: ATen overload name ("aten.add.Tensor") -> the
/// function that lowers it, or an explicit fallback reason. Built once from
/// the per-family registration functions; lookups of an unknown op return
/// nullptr and lower_graph falls back with "no lowering for <op>".
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "lowering/ops/op_call.h"

namespace cppi::lowering {

/// Emits the node's compute and records its value via OpCall::set_result*.
/// An Error (normally unsupported) means "fall back with this reason"; the
/// lowering must not have left anything behind that matters (lower_graph
/// rolls back whatever it emitted).
using LowerFn = std::function<Status(const OpCall&)>;

struct Lowering {
  LowerFn fn;                   // empty: always falls back
  std::string fallback_reason;  // when fn is empty
};

class Registry {
 public:
  /// Throws CompilerError(internal) on a duplicate name (a registration bug).
  void add(std::string_view target, LowerFn fn);
  void add_fallback(std::string_view target, std::string reason);
  const Lowering* find(std::string_view target) const;
  size_t size() const { return table_.size(); }
  std::vector<std::string> targets() const;

 private:
  std::unordered_map<std::string, Lowering> table_;
};

/// Every built-in lowering (immutable after construction).
const Registry& builtin_lowerings();

// One registration function per op family (one .cpp each).
void register_pointwise_lowerings(Registry& r);
void register_creation_lowerings(Registry& r);
void register_reduction_lowerings(Registry& r);
void register_scan_lowerings(Registry& r);
void register_view_lowerings(Registry& r);
void register_indexing_lowerings(Registry& r);
void register_indirect_indexing_lowerings(Registry& r);
void register_pooling_lowerings(Registry& r);
void register_random_lowerings(Registry& r);
void register_explicit_fallbacks(Registry& r);

}  // namespace cppi::lowering
