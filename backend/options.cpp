#include "backend/options.h"

namespace cppi {

Expected<Options> Options::from_desc(const Desc& d) {
  Options o;
  if (d.is_none()) return o;
  if (!d.is_dict()) return Error::invalid_input("options must be a dict");
  for (const auto& [key, value] : d.as_dict()) {
    auto want_string = [&]() -> Expected<std::string> {
      if (!value.is_string()) return Error::invalid_input(cat("option '", key, "' must be a string"));
      return value.as_string();
    };
    auto want_bool = [&]() -> Expected<bool> {
      if (!value.is_bool()) return Error::invalid_input(cat("option '", key, "' must be a bool"));
      return value.as_bool();
    };
    if (key == "mode") {
      auto s = want_string();
      if (!s) return s.error();
      o.mode = *s;
    } else if (key == "fallback") {
      auto s = want_string();
      if (!s) return s.error();
      if (*s == "eager") o.fallback = FallbackPolicy::Eager;
      else if (*s == "error") o.fallback = FallbackPolicy::Error;
      else return Error::invalid_input(cat("option 'fallback' must be 'eager' or 'error', not '", *s, "'"));
    } else if (key == "cpu_compiler") {
      auto s = want_string();
      if (!s) return s.error();
      if (*s == "default") o.cpu_compiler = CpuCompiler::Default;
      else if (*s == "clang") o.cpu_compiler = CpuCompiler::ClangJit;
      else if (*s == "gxx") o.cpu_compiler = CpuCompiler::Gxx;
      else return Error::invalid_input(cat("option 'cpu_compiler' must be 'default', 'clang' or 'gxx', not '", *s, "'"));
    } else if (key == "debug_dir") {
      auto s = want_string();
      if (!s) return s.error();
      o.debug_dir = *s;
    } else if (key == "fuse") {
      auto b = want_bool();
      if (!b) return b.error();
      o.fuse = *b;
    } else if (key == "reuse_buffers") {
      auto b = want_bool();
      if (!b) return b.error();
      o.reuse_buffers = *b;
    } else if (key == "cuda_fast_compile") {
      auto s = want_string();
      if (!s) return s.error();
      if (*s == "default") o.cuda_fast_compile = CudaFastCompile::Default;
      else if (*s == "off") o.cuda_fast_compile = CudaFastCompile::Off;
      else if (*s == "min") o.cuda_fast_compile = CudaFastCompile::Min;
      else if (*s == "mid") o.cuda_fast_compile = CudaFastCompile::Mid;
      else if (*s == "max") o.cuda_fast_compile = CudaFastCompile::Max;
      else return Error::invalid_input(
          cat("option 'cuda_fast_compile' must be 'default', 'off', 'min', 'mid' or 'max', not '", *s, "'"));
    } else if (key == "inject_relu_bug_TESTING_ONLY") {
      auto b = want_bool();
      if (!b) return b.error();
      o.inject_relu_bug_testing_only = *b;
    } else if (key == "deterministic") {
      auto b = want_bool();
      if (!b) return b.error();
      o.deterministic = *b;
    }
    // Other keys are Python-side options (dump_code, ...): validated there.
  }
  return o;
}

}  // namespace cppi
