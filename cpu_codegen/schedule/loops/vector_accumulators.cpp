/// group_vector_accumulators (CpuSchedule::vector_accumulators): a
/// reduction's whole vectors in groups, vector k of a group into accumulator
/// k, so that that many chains of updates are in flight; the whole vectors
/// after the last group go to the first.
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;

namespace {

Stmt grouped(const codegen::For& l, int accumulators, const LoopNestInput& in) {
  const int64_t w = in.s.vector_width, span = accumulators * w;
  const std::string g = l.var + "_grp", g_end = l.var + "_grp_end";
  std::vector<Stmt> vectors;
  for (int k = 0; k < accumulators; ++k) {
    const Bound at = Bound::symbolic(cat(g, " + ", int64_t{k} * w));
    const Stmt vector = stmt(codegen::VectorAt{l.var, at, stmt(codegen::Accumulate{k, accumulators})});
    vectors.push_back(codegen::block({vector}, true));
  }
  codegen::For groups{g, l.lo, Bound::symbolic(g_end), codegen::LoopKind::Serial, codegen::Tail::None, true, false,
                      codegen::block(vectors)};
  groups.stage_loop = true;
  groups.step = span;
  codegen::For rest = l;  // into the first accumulators
  rest.lo = Bound::symbolic(g_end);
  // g_end is local: another stage may loop over a variable of the same name.
  return codegen::block({stmt(codegen::Let{g_end, cat(l.lo.text, " + (", l.hi.text, " - ", l.lo.text, ") / ", span,
                                                      " * ", span)}),
                         stmt(groups), stmt(rest)},
                        true);
}

}  // namespace

codegen::Stmt group_vector_accumulators(const codegen::Stmt& s, const LoopNestInput& in) {
  if (const auto* l = std::get_if<codegen::For>(&s->node); l && l->kind == codegen::LoopKind::Vector) {
    const auto* a = l->body ? std::get_if<codegen::Accumulate>(&l->body->node) : nullptr;
    if (l->tail == codegen::Tail::None && a && a->accumulators > 1) return grouped(*l, a->accumulators, in);
  }
  return codegen::map_children(s, [&](const Stmt& c) { return group_vector_accumulators(c, in); });
}

}  // namespace cppi::cpu
