#include "lowering/fusion/loop_order.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <variant>

#include "lowering/ir/index_affine.h"

namespace cppi::lowering::fusion {
namespace {

/// Reductions over windows of at most this many points (pooling, small
/// stencils) run one output per GPU thread and per CPU vector lane, like a
/// pointwise kernel: their outer order is the order of their stores.
constexpr int64_t kWindowPoints = 16;

bool is_window_reduction(const ir::Stage& s) {
  const auto* r = std::get_if<ir::ReductionStage>(&s);
  if (!r) return false;
  int64_t points = 1;
  for (const auto& l : r->loops) {
    auto n = l.extent.constant();
    if (!n) return false;
    points *= *n;
    if (points > kWindowPoints) return false;
  }
  return true;
}

/// Per outer loop, the sum of |stride| over all stores; nullopt when one is
/// not a constant, or a stage is neither loop-less pointwise nor a window
/// reduction.
std::optional<std::vector<int64_t>> store_strides(const ir::Kernel& k) {
  std::vector<int64_t> sums(k.outer.size(), 0);
  for (const auto& s : k.stages) {
    if (is_window_reduction(s)) continue;  // stores nothing; folds each output's window
    const auto* pw = std::get_if<ir::PointwiseStage>(&s);
    if (!pw || !pw->loops.empty()) return std::nullopt;
    for (const auto& st : pw->stores) {
      for (size_t i = 0; i < k.outer.size(); ++i) {
        auto c = ir::coefficient(st.index, k.outer[i].var);
        if (!c) return std::nullopt;
        auto value = c->constant();
        if (!value) return std::nullopt;
        sums[i] += std::llabs(*value);
      }
    }
  }
  return sums;
}

}  // namespace

ir::KernelPtr order_loops_for_stores(const ir::KernelPtr& k) {
  if (!k || k->outer.size() < 2) return k;
  auto sums = store_strides(*k);
  if (!sums) return k;
  for (int64_t s : *sums) {
    if (s == 0) return k;
  }
  std::vector<size_t> order(k->outer.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*sums)[a] > (*sums)[b]; });
  if (std::is_sorted(order.begin(), order.end())) return k;
  std::vector<ir::Loop> outer;
  for (size_t i : order) outer.push_back(k->outer[i]);
  return ir::Kernel::make(k->name, k->device, std::move(outer), k->stages, k->schedule, k->origins);
}

}  // namespace cppi::lowering::fusion
