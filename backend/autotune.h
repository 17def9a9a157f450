/// \file
/// max-autotune at compile time (Options::autotune). Each kernel gets its
/// candidate schedules (cpu::cpu_schedule_candidates, gpu::gpu_schedule_candidates). Where the tuning cache
/// holds this kernel's winner, measured by an earlier process, the kernel is
/// compiled with that schedule and nothing is timed. Otherwise the other
/// candidates compile beside the graph, and the runtime times them all at
/// the first call on the call's own tensors, keeps the fastest and writes the
/// cache (python/cppinductor/autotune.py).
///
/// The cache is one entry per kernel under <cache dir>/autotune (the kernel
/// cache's private directory, entries checked by SHA-256: cpu_codegen/jit/
/// disk_cache.h), named by a hash of the heuristic kernel's printed source,
/// every candidate's schedule and the target (CPU: vector width and thread
/// count; GPU: compute capability and multiprocessors). An entry's payload
/// starts with kTuningCacheHeader, then the winner's schedule line
/// (describe_cpu_schedule / describe_gpu_schedule), then what the runtime
/// measured.
#pragma once

#include <optional>

#include <memory>
#include <string>
#include <vector>

#include "backend/compiled_graph.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/kernel.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "support/status.h"

namespace cppi {

inline constexpr const char* kTuningCacheHeader = "cppinductor-autotune 1";

/// The kernels' tuning, before they are printed: `kernels` (scheduled, all
/// on one device) has each cache hit replaced by the winning candidate under
/// the kernel's own name. `alternatives` lists the candidates to compile
/// beside them (each printed alone first: one the printer refuses is left
/// out), `owners` their (kernel, candidate) places in `tuning`, whose
/// handles the caller fills once compiled.
struct TuningPlan {
  std::vector<KernelTuning> tuning;  // one per kernel
  std::vector<ir::KernelPtr> alternatives;
  std::vector<std::pair<size_t, size_t>> owners;
};
TuningPlan plan_cpu_tuning(std::vector<ir::KernelPtr>& kernels, const cpu::CpuTarget& target,
                           const std::vector<std::string>& graph_symbols, const cpu::PrintOptions& print);
TuningPlan plan_gpu_tuning(std::vector<ir::KernelPtr>& kernels, const gpu::GpuTarget& target,
                           const std::vector<std::string>& graph_symbols, const gpu::CudaPrintOptions& print);

/// The positions of the buffers a kernel with signature `sig` writes, and of
/// those it also reads (a run then depends on what the last one left): what
/// the runtime's tuners save, restore and compare.
void written_buffers(const ir::KernelSignature& sig, std::vector<int>* written, std::vector<int>* read_written);

/// The winner's schedule line of the cache entry `key` (a kernel tuned per
/// size bucket looks its bucket's entry up at run time); nullopt on a miss,
/// or with `problem` set when the entry or the directory is unusable.
std::optional<std::string> read_tuning_winner(const std::string& key, std::string* problem);

/// Writes a tuning cache entry (the runtime's, after it measured a kernel):
/// `payload` must start with kTuningCacheHeader and the winner's schedule line.
Status write_tuning_entry(const std::string& key, const std::string& payload);

}  // namespace cppi
