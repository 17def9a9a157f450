// IR kernels for the GPU codegen tests and gpu_codegen_bench, built the way
// lowerings and fusion build them (reduced floats loaded, cast to float32,
// cast back before the store). Every buffer is a contiguous CUDA buffer;
// sizes may be constants or size symbols.
#pragma once

#include <string>
#include <vector>

#include "lowering/ir/ir.h"

namespace cppi::gpu::testing {

using ir::IndexExpr;
using ir::KernelPtr;

/// The graph symbols the test kernels' symbolic sizes use, in order.
extern const std::vector<std::string> kSymbols;

/// `k` with the schedule schedule_for_gpu picks for a default GpuTarget.
KernelPtr scheduled(const KernelPtr& k);
/// `k` forced onto mapping `m` with `block` threads and `ept` elements per thread.
KernelPtr with_gpu(const KernelPtr& k, ir::GpuMapping m, int block, int ept);
/// `k` as a ColumnReduction of 32 columns x `threads_per_column` row slices per block.
KernelPtr with_column_groups(const KernelPtr& k, int threads_per_column);

/// No outer loop: the sum of x - y over rows x cols, the difference halved
/// (a pointwise stage over the same loops, independent of the sum) and the
/// mean (mse_loss's forward shape, ir::pass_run_end = 2).
KernelPtr sum_and_halved_difference(const IndexExpr& rows, const IndexExpr& cols);

/// out[i, j] = relu(x[i, j] + b[j]) * 2 over (rows, cols).
KernelPtr add_relu_mul(const IndexExpr& rows, const IndexExpr& cols, DType dtype = DType::Float32);
/// out[i, j] = relu(x[i, j] * s) + s * 2, `s` a float64 host scalar (a
/// one-element CPU buffer, taken by value).
KernelPtr host_scalar_scale(const IndexExpr& rows, const IndexExpr& cols);
/// out[i] = sum over j of x[i, j] * s, `s` a float32 host scalar.
KernelPtr host_scalar_row_sum(const IndexExpr& rows, const IndexExpr& cols);
/// out = sin(x) + cos(x), 1-D.
KernelPtr sin_plus_cos(const IndexExpr& n, DType dtype = DType::Float32);
/// out[i, j] = gelu(x[i, j] + b[j]) (erf form).
KernelPtr gelu_bias(const IndexExpr& rows, const IndexExpr& cols, DType dtype = DType::Float32);
/// pre = x + b[j] and post = gelu(pre) over (rows, cols): two outputs of one
/// element, as a training graph keeps the pre-activation for the backward.
KernelPtr bias_then_gelu(const IndexExpr& rows, const IndexExpr& cols, DType dtype);
/// s = s + x over (rows, cols): s both read and written (an update in place).
KernelPtr add_in_place(const IndexExpr& rows, const IndexExpr& cols, DType dtype);
/// gelu's backward over a 3-d [a, b, c] (the transformer's MLP: its index
/// is unravelled from three loops).
/// out = r(r(x / 2) * r(tanh(r(x * x * x)))), r rounding to `dtype` as
/// eager rounds each op's result: a chain of roundings (gelu_new's shape).
KernelPtr rounded_chain(const IndexExpr& rows, const IndexExpr& cols, DType dtype);
KernelPtr gelu_backward_3d(const IndexExpr& a, const IndexExpr& b, const IndexExpr& c);
/// out[i, j] = where(isnan(x), -1, x) + (float)j: NaN handling, IndexValue.
KernelPtr nan_to_index(const IndexExpr& rows, const IndexExpr& cols);
/// F.pad(exp(x), (left, right), value=-2) over x of (rows, cols): the load
/// masked by left <= j < left + cols, out of (rows, left + cols + right);
/// with `halved`, a second output holds the result * 0.5.
KernelPtr pad_columns(const IndexExpr& rows, const IndexExpr& cols, int64_t left, int64_t right, bool halved = false);
/// cat([a * 2, b + 1], -1) of a (rows, left) and b (rows, right): two loads
/// masked by j < left and j >= left, a where between them.
KernelPtr cat_columns(const IndexExpr& rows, const IndexExpr& left, const IndexExpr& right);
/// out[i] = sum / max / min / argmax / prod over j of x[i, j] (float32; argmax
/// writes int64).
/// out[(5 * x0) % out_rows, x1] += x[x0, x1]: many rows add into each row
/// of out, so the adds of different threads meet (atomics).
KernelPtr scatter_add_rows(const IndexExpr& rows, int64_t out_rows, const IndexExpr& cols, DType dtype = DType::Float32);
KernelPtr row_reduce(ir::ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols);
/// out[j] = sum over i of x[i, j].
KernelPtr column_sum(const IndexExpr& rows, const IndexExpr& cols);
/// out[c] = reduce over r of x[r, c]; Welford stores var (population) and mean.
KernelPtr column_reduce(ir::ReductionKind kind, const IndexExpr& rows, const IndexExpr& cols);
/// out = cumsum(x, dim) of a rows x cols float32 x (dim 1: along rows,
/// contiguous; dim 0: down columns).
KernelPtr cumsum(const IndexExpr& rows, const IndexExpr& cols, int dim);
/// gw[c] = sum over r of g[r, c] * x[r, c] and gmax[c] = max over r of
/// g[r, c]: two independent reductions over the same rows (layer_norm
/// backward's weight and bias gradients), the second over its own loop
/// variable, which a printer folds in one pass.
KernelPtr two_column_reductions(const IndexExpr& rows, const IndexExpr& cols);
/// layer_norm backward's row shape over `loads` row inputs a0..: s = sum of
/// the product of all of them, t = sum of a0, then
/// out[i, j] = a0 + (s - t * a1) / 4096 (a1 = a0 when loads is 1): two
/// independent row sums and a looped store, every input read per row.
KernelPtr four_load_row_sums(const IndexExpr& rows, const IndexExpr& cols, int loads = 4);
/// sum[a, c] = sum over r of x[a, r, c] and scaled[a, r, c] = x * sum: a column
/// kernel with two outer loops and a looped stage after the reduction.
KernelPtr middle_sum_scale(const IndexExpr& a, const IndexExpr& r, const IndexExpr& c);
/// Softmax over the last dim.
KernelPtr softmax(const IndexExpr& rows, const IndexExpr& cols, DType dtype = DType::Float32);
/// out = g * scale[row] - exp(x - amax[row] - lse[row]) * sum(g * scale[row]) over each row.
KernelPtr log_softmax_backward(const IndexExpr& rows, const IndexExpr& cols);
/// layer_norm over the last dim with weight and bias (eps 1e-5), Welford stats.
KernelPtr layer_norm(const IndexExpr& rows, const IndexExpr& cols, DType dtype = DType::Float32);
/// GPT-2's residual stream into a layer norm: h = a0 + a1 + ... (`inputs`
/// row inputs, each add rounded to `dtype`), then mean and the corrected
/// two-pass variance of h and out = (h - mean) * rstd, every stage
/// recomputing h. With `store_sum`, the first stage also stores h to "sum"
/// and the later stages read it back (what fusion builds when h has a reader
/// outside the kernel). `cols` is a constant.
KernelPtr residual_layer_norm(const IndexExpr& rows, const IndexExpr& cols, DType dtype, int inputs, bool store_sum);
/// Three stages over each row: t = a * 2, then u = t + b (reading t back),
/// then the sum of u (reading u back); t and u are outputs.
KernelPtr chained_stores(const IndexExpr& rows, const IndexExpr& cols);
/// var (correction 1) and mean over the last dim, Welford.
KernelPtr var_mean(const IndexExpr& rows, const IndexExpr& cols);
/// Dropout then noise: out[i, j] = (rand > 0.3 ? x / 0.7 : 0) + 0.1 * randn,
/// both keyed on seed[0] (an int64 input) with disjoint counters.
KernelPtr dropout_noise(const IndexExpr& rows, const IndexExpr& cols);
/// any(x > 0) per row, written as bool.
KernelPtr row_any_positive(const IndexExpr& rows, const IndexExpr& cols);

}  // namespace cppi::gpu::testing
