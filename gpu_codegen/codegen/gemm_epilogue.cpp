#include "gpu_codegen/codegen/gemm_epilogue.h"

#include "gpu_codegen/codegen/cuda_kernel_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/prelude/cuda_gemm.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::gpu {

using namespace ir;

GemmTile GemmTile::skinny(int nw, int warps, int unroll, bool prefetch, int min_blocks) {
  GemmTile t;
  t.kind = Kind::Skinny, t.nw = nw, t.warps = warps, t.unroll = unroll, t.prefetch = prefetch,
  t.min_blocks = min_blocks;
  return t;
}

GemmTile GemmTile::skinny_n(int vec, int warps, int unroll) {
  GemmTile t;
  t.kind = Kind::SkinnyN, t.vec = vec, t.warps = warps, t.unroll = unroll;
  return t;
}

GemmTile GemmTile::tma(int mn, int consumers, int stages, int boxes, int cluster) {
  GemmTile t;
  t.kind = Kind::Tma, t.mn = mn, t.consumers = consumers, t.stages = stages, t.boxes = boxes, t.cluster = cluster;
  return t;
}

int GemmTile::threads() const { return kind == Kind::Tma ? 128 * (consumers + 1) : warps * 32; }

int GemmTile::shared_bytes() const {
  switch (kind) {
    case Kind::Skinny: return warps * nw * 4 * 32 * 4;  // the cross-warp sums
    case Kind::SkinnyN: return warps * vec * 4 * 32 * 4;
    case Kind::Tma:  // cppi_gemm::SwappedConfig::SHARED_BYTES: 128-byte box rows of B and A, barriers, alignment
      return stages * boxes * (64 * consumers + mn) * 128 + 2 * stages * 8 + 1024;
  }
  return 0;
}

int64_t GemmTile::blocks(const GemmProblem& p) const {
  const int64_t columns = kind == Kind::Tma ? 64 * consumers : 8 * (kind == Kind::SkinnyN ? vec : nw);
  return (p.n + columns - 1) / columns;
}

std::string GemmTile::describe() const {
  switch (kind) {
    case Kind::Skinny:
      return cat("gemm_skinny nw=", nw, " warps=", warps, " unroll=", unroll, prefetch ? " prefetch" : "",
                 min_blocks > 1 ? cat(" ", min_blocks, "/SM") : std::string());
    case Kind::SkinnyN: return cat("gemm_skinny_n vec=", vec, " warps=", warps, " unroll=", unroll);
    case Kind::Tma:
      return cat("gemm_tma_swapped n=", mn, " warpgroups=", consumers, " stages=", stages, "x", boxes,
                 cluster > 1 ? cat(" cluster=", cluster) : std::string());
  }
  return "";
}

std::vector<GemmTile> gemm_tiles(const GemmProblem& p, int compute_capability) {
  if (p.m < 1 || p.m > 64 || p.n < 1 || p.k < 1) return {};
  if (p.fp8 && (compute_capability != 90 || !p.b_k_contiguous || p.lda % 16 != 0 || p.ldb % 16 != 0)) return {};
  if (p.k % 8 != 0 || p.lda % 8 != 0 || p.ldb % 8 != 0 || p.lda < p.k) return {};
  if (p.dtype != DType::BFloat16 && p.dtype != DType::Float16) return {};
  if (p.b_k_contiguous ? p.ldb < p.k : p.n % 8 != 0 || p.ldb < p.n) return {};
  // The winners of the H200's cold-weights probe (docs/gemm-templates.md).
  // The small-M kernels (16-bit only): for N-contiguous B, all of 32-column
  // blocks (at N = 4096, 128 of them fill the SMs once); for K-contiguous B,
  // narrow blocks two to an SM where N / 16 blocks fill the SMs once (N =
  // 4096), wider ones with the L2 prefetch where that leaves a partial wave
  // (N = 11008), and the plain wide block.
  std::vector<GemmTile> tiles;
  if (!p.fp8 && p.m <= 16)
    tiles = p.b_k_contiguous ? std::vector<GemmTile>{GemmTile::skinny(2, 8, 4, true, 2),
                                                     GemmTile::skinny(4, 8, 4, true, 1),
                                                     GemmTile::skinny(4, 8, 4, false, 1)}
                             : std::vector<GemmTile>{GemmTile::skinny_n(4, 8, 4), GemmTile::skinny_n(4, 16, 2),
                                                     GemmTile::skinny_n(4, 8, 2)};
  if (compute_capability == 90) {
    // A block per 64 rows of B and two blocks of a cluster along K where N /
    // 64 leaves SMs idle (N = 4096); two warpgroups a block where it gives
    // more than a wave (N = 11008); one of each alone.
    const int mn = p.m <= 8 ? 8 : p.m <= 16 ? 16 : p.m <= 32 ? 32 : 64;
    tiles.push_back(GemmTile::tma(mn, 1, 4, 2, 2));
    tiles.push_back(GemmTile::tma(mn, 2, 3, 2, 1));
    tiles.push_back(GemmTile::tma(mn, 1, 4, 2, 1));
  }
  return tiles;
}

namespace {

/// The iterations of `k`'s one pointwise stage: its outer loops, then the stage's own.
std::vector<Loop> iteration_loops(const Kernel& k) {
  std::vector<Loop> loops = k.outer;
  const auto& stage = std::get<PointwiseStage>(k.stages[0]);
  loops.insert(loops.end(), stage.loops.begin(), stage.loops.end());
  return loops;
}

/// Every load of `buffer` in `k`'s stores' values (masks and indirect indices included).
std::vector<Expr> loads_of(const Kernel& k, const std::string& buffer) {
  std::vector<Expr> roots;
  for (const auto& st : std::get<PointwiseStage>(k.stages[0]).stores) roots.push_back(st.value);
  std::vector<Expr> out;
  for (const Expr& e : post_order(roots))
    if (const auto* l = e.as<Load>(); l && l->buffer->name == buffer) out.push_back(e);
  return out;
}

}  // namespace

std::optional<std::string> why_not_gemm_epilogue(const Kernel& k, const std::string& result, const GemmProblem& p) {
  if (k.device != Device::CUDA) return "not a CUDA kernel";
  if (k.stages.size() != 1 || !std::holds_alternative<PointwiseStage>(k.stages[0]))
    return "not one pointwise stage";
  const std::vector<Loop> loops = iteration_loops(k);
  int64_t iterations = 1;
  std::vector<IndexExpr> vars;
  for (const Loop& l : loops) {
    const std::optional<int64_t> extent = l.extent.constant();
    if (!extent) return "its sizes are symbolic";
    iterations *= *extent;
    vars.push_back(l.var);
  }
  if (iterations != p.m * p.n) return cat("its ", iterations, " iterations are not the result's ", p.m * p.n, " elements");
  const KernelSignature sig = signature(k);
  if (!sig.symbols.empty()) return "it takes size symbols";
  bool reads_result = false;
  for (const auto& a : sig.buffers) {
    if (is_host_scalar(*a.buffer, Device::CUDA)) return cat("it takes ", a.buffer->name, " by value");
    if (a.buffer->name == result) {
      if (a.written) return "it writes the matmul's result";
      reads_result = a.read;
    }
  }
  if (!reads_result) return "it does not read the matmul's result";
  for (const auto& st : std::get<PointwiseStage>(k.stages[0]).stores)
    if (st.accumulate) return "it accumulates into " + st.buffer->name;
  // Row-major over the iterations: each loop's stride is the product of the extents inside it.
  std::vector<int64_t> row_major(loops.size());
  int64_t inner = 1;
  for (size_t i = loops.size(); i-- > 0;) {
    row_major[i] = inner;
    inner *= *loops[i].extent.constant();
  }
  const std::vector<Expr> loads = loads_of(k, result);
  if (loads.empty()) return "it reads the matmul's result only inside an index";
  for (const Expr& e : loads) {
    const auto* l = e.as<Load>();
    if (l->mask.defined()) return "it reads the matmul's result under a mask";
    const std::optional<AffineForm> form = affine_form(l->index, vars);
    if (!form || form->offset.constant() != std::optional<int64_t>(0)) return "it reads the matmul's result out of order";
    for (size_t i = 0; i < vars.size(); ++i)
      if (form->strides[i].constant() != std::optional<int64_t>(row_major[i]))
        return "it reads the matmul's result out of order";
  }
  return std::nullopt;
}

std::string gemm_module_preamble() {
  return cat("// Generated by cppinductor (gpu_codegen/codegen/gemm_epilogue.h).\n#include \"", kCudaCodegenHeaderName,
             "\"\n#include \"", kCudaGemmName, "\"\n");
}

Expected<std::string> print_gemm_epilogue_kernel(const Kernel& k, const std::string& result, const GemmProblem& p,
                                                 const GemmTile& tile, const std::string& name,
                                                 const codegen::PrintOptions& options) {
  if (auto why = why_not_gemm_epilogue(k, result, p))
    return Error::internal(cat("kernel ", k.name, " is not a GEMM epilogue: ", *why));
  if ((tile.kind == GemmTile::Kind::SkinnyN && p.b_k_contiguous) ||
      (tile.kind == GemmTile::Kind::Skinny && !p.b_k_contiguous))
    return Error::internal(cat("kernel ", k.name, ": a ", tile.describe(), " tile for the other layout of B"));
  if (tile.kind != GemmTile::Kind::Tma && p.m > 16)
    return Error::internal(cat("kernel ", k.name, ": ", p.m, " rows for the 16-row ", tile.describe()));
  if (tile.kind == GemmTile::Kind::Tma && (p.m > tile.mn || p.m > 64))
    return Error::internal(cat("kernel ", k.name, ": ", p.m, " rows for ", tile.describe()));
  if (p.fp8 && tile.kind != GemmTile::Kind::Tma)
    return Error::internal(cat("kernel ", k.name, ": FP8 operands for ", tile.describe()));
  try {
    cuda_print::GemmEpilogue g;
    g.result = result;
    g.result_loads = loads_of(k, result);
    g.loops = iteration_loops(k);
    g.columns = p.n;
    g.bias = p.bias;
    if (p.fp8) {
      const auto at = [](GemmProblem::Scale s, const char* index) {
        return s == GemmProblem::Scale::One ? "0" : index;
      };
      g.scale = cat("(gemm_scale_a[", at(p.scale_a, "gemm_m"), "] * gemm_scale_b[", at(p.scale_b, "gemm_n"), "])");
    }
    g.threads = tile.threads();
    g.min_blocks = tile.min_blocks;
    g.tensor_maps = tile.kind == GemmTile::Kind::Tma;
    g.cluster = tile.grid_y();
    g.describe = cat(tile.describe(), " for ", p.m, " x ", p.k, " @ ", p.k, " x ", p.n);
    const char* half = p.dtype == DType::Float16 ? "true" : "false";
    const std::string sizes = cat(p.m, ", ", p.n, ", ", p.k);
    const std::string operands = cat("(gemm_a, gemm_b, ", sizes, ", ", p.lda, ", ", p.ldb, ", epilogue");
    switch (tile.kind) {
      case GemmTile::Kind::SkinnyN:
        g.call = cat("cppi_gemm::gemm_skinny_n<cppi_gemm::SkinnyNConfig<", tile.vec, ", ", tile.warps, ", ",
                     tile.unroll, ", ", half, ">>", operands, ");");
        break;
      case GemmTile::Kind::Skinny:
        g.call = cat("cppi_gemm::gemm_skinny<cppi_gemm::SkinnyConfig<1, ", tile.nw, ", ", tile.warps, ", ", tile.unroll,
                     ", 1, ", half, ", ", tile.prefetch ? "true" : "false", ">>", operands, ", nullptr, nullptr);");
        break;
      case GemmTile::Kind::Tma:
        g.call = cat("cppi_gemm::gemm_tma_swapped<cppi_gemm::SwappedConfig<", tile.mn, ", ", tile.consumers, ", ",
                     tile.stages, ", 1, ", tile.boxes, ", ", tile.cluster, ", ", half, ", ",
                     p.b_k_contiguous ? "true" : "false", ", ", p.fp8 ? "true" : "false",
                     p.a_e5m2 || p.b_e5m2 ? cat(", ", p.a_e5m2 ? "true" : "false", ", ", p.b_e5m2 ? "true" : "false")
                                          : std::string(),
                     ">>(gemm_a_map, gemm_b_map, ",
                     sizes, ", epilogue, nullptr, nullptr);");
        break;
    }
    ir::Schedule schedule = k.schedule;
    schedule.why = "max-autotune's candidate against cuBLAS, then the kernel";
    const KernelPtr fused = k.with_schedule(schedule);
    const std::vector<std::string> no_symbols;
    cuda_print::CudaKernelPrinter printer(*fused, fused->schedule.gpu, name, no_symbols, options);
    return printer.print_gemm_epilogue(g);
  } catch (const CompilerError& e) {
    return e.error();
  }
}

}  // namespace cppi::gpu
