#include "cpu_codegen/schedule/merge_duplicate_reductions.h"

#include <map>
#include <string>
#include <vector>

#include "lowering/ir/expr_visitor.h"

namespace cppi::cpu {

using namespace ir;

namespace {

/// Replaces LocalRefs by name (a dropped stage's results by the kept ones').
class RenameLocals : public ExprMutator {
 public:
  explicit RenameLocals(const std::map<std::string, std::string>& names) : names_(names) {}

 protected:
  Expr visit(const LocalRef& n) override {
    auto it = names_.find(n.name);
    if (it == names_.end()) return ExprMutator::visit(n);
    return LocalRef::make(it->second, n.dtype);
  }

 private:
  const std::map<std::string, std::string>& names_;
};

/// True when `later` computes what `earlier` does, given that nothing
/// between them writes what they read (checked by the caller).
bool repeats(const ReductionStage& earlier, const ReductionStage& later) {
  if (earlier.kind != later.kind || earlier.loops.size() != later.loops.size()) return false;
  if (earlier.result_dtypes != later.result_dtypes) return false;
  std::map<std::string, IndexExpr> rename;
  for (size_t i = 0; i < earlier.loops.size(); ++i) {
    if (!(earlier.loops[i].extent == later.loops[i].extent)) return false;
    rename[later.loops[i].var.as<IndexVar>()->name] = earlier.loops[i].var;
  }
  return structurally_equal(substitute_indices(later.body, rename), earlier.body);
}

bool writes_any_read_by(const Stage& s, const std::vector<Access>& read) {
  for (const auto& w : writes(s)) {
    for (const auto& r : read)
      if (w.buffer->name == r.buffer->name) return true;
  }
  return false;
}

}  // namespace

KernelPtr merge_duplicate_reductions(const KernelPtr& kernel) {
  if (kernel->device != Device::CPU || scan_of(*kernel)) return kernel;
  // Store positions computed from loaded values (scatters) are left alone:
  // the renaming below rewrites values only.
  for (const auto& st : kernel->stages) {
    for (const auto& w : writes(st))
      if (!indirect_terms(w.index).empty()) return kernel;
  }
  std::vector<Stage> stages;
  std::map<std::string, std::string> renamed;  // dropped result -> kept result
  auto rename = [&](const Expr& e) { return renamed.empty() ? e : RenameLocals(renamed).mutate(e); };
  for (const auto& original : kernel->stages) {
    if (auto p = std::get_if<PointwiseStage>(&original)) {
      PointwiseStage s = *p;
      for (auto& st : s.stores) st = st.with(st.index, rename(st.value));
      stages.push_back(std::move(s));
      continue;
    }
    const auto& r = std::get<ReductionStage>(original);
    ReductionStage s = ReductionStage::make(r.loops, r.kind, rename(r.body), r.results);
    bool dropped = false;
    const auto read = reads(Stage{s});
    for (size_t i = stages.size(); i-- > 0 && !dropped;) {
      if (const auto* earlier = std::get_if<ReductionStage>(&stages[i]); earlier && repeats(*earlier, s)) {
        for (size_t k = 0; k < s.results.size(); ++k) renamed[s.results[k]] = earlier->results[k];
        dropped = true;
      }
      if (writes_any_read_by(stages[i], read)) break;  // earlier stages saw other data
    }
    if (!dropped) stages.push_back(std::move(s));
  }
  if (renamed.empty()) return kernel;
  return Kernel::make(kernel->name, kernel->device, kernel->outer, std::move(stages), kernel->schedule,
                      kernel->origins);
}

}  // namespace cppi::cpu
