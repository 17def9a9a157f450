/// \file
/// Facts about a kernel that the CPU schedule's rules (cpu_schedule.cpp) ask:
/// what it reads back of what it writes, whether its rows fit a vector,
/// whether its stores are dense, how its reductions may split across
/// threads, and the work estimate they are weighed by.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/kernel.h"

namespace cppi::cpu::detail {

/// Whether `buffer`'s first access in the kernel is a pointwise stage that
/// stores it without loading it, and every load of it reads what that store
/// wrote in the same outer iteration (the same index once the loops are
/// renamed to the storing stage's, over equal extents): a scratch the
/// kernel fills before it reads it, as the stash of softmax's exp or a
/// column statistic stored for the stage after it.
bool written_before_read(const ir::Kernel& k, const std::string& buffer);

/// Whether computing an outer iteration twice could read what the first time
/// stored (TailKind::Overlapped): the kernel loads a buffer it stores (an
/// in-place update) that it does not fill itself first (written_before_read).
bool reads_a_buffer_it_writes(const ir::Kernel& k);

/// A loop's variable name.
inline std::string var_name(const ir::Loop& l) { return l.var.as<ir::IndexVar>()->name; }

/// Whether `k`'s stage loops may walk rows in lanes (CpuSchedule::row_blocks):
/// every stage with loops is a reduction or pointwise stage with one loop of
/// constant extent from 2 to fewer than a host vector of floats, and no store
/// accumulates.
bool rows_shorter_than_a_vector(const ir::Kernel& k, const CpuTarget& target);

/// Whether every buffer that `k` stores as row blocks along `v` may live in
/// registers from its first store to the end of the outer iteration: all
/// its stores and loads are the same rows (one start, one length), and no
/// stage loads it before the first stage that stores it. A buffer stored
/// otherwise is not read as row blocks (they would load what the kernel has
/// not stored yet).
bool row_blocks_stay_in_registers(const ir::Kernel& k, const std::string& v);

/// Iteration counts for weighing work: size symbols count as
/// CpuTarget::symbol_hint; products saturate at INT64_MAX.
struct Estimator {
  const CpuTarget& target;
  int64_t operator()(const ir::IndexExpr& e) const {
    ir::IndexBindings b;
    for (const auto& s : ir::free_symbols(e)) b[s] = target.symbol_hint;
    return std::max<int64_t>(1, ir::evaluate(e, b));
  }
  int64_t product(const std::vector<ir::Loop>& loops, size_t begin = 0, size_t end = SIZE_MAX) const {
    int64_t p = 1;
    for (size_t i = begin; i < std::min(end, loops.size()); ++i) p = sat_mul(p, (*this)(loops[i].extent));
    return p;
  }
  static int64_t sat_mul(int64_t a, int64_t b) {
    if (a != 0 && b > INT64_MAX / a) return INT64_MAX;
    return a * b;
  }
};

/// The iterations of the stages' loops per outer iteration, summed over the
/// stages (at most INT64_MAX / 2).
int64_t stage_work(const ir::Kernel& k, const Estimator& est);
/// Elements of work the schedule weighs: the outer iterations times
/// stage_work (at least 1).
int64_t kernel_work(const ir::Kernel& k, const Estimator& est);

/// True when every store of `k` writes its buffer densely in row-major order
/// of the outer loops and then its stage's loops: index = sum v_i * (product
/// of the later extents), every extent constant, the buffer exactly that many
/// elements. A parallel chunk of outer iterations then writes one contiguous
/// range of each output. `min_output_bytes`: the smallest such output.
bool writes_outputs_densely(const ir::Kernel& k, int64_t* min_output_bytes);

/// Whether an outer loop's extent is a size symbol. The kernel's work is then
/// only an estimate (symbols count as CpuTarget::symbol_hint), so it is not
/// made serial at compile time: the grain, which cppi_parallel_for checks at
/// run time (a range of at most `grain` iterations runs inline), keeps small
/// sizes on one thread. relu(x) * 2 of a dynamic 16M floats ran on one thread.
bool symbolic_outer(const ir::Kernel& k);

/// The outer iterations of a kernel whose innermost outer loop is
/// vectorised `width` lanes wide, counting a vector of that loop as one.
int64_t outer_vectors(const ir::Kernel& k, const Estimator& est, int width);

/// Whether a kernel of reductions has too few outer iterations (rows) to
/// share evenly among the threads, so each row's reduction loops are split
/// across them instead (parallel_reduction: one cppi_parallel_reduce per
/// reduction and row, each a parallel region). Fewer rows than threads always; otherwise rows that
/// do not divide among the threads (3 rows on 2: one thread takes two), at
/// most 4 per thread, each long enough that a thread's share of it (at least
/// 4 x min_parallel_work) outweighs starting a region: by rows, one of two
/// threads takes two of x.mean(1)'s 3 rows of 10^6 floats while the other
/// waits.
bool few_long_rows(int64_t rows, int64_t row_work, const CpuTarget& target);

/// Whether a column reduction with few vectors of columns splits its tiled
/// rows among the threads (parallel_reduction with column_block): one
/// vectorised outer loop of constant extent, two vectors or more and fewer
/// than two per thread (counting an overlapped rest, which must be
/// allowed: nothing read back is written), the kernel's leading stages
/// reductions over loops and the rest loop-less, and every thread's share of
/// the rows at least 4 x min_parallel_work elements. Otherwise x.sum(0) of
/// 2M x 20 floats runs its one tile pass on one thread of two; split per
/// vector, each vector's parallel region reads every row.
bool splits_tiled_rows(const ir::Kernel& k, const ir::CpuSchedule& c, const Estimator& est, const CpuTarget& target);

/// Whether every pointwise stage with loops may split its first loop among
/// threads beside the reductions (parallel_reduction): each store writes
/// distinct elements for distinct points of the stage's loops
/// (selects_disjoint_elements, all loops: an inner loop could otherwise
/// meet another chunk's elements), and what the stage loads from a buffer it
/// stores, it loads at the element it stores (softmax's in-place rescale).
/// Otherwise softmax over 3 rows of 1M floats runs as 2 + 1 rows on two
/// threads: its stash and rescale passes stop the reductions' split.
bool pointwise_loops_split(const ir::Kernel& k);

}  // namespace cppi::cpu::detail
