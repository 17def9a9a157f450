/// \file
/// Splitting a graph's kernels into modules compiled at once, one thread each
/// (the CPU JIT). NVRTC does not gain from it: two programs of a transformer
/// backward's kernels on two threads took 71-91 ms where the two one after
/// the other took 93-106 and the whole module 76-95 (NVRTC 13.0, two cores),
/// so CUDA graphs stay one program.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace cppi {

/// How many modules to compile `kernels` kernels in: `threads` (> 0), else
/// one per hardware thread (at most 8), and never fewer than two kernels a
/// module: below that a module's fixed cost (the precompiled header's load,
/// the passes' set-up) outweighs the overlap.
inline size_t module_count(int threads, size_t kernels) {
  const size_t t = threads > 0 ? static_cast<size_t>(threads)
                               : std::min<size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
  return std::max<size_t>(1, std::min(t, kernels / 2));
}

/// Kernel indices per module: the largest printed kernel first into the
/// lightest module (printed size stands in for compile time), each module's
/// kernels in input order. Deterministic, so a graph compiled twice hits the
/// module caches.
inline std::vector<std::vector<size_t>> deal_by_size(const std::vector<std::string>& sources, size_t modules) {
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::vector<size_t>> parts(std::max<size_t>(1, modules));
  std::vector<size_t> weight(parts.size(), 0);
  for (size_t i : order) {
    const size_t m = static_cast<size_t>(std::min_element(weight.begin(), weight.end()) - weight.begin());
    parts[m].push_back(i);
    weight[m] += sources[i].size();
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

}  // namespace cppi
