#include "cpu_codegen/schedule/stash_reduction_bodies.h"

#include <optional>
#include <string>
#include <vector>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"

namespace cppi::cpu {

using namespace ir;

namespace {

bool contains(const Expr& e, const Expr& part) {
  for (const auto& n : post_order({e}))
    if (structurally_equal(n, part)) return true;
  return false;
}

/// Replaces every subexpression structurally equal to `from` by `to`.
class ReplaceSubexpr : public ExprMutator {
 public:
  ReplaceSubexpr(Expr from, Expr to) : from_(std::move(from)), to_(std::move(to)) {}

 protected:
#define CPPI_REPLACE_VISIT(Name)                                \
  Expr visit(const Name& n) override {                          \
    if (structurally_equal(current(), from_)) return to_;       \
    return ExprMutator::visit(n);                               \
  }
  CPPI_FOR_EACH_EXPR_NODE(CPPI_REPLACE_VISIT)
#undef CPPI_REPLACE_VISIT

 private:
  Expr from_, to_;
};

bool touches(const Stage& s, const std::string& buffer) {
  for (const auto& a : reads(s))
    if (a.buffer->name == buffer) return true;
  for (const auto& a : writes(s))
    if (a.buffer->name == buffer) return true;
  return false;
}

/// True when stages[r] sums exp(y - m) over its loop and m is the Max of
/// the same y over the same extent in an earlier stage: one term is
/// exp(0) = 1 and none exceeds 1, so the sum lies in [1, extent] or is NaN.
bool sums_shifted_exp(const std::vector<Stage>& stages, size_t r) {
  const auto& red = std::get<ReductionStage>(stages[r]);
  if (red.kind != ReductionKind::Sum) return false;
  const auto* e = red.body.as<Unary>();
  const auto* sub = e && e->op == UnaryOp::Exp ? e->operand.as<Binary>() : nullptr;
  const auto* m = sub && sub->op == BinaryOp::Sub ? sub->rhs.as<LocalRef>() : nullptr;
  if (!m) return false;
  const std::string rv = red.loops[0].var.as<IndexVar>()->name;
  for (size_t i = 0; i < r; ++i) {
    const auto* mx = std::get_if<ReductionStage>(&stages[i]);
    if (!mx || mx->kind != ReductionKind::Max || mx->results[0] != m->name || mx->loops.size() != 1) continue;
    if (!(mx->loops[0].extent == red.loops[0].extent)) return false;
    const std::string mv = mx->loops[0].var.as<IndexVar>()->name;
    return structurally_equal(substitute_indices(mx->body, {{mv, var(rv)}}), sub->lhs);
  }
  return false;
}

/// Stages replacing stages[r] (a reduction) and stages[p] (the pointwise
/// stage that recomputes its body), or nullopt when the pair does not
/// qualify (see the header).
std::optional<std::vector<Stage>> stash(const std::vector<Stage>& stages, size_t r, size_t p,
                                        std::optional<int64_t> max_row_bytes) {
  const auto& red = std::get<ReductionStage>(stages[r]);
  const auto* pw = std::get_if<PointwiseStage>(&stages[p]);
  if (!pw || red.loops.size() != 1 || pw->loops.size() != 1 || pw->stores.size() != 1) return std::nullopt;
  const Loop& rl = red.loops[0];
  const Loop& pl = pw->loops[0];
  const auto extent = pl.extent.constant();
  if (!(rl.extent == pl.extent)) return std::nullopt;
  const Store& st = pw->stores[0];
  const DType t = red.body.dtype();
  if (st.buffer->dtype != t) return std::nullopt;
  if (max_row_bytes && (!extent || *extent * dtype_size(t) > *max_row_bytes)) return std::nullopt;
  if (!indirect_terms(st.index).empty()) return std::nullopt;
  const auto stride = coefficient(st.index, pl.var);
  if (!stride || !stride->constant() || *stride->constant() == 0) return std::nullopt;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (i != p && touches(stages[i], st.buffer->name)) return std::nullopt;
  }
  for (const auto& a : reads(stages[p]))
    if (a.buffer->name == st.buffer->name) return std::nullopt;
  if (!calls_math_function(red.body)) return std::nullopt;
  const std::string rv = rl.var.as<IndexVar>()->name;
  const Expr body = substitute_indices(red.body, {{rv, pl.var}});
  if (!contains(st.value, body)) return std::nullopt;

  const Expr stashed = load(st.buffer, st.index);
  Expr value = ReplaceSubexpr(body, stashed).mutate(st.value);
  // Softmax's normalisation as eager computes it: one reciprocal per row and
  // a multiply per element instead of a vector division per element (the
  // division bounded the kernel). Within 1 ulp of the quotient because the
  // sum is in [1, extent] (sums_shifted_exp): 1/sum is a normal float.
  const auto* div = value.as<Binary>();
  const auto* denom = div && div->op == BinaryOp::TrueDiv ? div->rhs.as<LocalRef>() : nullptr;
  if (denom && denom->name == red.results[0] && div->lhs.same_as(stashed) && sums_shifted_exp(stages, r)) {
    value = binary(BinaryOp::Mul, stashed, unary(UnaryOp::Reciprocal, div->rhs));
  }
  std::vector<Stage> out;
  out.push_back(PointwiseStage{{pl}, {Store::make(st.buffer, st.index, body)}});
  out.push_back(ReductionStage::make({pl}, red.kind, stashed, red.results));
  out.push_back(PointwiseStage{{pl}, {Store::make(st.buffer, st.index, value)}});
  return out;
}

}  // namespace

KernelPtr stash_reduction_bodies(const KernelPtr& kernel, std::optional<int64_t> max_row_bytes) {
  if (kernel->device != Device::CPU || scan_of(*kernel)) return kernel;
  std::vector<Stage> stages = kernel->stages;
  bool changed = false;
  for (size_t r = 0; r < stages.size(); ++r) {
    if (!std::holds_alternative<ReductionStage>(stages[r])) continue;
    // The first later pointwise stage is the one that can recompute the body.
    for (size_t p = r + 1; p < stages.size(); ++p) {
      if (!std::holds_alternative<PointwiseStage>(stages[p])) continue;
      auto replaced = stash(stages, r, p, max_row_bytes);
      if (replaced) {
        std::vector<Stage> next(stages.begin(), stages.begin() + static_cast<long>(r));
        next.push_back((*replaced)[0]);
        next.push_back((*replaced)[1]);
        next.insert(next.end(), stages.begin() + static_cast<long>(r) + 1, stages.begin() + static_cast<long>(p));
        next.push_back((*replaced)[2]);
        next.insert(next.end(), stages.begin() + static_cast<long>(p) + 1, stages.end());
        stages = std::move(next);
        changed = true;
        ++r;  // skip the stash stage just inserted
      }
      break;
    }
  }
  if (!changed) return kernel;
  return Kernel::make(kernel->name, kernel->device, kernel->outer, std::move(stages), kernel->schedule,
                      kernel->origins);
}

}  // namespace cppi::cpu
