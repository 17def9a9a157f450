#include "backend/gemm_choices.h"

#include <algorithm>
#include <map>
#include <optional>

#include "backend/autotune.h"
#include "backend/wrapper.h"
#include "support/sha256.h"
#include "gpu_codegen/codegen/gemm_epilogue.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/cuda_gemm_kernels.h"

namespace cppi {

namespace {

constexpr const char* kExternLabel = "cuBLAS, then the kernel";

/// A tensor's constant sizes and strides, or nullopt when any is symbolic.
std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>> constant_layout(const TensorMeta& t) {
  std::vector<int64_t> sizes, strides;
  for (const auto& s : t.sizes) {
    if (!s.is_const()) return std::nullopt;
    sizes.push_back(s.value);
  }
  for (const auto& s : t.strides) {
    if (!s.is_const()) return std::nullopt;
    strides.push_back(s.value);
  }
  return std::make_pair(sizes, strides);
}

/// Whether a step between the matmul's and its kernel's may write memory the
/// matmul reads: the fused kernel reads A and B later than the extern would.
/// An in-place ATen op, or a kernel writing a graph input or an operand.
bool may_write_operands(const CompiledGraph& cg, const std::vector<ir::KernelPtr>& kernels, const Step& s,
                        const GemmMatmul& mm) {
  const Graph& g = cg.graph;
  if (s.kind == Step::Kind::Aten) {
    const std::string& target = g.nodes[s.node].target;
    const size_t dot = target.find('.', target.find('.') + 1);  // "aten.copy_.default": the op's name ends in '_'
    return dot != std::string::npos && dot > 0 && target[dot - 1] == '_';
  }
  const ir::KernelSignature sig = ir::signature(*kernels[s.kernel]);
  for (size_t i = 0; i < sig.buffers.size(); ++i) {
    if (!sig.buffers[i].written) continue;
    const int slot = s.buffers[i];
    if (slot == mm.a_slot || slot == mm.b_slot || slot == mm.bias_slot || slot == mm.scale_a_slot ||
        slot == mm.scale_b_slot)
      return true;
    if (slot < int(g.nodes.size()) && g.nodes[slot].op == Node::Op::Placeholder) return true;
  }
  return false;
}

}  // namespace

bool is_half_cuda_matmul(const Node& n) {
  if (n.target != "aten.mm.default" && n.target != "aten.addmm.default" && n.target != "aten._scaled_mm.default")
    return false;
  if (n.value.kind != ValueInfo::Kind::Tensor) return false;
  const TensorMeta& c = n.value.tensor;
  return c.device == Device::CUDA && (c.dtype == DType::BFloat16 || c.dtype == DType::Float16);
}

std::optional<GemmMatmul> gemm_template_matmul(const Graph& g, const Node& n, int compute_capability,
                                               std::string* why) {
  const bool addmm = n.target == "aten.addmm.default", scaled = n.target == "aten._scaled_mm.default";
  const auto refuse = [&](std::string reason) -> std::optional<GemmMatmul> {
    *why = std::move(reason);
    return std::nullopt;
  };
  GemmMatmul mm;
  // _scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
  // its optional arguments, positional or by keyword.
  std::optional<Arg> scaled_bias;
  if (scaled) {
    static const char* const kNames[] = {"self", "mat2", "scale_a", "scale_b", "bias", "scale_result", "out_dtype",
                                         "use_fast_accum"};
    std::vector<Arg> args = n.args;
    args.resize(8);  // absent ones: None
    for (const auto& [name, arg] : n.kwargs) {
      const auto* at = std::find_if(std::begin(kNames), std::end(kNames), [&](const char* k) { return name == k; });
      if (at == std::end(kNames)) return refuse(cat("the argument ", name));
      args[at - std::begin(kNames)] = arg;
    }
    for (int i = 0; i < 4; ++i)
      if (args[i].kind != Arg::Kind::Node) return refuse("an operand is not a tensor");
    if (args[5].kind != Arg::Kind::None) return refuse("a scale_result");
    if (args[4].kind == Arg::Kind::Node) scaled_bias = args[4];
    mm.fast_accum = args[7].kind == Arg::Kind::Bool && args[7].b;
    mm.scale_a_slot = int(args[2].i), mm.scale_b_slot = int(args[3].i);
  } else {
    if (n.args.size() != (addmm ? 3u : 2u) || !n.kwargs.empty()) return refuse("beta or alpha given");
    for (const Arg& a : n.args)
      if (a.kind != Arg::Kind::Node) return refuse("an operand is not a tensor");
  }
  const size_t first = addmm ? 1 : 0;
  const ValueInfo &a = g.nodes[n.args[first].i].value, &b = g.nodes[n.args[first + 1].i].value;
  if (a.kind != ValueInfo::Kind::Tensor || b.kind != ValueInfo::Kind::Tensor) return refuse("an operand is not a tensor");
  const TensorMeta& c = n.value.tensor;
  if (scaled) {
    if (!is_float8(a.tensor.dtype) || !is_float8(b.tensor.dtype)) return refuse("an operand is not float8");
    // cuBLASLt (and so eager) multiplies no two e5m2 matrices.
    if (a.tensor.dtype == DType::Float8E5M2 && b.tensor.dtype == DType::Float8E5M2)
      return refuse("two float8_e5m2 operands, which torch._scaled_mm refuses");
  } else if (a.tensor.dtype != c.dtype || b.tensor.dtype != c.dtype) {
    return refuse("mixed dtypes");
  }
  auto la = constant_layout(a.tensor), lb = constant_layout(b.tensor), lc = constant_layout(c);
  if (!la || !lb || !lc) return refuse("symbolic sizes");
  if (la->first.size() != 2 || lb->first.size() != 2) return refuse("not two matrices");
  gpu::GemmProblem& p = mm.problem;
  p.m = la->first[0], p.k = la->first[1], p.n = lb->first[1], p.dtype = c.dtype, p.fp8 = scaled;
  p.a_e5m2 = a.tensor.dtype == DType::Float8E5M2, p.b_e5m2 = b.tensor.dtype == DType::Float8E5M2;
  // A row-major (its row stride free), B K-contiguous or N-contiguous, C row-major contiguous.
  if (la->second[1] != 1) return refuse("A's rows are not contiguous");
  if (lc->second != std::vector<int64_t>{p.n, 1}) return refuse("its result is not row-major");
  p.lda = p.m == 1 ? p.k : la->second[0];
  if (lb->second[0] == 1 && p.n > 1) {
    p.ldb = lb->second[1];
  } else if (lb->second[1] == 1) {
    p.b_k_contiguous = false;
    p.ldb = lb->second[0];
  } else {
    return refuse("B is contiguous along neither dimension");
  }
  mm.a_slot = int(n.args[first].i), mm.b_slot = int(n.args[first + 1].i);
  mm.a_strides = la->second, mm.b_strides = lb->second;
  if (scaled) {
    // One value, or one per row of A (scale_a [M, 1]) and per column of B (scale_b [1, N]).
    using Scale = gpu::GemmProblem::Scale;
    const auto scale = [&](int slot, int64_t rows, int64_t cols, Scale* kind, std::vector<int64_t>* strides) {
      const ValueInfo& v = g.nodes[slot].value;
      if (v.kind != ValueInfo::Kind::Tensor || v.tensor.dtype != DType::Float32 || v.tensor.device != Device::CUDA)
        return false;
      auto l = constant_layout(v.tensor);
      if (!l) return false;
      int64_t numel = 1;
      for (int64_t s : l->first) numel *= s;
      *strides = l->second;
      *kind = numel == 1 ? Scale::One : Scale::PerRow;
      // Per row: [rows, cols] with the one long dimension contiguous.
      return numel == 1 || (l->first == std::vector<int64_t>{rows, cols} && l->second[rows == 1 ? 1 : 0] == 1);
    };
    if (!scale(mm.scale_a_slot, p.m, 1, &p.scale_a, &mm.scale_a_strides) ||
        !scale(mm.scale_b_slot, 1, p.n, &p.scale_b, &mm.scale_b_strides))
      return refuse("its scales are neither one float32 value nor one per row of A and column of B");
  }
  if (addmm || scaled_bias) {
    const int bias_node = int(addmm ? n.args[0].i : scaled_bias->i);
    const ValueInfo& bias = g.nodes[bias_node].value;
    if (bias.kind != ValueInfo::Kind::Tensor || bias.tensor.dtype != c.dtype || bias.tensor.device != Device::CUDA)
      return refuse("its bias is not a tensor of its dtype");
    auto lbias = constant_layout(bias.tensor);
    if (!lbias || lbias->first != std::vector<int64_t>{p.n} || lbias->second != std::vector<int64_t>{1})
      return refuse("its bias is not one contiguous row");
    p.bias = true;
    mm.bias_slot = bias_node;
  }
  if (gpu::gemm_tiles(p, compute_capability).empty()) {
    const int most = compute_capability == 90 ? 64 : 16;
    if (p.m > most)
      return refuse(cat(p.m, " rows: the small-M templates take ", most, " at most", most == 16 ? " (64 on sm_90)" : ""));
    return refuse("K, a row stride or (N-contiguous B) N is not a multiple of 8");
  }
  return mm;
}

void plan_gemm_choices(CompiledGraph& cg, const std::vector<ir::KernelPtr>& kernels,
                       const gpu::CudaKernelOptions& options,
                       const std::function<void(const std::string&, const std::string&)>& dump) {
  const Graph& g = cg.graph;
  std::vector<std::vector<int>> readers(cg.num_slots);
  for (size_t s = 0; s < cg.steps.size(); ++s)
    for (int slot : slots_read(g, cg.steps[s])) readers[slot].push_back(int(s));
  std::vector<int> returned = output_slots(g);
  auto target = gpu::GpuTarget::current();
  if (!target) return;  // no GPU: nothing could be timed

  std::vector<gpu::GemmKernelSource> sources;
  std::map<std::string, size_t> source_of;  // kernel name -> its index in sources
  std::vector<std::vector<std::string>> names;  // per choice: its GEMM candidates' kernel names
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    const Step& mm_step = cg.steps[s];
    if (mm_step.kind != Step::Kind::Aten || !mm_step.is_extern) continue;
    const Node& node = g.nodes[mm_step.node];
    if (!is_half_cuda_matmul(node)) continue;
    const int result = mm_step.node;
    // Each matmul not made a choice says why (explain's "not fused"), with the
    // bytes its result takes through memory (stored, then read back).
    std::string reader;
    const auto refuse = [&](const std::string& why) {
      int64_t bytes = dtype_size(node.value.tensor.dtype) * 2;
      for (const auto& size : node.value.tensor.sizes) bytes = size.is_const() ? bytes * size.value : -1;
      cg.remarks.add(Remark{Remark::Kind::FusionRefusal, node.name, node.target, reader,
                            "max-autotune's GEMM epilogue: " + why, bytes < 0 ? -1 : bytes});
    };
    std::string why;
    auto mm = gemm_template_matmul(g, node, target->compute_capability, &why);
    if (!mm) {
      refuse(why);
      continue;
    }
    if (std::count(returned.begin(), returned.end(), result) > 0) {
      refuse("its result is returned");
      continue;
    }
    if (readers[result].size() != 1) {
      refuse(cat("its result is read by ", readers[result].size(), " steps"));
      continue;
    }
    const Step& k_step = cg.steps[readers[result][0]];
    if (k_step.kind != Step::Kind::Kernel) {
      refuse("its result is read by an ATen call");
      continue;
    }
    const ir::Kernel& k = *kernels[k_step.kernel];
    reader = k.origins.empty() ? k.name : k.origins.front();
    if (std::count(k_step.buffers.begin(), k_step.buffers.end(), result) != 1) {
      refuse("the kernel takes its result twice");
      continue;
    }
    // The wrapper makes the result where the kernel's layout check of it stands.
    if (std::none_of(k_step.expected_layouts.begin(), k_step.expected_layouts.end(),
                     [&](const Allocation& a) { return a.slot == result; })) {
      refuse("the kernel does not check its result's layout");
      continue;
    }
    if (std::any_of(cg.gemm_choices.begin(), cg.gemm_choices.end(),
                    [&](const GemmChoice& c) { return c.kernel_step == readers[result][0]; })) {
      refuse("the kernel reading it is already another matmul's epilogue");  // SwiGLU's gate and up projections
      continue;
    }
    bool written_between = false;
    for (size_t b = s + 1; b < size_t(readers[result][0]); ++b)
      written_between = written_between || may_write_operands(cg, kernels, cg.steps[b], *mm);
    if (written_between) {
      refuse("a step between the two writes a graph input or an operand");
      continue;
    }
    const int arg = int(std::find(k_step.buffers.begin(), k_step.buffers.end(), result) - k_step.buffers.begin());
    const ir::KernelSignature sig = ir::signature(k);
    const std::string buffer = sig.buffers[arg].buffer->name;
    if (auto not_epilogue = gpu::why_not_gemm_epilogue(k, buffer, mm->problem)) {
      refuse("the kernel reading its result: " + *not_epilogue);
      continue;
    }
    const std::vector<gpu::GemmTile> tiles = gpu::gemm_tiles(mm->problem, target->compute_capability);

    // Printed under a provisional name and without provenance first: the key
    // hashes the texts (the same kernel from other source lines shares its
    // entry), and the names come from the key.
    Sha256 hash;
    hash.field("cppinductor gemm v1").field(cat("cuda sm_", target->compute_capability, " ", target->multiprocessors));
    bool printed = true;
    for (const auto& t : tiles) {
      auto text = gpu::print_gemm_epilogue_kernel(k, buffer, mm->problem, t, "cppi_gemm_kernel");
      if (!text) {
        printed = false;
        break;
      }
      hash.field(t.describe()).field(*text);
    }
    if (!printed) continue;
    GemmChoice c;
    c.aten_step = int(s), c.kernel_step = readers[result][0];
    c.a_slot = mm->a_slot, c.b_slot = mm->b_slot, c.bias_slot = mm->bias_slot, c.result_arg = arg;
    c.a_strides = mm->a_strides, c.b_strides = mm->b_strides;
    c.scale_a_slot = mm->scale_a_slot, c.scale_b_slot = mm->scale_b_slot;
    c.scale_a_strides = mm->scale_a_strides, c.scale_b_strides = mm->scale_b_strides;
    c.out_dtype = mm->problem.dtype, c.fast_accum = mm->fast_accum;
    c.key = hash.hex_digest();
    written_buffers(sig, &c.written, &c.read_written);
    std::string problem;
    const std::optional<std::string> winner = read_tuning_winner(c.key, &problem);
    if (!problem.empty()) cg.gemm_problem = problem;
    if (winner && *winner == kExternLabel) continue;  // measured before: the extern and the kernel stand
    c.candidates.push_back({nullptr, kExternLabel, kExternLabel});
    std::vector<std::string> mine;
    for (size_t j = 0; j < tiles.size(); ++j) {
      const std::string label = tiles[j].describe();
      if (winner && *winner != label) continue;
      const std::string name = cat("gemm_", c.key.substr(0, 16), "_", j);
      if (!source_of.count(name)) {
        auto text = gpu::print_gemm_epilogue_kernel(k, buffer, mm->problem, tiles[j], name, options.print);
        if (!text) continue;
        source_of[name] = sources.size();
        gpu::GemmKernelSource source;
        source.name = name, source.text = *text;
        source.blocks = tiles[j].blocks(mm->problem), source.grid_y = tiles[j].grid_y();
        source.threads = tiles[j].threads(), source.shared_bytes = tiles[j].shared_bytes();
        source.buffer_args =
            int(k_step.buffers.size()) + 2 + (mm->bias_slot >= 0 ? 1 : 0) + (mm->scale_a_slot >= 0 ? 2 : 0);
        source.a_arg = int(k_step.buffers.size());
        if (tiles[j].kind == gpu::GemmTile::Kind::Tma) {
          const gpu::GemmProblem& p = mm->problem;
          const int b_rows = p.b_k_contiguous ? 64 * tiles[j].consumers : 64;
          source.maps = gpu::GemmTensorMaps{p.m, p.n, p.k, p.lda, p.ldb, tiles[j].mn, b_rows,
                                            p.dtype == DType::Float16, p.b_k_contiguous, p.fp8};
        }
        sources.push_back(std::move(source));
      }
      c.candidates.push_back({nullptr, label, label});
      mine.push_back(name);
    }
    if (mine.empty()) continue;
    if (winner) {
      c.cached_label = *winner;
      c.candidates.erase(c.candidates.begin());  // the winner alone: nothing to time
    }
    names.push_back(std::move(mine));
    cg.gemm_choices.push_back(std::move(c));
  }
  if (cg.gemm_choices.empty()) return;

  auto compiled = gpu::compile_gemm_kernels(sources, options);
  if (!compiled) {
    cg.gemm_problem = "the GEMM epilogue candidates did not compile: " + compiled.error().message;
    cg.gemm_choices.clear();
    return;
  }
  dump("kernels_gemm_candidates.cu", compiled->source);
  for (size_t i = 0; i < cg.gemm_choices.size(); ++i) {
    GemmChoice& c = cg.gemm_choices[i];
    const size_t first = c.cached_label.empty() ? 1 : 0;  // candidate 0 is the extern's, without a handle
    for (size_t j = 0; j < names[i].size(); ++j) c.candidates[first + j].kernel = compiled->kernels[source_of[names[i][j]]];
    Step& k_step = cg.steps[c.kernel_step];
    k_step.gemm_operands = {c.a_slot, c.b_slot};
    if (c.bias_slot >= 0) k_step.gemm_operands.push_back(c.bias_slot);
    if (c.scale_a_slot >= 0) k_step.gemm_operands.insert(k_step.gemm_operands.end(), {c.scale_a_slot, c.scale_b_slot});
  }
}

}  // namespace cppi
