/// \file
/// max-autotune's GEMM epilogues: finds each matmul (aten.mm, or aten.addmm
/// with a bias row, on CUDA, 16-bit floats, static shapes the GEMM template
/// takes) whose result one kernel
/// alone reads, element for element, and is not returned; prints that
/// kernel into the GEMM template as its epilogue (gpu_codegen/codegen/
/// gemm_epilogue.h) in each of the template's candidate configurations;
/// compiles them as one module; and records a GemmChoice, which the runtime
/// times at the first call against the extern followed by the kernel
/// (python/cppinductor/autotune.py, GraphTuning.gemm_launcher), keeping the fastest in the
/// tuning cache (backend/autotune.h). A cache hit leaves one candidate, or
/// none when the extern won. The kernel's step is marked as reading the
/// matmul's operands, so the memory plan keeps them until it runs. A 16-bit
/// CUDA matmul that does not become a choice gets a FusionRefusal remark with
/// the reason (explain's "not fused").
///
/// Runs after build_wrapper_steps and before plan_frees and
/// plan_buffer_reuse.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/compiled_graph.h"
#include "gpu_codegen/codegen/gemm_epilogue.h"
#include "gpu_codegen/cuda_kernels.h"
#include "lowering/ir/kernel.h"

namespace cppi {

/// A matmul as the GEMM template sees it: the problem and where its operands are.
struct GemmMatmul {
  gpu::GemmProblem problem;
  int a_slot = -1, b_slot = -1, bias_slot = -1;  // bias_slot: addmm's or _scaled_mm's, else -1
  int scale_a_slot = -1, scale_b_slot = -1;      // _scaled_mm's, else -1
  std::vector<int64_t> a_strides, b_strides;     // as traced: the fused kernels assume them
  std::vector<int64_t> scale_a_strides, scale_b_strides;
  bool fast_accum = false;                       // _scaled_mm's use_fast_accum, for its extern
};

/// Whether `n` is a matmul the template is for at all: aten.mm or aten.addmm
/// of 16-bit floats, or aten._scaled_mm with a 16-bit float result, on CUDA.
/// Those it then does not take are refused with a reason.
bool is_half_cuda_matmul(const Node& n);

/// Such a matmul as the template takes it on a device of `compute_capability`
/// (e.g. 90), or nullopt with `why` set: beta or alpha given, symbolic sizes,
/// A's rows not contiguous, B contiguous along neither dimension, a bias other
/// than one contiguous row, more than 16 rows (64 on sm_90), K or a stride
/// (N, with N-contiguous B) not a multiple of 8; for _scaled_mm also e5m2
/// operands, a scale_result, scales other than one value or one per row of
/// A / column of B.
std::optional<GemmMatmul> gemm_template_matmul(const Graph& g, const Node& n, int compute_capability,
                                               std::string* why);

/// `kernels`: the graph's, as cg.steps index them; `dump(name, text)`: the
/// debug dump of the candidates' module. When the module does not compile,
/// no choice is recorded and cg.gemm_problem says why.
void plan_gemm_choices(CompiledGraph& cg, const std::vector<ir::KernelPtr>& kernels,
                       const gpu::CudaKernelOptions& options,
                       const std::function<void(const std::string&, const std::string&)>& dump);

}  // namespace cppi
