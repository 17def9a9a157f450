#include "gpu_codegen/cuda_gemm_kernels.h"

#include <algorithm>

#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gemm_epilogue.h"
#include "gpu_codegen/prelude/cuda_gemm.h"

namespace cppi::gpu {

namespace {

/// cuTensorMapEncodeTiled over a row-major rows x cols matrix with row
/// stride `stride` (elements) of bfloat16, float16 or (`fp8`) one-byte
/// floats, boxes of 128 bytes x box_rows, the 128-byte swizzle, the L2 asked
/// for 256 bytes at a time, zeros outside.
Status encode_tensor_map(void* map, const void* base, int64_t rows, int64_t cols, int64_t stride, int box_rows,
                         bool half, bool fp8) {
  Expected<const CudaDriverApi*> api = cuda_driver();
  if (!api.ok()) return api.error();
  if (!api.value()->cuTensorMapEncodeTiled)
    return Error::unsupported("this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 and later)");
  constexpr int kUInt8 = 0, kFloat16 = 6, kBFloat16 = 9, kInterleaveNone = 0, kSwizzle128B = 3,
                kL2Promotion256B = 3, kOobFillNone = 0;
  const int bytes = fp8 ? 1 : 2;
  const std::uint64_t dims[2] = {std::uint64_t(cols), std::uint64_t(rows)};
  const std::uint64_t strides[1] = {std::uint64_t(stride) * bytes};
  const std::uint32_t box[2] = {std::uint32_t(128 / bytes), std::uint32_t(box_rows)};
  const std::uint32_t element_strides[2] = {1, 1};
  const CUresult r = api.value()->cuTensorMapEncodeTiled(
      static_cast<CUtensorMap_st*>(map), fp8 ? kUInt8 : half ? kFloat16 : kBFloat16, 2, const_cast<void*>(base), dims,
      strides, box, element_strides, kInterleaveNone, kSwizzle128B, kL2Promotion256B, kOobFillNone);
  if (r != cu::CUDA_SUCCESS) return Error::internal(cuda_error_text(*api.value(), r, "cuTensorMapEncodeTiled"));
  return Status::success();
}

}  // namespace

void CudaGemmKernelHandle::run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const {
  (void)symbols;
  constexpr int kMaxArgs = 64;
  if (source_.buffer_args > kMaxArgs)
    throw CompilerError(Error::internal(cat("cuda kernel ", source_.name, ": too many arguments")));
  void* args[kMaxArgs];
  for (int i = 0; i < source_.buffer_args; ++i) args[i] = const_cast<void**>(&buffers[i]);
  std::unique_lock<std::mutex> lock(maps_mutex_, std::defer_lock);
  if (source_.maps) {
    const GemmTensorMaps& m = *source_.maps;
    const void* a = buffers[source_.a_arg];
    const void* b = buffers[source_.a_arg + 1];
    lock.lock();  // held through the launch, which copies the maps
    if (mapped_[0] != a || mapped_[1] != b) {
      mapped_[0] = mapped_[1] = nullptr;
      // B is stored N x K (K-contiguous) or K x N.
      const int64_t b_height = m.b_k_contiguous ? m.n : m.k, b_width = m.b_k_contiguous ? m.k : m.n;
      for (Status s : {encode_tensor_map(maps_[0].bytes.data(), a, m.m, m.k, m.lda, m.a_rows, m.half, m.fp8),
                       encode_tensor_map(maps_[1].bytes.data(), b, b_height, b_width, m.ldb, m.b_rows, m.half, m.fp8)})
        if (!s.ok()) throw CompilerError(s.error());
      mapped_[0] = a, mapped_[1] = b;
    }
    args[source_.a_arg] = maps_[0].bytes.data();
    args[source_.a_arg + 1] = maps_[1].bytes.data();
  }
  Dim3 grid, block;
  grid.x = static_cast<unsigned>(source_.blocks);
  grid.y = static_cast<unsigned>(source_.grid_y);
  block.x = static_cast<unsigned>(source_.threads);
  Status s = launch(kernel_, grid, block, static_cast<unsigned>(source_.shared_bytes), stream, args);
  if (!s.ok()) throw CompilerError(s.error());
}

Expected<CompiledGemmKernels> compile_gemm_kernels(const std::vector<GemmKernelSource>& kernels,
                                                   const CudaKernelOptions& options) {
  CompiledGemmKernels out;
  out.source = gemm_module_preamble();
  for (const auto& k : kernels) out.source += "\n" + k.text;
  int cc = options.compute_capability;
  if (cc == 0) {
    auto current = current_device_compute_capability();
    if (!current.ok()) return current.error();
    cc = *current;
  }
  NvrtcOptions nvrtc = with_codegen_header(options.nvrtc);
  nvrtc.headers.push_back({kCudaGemmName, std::string(cuda_gemm_source())});
  // wgmma is sm_90a's: the module then runs on that compute capability alone.
  nvrtc.arch_specific = std::any_of(kernels.begin(), kernels.end(), [](const auto& k) { return k.maps.has_value(); });
  auto program = compile_cuda(out.source, "cppinductor_gemm.cu", cc, nvrtc);
  if (!program.ok()) return program.error();
  auto module = CudaModule::load(*program);
  if (!module.ok()) return module.error();
  for (const auto& k : kernels) {
    auto fn = module->function(k.name, false);
    if (!fn.ok()) return fn.error();
    out.kernels.push_back(std::make_shared<CudaGemmKernelHandle>(k, *fn));
  }
  out.nvrtc_ms = program->compile_ms;
  return out;
}

}  // namespace cppi::gpu
