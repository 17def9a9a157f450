#include "cpu_codegen/schedule/kernel_facts.h"

#include <algorithm>
#include <map>
#include <optional>

#include "lowering/ir/index_affine.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ir/stage_loops.h"

namespace cppi::cpu::detail {

using namespace ir;

bool written_before_read(const Kernel& k, const std::string& buffer) {
  const PointwiseStage* first = nullptr;
  const Store* store = nullptr;
  for (const auto& s : k.stages) {
    bool loads = false;
    for (const auto& a : reads(s)) loads = loads || a.buffer->name == buffer;
    if (!first) {
      const auto* pw = std::get_if<PointwiseStage>(&s);
      if (pw) {
        for (const auto& st : pw->stores) {
          if (st.buffer->name == buffer) store = &st;
        }
      }
      if (loads) return false;
      if (store) first = pw;
      continue;
    }
    if (!loads) continue;
    // A loop-less store (log_softmax's log of a column sum) is read back at
    // its own index; one with loops at the same point of equal loops.
    const auto& loops = loops_of(s);
    std::map<std::string, IndexExpr> renamed;
    if (!first->loops.empty()) {
      if (loops.size() != first->loops.size()) return false;
      for (size_t i = 0; i < loops.size(); ++i) {
        if (!(loops[i].extent == first->loops[i].extent)) return false;
        renamed[loops[i].var.as<IndexVar>()->name] = first->loops[i].var;
      }
    }
    for (const auto& a : reads(s)) {
      if (a.buffer->name == buffer && !(substitute(a.index, renamed) == store->index)) return false;
    }
  }
  return first != nullptr;
}

bool reads_a_buffer_it_writes(const Kernel& k) {
  for (const auto& b : read_back_buffers(k)) {
    if (!written_before_read(k, b)) return true;
  }
  return false;
}

bool rows_shorter_than_a_vector(const Kernel& k, const CpuTarget& target) {
  if (accumulates(k)) return false;
  bool any = false;
  for (const auto& s : k.stages) {
    const auto& loops = loops_of(s);
    if (loops.empty()) continue;
    const auto n = loops[0].extent.constant();
    if (std::holds_alternative<ScanStage>(s) || loops.size() != 1 || !n || *n < 2 || *n >= target.vector_bytes / 4) {
      return false;
    }
    any = true;
  }
  return any;
}

bool row_blocks_stay_in_registers(const Kernel& k, const std::string& v) {
  struct Rows {
    IndexExpr start;
    int64_t length = 0;
    bool operator==(const Rows& o) const { return length == o.length && start == o.start; }
  };
  auto rows_of = [&](const Stage& s, const Access& a) -> std::optional<Rows> {
    const auto& loops = loops_of(s);
    if (loops.size() != 1) return std::nullopt;
    const auto r = row_block_access(a.buffer->dtype, a.index, a.masked, v, loops[0]);
    if (!r) return std::nullopt;
    return Rows{row_block_start(a.index, loops[0]), *r};
  };
  std::map<std::string, std::vector<std::pair<size_t, std::optional<Rows>>>> stores;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    for (const auto& w : writes(k.stages[i])) stores[w.buffer->name].emplace_back(i, rows_of(k.stages[i], w));
  }
  for (const auto& [buffer, list] : stores) {
    // Stored as rows: every store the first one's rows; otherwise none as rows.
    const auto& [first_stage, first] = list[0];
    for (const auto& st : list) {
      if (st.second.has_value() != first.has_value() || (first && !(*st.second == *first))) return false;
    }
    for (size_t i = 0; i < k.stages.size(); ++i) {
      for (const auto& a : reads(k.stages[i])) {
        if (a.buffer->name != buffer) continue;
        const auto rows = rows_of(k.stages[i], a);
        if (!first && rows) return false;
        if (first && (!rows || !(*rows == *first) || i <= first_stage)) return false;
      }
    }
  }
  return true;
}

bool writes_outputs_densely(const Kernel& k, int64_t* min_output_bytes) {
  *min_output_bytes = INT64_MAX;
  bool any = false;
  for (const auto& st : k.stages) {
    const auto* p = std::get_if<PointwiseStage>(&st);
    if (!p) continue;  // reductions store nothing themselves
    std::vector<Loop> loops = k.outer;
    loops.insert(loops.end(), p->loops.begin(), p->loops.end());
    std::vector<IndexExpr> vars;
    std::vector<int64_t> strides(loops.size(), 1);
    int64_t total = 1;
    for (size_t i = loops.size(); i-- > 0;) {
      auto c = loops[i].extent.constant();
      if (!c || *c <= 0 || total > INT64_MAX / 16 / *c) return false;
      strides[i] = total;
      total *= *c;
    }
    for (const auto& l : loops) vars.push_back(l.var);
    for (const auto& store : p->stores) {
      auto form = affine_form(store.index, vars);
      auto numel = store.buffer->layout.storage_size().constant();
      if (!form || !numel || *numel != total || form->offset.constant() != std::optional<int64_t>(0)) return false;
      for (size_t i = 0; i < vars.size(); ++i) {
        if (form->strides[i].constant() != std::optional<int64_t>(strides[i])) return false;
      }
      *min_output_bytes = std::min(*min_output_bytes, total * dtype_size(store.buffer->dtype));
      any = true;
    }
  }
  return any;
}

bool symbolic_outer(const Kernel& k) {
  for (const auto& l : k.outer) {
    if (!l.extent.constant()) return true;
  }
  return false;
}

int64_t outer_vectors(const Kernel& k, const Estimator& est, int width) {
  const size_t n = k.outer.size();
  const int64_t last = est(k.outer[n - 1].extent);
  return Estimator::sat_mul(est.product(k.outer, 0, n - 1), (last + width - 1) / width);
}

bool few_long_rows(int64_t rows, int64_t row_work, const CpuTarget& target) {
  const int64_t threads = target.num_threads;
  if (rows < threads) return true;
  return rows % threads != 0 && rows <= 4 * threads && row_work / threads >= 4 * target.min_parallel_work;
}

bool splits_tiled_rows(const Kernel& k, const CpuSchedule& c, const Estimator& est, const CpuTarget& target) {
  if (c.vectorized != VectorizedLoop::InnermostOuter || c.transpose_tile || c.row_blocks || k.outer.size() != 1 ||
      target.num_threads < 2 || !signature(k).scratch.empty() || reads_a_buffer_it_writes(k)) {
    return false;
  }
  const auto extent = k.outer[0].extent.constant();
  if (!extent || *extent < c.vector_width) return false;
  const size_t tiled = ir::leading_looped_reductions(k.stages);
  if (tiled == 0) return false;
  for (size_t i = tiled; i < k.stages.size(); ++i)
    if (!loops_of(k.stages[i]).empty()) return false;
  // One vector is the lanes' parallel reduction already (not tiled).
  const int64_t vectors = (*extent + c.vector_width - 1) / c.vector_width;
  if (vectors < 2 || vectors >= 2 * int64_t{target.num_threads}) return false;
  const int64_t rows = est(std::get<ReductionStage>(k.stages[0]).loops[0].extent);
  const int64_t share = Estimator::sat_mul(rows / target.num_threads, vectors * c.vector_width);
  return rows > 16 && share >= 4 * target.min_parallel_work;
}

bool pointwise_loops_split(const Kernel& k) {
  // Within one outer iteration, its variables are constants.
  std::map<std::string, IndexExpr> outer_fixed;
  for (const Loop& l : k.outer) outer_fixed[var_name(l)] = index_const(0);
  VarRanges ranges;
  for (const auto& s : k.stages) {
    const auto* p = std::get_if<PointwiseStage>(&s);
    if (!p || p->loops.empty()) continue;
    std::vector<IndexExpr> vars;
    for (const Loop& l : p->loops) {
      ranges[var_name(l)] = l.extent;
      vars.push_back(l.var);
    }
    std::map<std::string, const Store*> stored;
    for (const auto& st : p->stores) {
      if (st.accumulate || stored.count(st.buffer->name) ||
          !selects_disjoint_elements(substitute(st.index, outer_fixed), vars, ranges)) {
        return false;
      }
      stored[st.buffer->name] = &st;
    }
    for (const auto& a : reads(s)) {
      auto it = stored.find(a.buffer->name);
      if (it != stored.end() && !(a.index == it->second->index)) return false;
    }
  }
  return true;
}

int64_t stage_work(const Kernel& k, const Estimator& est) {
  int64_t work = 0;
  for (const auto& s : k.stages) work = std::min<int64_t>(INT64_MAX / 2, work + est.product(loops_of(s)));
  return work;
}

int64_t kernel_work(const Kernel& k, const Estimator& est) {
  return Estimator::sat_mul(est.product(k.outer), std::max<int64_t>(1, stage_work(k, est)));
}

}  // namespace cppi::cpu::detail
