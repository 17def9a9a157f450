#include "backend/autotune.h"

#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/jit/disk_cache.h"
#include "cpu_codegen/jit/sha256.h"
#include "cpu_codegen/schedule/schedule_candidates.h"

namespace cppi {

namespace {

/// Candidates per kernel, the heuristic's included: each costs about the
/// kernel's own compile time, once per process without a cache entry.
constexpr size_t kMostCandidates = 6;

Expected<std::string> tuning_dir() {
  auto root = cpu::cache_dir();
  if (!root) return root.error();
  const std::string dir = *root + "/autotune";
  if (Status s = cpu::ensure_private_dir(dir); !s) return s.error();
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

/// Looks `t.key` up: the index of the winning candidate, or -1 (a miss, or
/// an unusable entry: t.cache_problem says why).
int cached_winner(const std::vector<cpu::CpuCandidate>& candidates, KernelTuning& t) {
  auto dir = tuning_dir();
  if (!dir) {
    t.cache_problem = dir.error().message;
    return -1;
  }
  bool corrupt = false;
  const std::string path = *dir + "/" + t.key;
  auto payload = cpu::read_cache_entry(path, &corrupt);
  if (corrupt) {
    t.cache_problem = "ignored a corrupted tuning cache entry " + path;
    return -1;
  }
  if (!payload) return -1;
  const std::string schedule = winner_schedule(*payload);
  for (size_t j = 0; j < candidates.size(); ++j)
    if (!schedule.empty() && cpu::describe_cpu_schedule(candidates[j].kernel->schedule.cpu) == schedule) return int(j);
  t.cache_problem = "ignored a tuning cache entry that names none of the kernel's schedules: " + path;
  return -1;
}

}  // namespace

CpuTuningPlan plan_cpu_tuning(std::vector<ir::KernelPtr>& kernels, const cpu::CpuTarget& target,
                              const std::vector<std::string>& graph_symbols, const cpu::PrintOptions& print) {
  CpuTuningPlan plan;
  plan.tuning.resize(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto candidates = cpu::cpu_schedule_candidates(kernels[i], target, kMostCandidates);
    if (candidates.size() < 2) continue;
    KernelTuning& t = plan.tuning[i];
    auto heuristic = cpu::print_cpu_module({candidates[0].kernel}, graph_symbols, print);
    if (!heuristic) continue;  // the graph's own print reports it
    cpu::Sha256 key;
    key.field("cppinductor autotune v1").field(cat(target.vector_bytes)).field(cat(target.num_threads));
    key.field(heuristic->kernel_sources[0]);
    for (const auto& c : candidates) key.field(cpu::describe_cpu_schedule(c.kernel->schedule.cpu));
    t.key = key.hex_digest();
    const auto sig = ir::signature(*kernels[i]);
    for (size_t b = 0; b < sig.buffers.size(); ++b) {
      if (sig.buffers[b].written) t.written.push_back(int(b));
      if (sig.buffers[b].written && sig.buffers[b].read) t.read_written.push_back(int(b));
    }

    if (int w = cached_winner(candidates, t); w >= 0) {
      const auto& won = candidates[size_t(w)].kernel;
      kernels[i] = ir::Kernel::make(kernels[i]->name, won->device, won->outer, won->stages, won->schedule, won->origins);
      t.cached_label = candidates[size_t(w)].label;
      t.cached_schedule = cpu::describe_cpu_schedule(won->schedule.cpu);
      continue;
    }
    t.candidates.push_back({nullptr, candidates[0].label, cpu::describe_cpu_schedule(candidates[0].kernel->schedule.cpu)});
    for (size_t j = 1; j < candidates.size(); ++j) {
      if (!cpu::print_cpu_module({candidates[j].kernel}, graph_symbols, print)) continue;
      plan.owners.emplace_back(i, t.candidates.size());
      plan.alternatives.push_back(candidates[j].kernel);
      t.candidates.push_back({nullptr, candidates[j].label, cpu::describe_cpu_schedule(candidates[j].kernel->schedule.cpu)});
    }
    if (t.candidates.size() < 2) t.candidates.clear();  // none printed: nothing to time
  }
  return plan;
}

Status write_tuning_entry(const std::string& key, const std::string& payload) {
  if (key.empty() || key.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Error::invalid_input("a tuning cache key is a hex digest, not '" + key + "'");
  if (winner_schedule(payload).empty())
    return Error::invalid_input(cat("a tuning cache entry starts with '", kTuningCacheHeader, "' and a schedule line"));
  auto dir = tuning_dir();
  if (!dir) return dir.error();
  return cpu::write_cache_entry(*dir + "/" + key, payload);
}

}  // namespace cppi
