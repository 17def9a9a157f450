#include "backend/buffer_reuse.h"

#include <algorithm>
#include <climits>
#include <optional>

#include "backend/wrapper.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ops/context.h"

namespace cppi {
namespace {

constexpr int kNever = INT_MAX;  // a storage a returned value may alias: it never dies
constexpr int64_t kMaxOversize = 2;  // a static buffer serves one down to half its size

/// The step after which each slot's storage is dead: the last use of the
/// slot and of every value an ATen step may have derived from it as an
/// alias (views, getitem, fallbacks; extern calls return fresh tensors).
std::vector<int> storage_deaths(const CompiledGraph& cg) {
  const Graph& g = cg.graph;
  std::vector<int> death = last_uses(cg);
  for (int slot : output_slots(g)) death[slot] = kNever;
  // An alias is defined after what it aliases: walking the steps backwards
  // settles each value's death before it reaches the values it reads.
  for (size_t s = cg.steps.size(); s-- > 0;) {
    const Step& step = cg.steps[s];
    if (step.kind != Step::Kind::Aten || step.is_extern) continue;
    for (int slot : slots_read(g, step)) death[slot] = std::max(death[slot], death[step.node]);
  }
  return death;
}

/// The byte size of the storage torch.empty_strided makes for this layout,
/// or nullopt when a size may be zero (the formula assumes none is).
std::optional<ir::IndexExpr> storage_bytes(DType dtype, const std::vector<ir::IndexExpr>& sizes,
                                           const std::vector<ir::IndexExpr>& strides) {
  ir::IndexExpr extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!ir::prove_positive(sizes[i])) return std::nullopt;
    extent = extent + (sizes[i] - 1) * strides[i];
  }
  return ir::simplify(extent * dtype_size(dtype));
}

/// A storage the plan knows exactly: a kernel allocation, or the one tensor
/// an extern call returns (a fresh tensor with the node's FX layout; the
/// runtime checks its size before it reuses it).
struct Storage {
  int slot = -1;
  Device device = Device::CPU;
  int device_index = 0;
  ir::IndexExpr bytes;
};

std::optional<Storage> extern_result(const Graph& g, const Step& step) {
  const ValueInfo& v = g.nodes[step.node].value;
  if (v.kind != ValueInfo::Kind::Tensor || !v.tensor.storage_offset.is_const() || v.tensor.storage_offset.value != 0)
    return std::nullopt;
  auto bytes = storage_bytes(v.tensor.dtype, lowering::to_index(v.tensor.sizes), lowering::to_index(v.tensor.strides));
  if (!bytes) return std::nullopt;
  return Storage{step.node, v.tensor.device, v.tensor.device_index, *bytes};
}

/// Exact size first (the most recently freed); else, between static sizes,
/// the smallest buffer up to kMaxOversize times larger.
std::vector<Storage>::iterator best_fit(std::vector<Storage>& pool, const Allocation& a, const ir::IndexExpr& bytes) {
  auto same_device = [&](const Storage& f) { return f.device == a.device && f.device_index == a.device_index; };
  for (auto it = pool.rbegin(); it != pool.rend(); ++it)
    if (same_device(*it) && it->bytes == bytes) return std::next(it).base();
  auto best = pool.end();
  std::optional<int64_t> want = bytes.constant();
  if (!want) return best;
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    std::optional<int64_t> have = it->bytes.constant();
    if (!same_device(*it) || !have || *have < *want || *have > kMaxOversize * *want) continue;
    if (best == pool.end() || *have <= *best->bytes.constant()) best = it;
  }
  return best;
}

}  // namespace

void plan_buffer_reuse(CompiledGraph& cg) {
  std::vector<int> death = storage_deaths(cg);
  std::vector<std::vector<Storage>> dying_after(cg.steps.size());
  std::vector<Storage> pool;  // dead storages, in the order they died
  auto track = [&](const Storage& storage) {
    int dies = death[storage.slot];
    if (dies >= 0 && dies != kNever) dying_after[dies].push_back(storage);
  };
  // A storage the kernel of step s reads for the last time and may write
  // `a` over (Allocation::overwritable), taken out of the storages dying there.
  auto take_in_place = [&](const Allocation& a, size_t s) -> std::optional<Storage> {
    for (int slot : a.overwritable) {
      auto& dying = dying_after[s];
      auto it = std::find_if(dying.begin(), dying.end(), [&](const Storage& d) { return d.slot == slot; });
      if (it == dying.end() || it->device != a.device || it->device_index != a.device_index) continue;
      Storage taken = *it;
      dying.erase(it);
      return taken;
    }
    return std::nullopt;
  };
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    Step& step = cg.steps[s];
    if (step.kind == Step::Kind::Aten && step.is_extern && step.allocs.empty()) {
      if (auto result = extern_result(cg.graph, step)) track(*result);
    }
    for (Allocation& a : step.allocs) {
      if (std::optional<Storage> over = take_in_place(a, s)) {
        // Returned buffers too: the storage was fresh for this call and
        // nothing else reads it after this kernel.
        a.reuse = over->slot;
        a.in_place = true;
        track(Storage{a.slot, a.device, a.device_index, over->bytes});
        continue;
      }
      std::optional<ir::IndexExpr> bytes = storage_bytes(a.dtype, a.sizes, a.strides);
      if (!bytes || death[a.slot] == kNever) continue;
      Storage mine{a.slot, a.device, a.device_index, *bytes};
      auto found = best_fit(pool, a, *bytes);
      if (found != pool.end()) {
        a.reuse = found->slot;
        mine.bytes = found->bytes;  // the storage keeps its size
        pool.erase(found);
        // The storage changes hands at this step: the old slot keeps it until then.
        for (Step& earlier : cg.steps) {
          auto& frees = earlier.free_after;
          frees.erase(std::remove(frees.begin(), frees.end(), a.reuse), frees.end());
        }
      }
      track(mine);
    }
    for (const Storage& f : dying_after[s]) pool.push_back(f);
  }
}

AllocationCounts count_allocations(const CompiledGraph& cg) {
  AllocationCounts counts;
  for (const Step& s : cg.steps)
    for (const Allocation& a : s.allocs) (a.reuse >= 0 ? counts.reused : counts.fresh)++;
  return counts;
}

}  // namespace cppi
