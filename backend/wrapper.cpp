#include "backend/wrapper.h"

#include <algorithm>
#include <map>
#include <set>

#include "lowering/ir/in_place.h"
#include "lowering/ops/context.h"

namespace cppi {
namespace {

void collect_slots(const Arg& a, std::vector<int>& out) {
  if (a.kind == Arg::Kind::Node) out.push_back(static_cast<int>(a.i));
  for (const auto& e : a.list) collect_slots(e, out);
}

Allocation allocation_for(int slot, const ir::Buffer& buffer, const Graph& g, int graph_node) {
  Allocation a;
  a.slot = slot;
  a.dtype = buffer.dtype;
  a.sizes = buffer.layout.sizes;
  a.strides = buffer.layout.strides;
  a.device = buffer.device == ir::Device::CUDA ? Device::CUDA : Device::CPU;
  if (graph_node >= 0 && g.nodes[graph_node].value.kind == ValueInfo::Kind::Tensor)
    a.device_index = g.nodes[graph_node].value.tensor.device_index;
  return a;
}

/// The buffer an extern matmul on the CPU writes through its out= variant
/// (mm, addmm, bmm with a dense row-major result), as Inductor's
/// extern_kernels.mm(a, b, out=buf): planned like a kernel's output, so the
/// result may take over a dead buffer's storage, still warm in cache,
/// instead of a fresh allocation that the GEMM's stores then miss in.
std::optional<Allocation> out_variant_allocation(const Graph& g, int node) {
  static const std::set<std::string> kOutVariants = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default"};
  const Node& n = g.nodes[node];
  const ValueInfo& v = n.value;
  if (!kOutVariants.count(n.target) || v.kind != ValueInfo::Kind::Tensor || v.tensor.device != Device::CPU)
    return std::nullopt;
  const ir::Layout layout{lowering::to_index(v.tensor.sizes), lowering::to_index(v.tensor.strides),
                          lowering::to_index(v.tensor.storage_offset)};
  if (!layout.is_contiguous()) return std::nullopt;
  Allocation a;
  a.slot = node;
  a.dtype = v.tensor.dtype;
  a.sizes = layout.sizes;
  a.strides = layout.strides;
  a.device = Device::CPU;
  a.device_index = v.tensor.device_index;
  return a;
}

/// Slots of the buffers kernel `k` only reads that `written` may be written
/// over (same dtype, ir::can_write_over). Whether the storage
/// may be taken (made in this call, dead after this step) is
/// plan_buffer_reuse's call: graph inputs, for one, never are.
std::vector<int> overwritable_inputs(const ir::Kernel& k, const ir::KernelSignature& sig, const ir::Buffer& written,
                                     const std::map<const ir::Buffer*, std::pair<int, int>>& slot_of) {
  std::vector<int> out;
  for (const auto& arg : sig.buffers) {
    const ir::Buffer& read = *arg.buffer;
    // Loads of `read` and stores of `written` at one index expression then
    // touch one address: the layouts may differ in shape (a [B*T, C] matmul
    // result read as [B, T, C]), not in dtype or offset.
    if (arg.written || !arg.read || read.dtype != written.dtype || read.device != written.device ||
        !read.layout.offset.is_constant(0) || !written.layout.offset.is_constant(0))
      continue;
    if (ir::can_write_over(k, read.name, written.name)) out.push_back(slot_of.at(&read).first);
  }
  return out;
}

}  // namespace

std::vector<int> slots_read(const Graph& g, const Step& s) {
  std::vector<int> out;
  if (s.kind == Step::Kind::Kernel) {
    std::vector<int> out = s.buffers;
    out.insert(out.end(), s.gemm_operands.begin(), s.gemm_operands.end());
    return out;
  }
  const Node& n = g.nodes[s.node];
  for (const auto& a : n.args) collect_slots(a, out);
  for (const auto& [k, a] : n.kwargs) collect_slots(a, out);
  return out;
}

std::vector<int> output_slots(const Graph& g) {
  std::vector<int> out;
  for (const auto& a : g.output().args) collect_slots(a, out);
  return out;
}

Status build_wrapper_steps(const lowering::FusedGraph& fused, CompiledGraph& cg) {
  const Graph& g = cg.graph;
  cg.num_slots = static_cast<int>(g.nodes.size());
  std::map<const ir::Buffer*, std::pair<int, int>> slot_of;  // buffer -> (slot, graph node or -1)
  std::set<int> filled;
  for (int p : g.placeholders()) filled.insert(p);
  for (const auto& b : fused.buffers) {
    int slot = b.graph_node >= 0 ? b.graph_node : cg.num_slots++;
    slot_of[b.buffer.get()] = {slot, b.graph_node};
    if (b.is_seed) {
      cg.seeds.push_back(
          {slot, b.buffer->device == ir::Device::CUDA ? Device::CUDA : Device::CPU, b.device_index});
      filled.insert(slot);
    }
  }
  std::set<int> made_by_kernels;  // slots whose layout a kernel step chose

  int kernel_index = 0;
  for (const auto& item : fused.program) {
    Step step;
    if (const auto* aten = std::get_if<lowering::AtenItem>(&item)) {
      step.kind = Step::Kind::Aten;
      step.node = aten->graph_node;
      step.is_extern = aten->is_extern;
      step.recomputes = aten->recomputes;
      if (aten->is_extern) {
        if (std::optional<Allocation> out = out_variant_allocation(g, aten->graph_node)) step.allocs.push_back(*out);
      }
      filled.insert(aten->graph_node);
    } else {
      const ir::Kernel& k = *std::get<ir::KernelPtr>(item);
      step.kind = Step::Kind::Kernel;
      step.kernel = kernel_index++;
      const ir::KernelSignature sig = ir::signature(k);
      std::vector<const ir::Buffer*> allocated;  // per allocation: the kernel's buffer
      for (const auto& arg : sig.buffers) {
        auto it = slot_of.find(arg.buffer.get());
        if (it == slot_of.end())
          return Error::internal(cat("kernel ", k.name, " uses buffer ", arg.buffer->name, " that has no binding"));
        auto [slot, graph_node] = it->second;
        step.buffers.push_back(slot);
        if (filled.count(slot)) {
          if (graph_node >= 0 && !made_by_kernels.count(slot)) {
            step.expected_layouts.push_back(allocation_for(slot, *arg.buffer, g, graph_node));
            step.expected_written.push_back(arg.written);
          }
          continue;
        }
        if (!arg.written)
          return Error::internal(cat("kernel ", k.name, " reads buffer ", arg.buffer->name, " before anything wrote it"));
        step.allocs.push_back(allocation_for(slot, *arg.buffer, g, graph_node));
        allocated.push_back(arg.buffer.get());
        filled.insert(slot);
        made_by_kernels.insert(slot);
      }
      for (size_t i = 0; i < step.allocs.size(); ++i)
        step.allocs[i].overwritable = overwritable_inputs(k, sig, *allocated[i], slot_of);
    }
    cg.steps.push_back(std::move(step));
  }
  // Everything the graph returns must exist by the end.
  for (int slot : output_slots(g))
    if (!filled.count(slot) && g.nodes[slot].op != Node::Op::Placeholder)
      return Error::internal(cat("graph output '", g.nodes[slot].name, "' is never produced"));
  return Status::success();
}

std::vector<int> last_uses(const CompiledGraph& cg) {
  std::vector<int> last_use(cg.num_slots, -1);
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    for (int slot : slots_read(cg.graph, cg.steps[s])) last_use[slot] = static_cast<int>(s);
    if (cg.steps[s].kind == Step::Kind::Aten) last_use[cg.steps[s].node] = std::max(last_use[cg.steps[s].node], int(s));
  }
  return last_use;
}

void plan_frees(CompiledGraph& cg) {
  std::vector<int> last_use = last_uses(cg);
  for (int slot : output_slots(cg.graph)) last_use[slot] = -1;  // returned: never freed
  for (int slot = 0; slot < cg.num_slots; ++slot)
    if (last_use[slot] >= 0) cg.steps[last_use[slot]].free_after.push_back(slot);
}

std::string describe_steps(const CompiledGraph& cg) {
  std::string out;
  auto slot_name = [&](int slot) {
    return slot < static_cast<int>(cg.graph.nodes.size()) ? cg.graph.nodes[slot].name : cat("buf", slot);
  };
  auto layout = [](const Allocation& a) {
    std::string text = "[";
    for (size_t i = 0; i < a.sizes.size(); ++i) text += cat(i ? ", " : "", to_string(a.sizes[i]));
    return text + "]";
  };
  for (const SeedInput& s : cg.seeds) {
    out += cat("seed     ", slot_name(s.slot), " = a fresh int64 from the ",
               s.device == Device::CPU ? std::string("cpu") : cat("cuda:", s.device_index), " generator\n");
  }
  for (const Step& s : cg.steps) {
    for (const auto& a : s.allocs) {
      out += cat("alloc    ", slot_name(a.slot), " ", dtype_name(a.dtype), layout(a));
      if (a.reuse < 0) out += "\n";
      else out += cat(a.in_place ? " = in place of " : " = reuse ", slot_name(a.reuse), "\n");
    }
    if (s.kind == Step::Kind::Aten) {
      const Node& n = cg.graph.nodes[s.node];
      out += cat(s.is_extern ? "extern   " : "aten     ", n.name, " = ", n.target, s.allocs.empty() ? "" : " (out=)", "\n");
    } else {
      out += cat("kernel   ", cg.kernels[s.kernel]->name(), "(");
      for (size_t i = 0; i < s.buffers.size(); ++i) out += cat(i ? ", " : "", slot_name(s.buffers[i]));
      out += ")\n";
    }
    if (!s.free_after.empty()) {
      out += "free     ";
      for (size_t i = 0; i < s.free_after.size(); ++i) out += cat(i ? ", " : "", slot_name(s.free_after[i]));
      out += "\n";
    }
  }
  return out;
}

}  // namespace cppi
