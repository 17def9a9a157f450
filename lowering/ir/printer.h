/// \file
/// The stable text form of the loop IR, used by tests (compared verbatim) and
/// by the debug dumps loop_ir_pre_fusion.txt / loop_ir_post_fusion.txt.
/// Changing the format breaks tests on purpose.
///
/// Bodies print one node per line in SSA form (constants and LocalRefs
/// inline; shared nodes once), with dtypes:
///   t0: float32 = load buf0[x1 + 64*x0]
///   t1: float32 = add(t0, float32(1))
///   store buf1[x1 + 64*x0] = t1
/// to_string(Expr) prints one expression nested on one line instead (shared
/// nodes repeat, so keep it for small expressions and test messages):
///   add(load buf0[x1 + 64*x0], float32(1))
/// Constants: float32(1.5), float64(-inf), float32(nan), int64(3), true, false.
/// An indirect index leaf prints its value inline, with the dimension size:
///   t1: float32 = load w[x1 + 64*indirect(load idx[x0], 1000)]
#pragma once

#include <ostream>
#include <string>

#include "lowering/ir/buffer.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/kernel.h"
#include "lowering/ir/node.h"

namespace cppi::ir {

std::string to_string(const Expr& e);
std::ostream& operator<<(std::ostream& os, const Expr& e);
/// buf0: float32[8, s0] strides=[s0, 1] offset=0 cpu input fixed
std::string to_string(const Buffer& b);
std::string to_string(const ComputeNode& n);
std::string to_string(const NodeList& nodes);
std::string to_string(const Kernel& k);
/// Kernels separated by blank lines (loop_ir_post_fusion.txt).
std::string to_string(const std::vector<KernelPtr>& kernels);
std::string to_string(const Schedule& s);

}  // namespace cppi::ir
