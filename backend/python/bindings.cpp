/// \file
/// The pybind11 boundary. Converts Python plain data to Desc and back, exposes
/// the pipeline and compiled graphs (their kernels through
/// kernel_launcher.h), and turns C++ errors into Python exceptions
/// (errors.h). Nothing else lives here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "backend/autotune.h"
#include "backend/buffer_reuse.h"
#include "backend/compiled_graph.h"
#include "lowering/graph/desc.h"
#include "lowering/graph/graph.h"
#include "lowering/graph/options.h"
#include "backend/pipeline.h"
#include "backend/python/cudagraph_outputs.h"
#include "backend/python/errors.h"
#include "backend/python/kernel_launcher.h"
#include "cpu_codegen/jit/compiler.h"
#include "cpu_codegen/jit/runtime.h"
#include "cpu_codegen/cpu_kernels.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/runtime/cuda_api.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"

namespace py = pybind11;
using namespace cppi;

using cppi::python::raise;

namespace {

Desc to_desc(py::handle h) {
  if (h.is_none()) return Desc();
  if (py::isinstance<py::bool_>(h)) return Desc(h.cast<bool>());
  if (py::isinstance<py::int_>(h)) return Desc(h.cast<int64_t>());
  if (py::isinstance<py::float_>(h)) return Desc(h.cast<double>());
  if (py::isinstance<py::str>(h)) return Desc(h.cast<std::string>());
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    Desc::List l;
    for (auto item : h) l.push_back(to_desc(item));
    return Desc(std::move(l));
  }
  if (py::isinstance<py::dict>(h)) {
    Desc::Dict d;
    for (auto [k, v] : h.cast<py::dict>()) d.emplace_back(py::str(k).cast<std::string>(), to_desc(v));
    return Desc(std::move(d));
  }
  throw py::type_error("graph descriptions hold None, bool, int, float, str, list and dict only; got " +
                       py::repr(h).cast<std::string>());
}

py::object from_desc(const Desc& d) {
  if (d.is_none()) return py::none();
  if (d.is_bool()) return py::bool_(d.as_bool());
  if (d.is_int()) return py::int_(d.as_int());
  if (d.is_float()) return py::float_(d.as_float());
  if (d.is_string()) return py::str(d.as_string());
  if (d.is_list()) {
    py::list l;
    for (const auto& e : d.as_list()) l.append(from_desc(e));
    return std::move(l);
  }
  py::dict out;
  for (const auto& [k, v] : d.as_dict()) out[py::str(k)] = from_desc(v);
  return std::move(out);
}

template <typename T>
T unwrap(Expected<T> v) {
  if (!v) raise(v.error());
  return std::move(*v);
}

py::dict remark_dict(const Remark& r) {
  py::dict d;
  d["kind"] = to_string(r.kind);
  d["node"] = r.node;
  d["op"] = r.op;
  d["other"] = r.other;
  d["reason"] = r.reason;
  if (r.bytes >= 0) d["bytes"] = r.bytes;
  return d;
}

py::tuple layout_tuple(const CompiledGraph& cg, const Allocation& a, const std::vector<int64_t>& symbols) {
  ir::IndexBindings bindings;
  for (size_t i = 0; i < cg.graph.symbols.size() && i < symbols.size(); ++i) bindings[cg.graph.symbols[i]] = symbols[i];
  auto eval = [&](const std::vector<ir::IndexExpr>& exprs) {
    std::vector<int64_t> out;
    for (const auto& e : exprs) out.push_back(ir::evaluate(e, bindings));
    return out;
  };
  std::string device = a.device == Device::CPU ? "cpu" : cat("cuda:", a.device_index);
  return py::make_tuple(std::string(dtype_name(a.dtype)), eval(a.sizes), eval(a.strides), device);
}

/// max-autotune's candidates as Python sees them: [(label, schedule)].
py::list candidate_list(const std::vector<KernelCandidate>& candidates) {
  py::list out;
  for (const auto& c : candidates) out.append(py::make_tuple(c.label, c.schedule));
  return out;
}

}  // namespace

/// finish_compile, waiting for the background compile without the GIL. The
/// stage time is recorded with the GIL held, so two Python threads calling
/// this at once cannot both record it.
Status finish_compile_without_gil(CompiledGraph& cg) {
  if (std::shared_ptr<PendingCompile> pending = cg.pending_compile) {
    py::gil_scoped_release release;
    (void)pending->wait();  // finish_compile reads the same answer
  }
  return finish_compile(cg);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "cppinductor's C++ compiler core";
  python::register_errors(m);

  m.def(
      "roundtrip_graph", [](py::object desc) { return from_desc(export_graph(unwrap(import_graph(to_desc(desc))))); },
      "Imports a graph description and exports it again (tests the boundary).");
  m.def(
      "desc_to_json", [](py::object desc) { return to_desc(desc).to_json(); }, "JSON text of a description.");

  py::class_<Allocation>(m, "Allocation")
      .def_readonly("slot", &Allocation::slot)
      .def_readonly("reuse", &Allocation::reuse)
      .def_readonly("in_place", &Allocation::in_place)
      .def_property_readonly("dtype", [](const Allocation& a) { return std::string(dtype_name(a.dtype)); });

  py::enum_<Step::Kind>(m, "StepKind").value("Aten", Step::Kind::Aten).value("Kernel", Step::Kind::Kernel);
  py::class_<Step>(m, "Step")
      .def_readonly("kind", &Step::kind)
      .def_readonly("node", &Step::node)
      .def_readonly("is_extern", &Step::is_extern)
      .def_readonly("recomputes", &Step::recomputes)
      .def_readonly("kernel", &Step::kernel)
      .def_readonly("buffers", &Step::buffers)
      .def_readonly("allocs", &Step::allocs)
      .def_readonly("expected_layouts", &Step::expected_layouts)
      .def_readonly("expected_written", &Step::expected_written)
      .def_readonly("free_after", &Step::free_after)
      .def_readonly("gemm_operands", &Step::gemm_operands);

  py::class_<CompiledGraph>(m, "CompiledGraph")
      .def_readonly("steps", &CompiledGraph::steps)
      .def_readonly("num_slots", &CompiledGraph::num_slots)
      .def_property_readonly("allocation_counts",
                             [](const CompiledGraph& cg) {
                               AllocationCounts c = count_allocations(cg);
                               py::dict d;
                               d["fresh"] = c.fresh;
                               d["reused"] = c.reused;
                               return d;
                             })
      .def_property_readonly("seed_inputs",
                             [](const CompiledGraph& cg) {
                               py::list out;
                               for (const auto& s : cg.seeds)
                                 out.append(py::make_tuple(
                                     s.slot, s.device == Device::CPU ? std::string("cpu")
                                                                     : cat("cuda:", s.device_index)));
                               return out;
                             })
      .def_property_readonly("remarks",
                             [](const CompiledGraph& cg) {
                               py::list out;
                               for (const auto& r : cg.remarks.all()) out.append(remark_dict(r));
                               return out;
                             })
      .def_property_readonly("stage_times",
                             [](CompiledGraph& cg) {
                               (void)finish_compile_without_gil(cg);  // a failed compile has no stage time
                               py::list out;
                               for (const auto& t : cg.stage_times) out.append(py::make_tuple(t.stage, t.seconds));
                               return out;
                             })
      .def_readonly("sources", &CompiledGraph::sources)
      .def_property_readonly(
          "compiling", [](const CompiledGraph& cg) { return cg.pending_compile != nullptr; },
          "Whether kernels still compile in the background (the option background_compile); finish_compile() "
          "waits for them.")
      .def(
          "finish_compile", [](CompiledGraph& cg) { finish_compile_without_gil(cg).throw_if_error(); },
          "Waits for the kernels compiling in the background; raises CompilerError if their compile failed "
          "(every call raises it again).")
      .def_property_readonly("symbol_bindings",
                             [](const CompiledGraph& cg) {
                               py::list out;
                               for (const auto& b : cg.graph.bindings)
                                 out.append(py::make_tuple(b.symbol, b.placeholder, b.dim));
                               return out;
                             })
      .def_property_readonly("kernel_infos",
                             [](const CompiledGraph& cg) {
                               py::list out;
                               for (const auto& k : cg.kernel_infos) {
                                 py::dict d;
                                 d["name"] = k.name;
                                 d["device"] = k.device;
                                 d["kind"] = k.kind;
                                 d["nodes"] = k.nodes;
                                 d["vectorized"] = k.vectorized;
                                 d["schedule"] = k.schedule;
                                 if (k.cost) {
                                   // Constant counts as ints, symbolic ones as their expression.
                                   auto count = [](const ir::IndexExpr& e) -> py::object {
                                     if (auto c = e.constant()) return py::int_(*c);
                                     return py::str(e.str());
                                   };
                                   d["bytes_read"] = count(k.cost->bytes_read);
                                   d["bytes_written"] = count(k.cost->bytes_written);
                                   d["flops"] = count(k.cost->flops);
                                 }
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("kernel_devices",
                             [](const CompiledGraph& cg) {
                               std::vector<std::string> devices;
                               for (const auto& k : cg.kernels) devices.push_back(k->device());
                               return devices;
                             })
      .def_property_readonly("kernel_names",
                             [](const CompiledGraph& cg) {
                               std::vector<std::string> names;
                               for (const auto& k : cg.kernels) names.push_back(k->name());
                               return names;
                             })
      .def(
          "allocation",
          [](const CompiledGraph& cg, int step, int index, const std::vector<int64_t>& symbols) {
            return layout_tuple(cg, cg.steps.at(step).allocs.at(index), symbols);
          },
          "(dtype, sizes, strides, device) of a buffer a step allocates, given the symbol values.")
      .def(
          "expected_layout",
          [](const CompiledGraph& cg, int step, int index, const std::vector<int64_t>& symbols) {
            return layout_tuple(cg, cg.steps.at(step).expected_layouts.at(index), symbols);
          },
          "(dtype, sizes, strides, device) a kernel step expects of a tensor made outside our kernels.")
      .def(
          "kernel_launcher",
          [](const CompiledGraph& cg, int kernel, int num_buffers) {
            return python::make_kernel_launcher(cg.kernels.at(kernel), num_buffers);
          },
          py::arg("kernel"), py::arg("num_buffers"),
          "launch(*buffers[, symbols[, stream]]): runs compiled kernel `kernel` on `num_buffers` tensors "
          "(backend/python/kernel_launcher.h).")
      .def(
          "kernel_tuning",
          [](const CompiledGraph& cg, int kernel) -> py::object {
            if (kernel < 0 || size_t(kernel) >= cg.tuning.size() || cg.tuning[kernel].key.empty()) return py::none();
            const KernelTuning& t = cg.tuning[kernel];
            py::dict d;
            d["key"] = t.key;
            d["candidates"] = candidate_list(t.candidates);
            d["cached_label"] = t.cached_label;
            d["cached_schedule"] = t.cached_schedule;
            d["problem"] = t.problem;
            d["written"] = t.written;
            d["read_written"] = t.read_written;
            d["symbol_positions"] = t.symbol_positions;
            return d;
          },
          py::arg("kernel"),
          "max-autotune: kernel `kernel`'s candidates [(label, schedule)], its cache entry (key, cached_label, "
          "cached_schedule, problem), the positions of the buffers it writes (written) and also reads "
          "(read_written), and of its size symbols among the graph's (symbol_positions: tuned per size "
          "bucket when not empty); None if not tuned "
          "(backend/autotune.h).")
      .def_property_readonly(
          "gemm_choices",
          [](const CompiledGraph& cg) {
            py::list out;
            for (const GemmChoice& c : cg.gemm_choices) {
              py::dict d;
              d["aten_step"] = c.aten_step;
              d["kernel_step"] = c.kernel_step;
              d["a_slot"] = c.a_slot;
              d["b_slot"] = c.b_slot;
              d["bias_slot"] = c.bias_slot;
              d["result_arg"] = c.result_arg;
              d["a_strides"] = py::tuple(py::cast(c.a_strides));
              d["b_strides"] = py::tuple(py::cast(c.b_strides));
              d["scale_a_slot"] = c.scale_a_slot;
              d["scale_b_slot"] = c.scale_b_slot;
              d["scale_a_strides"] = py::tuple(py::cast(c.scale_a_strides));
              d["scale_b_strides"] = py::tuple(py::cast(c.scale_b_strides));
              d["out_dtype"] = std::string(dtype_name(c.out_dtype));
              d["fast_accum"] = c.fast_accum;
              d["key"] = c.key;
              d["candidates"] = candidate_list(c.candidates);
              d["cached_label"] = c.cached_label;
              d["written"] = c.written;
              d["read_written"] = c.read_written;
              out.append(d);
            }
            return out;
          },
          "max-autotune: the matmuls that may run fused with the kernel reading their result "
          "(backend/gemm_choices.h), as dicts: the steps, the operands' slots (bias_slot -1 for mm; scale_a_slot and "
          "scale_b_slot -1 but for _scaled_mm, with its out_dtype and fast_accum) and compiled strides, the result's "
          "position among the kernel's buffers, the tuning key, the candidates [(label, schedule)] (the first the "
          "extern and the kernel, unless cached_label names the winner), and the kernel's written buffers.")
      .def_readonly("gemm_problem", &CompiledGraph::gemm_problem)
      .def(
          "gemm_launcher",
          [](const CompiledGraph& cg, int choice, int candidate, int num_buffers) {
            const auto& handle = cg.gemm_choices.at(choice).candidates.at(candidate).kernel;
            if (!handle) throw py::value_error("gemm_launcher: that candidate is the extern's, not a kernel");
            return python::make_kernel_launcher(handle, num_buffers);
          },
          py::arg("choice"), py::arg("candidate"), py::arg("num_buffers"),
          "A launcher (as kernel_launcher) of GEMM candidate `candidate` of choice `choice`: the kernel's buffers, "
          "then A, B and (addmm) the bias.")
      .def(
          "candidate_launcher",
          [](const CompiledGraph& cg, int kernel, int candidate, int num_buffers) {
            return python::make_kernel_launcher(cg.tuning.at(kernel).candidates.at(candidate).kernel, num_buffers);
          },
          py::arg("kernel"), py::arg("candidate"), py::arg("num_buffers"),
          "A launcher (as kernel_launcher) for candidate `candidate` of kernel `kernel`.")
      .def(
          "wait_for_candidate",
          [](const CompiledGraph& cg, int kernel, int candidate) {
            const auto& handle = cg.tuning.at(kernel).candidates.at(candidate).kernel;
            if (const auto* cpu_handle = dynamic_cast<const cpu::CpuKernelHandle*>(handle.get())) {
              py::gil_scoped_release unlocked;
              cpu_handle->module();  // throws CompilerError if its module failed to compile
            }
          },
          py::arg("kernel"), py::arg("candidate"),
          "Waits until candidate `candidate` of kernel `kernel` is compiled; raises CompilerError if it is not.");
  m.attr("TUNING_CACHE_HEADER") = kTuningCacheHeader;
  m.def(
      "write_tuning_entry",
      [](const std::string& key, const std::string& payload) {
        if (Status s = write_tuning_entry(key, payload); !s) raise(s.error());
      },
      py::arg("key"), py::arg("payload"),
      "Writes a max-autotune cache entry atomically under <cache dir>/autotune (backend/autotune.h).");
  m.def(
      "read_tuning_winner",
      [](const std::string& key) -> py::tuple {
        std::string problem;
        auto schedule = read_tuning_winner(key, &problem);
        return py::make_tuple(schedule ? py::cast(*schedule) : py::none(), problem);
      },
      py::arg("key"),
      "(winner's schedule line or None, problem): the max-autotune cache entry `key` (backend/autotune.h).");
  m.def("make_pointer_check", &python::make_pointer_check, py::arg("expected"),
        "check(args) -> bool: whether args[i] has data pointer p for each (i, p) (kernel_launcher.h).");
  m.def(
      "scan_cached",
      [](py::handle tensors, py::handle storage_ids, py::handle versions, py::handle data_ptrs,
         py::handle storage_use_count, bool with_changed) {
        python::CachedScan scan =
            python::scan_cached(tensors, storage_ids, versions, data_ptrs, storage_use_count, with_changed);
        return py::make_tuple(scan.reached, scan.held, scan.changed);
      },
      py::arg("tensors"), py::arg("storage_ids"), py::arg("versions"), py::arg("data_ptrs"),
      py::arg("storage_use_count"), py::arg("with_changed") = true,
      "(reached, held, changed) over a CUDA-graph recording's cached outputs: whether a storage is reached by "
      "more than its output (a view, a .grad), the indices of outputs held, and of those not held that a former "
      "holder changed (empty unless with_changed; cudagraph_outputs.h).");
  m.def("set_tensor_data_ptr_function", &python::set_tensor_data_ptr_function, py::arg("address"),
        py::arg("tensor_type"), "Kernel launchers read tensors' data pointers through torch's function at `address`.");

  // CPU runtime: kernels run on torch's own OpenMP threads (cpu_codegen/jit/runtime.h).
  m.def(
      "set_openmp_library", [](const std::string& path) { cpu::set_openmp_library(path).throw_if_error(); },
      "Runs parallel loops on this libgomp (torch's).");
  m.def("openmp_library", &cpu::openmp_library);
  m.def("set_num_threads", &cpu::set_num_threads, "Threads per parallel loop (torch.get_num_threads()).");
  m.def("get_num_threads", &cpu::get_num_threads);
  m.def("has_clang_jit", &cpu::has_clang_jit);
  m.def(
      "host_cpu_isas",
      [] {
        std::vector<std::string> out;
        for (CpuIsa isa : host_cpu_isas()) out.push_back(to_string(isa));
        return out;
      },
      "The cpu_isa values this host runs, widest first (empty off x86-64 or without AVX2).");
  m.def(
      "resolve_cpu_isa",
      [](const std::string& name) {
        Options o = unwrap(Options::from_desc(to_desc(py::dict(py::arg("cpu_isa") = name))));
        return unwrap(resolve_cpu_isa(o.cpu_isa)).name;
      },
      py::arg("name"), "The ISA CPU kernels are generated for under cpu_isa=`name` on this host ('avx512', 'avx2').");
  m.def(
      "wait_for_background_compiles",
      [] {
        py::gil_scoped_release release;
        cpu::wait_for_background_compiles();
      },
      "Blocks until every kernel compile running in the background has finished.");
  // A compile thread must not run into the destruction of LLVM's statics.
  py::module_::import("atexit").attr("register")(m.attr("wait_for_background_compiles"));
  m.def(
      "cpu_compiler_stats",
      [] {
        cpu::CompilerStats s = cpu::compiler_stats();
        py::dict d;
        d["modules_compiled"] = s.modules_compiled;
        d["compile_errors"] = s.compile_errors;
        d["memory_cache_hits"] = s.memory_cache_hits;
        d["disk_cache_hits"] = s.disk_cache_hits;
        d["disk_cache_corrupt"] = s.disk_cache_corrupt;
        d["frontend_ms"] = s.frontend_ms;
        d["optimize_ms"] = s.optimize_ms;
        d["codegen_ms"] = s.codegen_ms;
        d["link_ms"] = s.link_ms;
        return d;
      },
      "Process-wide CPU compiler counters.");
  m.def("reset_cpu_compiler_stats", &cpu::reset_compiler_stats);
  m.def(
      "cpu_cache_dir", [] { return unwrap(cache_dir()); },
      "The on-disk kernel cache directory (validated: owned by you, not writable by others).");

  // CUDA runtime: NVRTC comes from torch's CUDA wheel (found by the Python side).
  m.def(
      "set_nvrtc_library", [](const std::string& path) { gpu::set_nvrtc_library(path).throw_if_error(); },
      "Compiles CUDA kernels with this libnvrtc.");
  m.def("nvrtc_available", [] { return gpu::nvrtc_available(); });
  m.def("cuda_driver_available", [] { return gpu::cuda_driver_available(); });

  m.def(
      "generate_cuda_source",
      [](py::object desc, py::object options) {
        Options opts = unwrap(Options::from_desc(to_desc(options)));
        Graph g = unwrap(import_graph(to_desc(desc)));
        return unwrap(generate_cuda_source(std::move(g), opts));
      },
      py::arg("graph"), py::arg("options") = py::none(),
      "The CUDA source for a graph on CUDA, scheduled for a default target; no GPU needed.");
  m.def(
      "compile_cuda_source",
      [](const std::string& source, int compute_capability) {
        return unwrap(gpu::compile_to_ptx(source, "cppinductor_dry_run.cu", compute_capability,
                                          gpu::with_codegen_header({})));
      },
      py::arg("source"), py::arg("compute_capability") = 90,
      "PTX of CUDA source through NVRTC (no GPU needed): the check that generate_cuda_source's output compiles.");
  m.def(
      "cuda_codegen_header", [] { return gpu::cuda_codegen_header().text; },
      "The text of cppinductor_cuda_codegen.cuh, which generated CUDA modules include (for tools that compile "
      "them with NVRTC themselves).");

  m.def(
      "compile_graph",
      [](py::object desc, py::object options) {
        Options opts = unwrap(Options::from_desc(to_desc(options)));
        Graph g = unwrap(import_graph(to_desc(desc)));
        // Compile without the GIL; raise (which needs the GIL) only after.
        std::optional<Expected<CompiledGraph>> compiled;
        {
          py::gil_scoped_release release;
          compiled.emplace(compile_graph(std::move(g), opts));
        }
        return unwrap(std::move(*compiled));
      },
      py::arg("graph"), py::arg("options") = py::none(),
      "Compiles an exported ATen graph; raises UnsupportedError when it cannot.");
}
