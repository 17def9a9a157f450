/// \file
/// A matmul and the kernel that reads its result, printed as one kernel: the
/// GEMM template (prelude/cppinductor_cuda_gemm.cuh) with that kernel's body
/// as its epilogue. The kernel reads the matmul's result element for element;
/// here each element comes from the template's accumulator instead of memory,
/// so the result is never stored and the second launch is gone.
/// max-autotune times this against cuBLAS followed by the kernel
/// (backend/gemm_choices.h). Today: the small-M template (gemm_skinny), M <= 16.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/print_options.h"
#include "lowering/ir/kernel.h"
#include "support/dtype.h"
#include "support/status.h"

namespace cppi::gpu {

/// C = A @ B as the template computes it: A [m, k] with row stride lda (k
/// contiguous), B [k, n] with B[kk, nn] at nn * ldb + kk (k contiguous: a
/// Linear's weight, transposed) or, without `b_k_contiguous`, at kk * ldb +
/// nn (n contiguous: GPT-2's Conv1D weight), both of `dtype` (bfloat16 or float16), sums
/// in float32, C rounded to `dtype` as cuBLAS rounds it. With `bias`
/// (addmm's), C[m, n] = A @ B + bias[n], added in float32 before the rounding,
/// as cuBLAS's epilogue adds it.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  DType dtype = DType::BFloat16;
  bool bias = false;
  bool b_k_contiguous = true;
};

/// One configuration of the small-M kernels: cppi_gemm::SkinnyConfig for
/// K-contiguous B (vec 0), SkinnyNConfig for N-contiguous B. One 16-row MMA
/// tile, no split-K, so they keep no state between launches.
struct SkinnyTile {
  int nw = 4;             // K-contiguous B: 8-column groups per block
  int vec = 0;            // N-contiguous B: columns each lane loads (a block has 8 x vec)
  int warps = 8;          // warps splitting the block's K steps
  int unroll = 4;         // K steps loaded before their MMAs
  bool prefetch = false;  // B's loads ask the L2 for 256 bytes (K-contiguous B)
  int min_blocks = 1;     // __launch_bounds__'s blocks per SM

  int threads() const { return warps * 32; }
  int columns() const { return 8 * (vec ? vec : nw); }
  int shared_bytes() const { return warps * (vec ? vec : nw) * 4 * 32 * 4; }
  int64_t blocks(const GemmProblem& p) const { return (p.n + columns() - 1) / columns(); }
  /// "gemm_skinny nw=2 warps=8 unroll=4 prefetch 2/SM": the tuning cache's schedule line.
  std::string describe() const;
};

/// The configurations to time for `p`: those measured best on the H200 for
/// some shape (docs/gemm-templates.md). Empty when the template does not take
/// `p`: M above 16, K or a row stride not a multiple of 8 (16-byte loads), N
/// not a multiple of 8 with N-contiguous B, a dtype other than bfloat16 and
/// float16.
std::vector<SkinnyTile> skinny_tiles(const GemmProblem& p);

/// Why kernel `k` cannot be the epilogue of a matmul whose [m, n] result it
/// reads as buffer `result`, or nullopt when it can: one pointwise stage
/// whose iterations are the result's elements (their count is m * n), every
/// read of `result` unmasked at the iteration's own element (row-major), no
/// size symbols and no values passed from the host.
std::optional<std::string> why_not_gemm_epilogue(const ir::Kernel& k, const std::string& result, const GemmProblem& p);

/// The kernel `name`: the parameters of `k` (ir::signature's buffers, in
/// order; `result`'s pointer is never read and named so that nothing could
/// read it) followed by `const uint16_t* gemm_a, const uint16_t* gemm_b` and,
/// with p.bias, the bias (`gemm_bias`, of p.dtype, contiguous).
/// Launched with tile.blocks(p) blocks of tile.threads() threads and
/// tile.shared_bytes() of dynamic shared memory. The kernel alone: a module
/// starts with gemm_module_preamble(). Internal error when `k` fails
/// why_not_gemm_epilogue.
Expected<std::string> print_gemm_epilogue_kernel(const ir::Kernel& k, const std::string& result, const GemmProblem& p,
                                                 const SkinnyTile& tile, const std::string& name,
                                                 const codegen::PrintOptions& options = {});

/// The includes a module of such kernels starts with: the codegen header
/// (first: NVRTC precompiles it once per process) and the GEMM template,
/// which NVRTC is handed as an in-memory header (prelude/cuda_gemm.h).
std::string gemm_module_preamble();

}  // namespace cppi::gpu
