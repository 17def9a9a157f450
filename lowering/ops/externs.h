/// \file
/// ATen ops we deliberately call through ATen as "extern" kernels rather than
/// lowering them: matmuls and convolutions, where vendor libraries (MKL/oneDNN
/// on CPU, cuBLAS/cuDNN on GPU) beat generated loops. Unlike a fallback, an
/// extern call is the plan, not a gap; fusion may later add epilogues.
#pragma once

#include <string_view>

namespace cppi {

inline bool is_extern_op(std::string_view target) {
  static constexpr std::string_view kExterns[] = {
      "aten.mm.default",          "aten.addmm.default",       "aten.bmm.default",
      "aten.baddbmm.default",     "aten.convolution.default", "aten.convolution_backward.default",
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
