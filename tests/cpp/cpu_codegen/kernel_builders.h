// Small loop-IR kernels for the CPU codegen tests, and a harness that runs a
// kernel compiled and in the reference interpreter on the same random data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/cpu_kernels.h"
#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/kernel.h"

namespace cppi::cpu::test {

ir::BufferPtr input(const std::string& name, DType t, std::vector<ir::IndexExpr> sizes);
ir::BufferPtr output(const std::string& name, DType t, std::vector<ir::IndexExpr> sizes);

/// out[i] = maximum(in[i] * 2 + 1, 0) * exp(-in[i]) over one loop of `n`.
ir::KernelPtr pointwise_kernel(const ir::IndexExpr& n);
/// out0[i] = sin(in[i]) + cos(in[i]) and out1[i] = sin(in[i] * 2) over one
/// loop of `n`: sin and cos of one value, and a sin alone.
ir::KernelPtr sin_cos_kernel(const ir::IndexExpr& n);
/// out[x0, x1] = a[x0, x1] + b[x1] (a row broadcast) over [rows, cols].
ir::KernelPtr broadcast_add_kernel(const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// out[x0] = reduce(kind) over r0 of body(in[x0, r0]) for a [rows, cols] input.
/// float32 input; argmax/argmin store int64; welford stores mean and m2.
ir::KernelPtr row_reduction_kernel(ir::ReductionKind kind, const ir::IndexExpr& rows, const ir::IndexExpr& cols,
                                   DType dtype = DType::Float32);
/// out[x0] = sum over r0 of in[r0, x0]: a column sum of a [rows, cols] input.
ir::KernelPtr column_reduction_kernel(ir::ReductionKind kind, const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// Softmax over the last dim of [rows, cols]: max, sum of exp, normalise.
ir::KernelPtr softmax_kernel(const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// A softmax row's statistics without its normalising loop: max, then the
/// sum of exp(x - max), both stored per row (loop-less stores).
ir::KernelPtr softmax_statistics_kernel(const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// Layer norm's corrected two-pass variance over the last dim of [rows, cols]:
/// m = sum(x) / cols, then the two independent sums of d = x - m and of d * d
/// (`s1`, `s2`), then out = d * s2 / cols + s1 / cols.
ir::KernelPtr two_pass_variance_kernel(const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// out = half(float(a) * float(b) + 1) for float16 (or bfloat16) a, b.
ir::KernelPtr half_kernel(const ir::IndexExpr& n, DType half = DType::Float16);
/// A kernel exercising many ops (unary math, integer ops, compare/where, casts,
/// masked loads, iota) on `n` elements; stores several outputs.
ir::KernelPtr op_zoo_kernel(const ir::IndexExpr& n);
/// Row stages that call math functions, so the schedule masks their tails:
/// red = reduce(kind) over r0 of body(tanh(x)), then, over r0 again,
/// out[x0, r0] = exp(y - red) with y = in[x0, r0 + 1] loaded under its own
/// mask r0 + 1 < cols, and pos[x0, r0] = tanh(x) > 0 stored as bool. Any
/// and all reduce tanh(x) > 0.3 and subtract 1 where it holds.
ir::KernelPtr masked_tail_kernel(ir::ReductionKind kind, const ir::IndexExpr& rows, const ir::IndexExpr& cols);
/// A full reduction of a 1-D tensor (no outer loops).
ir::KernelPtr full_reduction_kernel(ir::ReductionKind kind, const ir::IndexExpr& n);

struct RunOptions {
  CompileOptions::Compiler compiler = default_compiler();
  std::vector<std::string> graph_symbols;
  ir::IndexBindings symbols;  // values of the graph's symbols
  bool specials = false;  // sprinkle NaN / inf / -inf into float inputs
  double rtol = 1.3e-5, atol = 1.5e-5;
  uint32_t seed = 1;
  int64_t int_range = 50;  // integer inputs are drawn from [-int_range, int_range]
  /// The kernel the interpreter runs instead (a rewrite's original, with the
  /// same buffers), so the compiled rewrite is checked against it.
  ir::KernelPtr reference;
  /// `kernel` as compiled elsewhere (with other kernels, say), run instead
  /// of compiling it alone.
  std::shared_ptr<CpuKernelHandle> compiled;
};

/// Compiles `kernel` (already scheduled) and runs it and the interpreter on
/// the same inputs; returns "" when all written buffers agree, else a report.
std::string run_and_compare(const ir::KernelPtr& kernel, const RunOptions& options);

/// FileCheck's CHECK lines: each pattern must occur after the previous one.
/// A pattern starting with "NOT:" must not occur at all.
::testing::AssertionResult file_check(const std::string& source, const std::vector<std::string>& patterns);

/// Only the kernel's own text (after the support block).
std::string kernel_text(const PrintedModule& m);

/// An AVX-512 machine with 8 threads, where kernels of >= min_parallel_work
/// elements of work go parallel (4096: small enough for test sizes).
CpuTarget avx512_target(int64_t min_parallel_work = 4096);
/// avx512_target with 32-byte vectors.
CpuTarget avx2_target();
/// The CPU schedule `k` gets on `t`.
ir::CpuSchedule sched(const ir::KernelPtr& k, const CpuTarget& t = avx512_target());

/// The printed module of one kernel; a failure to print fails the test.
PrintedModule print_one(const ir::KernelPtr& k, const std::vector<std::string>& symbols = {},
                        const PrintOptions& o = {});

/// run_and_compare of `k` scheduled for avx512_target() (parallel) and for a
/// target that keeps it serial, NaN and infinities in the inputs when
/// `specials`.
void expect_matches(const ir::KernelPtr& k, bool specials, const RunOptions& base = {});


}  // namespace cppi::cpu::test
