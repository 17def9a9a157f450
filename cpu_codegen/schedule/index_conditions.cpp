#include "cpu_codegen/schedule/index_conditions.h"

#include <optional>
#include <set>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/fold_conditions.h"

namespace cppi::cpu {

using namespace ir;

namespace {

/// A comparison of var with a constant: true below `point` and false from
/// it on, or the reverse.
struct IndexComparison {
  bool true_below;
  int64_t point;  // ir::change_point
};

std::optional<IndexComparison> index_comparison(const Compare& n, const std::string& var) {
  auto c = var_comparison(n, {{var, index_const(1)}});  // (only the name counts)
  auto point = c ? change_point(*c) : std::nullopt;
  auto at = point ? point->constant() : std::nullopt;
  if (!at) return std::nullopt;
  return IndexComparison{c->op == CompareOp::Lt || c->op == CompareOp::Le, *at};
}

/// The comparison's value over all of [lo, hi), if it has one.
std::optional<bool> value_over(const IndexComparison& c, int64_t lo, int64_t hi) {
  if (hi <= c.point) return c.true_below;
  if (lo >= c.point) return !c.true_below;
  return std::nullopt;
}

class SplitFinder : public ExprVisitor {
 public:
  SplitFinder(std::string var, int64_t lo, int64_t hi) : var_(std::move(var)), lo_(lo), hi_(hi) {}
  std::set<int64_t> splits;

 protected:
  void visit(const Compare& n) override {
    if (auto c = index_comparison(n, var_)) {
      if (c->point > lo_ && c->point < hi_) splits.insert(c->point);
    }
    ExprVisitor::visit(n);
  }

 private:
  std::string var_;
  int64_t lo_, hi_;
};

class PieceFolder : public ConditionFolder {
 public:
  PieceFolder(std::string var, int64_t lo, int64_t hi) : var_(std::move(var)), lo_(lo), hi_(hi) {}

 protected:
  std::optional<bool> decide(const Compare& n) override {
    if (auto c = index_comparison(n, var_)) return value_over(*c, lo_, hi_);
    return std::nullopt;
  }

 private:
  std::string var_;
  int64_t lo_, hi_;
};

/// The stages' stores, which must be loop-less pointwise stages.
template <class F>
void for_each_store(const std::vector<Stage>& stages, F f) {
  for (const auto& st : stages) {
    const auto* pw = std::get_if<PointwiseStage>(&st);
    if (!pw || !pw->loops.empty()) {
      throw CompilerError(Error::internal("index conditions: a stage with loops or a reduction"));
    }
    for (const auto& store : pw->stores) f(store);
  }
}

}  // namespace

std::vector<int64_t> index_condition_splits(const std::vector<Stage>& stages, const std::string& var,
                                            int64_t extent) {
  SplitFinder f(var, 0, extent);
  for_each_store(stages, [&](const Store& store) { f.walk(store.value); });
  return {f.splits.begin(), f.splits.end()};
}

std::vector<PointwiseStage> fold_index_conditions(const std::vector<Stage>& stages, const std::string& var,
                                                  int64_t lo, int64_t hi) {
  for_each_store(stages, [](const Store&) {});  // the checks the splits make
  PieceFolder f(var, lo, hi);
  std::vector<PointwiseStage> out;
  for (const auto& st : stages) {
    PointwiseStage folded;
    for (const auto& store : std::get<PointwiseStage>(st).stores) {
      folded.stores.push_back(store.with(store.index, f.mutate(store.value)));
    }
    out.push_back(std::move(folded));
  }
  return out;
}

}  // namespace cppi::cpu
