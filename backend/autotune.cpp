#include "backend/autotune.h"

#include "cpu_codegen/jit/compiler.h"
#include "support/disk_cache.h"
#include "support/sha256.h"
#include "cpu_codegen/schedule/schedule_candidates.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/gpu_schedule_candidates.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace cppi {

namespace {

/// Candidates per kernel, the heuristic's included: each costs about the
/// kernel's own compile time, once per process without a cache entry.
constexpr size_t kMostCandidates = 6;

Expected<std::string> tuning_dir() {
  auto root = cache_dir();
  if (!root) return root.error();
  const std::string dir = *root + "/autotune";
  if (Status s = ensure_private_dir(dir); !s) return s.error();
  return dir;
}

/// The line after the header of an entry's payload; empty if the payload
/// does not start with the header.
std::string winner_schedule(const std::string& payload) {
  const std::string header = std::string(kTuningCacheHeader) + "\n";
  if (payload.compare(0, header.size(), header) != 0) return "";
  const size_t end = payload.find('\n', header.size());
  return payload.substr(header.size(), end == std::string::npos ? std::string::npos : end - header.size());
}

/// One candidate as plan_tuning sees it, whatever the device.
struct Candidate {
  ir::KernelPtr kernel;
  std::string label;
  std::string schedule;  // its describe_*_schedule line
};

/// Looks `t.key` up: the index of the winning candidate, or -1 (a miss, or
/// an unusable entry: t.problem says why).
int cached_winner(const std::vector<Candidate>& candidates, KernelTuning& t) {
  auto schedule = read_tuning_winner(t.key, &t.problem);
  if (!schedule) return -1;
  for (size_t j = 0; j < candidates.size(); ++j)
    if (candidates[j].schedule == *schedule) return int(j);
  t.problem = "ignored a tuning cache entry that names none of the kernel's schedules: " + t.key;
  return -1;
}



/// The device-independent plan: cache lookups, the key, the alternatives
/// that print. `printed(k)`: k's printed source, or nullopt if it does not
/// print; `target`: what else the key must hold (device, vector width,
/// threads or multiprocessors).
TuningPlan plan_tuning(std::vector<ir::KernelPtr>& kernels, const std::vector<std::string>& graph_symbols,
                       const std::function<std::vector<Candidate>(const ir::KernelPtr&)>& candidates_of,
                       const std::function<std::optional<std::string>(const ir::KernelPtr&)>& printed,
                       const std::string& target) {
  TuningPlan plan;
  plan.tuning.resize(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::vector<Candidate> candidates = candidates_of(kernels[i]);
    if (candidates.size() < 2) continue;
    auto heuristic = printed(candidates[0].kernel);
    if (!heuristic) continue;  // the graph's own print reports it
    KernelTuning& t = plan.tuning[i];
    Sha256 key;
    key.field("cppinductor autotune v1").field(target).field(*heuristic);
    for (const auto& c : candidates) key.field(c.schedule);
    t.key = key.hex_digest();
    const auto sig = ir::signature(*kernels[i]);
    written_buffers(sig, &t.written, &t.read_written);
    for (const auto& symbol : sig.symbols) {
      auto at = std::find(graph_symbols.begin(), graph_symbols.end(), symbol);
      if (at != graph_symbols.end()) t.symbol_positions.push_back(int(at - graph_symbols.begin()));
    }
    // Per size bucket: the cache is read at run time, once the sizes are known.
    if (int w = t.symbol_positions.empty() ? cached_winner(candidates, t) : -1; w >= 0) {
      const auto& won = candidates[size_t(w)].kernel;
      kernels[i] = ir::Kernel::make(kernels[i]->name, won->device, won->outer, won->stages, won->schedule, won->origins);
      t.cached_label = candidates[size_t(w)].label;
      t.cached_schedule = candidates[size_t(w)].schedule;
      continue;
    }
    t.candidates.push_back({nullptr, candidates[0].label, candidates[0].schedule});
    for (size_t j = 1; j < candidates.size(); ++j) {
      if (!printed(candidates[j].kernel)) continue;
      plan.owners.emplace_back(i, t.candidates.size());
      plan.alternatives.push_back(candidates[j].kernel);
      t.candidates.push_back({nullptr, candidates[j].label, candidates[j].schedule});
    }
    if (t.candidates.size() < 2) t.candidates.clear();  // none printed: nothing to time
  }
  return plan;
}

}  // namespace

TuningPlan plan_cpu_tuning(std::vector<ir::KernelPtr>& kernels, const cpu::CpuTarget& target,
                           const std::vector<std::string>& graph_symbols, const cpu::PrintOptions& print) {
  return plan_tuning(
      kernels, graph_symbols,
      [&](const ir::KernelPtr& k) {
        std::vector<Candidate> out;
        for (auto& c : cpu::cpu_schedule_candidates(k, target, kMostCandidates))
          out.push_back({c.kernel, c.label, cpu::describe_cpu_schedule(c.kernel->schedule.cpu)});
        return out;
      },
      [&](const ir::KernelPtr& k) -> std::optional<std::string> {
        auto m = cpu::print_cpu_module({k}, graph_symbols, print);
        if (!m) return std::nullopt;
        return m->kernel_sources[0];
      },
      cat("cpu ", target.vector_bytes, " ", target.num_threads));
}

TuningPlan plan_gpu_tuning(std::vector<ir::KernelPtr>& kernels, const gpu::GpuTarget& target,
                           const std::vector<std::string>& graph_symbols, const gpu::CudaPrintOptions& print) {
  return plan_tuning(
      kernels, graph_symbols,
      [&](const ir::KernelPtr& k) {
        std::vector<Candidate> out;
        for (auto& c : gpu::gpu_schedule_candidates(k, target, kMostCandidates))
          out.push_back({c.kernel, c.label, gpu::describe_gpu_schedule(c.kernel->schedule.gpu)});
        return out;
      },
      [&](const ir::KernelPtr& k) -> std::optional<std::string> {
        auto m = gpu::print_cuda_module({k}, graph_symbols, print);
        if (!m) return std::nullopt;
        return m->source;
      },
      cat("cuda sm_", target.compute_capability, " ", target.multiprocessors));
}

void written_buffers(const ir::KernelSignature& sig, std::vector<int>* written, std::vector<int>* read_written) {
  for (size_t b = 0; b < sig.buffers.size(); ++b) {
    if (sig.buffers[b].written) written->push_back(int(b));
    if (sig.buffers[b].written && sig.buffers[b].read) read_written->push_back(int(b));
  }
}

std::optional<std::string> read_tuning_winner(const std::string& key, std::string* problem) {
  if (key.empty() || key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    *problem = "a tuning cache key is a hex digest, not '" + key + "'";
    return std::nullopt;
  }
  auto dir = tuning_dir();
  if (!dir) {
    *problem = dir.error().message;
    return std::nullopt;
  }
  bool corrupt = false;
  const std::string path = *dir + "/" + key;
  auto payload = read_cache_entry(path, &corrupt);
  if (corrupt) *problem = "ignored a corrupted tuning cache entry " + path;
  if (!payload) return std::nullopt;
  std::string schedule = winner_schedule(*payload);
  if (schedule.empty()) {
    *problem = "ignored a tuning cache entry without a schedule: " + path;
    return std::nullopt;
  }
  return schedule;
}

Status write_tuning_entry(const std::string& key, const std::string& payload) {
  if (key.empty() || key.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Error::invalid_input("a tuning cache key is a hex digest, not '" + key + "'");
  if (winner_schedule(payload).empty())
    return Error::invalid_input(cat("a tuning cache entry starts with '", kTuningCacheHeader, "' and a schedule line"));
  auto dir = tuning_dir();
  if (!dir) return dir.error();
  return write_cache_entry(*dir + "/" + key, payload);
}

}  // namespace cppi
