// The CUDA printer's GEMM epilogue (gemm_epilogue.h): the template's call,
// its functor the kernel's one pointwise stage at the element (m, n), where
// each load of the matmul's result reads the accumulator instead, rounded to
// the result's dtype as the matmul's own store would round it.
#include <algorithm>

#include "gpu_codegen/codegen/cuda_kernel_printer.h"

namespace cppi::gpu::cuda_print {

std::string CudaKernelPrinter::print_gemm_epilogue(const GemmEpilogue& g) {
  for (const auto& [v, e] : k_.var_ranges())
    if (v.rfind("gemm_", 0) == 0) fail(cat("kernel ", k_.name, ": loop variable ", v, " clashes with the GEMM's names"));
  codegen::print_kernel_header(out_, name_, k_, options_, g.describe);
  std::string params;
  DType result_dtype = DType::Float32;
  for (const auto& a : sig_.buffers) {
    const std::string type = std::string(dtype_ctype(a.buffer->dtype));
    if (a.buffer->name == g.result) {
      // Never read: the accumulator stands for it. Named apart from the
      // pointer a load would print, so that a load not bound below cannot compile.
      result_dtype = a.buffer->dtype;
      params += cat(params.empty() ? "" : ", ", "const ", type, "* gemm_result_unread");
      continue;
    }
    params += cat(params.empty() ? "" : ", ", a.written ? type + "* " : "const " + type + "* ",
                  pointers_.at(a.buffer->name));
  }
  params += cat(params.empty() ? "" : ", ",
                g.tensor_maps ? "const __grid_constant__ cppi_gemm::TensorMap gemm_a_map, "
                                "const __grid_constant__ cppi_gemm::TensorMap gemm_b_map"
                              : "const uint16_t* gemm_a, const uint16_t* gemm_b");
  if (g.bias) params += cat(", const ", dtype_ctype(result_dtype), "* gemm_bias");
  if (!g.scale.empty()) params += ", const float* gemm_scale_a, const float* gemm_scale_b";
  out_.line(cat("extern \"C\" __global__ void __launch_bounds__(", g.threads,
                g.min_blocks > 1 ? cat(", ", g.min_blocks) : std::string(), ")",
                g.cluster > 1 ? cat(" __cluster_dims__(1, ", g.cluster, ", 1)") : std::string()));
  out_.open(cat(name_, "(", params, ")"));
  const std::string flat = cat("(gemm_m * ", g.columns, " + gemm_n)");
  const std::string acc = g.scale.empty() ? "gemm_acc" : cat("gemm_acc * ", g.scale);
  const std::string sum =
      g.bias ? cat("(", acc, " + ", scalar_cast(result_dtype, DType::Float32, "gemm_bias[gemm_n]"), ")") : acc;
  const std::string value_line =
      cat("const ", scalar_type(result_dtype), " gemm_value = ", scalar_cast(DType::Float32, result_dtype, sum), ";");
  ValueScope scope;
  for (const Expr& load : g.result_loads) scope.add(load, CValue{"gemm_value", result_dtype});
  const std::vector<Store>& stores = std::get<PointwiseStage>(k_.stages[0]).stores;
  // A buffer both read and written: its loads and stores stay in the kernel's
  // order, element by element. Otherwise the template computes the values of
  // all of a thread's elements before storing any (cppi_gemm::SplitEpilogue),
  // so their loads are in flight together.
  const bool in_order = std::any_of(sig_.buffers.begin(), sig_.buffers.end(),
                                    [](const auto& a) { return a.read && a.written; });
  if (in_order) {
    out_.open("const auto epilogue = [&](int64_t gemm_m, int64_t gemm_n, float gemm_acc)");
    unravel(g.loops, flat);
    out_.line(value_line);
    print_stores(stores, scope);
    out_.close("};");
  } else {
    std::vector<CValue> values;
    std::set<std::string> store_vars;
    for (const Store& st : stores)
      for (const std::string& v : free_vars(st.index)) store_vars.insert(v);
    // The variables the values use: the loads of the result read the
    // accumulator instead, so their indices do not count.
    struct ValueVars : ExprVisitor {
      const std::vector<Expr>* result_loads = nullptr;
      std::set<std::string> out;
      void visit_index(const IndexExpr& index) override {
        for (const std::string& v : free_vars(index)) out.insert(v);
      }
      void visit(const Load& node) override {
        for (const Expr& r : *result_loads)
          if (r.get() == &node) return;
        ExprVisitor::visit(node);
      }
    } value_vars;
    value_vars.result_loads = &g.result_loads;
    for (const Store& st : stores) value_vars.walk(st.value);
    out_.open("const auto epilogue_value = [&](int64_t gemm_m, int64_t gemm_n, float gemm_acc)");
    unravel(g.loops, flat, &value_vars.out);
    out_.line(value_line);
    for (const Store& st : stores) values.push_back(scalar_value(st.value, scope));
    std::string fields, texts;
    for (size_t j = 0; j < values.size(); ++j) {
      fields += cat(" ", scalar_type(values[j].dtype), " v", j, ";");
      texts += cat(j ? ", " : "", values[j].text);
    }
    out_.line(cat("struct Values {", fields, " };"));
    out_.line(cat("return Values{", texts, "};"));
    out_.close("};");
    out_.open("const auto epilogue_store = [&](int64_t gemm_m, int64_t gemm_n, const auto& gemm_values)");
    unravel(g.loops, flat, &store_vars);
    ValueScope store_scope;  // each store's value is the field the value part returned
    for (size_t j = 0; j < stores.size(); ++j) store_scope.add(stores[j].value, {cat("gemm_values.v", j), values[j].dtype});
    print_stores(stores, store_scope);
    out_.close("};");
    out_.line("const cppi_gemm::SplitEpilogue<decltype(epilogue_value), decltype(epilogue_store)> epilogue{");
    out_.line("    epilogue_value, epilogue_store};");
  }
  out_.line(g.call);
  out_.close();
  return out_.str();
}

}  // namespace cppi::gpu::cuda_print
