/// \file
/// A matmul and the kernel that reads its result, printed as one kernel: the
/// GEMM template (prelude/cppinductor_cuda_gemm.cuh) with that kernel's body
/// as its epilogue. The kernel reads the matmul's result element for element;
/// here each element comes from the template's accumulator instead of memory,
/// so the result is never stored and the second launch is gone.
/// max-autotune times this against cuBLAS followed by the kernel
/// (backend/gemm_choices.h). Today: the small-M kernels, M <= 16 (64 on sm_90).
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
  /// torch._scaled_mm's: A and B of float8_e4m3fn (`dtype` is C's), the sum
  /// times scale_a and scale_b (float32: one value, or one per row of A / per
  /// column of B) before the bias is added, as cuBLASLt scales it. a_e5m2,
  /// b_e5m2: that operand float8_e5m2 instead.
  bool fp8 = false;
  bool a_e5m2 = false, b_e5m2 = false;
  enum class Scale { One, PerRow };
  Scale scale_a = Scale::One, scale_b = Scale::One;
};

/// One configuration of the GEMM template's kernels. None splits K through
/// global memory (no workspace, no counters): they keep no state between
/// launches.
struct GemmTile {
  enum class Kind {
    Skinny,   // cppi_gemm::gemm_skinny: K-contiguous B straight to MMA registers, M <= 16
    SkinnyN,  // cppi_gemm::gemm_skinny_n: N-contiguous B, M <= 16
    Tma,      // cppi_gemm::gemm_tma_swapped: sm_90, B (either layout) by the copy engine into wgmma, M <= 64
  };
  Kind kind = Kind::Skinny;
  int nw = 4;             // Skinny: 8-column groups per block
  int vec = 0;            // SkinnyN: columns each lane loads (a block has 8 x vec)
  int warps = 8;          // Skinny, SkinnyN: warps splitting the block's K steps
  int unroll = 4;         // Skinny, SkinnyN: K steps loaded before their MMAs
  bool prefetch = false;  // Skinny: B's loads ask the L2 for 256 bytes
  int min_blocks = 1;     // __launch_bounds__'s blocks per SM
  int mn = 0;             // Tma: wgmma's n, A's rows padded to 8, 16, 32 or 64
  int consumers = 1;      // Tma: warpgroups of 64 rows of B per block
  int stages = 4;         // Tma: shared buffers in flight
  int boxes = 2;          // Tma: boxes of 128 bytes of k (64 16-bit or 128 FP8 elements) per stage
  int cluster = 1;        // Tma: blocks splitting K, summed through shared memory

  static GemmTile skinny(int nw, int warps, int unroll, bool prefetch, int min_blocks);
  static GemmTile skinny_n(int vec, int warps, int unroll);
  static GemmTile tma(int mn, int consumers, int stages, int boxes, int cluster);

  int threads() const;
  int shared_bytes() const;
  /// The grid: blocks along N (x), and along K (y: the cluster's blocks).
  int64_t blocks(const GemmProblem& p) const;
  int grid_y() const { return kind == Kind::Tma ? cluster : 1; }
  /// "gemm_skinny nw=2 warps=8 unroll=4 prefetch 2/SM": the tuning cache's schedule line.
  std::string describe() const;
};

/// The configurations to time for `p` on a device of `compute_capability`
/// (e.g. 90): those measured best on the H200 for some shape
/// (docs/gemm-templates.md). Empty when no kernel takes `p`: M above 16 (64
/// on sm_90), K or a row stride not a multiple of 8 (16-byte loads), N not a
/// multiple of 8 with N-contiguous B, a dtype other than bfloat16 and float16;
/// FP8 (sm_90's wgmma kernel alone): B not K-contiguous, row strides not
/// multiples of 16.
std::vector<GemmTile> gemm_tiles(const GemmProblem& p, int compute_capability);

/// Why kernel `k` cannot be the epilogue of a matmul whose [m, n] result it
/// reads as buffer `result`, or nullopt when it can: one pointwise stage
/// whose iterations are the result's elements (their count is m * n), every
/// read of `result` unmasked at the iteration's own element (row-major), no
/// size symbols and no values passed from the host.
std::optional<std::string> why_not_gemm_epilogue(const ir::Kernel& k, const std::string& result, const GemmProblem& p);

/// The kernel `name`: the parameters of `k` (ir::signature's buffers, in
/// order; `result`'s pointer is never read and named so that nothing could
/// read it) followed by A and B (`const uint16_t* gemm_a, gemm_b`; a Tma
/// tile takes their tensor maps by value instead: `cppi_gemm::TensorMap
/// gemm_a_map, gemm_b_map`, see CudaGemmKernelHandle) and, with p.bias, the
/// bias (`gemm_bias`, of p.dtype, contiguous), then with p.fp8 the scales
/// (`const float* gemm_scale_a, gemm_scale_b`). Launched on a grid of
/// tile.blocks(p) x tile.grid_y() blocks of tile.threads() threads and
/// tile.shared_bytes() of dynamic shared memory. The kernel alone: a module
/// starts with gemm_module_preamble(). Internal error when `k` fails
/// why_not_gemm_epilogue.
Expected<std::string> print_gemm_epilogue_kernel(const ir::Kernel& k, const std::string& result, const GemmProblem& p,
                                                 const GemmTile& tile, const std::string& name,
                                                 const codegen::PrintOptions& options = {});

/// The includes a module of such kernels starts with: the codegen header
/// (first: NVRTC precompiles it once per process) and the GEMM template,
/// which NVRTC is handed as an in-memory header (prelude/cuda_gemm.h).
std::string gemm_module_preamble();

}  // namespace cppi::gpu
