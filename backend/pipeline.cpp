#include "backend/pipeline.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <sys/stat.h>

#include "backend/autotune.h"
#include "backend/gemm_choices.h"
#include "backend/buffer_reuse.h"
#include "backend/wrapper.h"
#include "cpu_codegen/printer/codegen_support.h"
#include "cpu_codegen/cpu_kernels.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/merge_duplicate_reductions.h"
#include "cpu_codegen/schedule/sink_loopless_stages.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "gpu_codegen/cuda_kernels.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/runtime/cuda_api.h"
#include "lowering/fusion/fusion.h"
#include "lowering/ir/kernel_cost.h"
#include "lowering/ir/printer.h"
#include "lowering/ops/lower_graph.h"

namespace cppi {
namespace {

/// What every stage may use: the options, the result being built (remarks,
/// timings) and the debug dump. Passed explicitly; there is no ambient state.
struct PipelineContext {
  const Options& options;
  CompiledGraph& result;

  void dump(const std::string& file, const std::string& text) const {
    if (options.debug_dir.empty()) return;
    ::mkdir(options.debug_dir.c_str(), 0755);
    std::ofstream(options.debug_dir + "/" + file) << text;
  }
};

/// Runs `stage` and records its wall time under `name`.
template <typename F>
auto timed(PipelineContext& ctx, const char* name, F&& stage) {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&] {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ctx.result.stage_times.push_back({name, s});
  };
  if constexpr (std::is_void_v<decltype(stage())>) {
    stage();
    finish();
  } else {
    auto out = stage();
    finish();
    return out;
  }
}

lowering::LoweringOptions lowering_options(const Options& o) {
  lowering::LoweringOptions lo;
  lo.cpu = true;
  // CUDA kernels need NVRTC at run time; without it CUDA nodes fall back
  // one by one with that reason instead of failing the whole graph.
  lo.cuda = gpu::nvrtc_available();
  lo.inject_relu_bug_testing_only = o.inject_relu_bug_testing_only;
  lo.deterministic = o.deterministic;
  return lo;
}

Expected<cpu::CompileOptions::Compiler> cpu_compiler(const Options& o) {
  switch (o.cpu_compiler) {
    case Options::CpuCompiler::Default: return cpu::default_compiler();
    case Options::CpuCompiler::Gxx: return cpu::CompileOptions::Compiler::Gxx;
    case Options::CpuCompiler::ClangJit:
      if (!cpu::has_clang_jit())
        return Error::invalid_input("cpu_compiler='clang' but this build has no in-process JIT (LLVM 16 not found)");
      return cpu::CompileOptions::Compiler::ClangJit;
  }
  return cpu::default_compiler();
}

/// NVRTC's fast-compile level: min by default, since our kernels are memory
/// bound and run as fast with it; every optimisation where the user chose a
/// max-autotune mode, trading compile time for run time.
gpu::FastCompile cuda_fast_compile(const Options& o) {
  switch (o.cuda_fast_compile) {
    case Options::CudaFastCompile::Off: return gpu::FastCompile::Off;
    case Options::CudaFastCompile::Min: return gpu::FastCompile::Min;
    case Options::CudaFastCompile::Mid: return gpu::FastCompile::Mid;
    case Options::CudaFastCompile::Max: return gpu::FastCompile::Max;
    case Options::CudaFastCompile::Default: break;
  }
  return o.mode.rfind("max-autotune", 0) == 0 ? gpu::FastCompile::Off : gpu::FastCompile::Min;
}

/// Under fallback="error", any node that falls back to ATen is an error.
Status check_fallback_policy(const PipelineContext& ctx) {
  if (ctx.options.fallback != Options::FallbackPolicy::Error) return Status::success();
  for (const Remark& r : ctx.result.remarks.all())
    if (r.kind == Remark::Kind::Fallback)
      return Error::unsupported(cat("node '", r.node, "' (", r.op, ") would fall back to ATen: ", r.reason,
                                    " [options={'fallback': 'error'}]"));
  return Status::success();
}

/// One program item in the loop-IR dumps: compute items as IR text, ATen
/// items by their node.
std::string item_text(const ir::ComputeNode& n, const Graph&) { return ir::to_string(n) + "\n"; }
std::string item_text(const ir::KernelPtr& k, const Graph&) { return ir::to_string(*k) + "\n"; }
std::string item_text(const lowering::AtenItem& a, const Graph& g) {
  const Node& n = g.nodes[a.graph_node];
  return cat(a.is_extern ? "extern " : "aten ", n.name, " = ", n.target, "\n\n");
}

/// loop_ir_pre_fusion.txt / loop_ir_post_fusion.txt.
template <typename Item>
std::string describe_program(const std::vector<Item>& program, const Graph& g) {
  std::string out;
  for (const auto& item : program) out += std::visit([&](const auto& x) { return item_text(x, g); }, item);
  return out;
}

/// Fills each kernel's schedule for its device: the host CPU with the
/// vectors of `cpu_isa` (an error where the host cannot run it), the GPU
/// target of the current device unless one is given.
Status schedule_kernels(lowering::FusedGraph& fused, CpuIsa cpu_isa,
                        std::optional<gpu::GpuTarget> gpu_target = std::nullopt) {
  std::optional<cpu::CpuTarget> cpu_target;
  for (auto& item : fused.program) {
    auto* k = std::get_if<ir::KernelPtr>(&item);
    if (!k) continue;
    if ((*k)->device == ir::Device::CPU) {
      if (!cpu_target) {
        auto isa = resolve_cpu_isa(cpu_isa);
        if (!isa) return isa.error();
        cpu_target = cpu::CpuTarget::host(*isa);
      }
      *k = cpu::schedule_for_cpu(
          cpu::stash_reduction_bodies(cpu::sink_loopless_stages(cpu::merge_duplicate_reductions(*k))), *cpu_target);
      continue;
    }
    if (!gpu_target) {
      auto target = gpu::GpuTarget::current();
      if (!target) return target.error();
      gpu_target = *target;
    }
    *k = gpu::schedule_for_gpu(*k, *gpu_target);
  }
  return Status::success();
}

std::vector<ir::KernelPtr> kernels_of(const lowering::FusedGraph& fused) {
  std::vector<ir::KernelPtr> out;
  for (const auto& item : fused.program)
    if (const auto* k = std::get_if<ir::KernelPtr>(&item)) out.push_back(*k);
  return out;
}

const char* kernel_kind(const ir::Kernel& k) {
  if (ir::scan_of(k)) return "scan";
  for (const auto& s : k.stages)
    if (std::holds_alternative<ir::ReductionStage>(s)) return "reduction";
  return "pointwise";
}

/// Provenance for generated code: FX node name -> "file:line | code".
std::map<std::string, std::string> origin_sources(const Graph& g) {
  std::map<std::string, std::string> out;
  for (const auto& n : g.nodes)
    if (!n.stack_trace.empty()) out[n.name] = n.stack_trace;
  return out;
}

/// max-autotune: records each kernel of one device in cg.tuning with its
/// candidates. `own` are the graph's handles of those kernels (candidate 0),
/// `compile_alternatives` compiles the other candidates (a module of their
/// own, so that one the compiler refuses costs only the tuning).
template <typename Handles, typename CompileAlternatives>
void record_tuning(CompiledGraph& cg, TuningPlan& plan, const Handles& own, const std::vector<size_t>& index,
                   CompileAlternatives compile_alternatives) {
  cg.tuning.resize(cg.kernels.size());
  for (size_t i = 0; i < plan.tuning.size(); ++i) {
    if (!plan.tuning[i].candidates.empty()) plan.tuning[i].candidates[0].kernel = own[i];
    cg.tuning[index[i]] = std::move(plan.tuning[i]);
  }
  if (plan.alternatives.empty()) return;
  auto alternatives = compile_alternatives(plan.alternatives);
  if (!alternatives) {  // time nothing: the heuristic's schedules stand
    for (const auto& [kernel, candidate] : plan.owners) {
      KernelTuning& t = cg.tuning[index[kernel]];
      t.candidates.clear();
      t.problem = "the candidate schedules did not compile: " + alternatives.error().message;
    }
    return;
  }
  for (size_t a = 0; a < plan.owners.size(); ++a) {
    const auto [kernel, candidate] = plan.owners[a];
    cg.tuning[index[kernel]].candidates[candidate].kernel = (*alternatives)[a];
  }
}

/// Prints and compiles the graph's kernels, one module per device, and
/// records what explain reports about each. Handles keep program order.
Status compile_kernels(PipelineContext& ctx, const std::vector<ir::KernelPtr>& kernels) {
  CompiledGraph& cg = ctx.result;
  std::vector<size_t> cpu_index, cuda_index;
  std::vector<ir::KernelPtr> cpu_kernels, cuda_kernels;
  for (size_t i = 0; i < kernels.size(); ++i) {
    bool cuda = kernels[i]->device == ir::Device::CUDA;
    (cuda ? cuda_index : cpu_index).push_back(i);
    (cuda ? cuda_kernels : cpu_kernels).push_back(kernels[i]);
  }
  cg.kernels.assign(kernels.size(), nullptr);
  std::vector<bool> vectorized(kernels.size(), false);
  const auto origins = origin_sources(cg.graph);

  if (!cpu_kernels.empty()) {
    auto compiler = cpu_compiler(ctx.options);
    if (!compiler) return compiler.error();
    auto isa = resolve_cpu_isa(ctx.options.cpu_isa);
    if (!isa) return isa.error();
    cpu::CpuKernelOptions opts;
    opts.print.origin_source = origins;
    opts.print.loop_ir_dumps = !ctx.options.debug_dir.empty();
    opts.compile.compiler = *compiler;
    opts.compile.avx512_off = isa->avx512_off;
    opts.compile.unroll_loops = ctx.options.cpu_unroll_loops;
    TuningPlan tuning;
    if (ctx.options.autotune)
      tuning = plan_cpu_tuning(cpu_kernels, cpu::CpuTarget::host(*isa), cg.graph.symbols, opts.print);
    auto compiled = cpu::start_cpu_kernels(cpu_kernels, cg.graph.symbols, opts);
    if (!compiled) return compiled.error();
    if (ctx.options.background_compile) {
      cg.pending_compile = compiled->job;
    } else {
      if (Status s = compiled->job->wait(); !s) return s.error();
      cg.stage_times.push_back({"cpu_compile", compiled->job->seconds()});  // wall time: modules compile at once
    }
    ctx.dump(cpu::kCpuCodegenHeaderName, cpu::cpu_codegen_header().text);  // what kernels.cpp includes
    ctx.dump("kernels.cpp", compiled->source);
    std::string loop_ir;
    for (const auto& k : compiled->kernels) loop_ir += k->info().loop_ir + "\n";
    ctx.dump("loop_ir_scheduled.txt", loop_ir);
    cg.sources.emplace_back("kernels.cpp", compiled->source);
    for (size_t i = 0; i < compiled->kernels.size(); ++i) {
      cg.kernels[cpu_index[i]] = compiled->kernels[i];
      vectorized[cpu_index[i]] = compiled->kernels[i]->info().vectorized;
    }
    if (ctx.options.autotune) {
      record_tuning(cg, tuning, compiled->kernels, cpu_index, [&](const std::vector<ir::KernelPtr>& alternatives)
                        -> Expected<std::vector<std::shared_ptr<cpu::CpuKernelHandle>>> {
        auto started = cpu::start_cpu_kernels(alternatives, cg.graph.symbols, opts);  // compiles in the background
        if (!started) return started.error();
        ctx.dump("kernels_autotune_candidates.cpp", started->source);
        return started->kernels;
      });
    }
  }
  if (!cuda_kernels.empty()) {
    gpu::CudaKernelOptions opts;
    opts.print.origin_source = origins;
    opts.nvrtc.fast_compile = cuda_fast_compile(ctx.options);
    opts.nvrtc.cubin = ctx.options.cuda_cubin;
    opts.print.loop_ir_dumps = !ctx.options.debug_dir.empty();
    TuningPlan tuning;
    if (ctx.options.autotune) {
      auto target = gpu::GpuTarget::current();
      if (target) tuning = plan_gpu_tuning(cuda_kernels, *target, cg.graph.symbols, opts.print);
    }
    auto compiled = gpu::compile_cuda_kernels(cuda_kernels, cg.graph.symbols, opts);
    if (!compiled) return compiled.error();
    if (ctx.options.autotune) {
      record_tuning(cg, tuning, compiled->kernels, cuda_index, [&](const std::vector<ir::KernelPtr>& alternatives)
                        -> Expected<std::vector<std::shared_ptr<gpu::CudaKernelHandle>>> {
        auto built = gpu::compile_cuda_kernels(alternatives, cg.graph.symbols, opts);
        if (!built) return built.error();
        ctx.dump("kernels_autotune_candidates.cu", built->source);
        return built->kernels;
      });
    }
    ctx.dump(gpu::kCudaCodegenHeaderName, gpu::cuda_codegen_header().text);  // what kernels.cu includes
    ctx.dump("kernels.cu", compiled->source);
    if (!compiled->ptx.empty()) ctx.dump("kernels.ptx", compiled->ptx);  // none when NVRTC made a cubin
    std::string twins;  // compiled only if a launch needs them
    for (const auto& k : compiled->kernels) twins += k->info().scalar_twin_source;
    if (!twins.empty()) ctx.dump("kernels_scalar_twins.cu", twins);
    std::string loop_ir;
    for (const auto& k : compiled->kernels) loop_ir += k->info().loop_ir;
    if (!loop_ir.empty()) ctx.dump("loop_ir_scheduled_cuda.txt", loop_ir);
    cg.sources.emplace_back("kernels.cu", compiled->source);
    if (!compiled->ptx.empty()) cg.sources.emplace_back("kernels.ptx", compiled->ptx);
    for (size_t i = 0; i < compiled->kernels.size(); ++i) {
      cg.kernels[cuda_index[i]] = compiled->kernels[i];
      vectorized[cuda_index[i]] = !compiled->kernels[i]->info().scalar_twin.empty();
    }
    cg.stage_times.push_back({"nvrtc_compile", compiled->nvrtc_ms / 1e3});
    // The driver's JIT of the PTX (none for a cubin, little when its cache
    // has this PTX): on a machine's first run, seconds for a large module.
    cg.stage_times.push_back({"cuda_load", compiled->load_ms / 1e3});
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    cg.kernel_infos.push_back({kernels[i]->name, kernels[i]->device == ir::Device::CUDA ? "cuda" : "cpu",
                               kernel_kind(*kernels[i]), kernels[i]->origins, vectorized[i],
                               kernels[i]->schedule.why, ir::kernel_cost(*kernels[i])});
  return Status::success();
}

/// max-autotune: the matmuls that may run fused with the kernel after them
/// (backend/gemm_choices.h), where the graph has CUDA kernels.
void plan_gemm_epilogues(PipelineContext& ctx, const std::vector<ir::KernelPtr>& kernels) {
  if (std::none_of(kernels.begin(), kernels.end(), [](const auto& k) { return k->device == ir::Device::CUDA; }))
    return;
  gpu::CudaKernelOptions opts;
  opts.print.origin_source = origin_sources(ctx.result.graph);
  opts.nvrtc.fast_compile = cuda_fast_compile(ctx.options);
  opts.nvrtc.cubin = ctx.options.cuda_cubin;
  plan_gemm_choices(ctx.result, kernels, opts, [&](const std::string& name, const std::string& text) { ctx.dump(name, text); });
}

/// explain's entries for the ATen calls the wrapper makes.
void record_aten_calls(CompiledGraph& cg) {
  std::set<std::string> fallbacks, externs;
  for (const Remark& r : cg.remarks.all()) {
    if (r.kind == Remark::Kind::Fallback) fallbacks.insert(r.node);
    if (r.kind == Remark::Kind::Extern) externs.insert(r.node);
  }
  for (const Step& s : cg.steps) {
    if (s.kind != Step::Kind::Aten) continue;
    const Node& n = cg.graph.nodes[s.node];
    bool is_fallback = fallbacks.count(n.name), is_extern = externs.count(n.name);
    if (!is_fallback && !is_extern) continue;  // plumbing: getitem, views the runtime needs, attributes
    std::string device =
        n.value.kind == ValueInfo::Kind::Tensor && n.value.tensor.device == Device::CUDA ? "cuda" : "cpu";
    cg.kernel_infos.push_back({n.name, device, is_extern ? "extern" : "fallback", {n.name}, false});
  }
}

}  // namespace

Expected<CompiledGraph> compile_graph(Graph graph, const Options& options) {
  CompiledGraph result;
  result.graph = std::move(graph);
  PipelineContext ctx{options, result};
  const Graph& g = result.graph;
  ctx.dump("fx_graph.json", export_graph(g).to_json());

  auto lowered = timed(ctx, "lower", [&] { return lowering::lower_graph(g, lowering_options(options), result.remarks); });
  if (!lowered) return lowered.error();
  if (Status s = check_fallback_policy(ctx); !s) return s.error();
  ctx.dump("loop_ir_pre_fusion.txt", describe_program(lowered->program, g));

  lowering::FusionOptions fusion_options;
  fusion_options.enabled = options.fuse;
  lowering::FusedGraph fused = timed(ctx, "fuse", [&] { return lowering::fuse(*lowered, fusion_options, result.remarks); });

  Status scheduled = timed(ctx, "schedule", [&] { return schedule_kernels(fused, options.cpu_isa); });
  if (!scheduled) return scheduled.error();
  ctx.dump("loop_ir_post_fusion.txt", describe_program(fused.program, g));

  Status compiled = timed(ctx, "codegen", [&] { return compile_kernels(ctx, kernels_of(fused)); });
  if (!compiled) return compiled.error();

  Status wrapped = timed(ctx, "wrapper", [&] {
    Status s = build_wrapper_steps(fused, result);
    if (!s) return s;
    if (options.autotune) plan_gemm_epilogues(ctx, kernels_of(fused));
    plan_frees(result);
    if (options.reuse_buffers) plan_buffer_reuse(result);
    return s;
  });
  if (!wrapped) return wrapped.error();
  record_aten_calls(result);
  ctx.dump("wrapper_plan.txt", describe_steps(result));

  // Stages do not nest: codegen is what it did besides waiting for the compilers.
  double compilers = 0, total = 0;
  for (const auto& t : result.stage_times)
    if (t.stage == "cpu_compile" || t.stage == "nvrtc_compile") compilers += t.seconds;
  for (auto& t : result.stage_times) {
    if (t.stage == "codegen") t.seconds = std::max(0.0, t.seconds - compilers);
    total += t.seconds;
  }
  result.stage_times.push_back({"total", total});
  return result;
}

Status finish_compile(CompiledGraph& cg) {
  if (!cg.pending_compile) return Status::success();
  if (Status s = cg.pending_compile->wait(); !s) return s;
  // Where a synchronous compile records it (before codegen), and into the total.
  const double seconds = cg.pending_compile->seconds();
  for (auto& t : cg.stage_times)
    if (t.stage == "total") t.seconds += seconds;
  auto codegen = std::find_if(cg.stage_times.begin(), cg.stage_times.end(),
                              [](const StageTime& t) { return t.stage == "codegen"; });
  cg.stage_times.insert(codegen, {"cpu_compile", seconds});
  cg.pending_compile.reset();
  return Status::success();
}

Expected<std::string> generate_cuda_source(Graph graph, const Options& options) {
  CompiledGraph result;
  result.graph = std::move(graph);
  lowering::LoweringOptions lo = lowering_options(options);
  lo.cuda = true;
  auto lowered = lowering::lower_graph(result.graph, lo, result.remarks);
  if (!lowered) return lowered.error();
  lowering::FusionOptions fusion_options;
  fusion_options.enabled = options.fuse;
  lowering::FusedGraph fused = lowering::fuse(*lowered, fusion_options, result.remarks);
  if (Status s = schedule_kernels(fused, options.cpu_isa, gpu::GpuTarget{}); !s) return s.error();
  std::vector<ir::KernelPtr> cuda_kernels;
  for (const auto& k : kernels_of(fused))
    if (k->device == ir::Device::CUDA) cuda_kernels.push_back(k);
  gpu::CudaPrintOptions print;
  print.origin_source = origin_sources(result.graph);
  auto printed = gpu::print_cuda_module(cuda_kernels, result.graph.symbols, print);
  if (!printed) return printed.error();
  return printed->source;
}

}  // namespace cppi
