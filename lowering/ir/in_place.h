/// \file
/// When a kernel may write a buffer over the storage of a buffer it reads
/// (Inductor's in-place "reuse" of a dying input: relu(mm(x, w)) writes the
/// relu into the mm result instead of a fresh buffer, which saves an
/// allocation and keeps the written lines in cache).
///
/// Sharing storage is safe when no element of `read` is loaded after the
/// kernel has stored `written` at that element. This holds, for any thread
/// count, vector width or GPU mapping, when:
/// - every load of `read` and every store of `written` use one index
///   expression f, with the same extent for each loop variable it names
///   (so each stage touches the same elements per outer iteration);
/// - f is injective over the iteration space of the stage storing
///   `written` (each element is stored once, by one iteration, and outer
///   iterations touch disjoint elements): affine in every loop variable
///   visible there, with strides in mixed radix (each stride larger than
///   the span of the smaller ones);
/// - no load of `read` comes after the first store of `written`: not in a
///   later stage, not in a later store of the same stage. Within one
///   iteration a store's value is computed (loads included) before it is
///   stored, and the element an iteration loads is the one it stores.
/// `read` must not be written by the kernel, and the kernel must compute
/// each element once (not so with CpuSchedule's TailKind::Overlapped). The caller also checks that the
/// two buffers have one dtype and start at their storage, so element f of
/// each is one address (their shapes may differ: [B*T, C] read as [B, T, C]).
#pragma once

#include <string>

#include "lowering/ir/kernel.h"

namespace cppi::ir {

/// True when `written` may share storage with `read` in kernel `k` (see the
/// file comment). Buffers are named, as loads and stores compare them.
bool can_write_over(const Kernel& k, const std::string& read, const std::string& written);

}  // namespace cppi::ir
