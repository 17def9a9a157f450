/// \file
/// ATen ops we deliberately call through ATen as "extern" kernels rather than
/// lowering them: matmuls and convolutions, where vendor libraries (MKL/oneDNN
/// on CPU, cuBLAS/cuDNN on GPU) beat generated loops. Unlike a fallback, an
/// extern call is the plan, not a gap; fusion may later add epilogues.
#pragma once

#include <string_view>

namespace cppi {

/// A functional collective (all_reduce, all_gather_into_tensor,
/// reduce_scatter_tensor, wait_tensor, ...): nothing to lower, c10d runs it.
/// Not an extern for the memory plan: wait_tensor returns its input, and a
/// collective's input must outlive the asynchronous work that reads it.
inline bool is_collective_op(std::string_view target) {
  constexpr std::string_view kPrefix = "_c10d_functional.";
  return target.substr(0, kPrefix.size()) == kPrefix;
}

inline bool is_extern_op(std::string_view target) {
  static constexpr std::string_view kExterns[] = {
      "aten.mm.default",          "aten.addmm.default",       "aten.bmm.default",
      "aten.baddbmm.default",     "aten.convolution.default", "aten.convolution_backward.default",
      "aten._scaled_mm.default",  // FP8 (cuBLASLt); its epilogue is our kernel
      "aten._scaled_dot_product_flash_attention_for_cpu.default",
      "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
      "aten._scaled_dot_product_flash_attention.default",
      "aten._scaled_dot_product_flash_attention_backward.default",
      "aten._scaled_dot_product_efficient_attention.default",
      "aten._scaled_dot_product_efficient_attention_backward.default",
      "aten._scaled_dot_product_cudnn_attention.default",
      "aten._scaled_dot_product_cudnn_attention_backward.default",
  };
  for (auto e : kExterns)
    if (e == target) return true;
  return false;
}

}  // namespace cppi
