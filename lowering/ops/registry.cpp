#include "lowering/ops/registry.h"

#include <algorithm>

namespace cppi::lowering {

void Registry::add(std::string_view target, LowerFn fn) {
  auto [it, inserted] = table_.emplace(std::string(target), Lowering{std::move(fn), ""});
  if (!inserted) throw CompilerError(Error::internal(cat("lowering for ", target, " registered twice")));
}

void Registry::add_fallback(std::string_view target, std::string reason) {
  auto [it, inserted] = table_.emplace(std::string(target), Lowering{nullptr, std::move(reason)});
  if (!inserted) throw CompilerError(Error::internal(cat("lowering for ", target, " registered twice")));
}

const Lowering* Registry::find(std::string_view target) const {
  auto it = table_.find(std::string(target));
  return it == table_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::targets() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : table_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

const Registry& builtin_lowerings() {
  static const Registry registry = [] {
    Registry r;
    register_pointwise_lowerings(r);
    register_creation_lowerings(r);
    register_reduction_lowerings(r);
    register_scan_lowerings(r);
    register_view_lowerings(r);
    register_indexing_lowerings(r);
    register_indirect_indexing_lowerings(r);
    register_pooling_lowerings(r);
    register_random_lowerings(r);
    register_explicit_fallbacks(r);
    return r;
  }();
  return registry;
}

}  // namespace cppi::lowering
