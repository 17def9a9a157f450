#include "gpu_codegen/cuda_gemm_kernels.h"

#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gemm_epilogue.h"
#include "gpu_codegen/prelude/cuda_gemm.h"

namespace cppi::gpu {

void CudaGemmKernelHandle::run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const {
  (void)symbols;
  constexpr int kMaxArgs = 64;
  if (source_.buffer_args > kMaxArgs)
    throw CompilerError(Error::internal(cat("cuda kernel ", source_.name, ": too many arguments")));
  void* args[kMaxArgs];
  for (int i = 0; i < source_.buffer_args; ++i) args[i] = const_cast<void**>(&buffers[i]);
  Dim3 grid, block;
  grid.x = static_cast<unsigned>(source_.blocks);
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
  auto program = compile_cuda(out.source, "cppinductor_gemm.cu", cc, nvrtc);
  if (!program.ok()) return program.error();
  auto module = CudaModule::load_ptx(program->ptx);
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
