#include "backend/buffer_reuse.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>

#include "backend/wrapper.h"
#include "lowering/ir/index_simplify.h"

namespace cppi {
namespace {

constexpr int kNever = INT_MAX;  // a storage a returned value may alias: it never dies

/// The step after which each slot's storage is dead: the last use of the
/// slot and of every value an ATen step may have derived from it as an
/// alias (views, getitem, fallbacks; extern calls return fresh tensors).
std::vector<int> storage_deaths(const CompiledGraph& cg) {
  const Graph& g = cg.graph;
  std::vector<int> death(cg.num_slots, -1);
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    for (int slot : slots_read(g, cg.steps[s])) death[slot] = static_cast<int>(s);
    if (cg.steps[s].kind == Step::Kind::Aten) death[cg.steps[s].node] = std::max(death[cg.steps[s].node], int(s));
  }
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

/// The byte size of the storage torch.empty_strided makes for `a`, or
/// nullopt when a size may be zero (the formula below assumes none is).
std::optional<ir::IndexExpr> storage_bytes(const Allocation& a) {
  ir::IndexExpr extent = 1;
  for (size_t i = 0; i < a.sizes.size(); ++i) {
    if (!ir::prove_positive(a.sizes[i])) return std::nullopt;
    extent = extent + (a.sizes[i] - 1) * a.strides[i];
  }
  return ir::simplify(extent * dtype_size(a.dtype));
}

/// A dead buffer whose storage a later allocation may take over.
struct FreeBuffer {
  int slot = -1;
  int died_after = -1;  // step
  Device device = Device::CPU;
  int device_index = 0;
  ir::IndexExpr bytes;
};

}  // namespace

void plan_buffer_reuse(CompiledGraph& cg) {
  std::vector<int> death = storage_deaths(cg);
  std::vector<std::vector<FreeBuffer>> dying_after(cg.steps.size());
  std::vector<FreeBuffer> pool;  // in the order the buffers died
  for (size_t s = 0; s < cg.steps.size(); ++s) {
    for (Allocation& a : cg.steps[s].allocs) {
      std::optional<ir::IndexExpr> bytes = storage_bytes(a);
      if (!bytes || death[a.slot] == kNever || death[a.slot] < 0) continue;
      auto fits = [&](const FreeBuffer& f) {
        return f.device == a.device && f.device_index == a.device_index && f.bytes == *bytes;
      };
      auto found = std::find_if(pool.rbegin(), pool.rend(), fits);  // most recently freed first
      if (found != pool.rend()) {
        a.reuse = found->slot;
        pool.erase(std::next(found).base());
        // The storage changes hands at this step: the old slot keeps it until then.
        for (Step& earlier : cg.steps) {
          auto& frees = earlier.free_after;
          frees.erase(std::remove(frees.begin(), frees.end(), a.reuse), frees.end());
        }
      }
      dying_after[death[a.slot]].push_back({a.slot, death[a.slot], a.device, a.device_index, *bytes});
    }
    for (const FreeBuffer& f : dying_after[s]) pool.push_back(f);
  }
}

AllocationCounts count_allocations(const CompiledGraph& cg) {
  AllocationCounts counts;
  for (const Step& s : cg.steps)
    for (const Allocation& a : s.allocs) (a.reuse >= 0 ? counts.reused : counts.fresh)++;
  return counts;
}

}  // namespace cppi
