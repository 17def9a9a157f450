// Tests for the CUDA printer's output where it runs (schedule decisions and
// checks on the source are gpu_source_test.cpp):
// - NVRTC compiles every generated test kernel (skips without NVRTC);
// - on a GPU, kernels run on random data (odd sizes, NaN and inf) under every
//   mapping the printer supports and are compared with the IR reference
//   interpreter run on the host (skips without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "gpu_codegen/cuda_kernels.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/codegen/gpu_schedule_candidates.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "gpu_test_kernels.h"
#include "lowering/ir/scalar_convert.h"

namespace cppi::gpu {
namespace {

using namespace ir;
using namespace testing;

bool have_nvrtc() {
  static const bool available = [] {
    const char* env = std::getenv("CPPINDUCTOR_NVRTC_LIBRARY");
    if ((!env || !*env) && *CPPI_TEST_NVRTC_LIBRARY) (void)set_nvrtc_library(CPPI_TEST_NVRTC_LIBRARY);
    return nvrtc_available();
  }();
  return available;
}

#define REQUIRE_NVRTC() \
  if (!have_nvrtc()) GTEST_SKIP() << "no NVRTC: " << nvrtc().error().message
#define REQUIRE_GPU()                                                                \
  REQUIRE_NVRTC();                                                                   \
  if (!cuda_driver_available()) GTEST_SKIP() << "no GPU: " << cuda_driver().error().message

// --- every kernel under every mapping it supports ------------------------------------------------

struct Case {
  std::string label;
  KernelPtr kernel;
  std::vector<int64_t> symbols;  // s0, s1
};

/// Forced schedules: each mapping the printer supports for the kernel.
std::vector<KernelPtr> mapping_variants(const KernelPtr& k) {
  std::vector<KernelPtr> out = {scheduled(k)};
  bool loops = false;
  for (const auto& s : k->stages) loops |= !std::visit([](const auto& st) { return st.loops.empty(); }, s);
  if (!loops) {
    out.push_back(with_gpu(k, GpuMapping::GridStridePointwise, 128, 1));
    return out;
  }
  out.push_back(with_gpu(k, GpuMapping::ColumnReduction, 64, 1));
  out.push_back(with_column_groups(k, 4));
  out.push_back(with_column_groups(k, 32));
  out.push_back(with_gpu(k, GpuMapping::RowPerWarp, 64, 0));
  out.push_back(with_gpu(k, GpuMapping::RowPerBlock, 128, 0));
  out.push_back(with_gpu(k, GpuMapping::RowPerBlock, 1024, 0));
  return out;
}

std::vector<Case> all_cases() {
  const IndexExpr s0 = sym("s0"), s1 = sym("s1");
  std::vector<Case> c = {
      {"add_relu_mul_f32", add_relu_mul(s0, s1), {37, 1004}},
      {"add_relu_mul_f32_odd", add_relu_mul(s0, s1), {5, 1001}},
      {"add_relu_mul_f16", add_relu_mul(s0, s1, DType::Float16), {9, 520}},
      {"add_relu_mul_bf16", add_relu_mul(s0, s1, DType::BFloat16), {9, 520}},
      {"sin_plus_cos", sin_plus_cos(s0), {100003, 1}},
      {"gelu_bias", gelu_bias(s0, s1), {33, 256}},
      {"rounded_chain_bf16", rounded_chain(s0, s1, DType::BFloat16), {33, 264}},
      {"rounded_chain_f16_odd", rounded_chain(s0, s1, DType::Float16), {33, 263}},
      {"pad_columns_flat", pad_columns(s0, 1001, 3, 5), {8}},  // 8 x 1009 elements: flat vectors
      {"pad_columns_flat_odd", pad_columns(s0, 1001, 3, 5), {7}},  // 7 x 1009: the scalar twin
      {"pad_columns_flat_halved", pad_columns(s0, 1001, 3, 5, /*halved=*/true), {12}},
      {"pad_columns_by_rows", pad_columns(s0, 1001, 3, 4), {5}},  // 1008 columns: masked lanes one by one
      {"cat_columns", cat_columns(s0, 64, 36), {9}},
      {"cat_columns_uneven", cat_columns(s0, 6, 10), {9}},  // lanes straddle the bound
      {"cat_columns_symbolic", cat_columns(s0, s1, s1), {9, 64}},
      {"cat_columns_symbolic_odd", cat_columns(s0, s1, s1), {9, 66}},  // bound 66: the scalar twin
      {"nan_to_index", nan_to_index(s0, s1), {7, 129}},
      {"scatter_add_rows_f32", scatter_add_rows(s0, 7, s1), {300, 129}},
      {"scatter_add_rows_f64", scatter_add_rows(s0, 3, s1, DType::Float64), {200, 64}},
      {"scatter_add_rows_i64", scatter_add_rows(s0, 5, s1, DType::Int64), {100, 33}},
      {"row_sum", row_reduce(ReductionKind::Sum, s0, s1), {67, 1003}},
      {"row_max", row_reduce(ReductionKind::Max, s0, s1), {67, 77}},
      {"row_min", row_reduce(ReductionKind::Min, s0, s1), {13, 3000}},
      {"row_argmax", row_reduce(ReductionKind::ArgMax, s0, s1), {67, 999}},
      {"row_argmin", row_reduce(ReductionKind::ArgMin, s0, s1), {31, 2050}},
      {"row_any", row_any_positive(s0, s1), {40, 33}},
      {"column_sum", column_sum(s0, s1), {1001, 67}},
      {"softmax_sym", softmax(s0, s1), {37, 1500}},
      {"softmax_f16_sym", softmax(s0, s1, DType::Float16), {37, 700}},
      {"layer_norm_sym", layer_norm(s0, s1), {21, 4099}},
      {"var_mean_sym", var_mean(s0, s1), {29, 2047}},
      // Constant shapes: the schedule caches rows in registers.
      {"softmax_warp_cached", softmax(45, 1000), {}},
      {"dropout_noise", dropout_noise(s0, s1), {33, 257}},
      {"softmax_block_cached", softmax(19, 4096), {}},
      {"softmax_block_cached_odd", softmax(19, 3001), {}},
      {"layer_norm_cached", layer_norm(23, 1537), {}},
      {"layer_norm_bf16_cached", layer_norm(23, 768, DType::BFloat16), {}},
      {"var_mean_cached", var_mean(17, 5000), {}},
      {"residual_layer_norm_bf16", residual_layer_norm(41, 768, DType::BFloat16, 5, false), {}},
      {"residual_layer_norm_stored", residual_layer_norm(41, 768, DType::BFloat16, 4, true), {}},
      {"residual_layer_norm_f32_odd", residual_layer_norm(23, 1001, DType::Float32, 3, true), {}},
      {"chained_stores", chained_stores(37, 520), {}},
      {"row_argmax_cached", row_reduce(ReductionKind::ArgMax, 33, 129), {}},
      {"column_sum_const", column_sum(300, 1000), {}},
      {"column_welford", column_reduce(ReductionKind::Welford, s0, s1), {1003, 45}},
      {"column_argmax", column_reduce(ReductionKind::ArgMax, s0, s1), {517, 70}},
      {"column_min", column_reduce(ReductionKind::Min, s0, s1), {64, 33}},
      {"middle_sum_scale", middle_sum_scale(s0, 301, s1), {3, 37}},
      {"two_column_reductions", two_column_reductions(s0, s1), {1003, 70}},
      {"four_load_row_sums_cached", four_load_row_sums(37, 1000), {}},
      {"sum_and_halved_difference", sum_and_halved_difference(s0, s1), {7, 300}},
      {"add_relu_mul_const", add_relu_mul(64, 1024), {}},
      {"host_scalar_scale", host_scalar_scale(s0, s1), {37, 1004}},
      {"host_scalar_row_sum", host_scalar_row_sum(s0, s1), {67, 1003}},
  };
  return c;
}

/// Every test kernel once, with distinct names.
std::vector<KernelPtr> every_test_kernel() {
  std::vector<KernelPtr> kernels;
  int n = 0;
  for (const auto& c : all_cases()) {
    for (const auto& k : mapping_variants(c.kernel)) {
      Schedule s = k->schedule;
      kernels.push_back(Kernel::make(cat(k->name, "_", n++), k->device, k->outer, k->stages, s, k->origins));
    }
  }
  return kernels;
}

TEST(CudaNvrtc, EveryTestKernelCompiles) {
  REQUIRE_NVRTC();
  auto m = print_cuda_module(every_test_kernel(), kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto ptx = compile_cuda(m->source, "gpu_codegen_test.cu", 90, with_codegen_header({}));
  ASSERT_TRUE(ptx.ok()) << ptx.error().message;
  EXPECT_NE(ptx->ptx.find(".entry softmax"), std::string::npos);
  // 128-bit vector loads made it into the PTX, and shuffles for warp reductions.
  EXPECT_NE(ptx->ptx.find("ld.global.v4.f32"), std::string::npos);
  EXPECT_NE(ptx->ptx.find("shfl.sync.bfly"), std::string::npos);
  // Philox rounds: 32x32 -> high word multiplies.
  EXPECT_NE(ptx->ptx.find(".entry dropout_noise"), std::string::npos);
  EXPECT_NE(ptx->ptx.find("mul.hi.u32"), std::string::npos);
  // No fast math (libdevice's expf still uses ex2.approx inside its accurate
  // range reduction, so the PTX alone cannot show it).
  for (const auto& flag : nvrtc_flags(ptx->arch, {})) EXPECT_EQ(flag.find("fast_math"), std::string::npos) << flag;
  EXPECT_EQ(ptx->log.find("warning"), std::string::npos) << ptx->log.substr(0, 2000);
}

TEST(CudaModuleSplit, ProgramsAreRunsOfWholeKernelsInOrder) {
  auto m = print_cuda_module(every_test_kernel(), kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const size_t n = m->kernels.size();
  ASSERT_GE(n, 4 * kMinKernelsPerProgram);
  for (size_t asked : {size_t(1), size_t(3), size_t(8), n}) {
    const ModulePrograms split = split_module(*m, asked);
    const size_t programs = split.sources.size();
    EXPECT_EQ(programs, std::min(asked, n / kMinKernelsPerProgram)) << asked;
    ASSERT_EQ(split.first_kernel.size(), programs);
    EXPECT_EQ(split.first_kernel[0], 0u);
    // The programs, each without its preamble, are the module's kernels in order.
    std::string kernels_text;
    for (size_t p = 0; p < programs; ++p) {
      ASSERT_EQ(split.sources[p].rfind(m->preamble, 0), 0u) << p;
      kernels_text += split.sources[p].substr(m->preamble.size());
      const size_t end = p + 1 < programs ? split.first_kernel[p + 1] : n;
      EXPECT_GE(end - split.first_kernel[p], kMinKernelsPerProgram) << asked << " " << p;
      for (size_t k = split.first_kernel[p]; k < end; ++k)
        EXPECT_NE(split.sources[p].find(cat("\n", m->kernels[k].name, "(")), std::string::npos) << k;
    }
    EXPECT_EQ(m->preamble + kernels_text, m->source);
  }
  // Too few kernels to split: one program.
  auto small = print_cuda_module({scheduled(add_relu_mul(64, 1024))}, kSymbols);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(split_module(*small, 8).sources.size(), 1u);
}

TEST(CudaNvrtc, EveryProgramOfASplitModuleCompilesToACubin) {
  REQUIRE_NVRTC();
  auto m = print_cuda_module(every_test_kernel(), kSymbols);
  ASSERT_TRUE(m.ok()) << m.error().message;
  NvrtcOptions o = with_codegen_header({});
  o.cubin = true;
  const ModulePrograms split = split_module(*m, 3);
  ASSERT_EQ(split.sources.size(), 3u);
  for (size_t p = 0; p < split.sources.size(); ++p) {
    auto program = compile_cuda(split.sources[p], cat("split_", p, ".cu"), 90, o);
    ASSERT_TRUE(program.ok()) << program.error().message;
    EXPECT_FALSE(program->cubin.empty());
    EXPECT_NE(program->cubin.find(m->kernels[split.first_kernel[p]].name), std::string::npos);
  }
}

TEST(CudaNvrtc, VectorStoresAreOneInstruction) {
  REQUIRE_NVRTC();
  // A store of a lane-by-lane filled cppi_vec came out as four st.global.f32
  // when copied as a struct (or as float4/uint4) to an unravelled 3-d index;
  // through cppi_store_vec it is one st.global.v4. The f16 kernel stores 8
  // halves: one 16-byte store too.
  const std::vector<KernelPtr> kernels = {gelu_backward_3d(16, 1024, 4096), gelu_bias(4096, 4096, DType::Float16)};
  for (const auto& k : kernels) {
    auto m = print_cuda_module({scheduled(k)}, kSymbols);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto ptx = compile_cuda(m->source, "vector_stores.cu", 90, with_codegen_header({}));
    ASSERT_TRUE(ptx.ok()) << ptx.error().message;
    const std::string& text = ptx->ptx;
    EXPECT_NE(text.find("st.global.v4."), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.f32"), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.b16"), std::string::npos) << k->name;
    EXPECT_EQ(text.find("st.global.u16"), std::string::npos) << k->name;
  }
}

// --- on a GPU: compare with the reference interpreter ----------------------------------------------

struct HostBuffer {
  BufferPtr buffer;
  std::vector<unsigned char> bytes;
  size_t count = 0;
};

float random_float(std::mt19937& rng, bool specials) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  if (specials) {
    const unsigned r = rng() % 1000;
    if (r == 0) return std::nanf("");
    if (r == 1) return INFINITY;
    if (r == 2) return -INFINITY;
  }
  return u(rng);
}

void fill_random(HostBuffer& h, std::mt19937& rng, bool specials) {
  unsigned char* p = h.bytes.data();
  for (size_t i = 0; i < h.count; ++i) {
    const float f = random_float(rng, specials);
    switch (h.buffer->dtype) {
      case DType::Float32: std::memcpy(p + 4 * i, &f, 4); break;
      case DType::Float16: {
        uint16_t b = float_to_half(f);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::BFloat16: {
        uint16_t b = float_to_bf16(f);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::Float64: {
        const double d = f;
        std::memcpy(p + 8 * i, &d, 8);
        break;
      }
      case DType::Int64: {  // a random seed
        const int64_t v = (static_cast<int64_t>(rng()) << 32) | rng();
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      default: FAIL() << "no random fill for " << dtype_name(h.buffer->dtype);
    }
  }
}

double element(const HostBuffer& h, size_t i) {
  const unsigned char* p = h.bytes.data();
  switch (h.buffer->dtype) {
    case DType::Float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::Float64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case DType::Float16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return half_to_float(b);
    }
    case DType::BFloat16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return bf16_to_float(b);
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
    case DType::Bool: return p[i];
    default: return NAN;
  }
}

/// Runs `k` on the GPU and in the interpreter on the same random inputs.
/// Runs `k` on random inputs (`launches` times in a row, which must give the
/// same result: module state resets) and compares with the interpreter.
/// `eighths`: float inputs are multiples of 1/8, so sums of their products
/// below 2^18 are exact in float32 in any order and the comparison checks
/// which elements were summed, not the interpreter's sequential rounding.
void run_and_compare(const std::string& label, const KernelPtr& k, const std::vector<int64_t>& symbol_values,
                     bool specials, unsigned seed, int launches = 1, bool eighths = false) {
  SCOPED_TRACE(label + " [" + to_string(k->schedule.gpu.mapping) + " block " +
               std::to_string(k->schedule.gpu.block_size) + " ept " +
               std::to_string(k->schedule.gpu.elements_per_thread) + " tpc " +
               std::to_string(k->schedule.gpu.threads_per_column) + "]");
  IndexBindings bindings;
  std::vector<int64_t> syms = symbol_values;
  syms.resize(kSymbols.size(), 1);
  for (size_t i = 0; i < kSymbols.size(); ++i) bindings[kSymbols[i]] = syms[i];
  auto sig = signature(*k);
  std::mt19937 rng(seed);
  std::vector<HostBuffer> host, ref;
  for (const auto& a : sig.buffers) {
    HostBuffer h;
    h.buffer = a.buffer;
    h.count = static_cast<size_t>(evaluate(a.buffer->layout.storage_size(), bindings));
    h.bytes.assign(h.count * dtype_size(a.buffer->dtype), 0x7F);  // poison: unwritten outputs show
    if (!a.written || a.read) fill_random(h, rng, specials);  // what an accumulating store adds to
    if (!a.written && eighths && h.buffer->dtype == DType::Float32) {
      for (size_t i = 0; i < h.count; ++i) {
        float f;
        std::memcpy(&f, h.bytes.data() + 4 * i, 4);
        f = std::round(f * 8.0f) / 8.0f;
        std::memcpy(h.bytes.data() + 4 * i, &f, 4);
      }
    }
    host.push_back(std::move(h));
  }
  ref = host;
  InterpreterArgs args;
  args.symbols = bindings;
  for (auto& r : ref) args.buffers[r.buffer->name] = r.bytes.data();
  Status st = interpret(*k, args);
  ASSERT_TRUE(st.ok()) << st.error().message;

  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  std::vector<DeviceBuffer> dev;
  std::vector<void*> ptrs;
  for (auto& h : host) {
    auto b = DeviceBuffer::allocate(h.bytes.size());
    if (is_host_scalar(*h.buffer, Device::CUDA)) {
      ptrs.push_back(h.bytes.data());  // the argument is the value, read from host memory at launch
      ASSERT_TRUE(b.ok()) << b.error().message;
      dev.push_back(std::move(*b));    // unused: keeps dev[b] beside host[b]
      continue;
    }
    ASSERT_TRUE(b.ok()) << b.error().message;
    ASSERT_TRUE(b->upload(h.bytes.data(), h.bytes.size()).ok());
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(b->ptr())));
    dev.push_back(std::move(*b));
  }
  for (int i = 0; i < launches; ++i) compiled->kernels[0]->run(ptrs.data(), syms.data(), 0);
  Status sync = synchronize_context();
  ASSERT_TRUE(sync.ok()) << sync.error().message;
  const bool reduction = k->stages.size() > 1 || std::holds_alternative<ReductionStage>(k->stages[0]);
  // Welford over an inf is NaN or inf by where the inf falls in the fold
  // order: an inf folded last leaves the mean at inf, one followed by finite
  // values gives inf - inf. Eager's own var_mean does both
  // (var_mean([inf, 1, 2, 3]) has mean NaN, of the flipped tensor inf), so
  // a tree of partials may end at inf where the interpreter's sequential
  // fold reached NaN.
  bool welford = false;
  for (const auto& stage : k->stages) {
    auto r = std::get_if<ReductionStage>(&stage);
    welford |= r && r->kind == ReductionKind::Welford;
  }
  for (size_t b = 0; b < host.size(); ++b) {
    if (!sig.buffers[b].written) continue;
    ASSERT_TRUE(dev[b].download(host[b].bytes.data(), host[b].bytes.size()).ok());
    const DType t = host[b].buffer->dtype;
    const double rtol = t == DType::Float16 ? 2e-3 : t == DType::BFloat16 ? 1.6e-2 : reduction ? 1e-4 : 1.3e-5;
    const double atol = t == DType::Float16 ? 1e-3 : t == DType::BFloat16 ? 1e-2 : reduction ? 1e-4 : 1.5e-5;
    int bad = 0;
    for (size_t i = 0; i < host[b].count && bad < 5; ++i) {
      const double got = element(host[b], i), want = element(ref[b], i);
      const bool ok = (std::isnan(got) && std::isnan(want)) || got == want ||
                      (welford && specials && std::isinf(got) && std::isnan(want)) ||
                      (std::isfinite(want) && std::abs(got - want) <= atol + rtol * std::abs(want));
      if (!ok) {
        ++bad;
        ADD_FAILURE() << host[b].buffer->name << "[" << i << "]: gpu " << got << " vs reference " << want;
      }
    }
  }
}

TEST(CudaRun, EveryMappingMatchesTheInterpreter) {
  REQUIRE_GPU();
  unsigned seed = 1;
  for (const auto& c : all_cases()) {
    for (const auto& k : mapping_variants(c.kernel)) {
      run_and_compare(c.label, k, c.symbols, /*specials=*/false, seed++);
      run_and_compare(c.label + " (NaN/inf)", k, c.symbols, /*specials=*/true, seed++);
    }
  }
}

// max-autotune's candidates (gpu_schedule_candidates.h): the heuristic's
// first, each schedule once, and each computing what the interpreter does.
TEST(GpuScheduleCandidates, TheHeuristicComesFirstAndEveryScheduleOnce) {
  for (const KernelPtr& k : {softmax(19, 4096), column_sum(300, 1000), add_relu_mul(64, 1024)}) {
    const auto candidates = gpu_schedule_candidates(k, GpuTarget{}, 16);
    ASSERT_GE(candidates.size(), 2u) << k->name;
    EXPECT_EQ(candidates[0].label, "heuristic");
    EXPECT_EQ(describe_gpu_schedule(candidates[0].kernel->schedule.gpu),
              describe_gpu_schedule(schedule_for_gpu(k, GpuTarget{})->schedule.gpu));
    std::set<std::string> seen;
    for (size_t j = 0; j < candidates.size(); ++j) {
      EXPECT_TRUE(seen.insert(describe_gpu_schedule(candidates[j].kernel->schedule.gpu)).second) << candidates[j].label;
      if (j > 0) EXPECT_EQ(candidates[j].kernel->name, cat(k->name, "_c", j));
    }
  }
}

TEST(CudaRun, EveryScheduleCandidateMatchesTheInterpreter) {
  REQUIRE_GPU();
  unsigned seed = 1000;
  for (const auto& c : all_cases()) {
    for (const auto& candidate : gpu_schedule_candidates(c.kernel, GpuTarget{}, 16)) {
      run_and_compare(c.label + " as " + candidate.label, candidate.kernel, c.symbols, /*specials=*/false, seed++);
    }
  }
}

TEST(CudaRun, SplitRowsMatchTheInterpreterLaunchAfterLaunch) {
  REQUIRE_GPU();
  for (ReductionKind kind : {ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min}) {
    auto k = scheduled(row_reduce(kind, 3, 100003));
    ASSERT_GT(k->schedule.gpu.row_splits, 1) << to_string(kind);
    run_and_compare(cat("split ", to_string(kind)), k, {}, /*specials=*/false, 7);
    run_and_compare(cat("split ", to_string(kind), " (NaN/inf)"), k, {}, /*specials=*/true, 8);
  }
  // One module launched again and again: the arrival counters reset.
  auto k = scheduled(row_reduce(ReductionKind::Sum, 1, 1 << 20));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const KernelSignature sig = signature(*k);
  auto x = DeviceBuffer::allocate(sizeof(float) << 20), out = DeviceBuffer::allocate(sizeof(float));
  ASSERT_TRUE(x.ok() && out.ok());
  void* ptrs[2];
  for (size_t i = 0; i < 2; ++i) {
    const bool is_out = sig.buffers[i].buffer->name == "out";
    ptrs[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(is_out ? out->ptr() : x->ptr()));
  }
  for (int launch = 1; launch <= 3; ++launch) {
    std::vector<float> ones(1 << 20, static_cast<float>(launch));
    ASSERT_TRUE(x->upload(ones.data(), ones.size() * sizeof(float)).ok());
    compiled->kernels[0]->run(ptrs, nullptr, 0);
    float sum = 0;
    ASSERT_TRUE(synchronize_context().ok());
    ASSERT_TRUE(out->download(&sum, sizeof sum).ok());
    EXPECT_EQ(sum, static_cast<float>(launch) * (1 << 20)) << "launch " << launch;
  }
}

TEST(CudaRun, ScansMatchTheInterpreterLaunchAfterLaunch) {
  REQUIRE_GPU();
  // Eighths: every running sum is exact, whatever the order of the adds.
  // Rows in vectors, rows of 4098 (the scalar twin: 4098 % 4 != 0),
  // columns, and few long rows and columns split across blocks (each
  // launch takes new tickets: three in a row).
  const std::vector<std::pair<std::string, KernelPtr>> cases = {
      {"rows", scheduled(cumsum(40, 5000, 1))},
      {"rows of 4098", scheduled(cumsum(40, 4098, 1))},
      {"columns", scheduled(cumsum(3000, 70, 0))},
      {"split rows", scheduled(cumsum(3, 300000, 1))},
      {"split columns", scheduled(cumsum(20000, 40, 0))},
  };
  ASSERT_GT(cases[3].second->schedule.gpu.row_splits, 1);
  ASSERT_GT(cases[4].second->schedule.gpu.row_splits, 1);
  unsigned seed = 40;
  for (const auto& [name, k] : cases) {
    run_and_compare(name, k, {}, /*specials=*/false, ++seed, /*launches=*/3, /*eighths=*/true);
    run_and_compare(name + " (NaN/inf)", k, {}, /*specials=*/true, ++seed, /*launches=*/2, /*eighths=*/true);
  }
}

TEST(CudaRun, SplitReductionWithPointwiseInItsPassMatchesTheInterpreter) {
  REQUIRE_GPU();
  // Exact sums (eighths): 40000 differences up to 6 stay below 2^18.
  auto k = scheduled(sum_and_halved_difference(8, 5000));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  run_and_compare("split sum + pointwise", k, {}, /*specials=*/false, 31, /*launches=*/3, /*eighths=*/true);
  run_and_compare("split sum + pointwise (NaN/inf)", k, {}, /*specials=*/true, 32);
}

TEST(CudaRun, SplitColumnGroupsMatchTheInterpreterLaunchAfterLaunch) {
  REQUIRE_GPU();
  // 1000 columns (a partial group of 8) over 20000 rows, split; three
  // launches of one module: each resets the arrival counters for the next.
  // Exact sums (eighths): 20000 rows of products up to 9 stay below 2^18.
  auto k = scheduled(two_column_reductions(20000, 1000));
  ASSERT_GT(k->schedule.gpu.row_splits, 1);
  run_and_compare("split columns", k, {}, /*specials=*/false, 11, /*launches=*/3, /*eighths=*/true);
  run_and_compare("split columns (NaN/inf)", k, {}, /*specials=*/true, 12, /*launches=*/3, /*eighths=*/true);
  auto sum = scheduled(column_sum(30000, 96));
  ASSERT_GT(sum->schedule.gpu.row_splits, 1);
  run_and_compare("split column sum", sum, {}, /*specials=*/false, 13, /*launches=*/2, /*eighths=*/true);
}

TEST(CudaRun, MisalignedCachedRowsTakeTheScalarTwin) {
  REQUIRE_GPU();
  auto k = scheduled(var_mean(8, 1000));
  ASSERT_EQ(k->schedule.gpu.cache_vector, 4);
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const auto& h = *compiled->kernels[0];
  auto x = DeviceBuffer::allocate(8 * 1001 * 4), out = DeviceBuffer::allocate(8 * 1001 * 4);
  ASSERT_TRUE(x.ok() && out.ok());
  const KernelSignature sig = signature(*k);
  auto args = [&](int64_t shift) {
    std::vector<void*> p;
    for (const auto& a : sig.buffers) {
      const CUdeviceptr base = a.written ? (a.buffer->name == "var" ? out->ptr() : out->ptr() + 4096) : x->ptr() + shift;
      p.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(base)));
    }
    return p;
  };
  auto aligned = args(0), shifted = args(4);
  EXPECT_TRUE(h.plan(aligned.data(), nullptr).vectorized);
  EXPECT_FALSE(h.plan(shifted.data(), nullptr).vectorized);
  h.run(shifted.data(), nullptr, 0);
  ASSERT_TRUE(synchronize_context().ok());
  EXPECT_TRUE(h.scalar_twin_compiled());
  // Both variants against the interpreter (run_and_compare's buffers are aligned).
  run_and_compare("var_mean cached vectors", k, {}, /*specials=*/true, 21);
  run_and_compare("row sum cached vectors", scheduled(row_reduce(ReductionKind::Sum, 40, 2048)), {}, false, 23);
  // Rows stored as vectors: a warp per row and a block per row, and the
  // scalar twin forced (an output shifted by one element).
  for (const auto& ln : {scheduled(layer_norm(64, 1024)), scheduled(layer_norm(6, 4096)), scheduled(softmax(40, 2048))}) {
    ASSERT_GT(ln->schedule.gpu.cache_vector, 1) << ln->name;
    run_and_compare(ln->name + " cached vector stores", ln, {}, /*specials=*/true, 25);
  }
  auto ln = scheduled(layer_norm(64, 1024));
  auto ln_compiled = compile_cuda_kernels({ln}, kSymbols);
  ASSERT_TRUE(ln_compiled.ok()) << ln_compiled.error().message;
  const KernelSignature ln_sig = signature(*ln);
  auto buf = DeviceBuffer::allocate(ln_sig.buffers.size() * 64 * 1025 * 4);
  ASSERT_TRUE(buf.ok());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < ln_sig.buffers.size(); ++i) {
    const bool out = ln_sig.buffers[i].written;
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(buf->ptr() + i * 64 * 1025 * 4 + (out ? 4 : 0))));
  }
  EXPECT_FALSE(ln_compiled->kernels[0]->plan(ptrs.data(), nullptr).vectorized);
}

TEST(CudaRun, MisalignedViewsTakeTheScalarTwin) {
  REQUIRE_GPU();
  auto k = scheduled(sin_plus_cos(sym("s0")));
  auto compiled = compile_cuda_kernels({k}, kSymbols);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const auto& h = *compiled->kernels[0];
  auto x = DeviceBuffer::allocate(4096 * 4), out = DeviceBuffer::allocate(4096 * 4);
  ASSERT_TRUE(x.ok() && out.ok());
  void* aligned[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(out->ptr())),
                     reinterpret_cast<void*>(static_cast<uintptr_t>(x->ptr()))};
  void* shifted[] = {reinterpret_cast<void*>(static_cast<uintptr_t>(out->ptr() + 4)), aligned[1]};
  int64_t n_even[] = {4000, 1}, n_odd[] = {4001, 1};
  EXPECT_TRUE(h.plan(aligned, n_even).vectorized);
  EXPECT_FALSE(h.plan(shifted, n_even).vectorized);
  EXPECT_FALSE(h.plan(aligned, n_odd).vectorized);
  // Aligned launches never compile the twin; the first misaligned one does.
  h.run(aligned, n_even, 0);
  EXPECT_FALSE(h.scalar_twin_compiled());
  h.run(shifted, n_even, 0);
  EXPECT_TRUE(h.scalar_twin_compiled());
  ASSERT_TRUE(synchronize_context().ok());
  // And the scalar twin computes the right thing on the shifted view.
  run_and_compare("sin_plus_cos odd", k, {4001}, true, 99);
}

}  // namespace
}  // namespace cppi::gpu
