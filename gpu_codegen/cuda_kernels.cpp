#include "gpu_codegen/cuda_kernels.h"

#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <thread>

namespace cppi::gpu {

using namespace ir;

CudaKernelHandle::CudaKernelHandle(PrintedCudaKernel info, CudaKernel kernel, CudaKernelOptions twin_options)
    : info_(std::move(info)), kernel_(std::move(kernel)), twin_options_(std::move(twin_options)) {}

Expected<CudaKernel> CudaKernelHandle::scalar_twin() const {
  std::lock_guard<std::mutex> lock(twin_mutex_);
  if (scalar_) return *scalar_;
  if (info_.scalar_twin.empty()) return Error::internal(cat("cuda kernel ", info_.name, " has no scalar twin"));
  int cc = twin_options_.compute_capability;
  if (cc == 0) {
    auto current = current_device_compute_capability();
    if (!current.ok()) return current.error();
    cc = *current;
  }
  auto program = compile_cuda(info_.scalar_twin_source, info_.scalar_twin + ".cu", cc, twin_options_.nvrtc);
  if (!program.ok()) return program.error();
  auto module = CudaModule::load(*program);
  if (!module.ok()) return module.error();
  auto fn = module->function(info_.scalar_twin, has_module_state(info_.schedule));
  if (!fn.ok()) return fn.error();
  scalar_ = *fn;  // keeps the module loaded
  return *scalar_;
}

bool CudaKernelHandle::scalar_twin_compiled() const {
  std::lock_guard<std::mutex> lock(twin_mutex_);
  return scalar_.has_value();
}

int64_t CudaKernelHandle::evaluate(const IndexExpr& e, const int64_t* symbols) const {
  if (auto c = e.constant()) return *c;
  IndexBindings b;
  for (size_t i = 0; i < info_.symbols.size(); ++i) b[info_.symbols[i]] = symbols[info_.symbol_positions[i]];
  return ir::evaluate(e, b);
}

CudaKernelHandle::Launch CudaKernelHandle::plan(void* const* buffers, const int64_t* symbols) const {
  Launch l;
  const GpuSchedule& g = info_.schedule;
  l.iterations = evaluate(info_.iterations, symbols);
  l.block.x = static_cast<unsigned>(g.block_size);
  l.vectorized = !info_.scalar_twin.empty();
  for (const auto& c : info_.vector_checks) {
    if (!l.vectorized) break;
    if (c.buffer_arg >= 0 && reinterpret_cast<uintptr_t>(buffers[c.buffer_arg]) % static_cast<uintptr_t>(c.alignment)) {
      l.vectorized = false;
    }
    for (const auto& m : c.multiples) {
      if (evaluate(m, symbols) % c.divisor != 0) l.vectorized = false;
    }
  }
  int64_t per_block = g.block_size;
  switch (g.mapping) {
    case GpuMapping::GridStridePointwise: per_block = g.block_size * (l.vectorized ? g.elements_per_thread : 1); break;
    case GpuMapping::ColumnReduction: per_block = g.block_size / std::max(g.threads_per_column, 1); break;
    case GpuMapping::RowPerWarp: per_block = g.block_size / 32; break;
    case GpuMapping::RowPerBlock: per_block = 1; break;
    case GpuMapping::None: break;
  }
  int64_t blocks = (l.iterations + per_block - 1) / per_block;
  if (g.row_splits > 1) blocks *= g.row_splits;  // exact: a row or a column group per P blocks
  if (g.grid_size > 0) blocks = std::min(blocks, g.grid_size);
  blocks = std::clamp<int64_t>(blocks, 1, std::numeric_limits<int32_t>::max());
  l.grid.x = static_cast<unsigned>(blocks);
  return l;
}

void CudaKernelHandle::run(void* const* buffers, const int64_t* symbols, uintptr_t stream) const {
  const Launch l = plan(buffers, symbols);
  if (l.iterations <= 0) return;
  constexpr size_t kMaxArgs = 64;
  const size_t nb = static_cast<size_t>(info_.buffer_args), ns = info_.symbol_positions.size();
  if (nb + ns > kMaxArgs) throw CompilerError(Error::internal(cat("cuda kernel ", info_.name, ": too many arguments")));
  void* args[kMaxArgs];
  // A host scalar's argument is its value: the driver reads it through the
  // host pointer now, at launch.
  for (size_t i = 0; i < nb; ++i) args[i] = info_.by_value[i] ? buffers[i] : const_cast<void**>(&buffers[i]);
  for (size_t j = 0; j < ns; ++j) args[nb + j] = const_cast<int64_t*>(&symbols[info_.symbol_positions[j]]);
  std::optional<CudaKernel> twin;
  if (!l.vectorized && !info_.scalar_twin.empty()) {
    auto t = scalar_twin();
    if (!t.ok()) throw CompilerError(t.error());
    twin = std::move(*t);
  }
  Status s = launch(twin ? *twin : kernel_, l.grid, l.block, 0, stream, args);
  if (!s.ok()) throw CompilerError(s.error());
}

ModulePrograms split_module(const PrintedCudaModule& module, size_t programs) {
  const size_t n = module.kernel_sources.size();
  programs = std::max<size_t>(std::min(programs, n / kMinKernelsPerProgram), 1);
  ModulePrograms out;
  for (size_t p = 0; p < programs; ++p) {
    const size_t begin = n * p / programs, end = n * (p + 1) / programs;
    std::string source = module.preamble;
    for (size_t k = begin; k < end; ++k) source += module.kernel_sources[k];
    out.sources.push_back(std::move(source));
    out.first_kernel.push_back(begin);
  }
  return out;
}

namespace {

/// How many programs a module compiles as (split_module): one for PTX, whose
/// compile is mostly NVVM's; for cubins one per hardware thread, up to eight.
size_t program_count(const NvrtcOptions& nvrtc) {
  if (!nvrtc.cubin) return 1;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
}

}  // namespace

Expected<CompiledCudaKernels> compile_cuda_kernels(const std::vector<KernelPtr>& kernels,
                                                   const std::vector<std::string>& graph_symbols,
                                                   const CudaKernelOptions& options) {
  auto printed = print_cuda_module(kernels, graph_symbols, options.print);
  if (!printed.ok()) return printed.error();
  int cc = options.compute_capability;
  if (cc == 0) {
    auto current = current_device_compute_capability();
    if (!current.ok()) return current.error();
    cc = *current;
  }
  const NvrtcOptions nvrtc = with_codegen_header(options.nvrtc);
  const ModulePrograms split = split_module(*printed, program_count(nvrtc));
  const auto compile_start = std::chrono::steady_clock::now();
  std::vector<Expected<PtxProgram>> programs;
  if (split.sources.size() == 1) {
    programs.push_back(compile_cuda(split.sources[0], "cppinductor_kernels.cu", cc, nvrtc));
  } else {
    std::vector<std::future<Expected<PtxProgram>>> pending;
    for (size_t p = 0; p < split.sources.size(); ++p)
      pending.push_back(std::async(std::launch::async, [&, p] {
        return compile_cuda(split.sources[p], cat("cppinductor_kernels_", p, ".cu"), cc, nvrtc);
      }));
    for (auto& f : pending) programs.push_back(f.get());
  }
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start).count();
  for (const auto& program : programs)
    if (!program.ok()) return program.error();
  const auto start = std::chrono::steady_clock::now();
  std::vector<CudaModule> modules;
  for (const auto& program : programs) {
    auto module = CudaModule::load(*program);
    if (!module.ok()) return module.error();
    modules.push_back(*module);
  }
  CompiledCudaKernels out;
  out.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < printed->kernels.size(); ++i) {
    PrintedCudaKernel& info = printed->kernels[i];
    const size_t p =
        std::upper_bound(split.first_kernel.begin(), split.first_kernel.end(), i) - split.first_kernel.begin() - 1;
    // Split-row kernels keep partials in the module: the runtime serialises
    // their launches across streams.
    auto fn = modules[p].function(info.name, has_module_state(info.schedule));
    if (!fn.ok()) return fn.error();
    CudaKernelOptions twin_options = options;
    twin_options.compute_capability = cc;
    twin_options.print = {};
    twin_options.nvrtc = nvrtc;
    out.kernels.push_back(std::make_shared<CudaKernelHandle>(std::move(info), *fn, std::move(twin_options)));
  }
  out.source = std::move(printed->source);
  bool compiled = false;
  for (auto& program : programs) {
    out.ptx += program->ptx;
    if (!program->log.empty()) out.nvrtc_log += (out.nvrtc_log.empty() ? "" : "\n") + program->log;
    compiled |= !program->from_cache;
  }
  out.arch = programs[0]->arch;
  out.nvrtc_ms = compiled ? compile_ms : 0.0;  // wall time: the programs compile side by side
  return out;
}

}  // namespace cppi::gpu
