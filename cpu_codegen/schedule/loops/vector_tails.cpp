/// split_vector_tails (CpuSchedule::tail): each vectorised loop as its whole
/// vectors, then the rest: a scalar loop, one vector with the lanes past the
/// end off (x.sum(0) of n x 7: one 8-lane vector per row), or one vector
/// ending at the loop's end over lanes done already.
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Bound;
using codegen::Stmt;
using codegen::stmt;

codegen::Stmt split_vector_tails(const codegen::Stmt& s, const LoopNestInput& in) {
  const int64_t w = in.s.vector_width;
  return map_unsplit_vector_loops(s, [&](const codegen::For& l) {
    const bool known = l.lo.value && l.hi.value;  // then the split is constant
    auto bound = [&](const std::string& text) { return known ? Bound::constant(std::stoll(text)) : Bound::symbolic(text); };
    auto whole_vectors = [&](const std::string& from, const std::string& to) {
      codegen::For main = l;
      main.lo = bound(from);
      main.hi = bound(to);
      main.tail = codegen::Tail::None;
      main.whole_vectors_before_rest = l.stage_loop && l.tail == codegen::Tail::Masked;
      return stmt(main);
    };
    const codegen::VectorSplit split = codegen::split_at_whole_vectors(l.var, l.lo, l.hi, w);
    std::vector<Stmt> parts;
    for (const auto& let : split.lets) parts.push_back(stmt(let));
    if (split.main) parts.push_back(whole_vectors(split.main->first, split.main->second));
    if (split.rest) {
      const auto& [vend, end] = *split.rest;
      switch (l.tail) {
        case codegen::Tail::Scalar: {
          codegen::For scalar{l.var, bound(vend), bound(end), codegen::LoopKind::Serial, codegen::Tail::None, true, false,
                              l.body};
          scalar.stage_loop = l.stage_loop;
          parts.push_back(stmt(scalar));
          break;
        }
        case codegen::Tail::Masked: {
          // A stage loop's rest is its one vector at the split; the outer
          // loop's, a loop of that one vector.
          const codegen::MaskedRest masked = codegen::masked_rest(l.var, vend, end, known);
          const Stmt rest = l.stage_loop ? stmt(codegen::VectorAt{l.var, bound(vend), l.body}) : whole_vectors(vend, end);
          parts.push_back(stmt(codegen::If{masked.condition,
                                           codegen::block({stmt(codegen::Comment{masked.comment}),
                                                           stmt(codegen::MaskedLanes{masked.lanes, rest})}),
                                           nullptr}));
          break;
        }
        case codegen::Tail::Overlapped: {
          // [lo, hi) holds at least one whole vector (CpuSchedule::tail).
          Stmt rest = codegen::block(
              {stmt(codegen::Comment{"the rest: one vector ending at the loop's end, over lanes already done"}),
               whole_vectors(known ? std::to_string(*l.hi.value - w) : cat(end, " - ", w), end)});
          parts.push_back(known ? rest : stmt(codegen::If{cat(vend, " < ", end), rest, nullptr}));
          break;
        }
        case codegen::Tail::None: break;
      }
    }
    return codegen::block(parts, !split.lets.empty());
  });
}

}  // namespace cppi::cpu
