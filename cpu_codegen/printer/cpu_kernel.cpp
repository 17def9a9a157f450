#include "cpu_codegen/printer/cpu_kernel.h"

#include "cpu_codegen/printer/codegen_support.h"

namespace cppi::cpu {

Expected<CompiledCpuKernels> compile_cpu_kernels(const std::vector<ir::KernelPtr>& kernels,
                                                 const std::vector<std::string>& graph_symbols,
                                                 const CpuKernelOptions& options) {
  auto printed = print_cpu_module(kernels, graph_symbols, options.print);
  if (!printed.ok()) return printed.error();
  CompileOptions compile = options.compile;
  compile.first_header = cpu_codegen_header();
  auto module = compile_cpp(printed->source, compile);
  if (!module.ok()) return module.error();
  CompiledCpuKernels out;
  out.module = *module;
  for (const auto& info : printed->kernels) {
    void* sym = out.module->lookup(info.name);
    if (!sym) return Error::internal("cpu codegen: compiled module lacks kernel symbol " + info.name);
    out.kernels.push_back(std::make_shared<CpuKernelHandle>(
        info.name, reinterpret_cast<CpuKernelHandle::Fn>(sym), out.module, info));
  }
  out.source = std::move(printed->source);
  return out;
}

}  // namespace cppi::cpu
