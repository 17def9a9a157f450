#include "lowering/graph/options.h"

#include <initializer_list>
#include <type_traits>
#include <utility>

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
    // One of `choices` by name; the error names them all ("'a', 'b' or 'c'").
    auto want_choice = [&](auto* out, std::initializer_list<std::pair<const char*, std::decay_t<decltype(*out)>>> choices)
        -> Status {
      auto s = want_string();
      if (!s) return s.error();
      std::string names;
      size_t i = 0;
      for (const auto& [name, v] : choices) {
        if (*s == name) {
          *out = v;
          return Status::success();
        }
        names += cat(i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ", "'", name, "'");
        ++i;
      }
      return Error::invalid_input(cat("option '", key, "' must be ", names, ", not '", *s, "'"));
    };
    if (key == "mode") {
      auto s = want_string();
      if (!s) return s.error();
      o.mode = *s;
    } else if (key == "fallback") {
      Status s = want_choice(&o.fallback, {{"eager", FallbackPolicy::Eager}, {"error", FallbackPolicy::Error}});
      if (!s) return s.error();
    } else if (key == "cpu_compiler") {
      Status s = want_choice(&o.cpu_compiler, {{"default", CpuCompiler::Default},
                                               {"clang", CpuCompiler::ClangJit},
                                               {"gxx", CpuCompiler::Gxx}});
      if (!s) return s.error();
    } else if (key == "cpu_isa") {
      Status s = want_choice(&o.cpu_isa, {{"native", CpuIsa::Native}, {"avx2", CpuIsa::Avx2}, {"avx512", CpuIsa::Avx512}});
      if (!s) return s.error();
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
    } else if (key == "background_compile") {
      auto b = want_bool();
      if (!b) return b.error();
      o.background_compile = *b;
    } else if (key == "cpu_unroll_loops") {
      auto b = want_bool();
      if (!b) return b.error();
      o.cpu_unroll_loops = *b;
    } else if (key == "cuda_fast_compile") {
      Status s = want_choice(&o.cuda_fast_compile, {{"default", CudaFastCompile::Default},
                                                    {"off", CudaFastCompile::Off},
                                                    {"min", CudaFastCompile::Min},
                                                    {"mid", CudaFastCompile::Mid},
                                                    {"max", CudaFastCompile::Max}});
      if (!s) return s.error();
    } else if (key == "cuda_binary") {
      Status s = want_choice(&o.cuda_cubin, {{"ptx", false}, {"cubin", true}});
      if (!s) return s.error();
    } else if (key == "inject_relu_bug_TESTING_ONLY") {
      auto b = want_bool();
      if (!b) return b.error();
      o.inject_relu_bug_testing_only = *b;
    } else if (key == "autotune") {
      auto b = want_bool();
      if (!b) return b.error();
      o.autotune = *b;
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
