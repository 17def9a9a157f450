/// \file
/// CompiledGraph: what the pipeline returns and the runtime executes. It is a
/// straight-line plan of steps over value slots — slot i < graph.nodes.size()
/// holds node i's value, later slots hold internal buffers — plus the compiled
/// kernels. python/cppinductor/runtime.py walks the plan with real tensors:
/// ATen steps run the FX node's op (an extern call or a fallback), kernel steps
/// call into compiled code with the slots' data pointers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lowering/graph/graph.h"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/kernel_cost.h"
#include "support/remarks.h"
#include "support/kernel_handle.h"
#include "support/pending_compile.h"

namespace cppi {

/// A buffer the wrapper allocates before a kernel writes it. Sizes and
/// strides are index expressions over the graph's size symbols.
struct Allocation {
  int slot = -1;
  /// -1: a fresh allocation. Otherwise the slot of a dead buffer whose
  /// storage this one takes over (backend/buffer_reuse.h): the runtime views
  /// that storage with this allocation's dtype, sizes and strides, and the
  /// old slot is released here instead of after its last use.
  int reuse = -1;
  /// With reuse >= 0: the reused buffer is one the step's kernel reads and
  /// this step is its last use; the kernel writes this buffer over it in
  /// place (lowering/ir/in_place.h). The runtime writes through the reused
  /// tensor's own start (allocating fresh if it does not start its storage)
  /// and frees it after the kernel, as a read input.
  bool in_place = false;
  /// Slots of buffers the kernel reads whose storage this buffer may share
  /// (same dtype, ir::can_write_over); plan_buffer_reuse picks
  /// one that dies at this step.
  std::vector<int> overwritable;
  DType dtype = DType::Float32;
  Device device = Device::CPU;
  int device_index = 0;
  std::vector<ir::IndexExpr> sizes;
  std::vector<ir::IndexExpr> strides;
};

struct Step {
  enum class Kind {
    Aten,    ///< run graph node `node` through ATen (extern call or fallback)
    Kernel,  ///< call compiled kernel `kernel` on `buffers`
  };
  Kind kind = Kind::Aten;
  int node = -1;
  bool is_extern = false;
  bool recomputes = false;  // Aten: remakes a value compute nodes made (lowering::AtenItem)
  int kernel = -1;
  std::vector<int> buffers;          // Kernel: slots in kernel argument order
  /// Slots to allocate first: a kernel's outputs, or the result an extern
  /// matmul writes through its out= variant (backend/wrapper.cpp).
  std::vector<Allocation> allocs;
  /// Kernel: tensors made outside our kernels (graph inputs, ATen results)
  /// with the layout the kernel was compiled for; the runtime re-lays out a
  /// tensor whose strides differ (and copies back the ones the kernel writes).
  std::vector<Allocation> expected_layouts;
  std::vector<bool> expected_written;
  std::vector<int> free_after;       // slots whose last use is this step
  /// Kernel: the operands of a matmul this kernel may run fused with (its
  /// GemmChoice), read at this step when the fused kernel wins.
  std::vector<int> gemm_operands;
};

/// A slot the runtime fills before the first step of every call with a fresh
/// random seed: a 1-element int64 tensor drawn from torch's generator of the
/// device (so torch.manual_seed makes runs reproducible and successive calls
/// differ). Kernels with random nodes read it as their Philox key.
struct SeedInput {
  int slot = -1;
  Device device = Device::CPU;
  int device_index = 0;
};

/// Time spent per pipeline stage, in order.
struct StageTime {
  std::string stage;
  double seconds = 0;
};

/// One entry of explain's kernel list: a generated kernel, or an ATen call
/// the wrapper makes (an extern or a fallback).
struct KernelInfo {
  std::string name;
  std::string device;  // "cpu" | "cuda"
  std::string kind;    // pointwise | reduction | scan | template | extern | fallback
  std::vector<std::string> nodes;  // FX nodes it computes
  bool vectorized = false;
  std::string schedule;  // the scheduler's why (Schedule::why); empty for ATen calls
  /// Bytes and FLOPs of one call, from the kernel's IR (ir::kernel_cost); none for ATen calls.
  std::optional<ir::KernelCost> cost;
};

/// max-autotune (backend/autotune.h): one candidate schedule of a kernel.
struct KernelCandidate {
  std::shared_ptr<KernelHandle> kernel;  // candidate 0: the graph's own kernel
  std::string label;                     // "heuristic", "one thread", ...
  std::string schedule;                  // cpu::describe_cpu_schedule
};

/// One kernel's tuning; an empty key: the kernel is not tuned (not CPU, or
/// no schedule but the heuristic's).
struct KernelTuning {
  std::string key;  // the cache entry's name
  /// To time at the first call; empty after a cache hit.
  std::vector<KernelCandidate> candidates;
  /// After a cache hit: the winner's label and schedule.
  std::string cached_label, cached_schedule;
  /// What went wrong, if anything: the cache not read (an unusable
  /// directory, a corrupted entry), the candidates not compiled.
  std::string problem;
  /// Positions of the buffers the kernel writes, in launch order, and of
  /// those it also reads (a run then depends on what the last one left).
  std::vector<int> written, read_written;
  /// A kernel over size symbols is tuned once per size bucket, at run time
  /// (python/cppinductor/autotune.py): the positions of its symbols among
  /// the graph's, which the bucket is made of. Empty: static sizes, tuned
  /// once (and a cache hit applied at compile time).
  std::vector<int> symbol_positions;
};

/// max-autotune (backend/gemm_choices.h): a matmul whose result only one
/// kernel reads, which the GEMM template can compute with that kernel as
/// its epilogue. Candidate 0 is the plan as it stands (the extern, then the
/// kernel); the others are GEMM kernels taking the kernel's buffers, then A,
/// B and (addmm) the bias.
struct GemmChoice {
  int aten_step = -1, kernel_step = -1;
  int a_slot = -1, b_slot = -1, bias_slot = -1;  // bias_slot: addmm's or _scaled_mm's, else -1
  /// torch._scaled_mm's scales (else -1), their strides as compiled, its
  /// result dtype and use_fast_accum (what its extern is called with).
  int scale_a_slot = -1, scale_b_slot = -1;
  std::vector<int64_t> scale_a_strides, scale_b_strides;
  DType out_dtype = DType::BFloat16;
  bool fast_accum = false;
  int result_arg = -1;  // the result's position among the kernel's buffers
  std::vector<int64_t> a_strides, b_strides;  // as compiled: the fused kernels assume them
  std::string key;                            // the tuning cache entry's name
  std::vector<KernelCandidate> candidates;    // candidate 0 has no handle
  /// A cache hit: the winner, the only GEMM candidate left (a hit on
  /// candidate 0 records no choice).
  std::string cached_label;
  std::vector<int> written, read_written;  // as KernelTuning's, of the kernel's buffers
};

struct CompiledGraph {
  Graph graph;
  std::vector<Step> steps;
  std::vector<SeedInput> seeds;
  int num_slots = 0;
  std::vector<std::shared_ptr<KernelHandle>> kernels;
  std::vector<KernelInfo> kernel_infos;
  Remarks remarks;
  std::vector<StageTime> stage_times;
  /// Generated sources, one entry per compiled module, for dumps and tests.
  std::vector<std::pair<std::string, std::string>> sources;  // (file name, text)
  /// max-autotune: each kernel's tuning, in kernel order (backend/autotune.h);
  /// empty when the option is off.
  std::vector<KernelTuning> tuning;
  /// max-autotune: the matmuls that may run fused with their epilogue.
  std::vector<GemmChoice> gemm_choices;
  std::string gemm_problem;  // why there are none where some were found (the runtime logs it)
  /// The CPU kernels while they compile in the background
  /// (Options::background_compile); finish_compile() waits and clears it.
  std::shared_ptr<PendingCompile> pending_compile;
};

}  // namespace cppi
