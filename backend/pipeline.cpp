#include "backend/pipeline.h"

#include <chrono>
#include <fstream>
#include <functional>
#include <sys/stat.h>

#include "lowering/ops/externs.h"

namespace cppi {
namespace {

/// What every stage may use: the options, where remarks go, stage timings and
/// the debug dump. Passed explicitly; there is no ambient state.
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

bool is_aten_op(const std::string& target) {
  return target.rfind("aten.", 0) == 0 || target.rfind("prims.", 0) == 0;
}

/// Every node that computes something becomes a step. Nodes without a lowering
/// run through ATen with a recorded reason; matmuls and convolutions are
/// extern calls by design.
Status plan_steps(PipelineContext& ctx) {
  const Graph& g = ctx.result.graph;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != Node::Op::CallFunction && n.op != Node::Op::GetAttr) continue;
    Step step;
    step.kind = Step::Kind::Aten;
    step.node = static_cast<int>(i);
    if (n.op == Node::Op::CallFunction && is_aten_op(n.target)) {
      std::string device = "cpu";
      if (n.value.kind == ValueInfo::Kind::Tensor && n.value.tensor.device == Device::CUDA) device = "cuda";
      ctx.result.kernel_infos.push_back(
          {n.name, device, is_extern_op(n.target) ? "extern" : "fallback", {n.name}, false});
      if (is_extern_op(n.target)) {
        step.is_extern = true;
        ctx.result.remarks.add({Remark::Kind::Extern, n.name, n.target, "", "calls the vendor library through ATen"});
      } else {
        ctx.result.remarks.add({Remark::Kind::Fallback, n.name, n.target, "", cat("no lowering for ", n.target)});
      }
    }
    ctx.result.steps.push_back(std::move(step));
  }
  ctx.result.num_slots = static_cast<int>(g.nodes.size());
  if (ctx.options.fallback == Options::FallbackPolicy::Error) {
    for (const Remark& r : ctx.result.remarks.all())
      if (r.kind == Remark::Kind::Fallback)
        return Error::unsupported(cat("node '", r.node, "' (", r.op, ") would fall back to ATen: ", r.reason,
                                      " [options={'fallback': 'error'}]"));
  }
  return Status::success();
}

void collect_slots(const Arg& a, std::vector<int>& out) {
  if (a.kind == Arg::Kind::Node) out.push_back(static_cast<int>(a.i));
  for (const auto& e : a.list) collect_slots(e, out);
}

/// The slots each step reads: a kernel's buffers, an ATen step's node args.
std::vector<int> slots_read(const Graph& g, const Step& s) {
  std::vector<int> out;
  if (s.kind == Step::Kind::Kernel) return s.buffers;
  const Node& n = g.nodes[s.node];
  for (const auto& a : n.args) collect_slots(a, out);
  for (const auto& [k, a] : n.kwargs) collect_slots(a, out);
  return out;
}

/// Frees each slot right after its last reader so peak memory matches eager's
/// (the backward graph holds many saved activations).
void plan_frees(PipelineContext& ctx) {
  CompiledGraph& cg = ctx.result;
  std::vector<int> last_use(cg.num_slots, -1);
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    for (int slot : slots_read(cg.graph, cg.steps[s])) last_use[slot] = static_cast<int>(s);
    if (cg.steps[s].kind == Step::Kind::Kernel)
      for (const auto& a : cg.steps[s].allocs) last_use[a.slot] = std::max(last_use[a.slot], static_cast<int>(s));
  }
  std::vector<int> outputs;
  for (const auto& a : cg.graph.output().args) collect_slots(a, outputs);
  for (int slot : outputs) last_use[slot] = -1;  // returned: never freed
  for (int slot = 0; slot < cg.num_slots; ++slot)
    if (last_use[slot] >= 0) cg.steps[last_use[slot]].free_after.push_back(slot);
}

std::string describe_plan(const CompiledGraph& cg) {
  std::string out;
  for (const Step& s : cg.steps) {
    if (s.kind == Step::Kind::Aten) {
      const Node& n = cg.graph.nodes[s.node];
      out += cat(s.is_extern ? "extern   " : "aten     ", n.name, " = ", n.target, "\n");
    } else {
      out += cat("kernel   ", cg.kernels[s.kernel]->name(), "\n");
    }
  }
  return out;
}

}  // namespace

Expected<CompiledGraph> compile_graph(Graph graph, const Options& options) {
  CompiledGraph result;
  result.graph = std::move(graph);
  PipelineContext ctx{options, result};
  ctx.dump("fx_graph.json", export_graph(result.graph).to_json());

  Status planned = timed(ctx, "plan", [&] { return plan_steps(ctx); });
  if (!planned) return planned.error();
  timed(ctx, "memory_plan", [&] { plan_frees(ctx); });
  ctx.dump("wrapper_plan.txt", describe_plan(result));

  double total = 0;
  for (const auto& t : result.stage_times) total += t.seconds;
  result.stage_times.push_back({"total", total});
  return result;
}

}  // namespace cppi
