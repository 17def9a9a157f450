#include "cpu_codegen/schedule/index_conditions.h"

#include <optional>
#include <set>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/fold_conditions.h"
#include "lowering/ir/index_affine.h"

namespace cppi::cpu {

using namespace ir;

namespace {

/// A comparison `var + offset  op  bound`, normalised so the loop variable
/// is on the left.
struct IndexComparison {
  CompareOp op;
  int64_t offset;
  int64_t bound;
};

/// An integer constant, or an index value that is one (cat's boundary).
std::optional<int64_t> int_constant(const Expr& e) {
  if (const auto* iv = e.as<IndexValue>()) return iv->index.constant();
  const auto* c = e.as<Constant>();
  if (!c || !is_integral(c->dtype, /*include_bool=*/false)) return std::nullopt;
  return c->int_value;
}

/// `index` = var + a constant, nothing else.
std::optional<int64_t> offset_from(const IndexExpr& index, const std::string& var) {
  auto form = affine_form(index, {ir::var(var)});
  if (!form || !form->strides[0].is_constant(1)) return std::nullopt;
  return form->offset.constant();
}

CompareOp mirrored(CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return CompareOp::Gt;
    case CompareOp::Le: return CompareOp::Ge;
    case CompareOp::Gt: return CompareOp::Lt;
    case CompareOp::Ge: return CompareOp::Le;
    default: return op;
  }
}

std::optional<IndexComparison> index_comparison(const Compare& n, const std::string& var) {
  if (n.op == CompareOp::Eq || n.op == CompareOp::Ne) return std::nullopt;  // true at one point only
  for (const bool swapped : {false, true}) {
    const Expr& index_side = swapped ? n.rhs : n.lhs;
    const Expr& bound_side = swapped ? n.lhs : n.rhs;
    const auto* iv = index_side.as<IndexValue>();
    auto bound = int_constant(bound_side);
    if (!iv || !bound) continue;
    if (auto offset = offset_from(iv->index, var)) return IndexComparison{swapped ? mirrored(n.op) : n.op, *offset, *bound};
  }
  return std::nullopt;
}

/// The first value of var at which the comparison is true (Ge, Gt) or
/// false (Lt, Le): it changes there and nowhere else.
int64_t change_point(const IndexComparison& c) {
  switch (c.op) {
    case CompareOp::Lt:
    case CompareOp::Ge: return c.bound - c.offset;
    default: return c.bound - c.offset + 1;  // Le, Gt
  }
}

/// The comparison's value over all of [lo, hi), if it has one.
std::optional<bool> value_over(const IndexComparison& c, int64_t lo, int64_t hi) {
  const int64_t p = change_point(c);
  const bool below = c.op == CompareOp::Lt || c.op == CompareOp::Le;  // true below p
  if (hi <= p) return below;
  if (lo >= p) return !below;
  return std::nullopt;
}

class SplitFinder : public ExprVisitor {
 public:
  SplitFinder(std::string var, int64_t lo, int64_t hi) : var_(std::move(var)), lo_(lo), hi_(hi) {}
  std::set<int64_t> splits;

 protected:
  void visit(const Compare& n) override {
    if (auto c = index_comparison(n, var_)) {
      const int64_t p = change_point(*c);
      if (p > lo_ && p < hi_) splits.insert(p);
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
      folded.stores.push_back(Store::make(store.buffer, store.index, f.mutate(store.value)));
    }
    out.push_back(std::move(folded));
  }
  return out;
}

}  // namespace cppi::cpu
