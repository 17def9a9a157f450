// gpu_codegen_bench: times generated CUDA kernels on large inputs against the
// device's copy bandwidth measured in the same run. Not a test; needs a GPU.
//
//   gpu_codegen_bench [--reps N] [--fast-compile off|min|mid|max] [--sources DIR]
//
// For each workload: schedule_for_gpu -> compile_cuda_kernels (NVRTC time
// with an empty PTX cache), inputs filled on the device with a hash-based
// uniform [-3, 3), 3 warm-up launches, then N launches each timed with CUDA
// events; the median is reported. GB/s counts the bytes each kernel must move
// (inputs read once, outputs written once). The copy reference is a 16-byte
// grid-stride copy kernel over 1 GiB (bytes read + written).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_codegen/cuda_kernels.h"
#include "gpu_codegen/codegen/cuda_printer.h"
#include "gpu_codegen/codegen/cuda_support.h"
#include "gpu_codegen/codegen/gpu_schedule.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "gpu_test_kernels.h"

using namespace cppi;
using namespace cppi::gpu;

namespace {

const char* kHelpers = R"(
#include "cppinductor_cuda_prelude.cuh"
__device__ __forceinline__ float uniform_hash(uint64_t i, uint32_t seed) {
  uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) ^ seed;
  h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
  return (float)(h >> 8) * (6.0f / 16777216.0f) - 3.0f;
}
extern "C" __global__ void fill_f32(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = uniform_hash(i, seed);
}
extern "C" __global__ void fill_f16(cppi_half* p, int64_t n, uint32_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = cppi_float_to_half(uniform_hash(i, seed));
}
struct alignas(16) v4 { float a, b, c, d; };
extern "C" __global__ void __launch_bounds__(256) copy16(const v4* src, v4* dst, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256) dst[i] = src[i];
}
)";

#define CHECK_OK(expr)                                                              \
  do {                                                                              \
    auto _s = (expr);                                                               \
    if (!_s.ok()) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, _s.error().message.c_str()); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

template <typename T>
T take(Expected<T> e) {
  if (!e.ok()) {
    std::fprintf(stderr, "error: %s\n", e.error().message.c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// Times `launch` with events: warm-up, then `reps` timed launches; median ms.
template <typename F>
double time_ms(F launch, int reps) {
  EventTimer timer = take(EventTimer::create());
  for (int i = 0; i < 3; ++i) launch();
  CHECK_OK(synchronize_context());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK_OK(timer.start(0));
    launch();
    CHECK_OK(timer.stop(0));
    ms.push_back(take(timer.elapsed_ms()));
  }
  return median(ms);
}

struct Helpers {
  CudaModule module;
  CudaKernel fill_f32, fill_f16, copy16;
};

void fill(const Helpers& h, const DeviceBuffer& b, DType t, uint32_t seed) {
  int64_t n = static_cast<int64_t>(b.bytes() / dtype_size(t));
  CUdeviceptr p = b.ptr();
  void* args[] = {&p, &n, &seed};
  CHECK_OK(launch(t == DType::Float16 ? h.fill_f16 : h.fill_f32, Dim3{1056, 1, 1}, Dim3{256, 1, 1}, 0, 0, args));
}

struct Row {
  std::string name, shape, schedule;
  double bytes = 0, ms = 0, nvrtc_ms = 0;
};

Row bench_kernel(const Helpers& h, const std::string& name, const std::string& shape, const ir::KernelPtr& k,
                 int reps, const NvrtcOptions& nvrtc, bool reschedule) {
  GpuTarget target = take(GpuTarget::current());
  ir::KernelPtr s = reschedule ? schedule_for_gpu(k, target) : k;
  clear_ptx_cache();
  CudaKernelOptions options;
  options.nvrtc = nvrtc;
  CompiledCudaKernels compiled = take(compile_cuda_kernels({s}, {}, options));
  const auto& handle = *compiled.kernels[0];
  auto sig = ir::signature(*s);
  std::vector<DeviceBuffer> bufs;
  std::vector<void*> ptrs;
  double bytes = 0;
  uint32_t seed = 1;
  for (const auto& a : sig.buffers) {
    const int64_t n = ir::evaluate(a.buffer->layout.storage_size(), {});
    const size_t size = static_cast<size_t>(n) * dtype_size(a.buffer->dtype);
    DeviceBuffer b = take(DeviceBuffer::allocate(size));
    if (a.read) fill(h, b, a.buffer->dtype, seed++);
    bytes += static_cast<double>(size);  // read once or written once
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(b.ptr())));
    bufs.push_back(std::move(b));
  }
  CHECK_OK(synchronize_context());
  auto plan = handle.plan(ptrs.data(), nullptr);
  Row r;
  r.name = name;
  r.shape = shape;
  r.schedule = cat(ir::to_string(s->schedule.gpu.mapping), " b", s->schedule.gpu.block_size, " e",
                   s->schedule.gpu.elements_per_thread,
                   s->schedule.gpu.threads_per_column > 1 ? cat(" s", s->schedule.gpu.threads_per_column) : std::string(),
                   plan.vectorized ? " vec" : "", " grid", plan.grid.x);
  r.bytes = bytes;
  r.nvrtc_ms = compiled.nvrtc_ms;
  r.ms = time_ms([&] { handle.run(ptrs.data(), nullptr, 0); }, reps);
  CHECK_OK(synchronize_context());
  return r;
}

/// One kernel to time: the schedule's choice (`reschedule`) or a forced one.
struct Case {
  std::string name, shape;
  ir::KernelPtr kernel;
  bool reschedule = true;
};

std::vector<Case> bench_cases(const GpuTarget& target) {
  using namespace cppi::gpu::testing;
  const int64_t R = 65536, C = 4096;  // 1 GiB of float32
  std::vector<Case> cases;
  cases.push_back({"relu(x+b)*2 f32", "65536x4096", add_relu_mul(R, C)});
  cases.push_back({"relu(x+b)*2 f16", "65536x8192", add_relu_mul(R, 2 * C, DType::Float16)});
  cases.push_back({"sin(x)+cos(x) f32", "268435456", sin_plus_cos(R * C)});
  cases.push_back({"gelu(x+b) f32", "65536x4096", gelu_bias(R, C)});
  cases.push_back({"softmax f32", "16384x4096", softmax(16384, 4096)});
  cases.push_back({"layer_norm f32", "16384x4096", layer_norm(16384, 4096)});
  cases.push_back({"var_mean f32", "16384x4096", var_mean(16384, 4096)});
  cases.push_back({"softmax f32 (symbolic-like, 3 pass)", "16384x4096",
                              softmax(16384, 4096)->with_schedule([] {
                                ir::Schedule s;
                                s.gpu = ir::GpuSchedule{ir::GpuMapping::RowPerBlock, 256, 0, 0, 1};
                                return s;
                              }()),
                              /*reschedule=*/false});
  cases.push_back({"column_sum f32", "16384x4096", column_sum(16384, 4096)});
  // Scans: along rows (16-byte vectors), down columns, and few long ones
  // split across blocks (two passes and a look-back).
  cases.push_back({"cumsum rows f32", "16384x4096", cumsum(16384, 4096, 1)});
  cases.push_back({"cumsum rows f32", "65536x512", cumsum(65536, 512, 1)});
  cases.push_back({"cumsum columns f32", "16384x4096", cumsum(16384, 4096, 0)});
  cases.push_back({"cumsum rows f32 (split)", "8x8388608", cumsum(8, 8388608, 1)});
  cases.push_back({"cumsum 1-D f32 (split)", "67108864", cumsum(1, 67108864, 1)});
  cases.push_back({"cumsum columns f32 (split)", "1048576x64", cumsum(1048576, 64, 0)});

  // Long rows and wide columns (the Python benchmark's shapes), each with the
  // schedule's choice first and then forced variants for comparison.
  auto forced = [](const ir::KernelPtr& k, ir::GpuMapping m, int block, int ept, int tpc = 1) {
    ir::Schedule s = k->schedule;
    s.gpu = ir::GpuSchedule{m, block, 0, ept, tpc};
    return k->with_schedule(s);
  };
  const int64_t L = 16384;
  // Pointwise shapes the schedule did not pick, against its choice (block
  // 128, one 16-byte vector per thread): block 256 or 512, two vectors per
  // thread, and below a capped grid (threads loop). gelu also at the
  // transformer block's size (256 MiB in).
  cases.push_back({"gelu(x+b) f32", "16384x4096", gelu_bias(L, 4096)});
  cases.push_back({"relu(x+b)*2 f32", "16384x4096", add_relu_mul(L, 4096)});
  struct Variant {
    const char* label;
    const char* shape;
    ir::KernelPtr kernel;
    int block, ept;
  };
  const std::vector<Variant> variants = {
      {"gelu(x+b) f32", "16384x4096", gelu_bias(L, 4096), 256, 4},
      {"gelu(x+b) f32", "16384x4096", gelu_bias(L, 4096), 512, 4},
      {"gelu(x+b) f32", "16384x4096", gelu_bias(L, 4096), 128, 8},
      {"gelu(x+b) f32", "16384x4096", gelu_bias(L, 4096), 256, 8},
      {"relu(x+b)*2 f32", "16384x4096", add_relu_mul(L, 4096), 256, 4},
      {"relu(x+b)*2 f32", "65536x4096", add_relu_mul(R, C), 256, 4},
      {"gelu(x+b) f32", "65536x4096", gelu_bias(R, C), 256, 4},
      {"sin(x)+cos(x) f32", "268435456", sin_plus_cos(R * C), 256, 4},
  };
  for (const auto& v : variants) {
    cases.push_back({cat(v.label, " (block ", v.block, ", ", v.ept, " per thread)"), v.shape,
                                forced(v.kernel, ir::GpuMapping::GridStridePointwise, v.block, v.ept), false});
  }
  for (int64_t per_sm : {8, 32}) {
    ir::KernelPtr k = forced(gelu_bias(L, 4096), ir::GpuMapping::GridStridePointwise, 256, 4);
    ir::Schedule capped = k->schedule;
    capped.gpu.grid_size = per_sm * target.multiprocessors;
    cases.push_back({cat("gelu(x+b) f32 (", per_sm, " blocks/SM)"), "16384x4096",
                                k->with_schedule(capped), false});
  }
  // Rows of 1024 (the transformer's layer_norm): a warp per row or a block.
  cases.push_back({"layer_norm f32", "16384x1024", layer_norm(L, 1024)});
  cases.push_back({"softmax f32", "16384x1024", softmax(L, 1024)});
  // A block per row, with 16-byte vectors as the warp rows have them.
  auto vectors = [](ir::KernelPtr k) {
    ir::Schedule s = k->schedule;
    s.gpu.cache_vector = 4;
    return k->with_schedule(s);
  };
  for (int block : {128, 256}) {
    cases.push_back({cat("layer_norm f32 (block ", block, ")"), "16384x1024",
                                vectors(forced(layer_norm(L, 1024), ir::GpuMapping::RowPerBlock, block, 1024 / block)),
                                false});
    cases.push_back({cat("softmax f32 (block ", block, ")"), "16384x1024",
                                vectors(forced(softmax(L, 1024), ir::GpuMapping::RowPerBlock, block, 1024 / block)),
                                false});
  }
  cases.push_back({"column_sum f32", "16384x16384", column_sum(L, L)});
  for (int tpc : {8, 32}) {
    cases.push_back({cat("column_sum f32 (", tpc, " slices)"), "16384x16384",
                                forced(column_sum(L, L), ir::GpuMapping::ColumnReduction, 32 * tpc, 1, tpc), false});
  }
  cases.push_back({"column_sum f32 (thread per column)", "16384x16384",
                              forced(column_sum(L, L), ir::GpuMapping::ColumnReduction, 128, 1), false});
  cases.push_back({"column var_mean f32", "16384x16384", column_reduce(ir::ReductionKind::Welford, L, L)});
  cases.push_back({"layer_norm f32", "16384x16384", layer_norm(L, L)});
  cases.push_back({"var_mean f32", "16384x16384", var_mean(L, L)});
  for (auto [block, ept] : {std::pair{512, 32}, {256, 64}, {1024, 0}, {512, 0}, {256, 0}}) {
    cases.push_back({cat("layer_norm f32 (b", block, " e", ept, ")"), "16384x16384",
                                forced(layer_norm(L, L), ir::GpuMapping::RowPerBlock, block, ept), false});
    cases.push_back({cat("var_mean f32 (b", block, " e", ept, ")"), "16384x16384",
                                forced(var_mean(L, L), ir::GpuMapping::RowPerBlock, block, ept), false});
  }

  return cases;
}

/// Writes each case's CUDA module to `dir` as NN_<name>.cu, scheduled for a
/// default GpuTarget (an H100/H200): no GPU needed, for reading the source or
/// compiling it offline (gpu_codegen/tools/sass_loops.py).
int write_sources(const std::string& dir) {
  GpuTarget target;
  int i = 0;
  for (const Case& c : bench_cases(target)) {
    ir::KernelPtr k = c.reschedule ? schedule_for_gpu(c.kernel, target) : c.kernel;
    PrintedCudaModule printed = take(print_cuda_module({k}, {}));
    std::string file = cat(dir, "/", i < 10 ? "0" : "", i, "_");
    for (char ch : c.name + " " + c.shape) file += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    std::FILE* f = std::fopen((file + ".cu").c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s.cu\n", file.c_str());
      return 1;
    }
    std::fputs(printed.source.c_str(), f);
    std::fclose(f);
    ++i;
  }
  // The header every module includes (compile_cuda serves it from memory).
  std::FILE* h = std::fopen(cat(dir, "/", kCudaCodegenHeaderName).c_str(), "w");
  if (!h) return 1;
  std::fputs(cuda_codegen_header().text.c_str(), h);
  std::fclose(h);
  std::printf("%d sources and %s in %s\n", i, kCudaCodegenHeaderName, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  NvrtcOptions nvrtc;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--sources") && i + 1 < argc) {
      return write_sources(argv[++i]);
    } else if (!std::strcmp(argv[i], "--fast-compile") && i + 1 < argc) {
      const std::string level = argv[++i];
      bool known = false;
      for (FastCompile f : {FastCompile::Off, FastCompile::Min, FastCompile::Mid, FastCompile::Max})
        if (level == to_string(f)) nvrtc.fast_compile = f, known = true;
      if (!known) {
        std::fprintf(stderr, "--fast-compile takes off, min, mid or max\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: gpu_codegen_bench [--reps N] [--fast-compile LEVEL] [--sources DIR]\n");
      return 2;
    }
  }
  GpuTarget target = take(GpuTarget::current());
  auto props = take(current_device_properties());
  std::printf("device: %s, cc %d, %d SMs; NVRTC --Ofast-compile: %s\n", props.name.c_str(), props.compute_capability,
              props.multiprocessors, to_string(nvrtc.fast_compile));

  CudaModule helpers =
      take(CudaModule::load_ptx(take(compile_to_ptx(kHelpers, "bench_helpers.cu", target.compute_capability))));
  Helpers h{helpers, take(helpers.function("fill_f32")), take(helpers.function("fill_f16")),
            take(helpers.function("copy16"))};

  // Copy bandwidth: 1 GiB -> 1 GiB.
  const size_t gib = size_t(1) << 30;
  double copy_gbs;
  {
    DeviceBuffer src = take(DeviceBuffer::allocate(gib)), dst = take(DeviceBuffer::allocate(gib));
    fill(h, src, DType::Float32, 7);
    CUdeviceptr s = src.ptr(), d = dst.ptr();
    int64_t n = static_cast<int64_t>(gib / 16);
    void* args[] = {&s, &d, &n};
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1 << 30));
    const double ms = time_ms([&] { CHECK_OK(launch(h.copy16, Dim3{grid, 1, 1}, Dim3{256, 1, 1}, 0, 0, args)); }, reps);
    copy_gbs = 2.0 * gib / ms / 1e6;
    std::printf("copy reference: 1 GiB in %.3f ms = %.0f GB/s (read + write)\n", ms, copy_gbs);
  }

  std::vector<Row> rows;
  for (const Case& c : bench_cases(target))
    rows.push_back(bench_kernel(h, c.name, c.shape, c.kernel, reps, nvrtc, c.reschedule));

  std::printf("\n%-40s %-12s %-42s %9s %9s %8s %7s %9s\n", "kernel", "shape", "schedule", "MB", "ms", "GB/s", "%copy",
              "nvrtc ms");
  for (const auto& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6;
    std::printf("%-40s %-12s %-42s %9.1f %9.4f %8.0f %6.1f%% %9.1f\n", r.name.c_str(), r.shape.c_str(),
                r.schedule.c_str(), r.bytes / 1e6, r.ms, gbs, 100.0 * gbs / copy_gbs, r.nvrtc_ms);
  }
  return 0;
}
