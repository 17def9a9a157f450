// gpu_runtime_smoke: compiles a few kernels with NVRTC, loads and launches
// them through the driver API, checks every result, and measures NVRTC
// compile time per kernel, host time per launch and copy bandwidth on 1 GiB.
// Exits non-zero on any failure or mismatch; the last line says SMOKE PASSED
// or SMOKE FAILED.
//
// On the GPU machine, everything (build, smoke, GoogleTests, logs in $OUT):
//   bash gpu_codegen/tools/run_gpu_checks.sh
// or by hand (no LLVM there; NVRTC from torch's wheel):
//   cmake -G Ninja -S . -B build-gpu -DCPPINDUCTOR_CPU_JIT=OFF -DCPPINDUCTOR_BUILD_PYTHON=OFF
//   (if another folder breaks that: cmake -G Ninja -S gpu_codegen/standalone -B build-gpu)
//   ninja -C build-gpu gpu_runtime_smoke
//   export CPPINDUCTOR_NVRTC_LIBRARY=$(python3 -c "import nvidia, pathlib; print(next(p for d in
//     nvidia.__path__ for p in pathlib.Path(d).rglob('libnvrtc.so.1[0-9]')))")   # one line
//   ./build-gpu/gpu_codegen/gpu_runtime_smoke [--nvrtc PATH] [--device N] [--mib N]
//
// Without CPPINDUCTOR_NVRTC_LIBRARY or --nvrtc it searches libnvrtc.so.13,
// libnvrtc.so.12, libnvrtc.so on the loader path (e.g. /usr/local/cuda/lib64
// when that is in LD_LIBRARY_PATH).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh"
#include "gpu_codegen/runtime/cuda_api.h"
#include "gpu_codegen/runtime/cuda_module.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"

using namespace cppi;
using namespace cppi::gpu;

namespace {

int g_failures = 0;

void fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  ++g_failures;
}

template <typename T>
T get(Expected<T> e, const char* what) {
  if (!e.ok()) {
    std::printf("FATAL: %s: %s\n", what, e.error().message.c_str());
    std::printf("SMOKE FAILED\n");
    std::exit(2);
  }
  return std::move(e).value();
}

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::printf("FATAL: %s: %s\n", what, s.error().message.c_str());
    std::printf("SMOKE FAILED\n");
    std::exit(2);
  }
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Compiles (reporting NVRTC time, then the cached time), loads, and returns the kernel.
CudaKernel build(const char* source, const char* kernel_name, int cc) {
  PtxProgram program = get(compile_cuda(source, kernel_name, cc), kernel_name);
  PtxProgram cached = get(compile_cuda(source, kernel_name, cc), kernel_name);
  if (!cached.from_cache) fail(std::string(kernel_name) + ": second compile missed the cache");
  const auto load_start = std::chrono::steady_clock::now();
  CudaModule module = get(CudaModule::load_ptx(program.ptx), kernel_name);
  const double load_ms = ms_since(load_start);
  CudaKernel kernel = get(module.function(kernel_name), kernel_name);
  std::printf("  %-22s NVRTC %7.2f ms (compute_%d, %6zu B PTX) | driver load %6.2f ms | %3d regs\n",
              kernel_name, program.compile_ms, program.arch, program.ptx.size(), load_ms,
              kernel.num_registers());
  return kernel;
}

const char* kVectorAdd = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
)";

// 16 bytes per thread per iteration, grid-stride: the shape of a memory-bound
// pointwise kernel the printer will emit.
const char* kCopy = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void copy_uint4(const uint4* __restrict__ in, uint4* __restrict__ out,
                                      int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}
)";

const char* kRowReductions = R"(
#include "cppinductor_cuda_prelude.cuh"
// One block per row: sum, max, min, mean, variance (biased).
extern "C" __global__ void row_reductions(const float* x, float* out, int cols) {
  __shared__ float scratch[32];
  __shared__ cppi_welford<float> wscratch[32];
  const float inf = __int_as_float(0x7f800000);
  const float* row = x + (int64_t)blockIdx.x * cols;
  float s = 0.0f, mx = -inf, mn = inf;
  cppi_welford<float> w = cppi_welford_init<float>();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = row[c];
    s += v;
    mx = cppi_max(mx, v);
    mn = cppi_min(mn, v);
    w = cppi_welford_update(w, v);
  }
  s = cppi_block_reduce_sum(s, scratch);
  mx = cppi_block_reduce_max(mx, -inf, scratch);
  mn = cppi_block_reduce_min(mn, inf, scratch);
  w = cppi_block_reduce_welford(w, wscratch);
  if (threadIdx.x == 0) {
    float* o = out + blockIdx.x * 5;
    o[0] = s; o[1] = mx; o[2] = mn; o[3] = w.mean; o[4] = w.m2 / w.weight;
  }
}
)";

const char* kSharedReverse = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void shared_reverse(const float* in, float* out, int n) {
  extern __shared__ float buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
)";

const char* kEmpty = R"(
extern "C" __global__ void empty_kernel(int x) {}
)";

const char* kHalfConvert = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void half_convert(const float* in, cppi_half* h, cppi_bf16* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { h[i] = cppi_float_to_half(in[i]); b[i] = cppi_float_to_bf16(in[i]); }
}
)";

void test_vector_add(const CudaKernel& kernel) {
  const int64_t n = (1 << 24) + 5;
  std::vector<float> a(n), b(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1000) * 0.25f;
    b[i] = -static_cast<float>(i % 37);
  }
  DeviceBuffer da = get(DeviceBuffer::allocate(n * 4), "alloc"),
               db = get(DeviceBuffer::allocate(n * 4), "alloc"),
               dout = get(DeviceBuffer::allocate(n * 4), "alloc");
  check(da.upload(a.data(), n * 4), "upload");
  check(db.upload(b.data(), n * 4), "upload");
  CUdeviceptr pa = da.ptr(), pb = db.ptr(), pout = dout.ptr();
  int64_t count = n;
  void* args[] = {&pa, &pb, &pout, &count};
  check(launch(kernel, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, 0, args),
        "launch vector_add");
  check(synchronize_context(), "sync");
  check(dout.download(out.data(), n * 4), "download");
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += out[i] != a[i] + b[i];
  if (bad)
    fail("vector_add: " + std::to_string(bad) + " wrong elements");
  else
    std::printf("  vector_add: %lld elements OK\n", static_cast<long long>(n));
}

void test_copy_bandwidth(const CudaKernel& kernel, size_t bytes, int sms) {
  bytes -= bytes % 16;
  const int64_t n = static_cast<int64_t>(bytes / 16);
  DeviceBuffer in = get(DeviceBuffer::allocate(bytes), "alloc in");
  DeviceBuffer out = get(DeviceBuffer::allocate(bytes), "alloc out");
  std::vector<unsigned char> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  check(in.upload(host.data(), bytes), "upload");
  check(out.fill_bytes(0), "memset");
  CUdeviceptr pin = in.ptr(), pout = out.ptr();
  int64_t count = n;
  void* args[] = {&pin, &pout, &count};
  const unsigned block = 256;
  const unsigned grid = static_cast<unsigned>(sms) * 8;  // a few waves, grid-stride does the rest
  for (int i = 0; i < 3; ++i) check(launch(kernel, {grid}, {block}, 0, 0, args), "warmup copy");
  EventTimer timer = get(EventTimer::create(), "events");
  const int iterations = 20;
  check(timer.start(0), "event");
  for (int i = 0; i < iterations; ++i) check(launch(kernel, {grid}, {block}, 0, 0, args), "copy");
  check(timer.stop(0), "event");
  const float ms = get(timer.elapsed_ms(), "elapsed");
  std::vector<unsigned char> back(bytes);
  check(out.download(back.data(), bytes), "download");
  if (std::memcmp(back.data(), host.data(), bytes) != 0) fail("copy: output differs from input");
  const double gbps = 2.0 * static_cast<double>(bytes) * iterations / (ms * 1e-3) / 1e9;
  std::printf("  copy %.0f MiB: %.3f ms per copy, %.1f GB/s (read+write), grid %u x %u\n",
              bytes / 1048576.0, ms / iterations, gbps, grid, block);
}

void test_row_reductions(const CudaKernel& kernel) {
  const int rows = 64, cols = 3001;
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.013f * static_cast<float>(i)) * 3.0f + 1.0f;
  x[5 * cols + 1234] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer dx = get(DeviceBuffer::allocate(x.size() * 4), "alloc");
  DeviceBuffer dout = get(DeviceBuffer::allocate(rows * 5 * 4), "alloc");
  check(dx.upload(x.data(), x.size() * 4), "upload");
  CUdeviceptr px = dx.ptr(), pout = dout.ptr();
  int c = cols;
  void* args[] = {&px, &pout, &c};
  check(launch(kernel, {rows}, {512}, 0, 0, args), "launch row_reductions");
  check(synchronize_context(), "sync");
  std::vector<float> out(rows * 5);
  check(dout.download(out.data(), out.size() * 4), "download");
  int bad = 0;
  for (int r = 0; r < rows; ++r) {
    const float* o = &out[r * 5];
    if (r == 5) {
      for (int k = 0; k < 5; ++k) bad += !std::isnan(o[k]);
      continue;
    }
    double sum = 0, var = 0;
    float mx = -INFINITY, mn = INFINITY;
    for (int j = 0; j < cols; ++j) {
      const float v = x[r * cols + j];
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    const double mean = sum / cols;
    for (int j = 0; j < cols; ++j) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
    var /= cols;
    bad += std::fabs(o[0] - sum) > 1e-5 * cols * 4 || o[1] != mx || o[2] != mn ||
           std::fabs(o[3] - mean) > 1e-5 * (1 + std::fabs(mean)) ||
           std::fabs(o[4] - var) > 1e-4 * var;
  }
  if (bad)
    fail("row_reductions: " + std::to_string(bad) + " wrong rows");
  else
    std::printf("  row_reductions: %d rows x %d (sum/max/min/welford, NaN row) OK\n", rows, cols);
}

void test_large_shared(const CudaKernel& kernel, int max_shared_bytes) {
  // 200 KiB (H100/H200 allow 227 KiB), well above the 48 KiB default.
  const int bytes = std::min(200 * 1024, max_shared_bytes - kernel.static_shared_bytes());
  const int n = bytes / 4;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i) * 0.5f;
  DeviceBuffer din = get(DeviceBuffer::allocate(n * 4), "alloc"),
               dout = get(DeviceBuffer::allocate(n * 4), "alloc");
  check(din.upload(in.data(), n * 4), "upload");
  CUdeviceptr pin = din.ptr(), pout = dout.ptr();
  int count = n;
  void* args[] = {&pin, &pout, &count};
  check(launch(kernel, {1}, {1024}, n * 4, 0, args), "launch shared_reverse");
  check(synchronize_context(), "sync");
  check(dout.download(out.data(), n * 4), "download");
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += out[i] != in[n - 1 - i];
  if (bad)
    fail("shared_reverse: " + std::to_string(bad) + " wrong");
  else
    std::printf("  shared_reverse: %d KiB dynamic shared memory OK\n", bytes / 1024);
}

void test_half_convert(const CudaKernel& kernel) {
  std::vector<float> in;
  for (uint32_t u = 0; u < 0xFFFFFFFFu - 99991u; u += 99991u) {
    const float f = cppi_bits_float(u);
    if (!std::isnan(f)) in.push_back(f);
  }
  const int n = static_cast<int>(in.size());
  DeviceBuffer din = get(DeviceBuffer::allocate(n * 4), "alloc");
  DeviceBuffer dh = get(DeviceBuffer::allocate(n * 2), "alloc"),
               db = get(DeviceBuffer::allocate(n * 2), "alloc");
  check(din.upload(in.data(), n * 4), "upload");
  CUdeviceptr pin = din.ptr(), ph = dh.ptr(), pb = db.ptr();
  void* args[] = {&pin, &ph, &pb, const_cast<int*>(&n)};
  check(launch(kernel, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, 0, args),
        "launch half_convert");
  check(synchronize_context(), "sync");
  std::vector<uint16_t> h(n), b(n);
  check(dh.download(h.data(), n * 2), "download");
  check(db.download(b.data(), n * 2), "download");
  int bad = 0;
  for (int i = 0; i < n; ++i)
    bad += h[i] != cppi_float_to_half_bits(in[i]) || b[i] != cppi_float_to_bf16_bits(in[i]);
  if (bad)
    fail("half_convert: " + std::to_string(bad) + " device/host mismatches");
  else
    std::printf("  half_convert: %d floats, device cvt == host bit conversion\n", n);
}

void test_bad_launches(const CudaKernel& kernel) {
  CUdeviceptr p = 0;
  int64_t n = 0;
  void* args[] = {&p, &p, &p, &n};
  const Status too_many_threads = launch(kernel, {1}, {4096}, 0, 0, args);
  const Status grid_too_tall = launch(kernel, {1, 1u << 20}, {32}, 0, 0, args);
  const Status too_much_shared = launch(kernel, {1}, {32}, 64u << 20, 0, args);
  if (too_many_threads.ok() || grid_too_tall.ok() || too_much_shared.ok())
    fail("a bad launch was accepted");
  else
    std::printf("  bad launches refused:\n    %s\n    %s\n    %s\n",
                too_many_threads.error().message.c_str(), grid_too_tall.error().message.c_str(),
                too_much_shared.error().message.c_str());
  check(synchronize_context(), "sync after bad launches");
}

// Host cost of one launch() (what a reduce-overhead call path pays per kernel).
void test_launch_overhead(const CudaKernel& kernel) {
  int x = 0;
  void* args[] = {&x};
  const int launches = 20000;
  for (int i = 0; i < 100; ++i) check(launch(kernel, {1}, {32}, 0, 0, args), "launch empty");
  check(synchronize_context(), "sync");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) check(launch(kernel, {1}, {32}, 0, 0, args), "launch empty");
  const double host_ms = ms_since(start);
  check(synchronize_context(), "sync");
  const double total_ms = ms_since(start);
  std::printf(
      "  launch(): %.2f us host time per launch, %.2f us per launch until the GPU is done\n",
      1e3 * host_ms / launches, 1e3 * total_ms / launches);
}

// NVRTC from several threads at once: distinct sources, all must compile.
void test_parallel_compiles(int cc) {
  const int kernels = 8, threads = 4;
  std::vector<Expected<PtxProgram>> results(kernels, Error::internal("not run"));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int k = t; k < kernels; k += threads) {
        const std::string source =
            std::string(kVectorAdd) + "// variant " + std::to_string(k) + "\n";
        results[k] = compile_cuda(source, "variant_" + std::to_string(k), cc);
      }
    });
  for (std::thread& w : workers) w.join();
  const double wall = ms_since(start);
  double sum = 0;
  for (int k = 0; k < kernels; ++k) {
    if (!results[k].ok()) {
      fail("parallel compile " + std::to_string(k) + ": " + results[k].error().message);
      return;
    }
    sum += results[k]->compile_ms;
  }
  std::printf("  %d compiles on %d threads: %.1f ms wall, %.1f ms summed NVRTC time\n", kernels,
              threads, wall, sum);
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  size_t mib = 1024;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nvrtc" && i + 1 < argc) {
      check(set_nvrtc_library(argv[++i]), "--nvrtc");
    } else if (arg == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (arg == "--mib" && i + 1 < argc) {
      mib = static_cast<size_t>(std::atoll(argv[++i]));
    } else {
      std::printf("usage: %s [--nvrtc PATH] [--device N] [--mib N]\n", argv[0]);
      return 2;
    }
  }

  const CudaDriverApi& d = *get(cuda_driver(), "CUDA driver");
  const NvrtcApi& nv = *get(nvrtc(), "NVRTC");
  const DeviceProperties props = get(current_device_properties(device), "device properties");
  const int cc = props.compute_capability;
  const int sms = props.multiprocessors;
  std::printf("device %d: %s, sm_%d, %d SMs, %d KiB shared/block; driver CUDA %d.%d (%s)\n",
              props.device, props.name.c_str(), cc, sms, props.max_shared_bytes_per_block / 1024,
              d.driver_version / 1000, d.driver_version % 1000 / 10, d.library.c_str());
  std::printf("NVRTC %d.%d (%s)\n", nv.version_major, nv.version_minor, nv.library.c_str());

  std::printf("compile + load (the first compile includes NVRTC's start-up):\n");
  const CudaKernel vector_add = build(kVectorAdd, "vector_add", cc);
  const CudaKernel copy = build(kCopy, "copy_uint4", cc);
  const CudaKernel row_reductions = build(kRowReductions, "row_reductions", cc);
  const CudaKernel shared_reverse = build(kSharedReverse, "shared_reverse", cc);
  const CudaKernel half_convert = build(kHalfConvert, "half_convert", cc);
  const CudaKernel empty = build(kEmpty, "empty_kernel", cc);
  const NvrtcCounters counters = nvrtc_counters();
  std::printf("  NVRTC: %llu compiles, %.1f ms total, %.1f ms mean; %llu cache hits\n",
              static_cast<unsigned long long>(counters.compiles), counters.compile_ms,
              counters.compile_ms / std::max<unsigned long long>(counters.compiles, 1),
              static_cast<unsigned long long>(counters.cache_hits));

  std::printf("checks:\n");
  test_vector_add(vector_add);
  test_row_reductions(row_reductions);
  test_large_shared(shared_reverse, props.max_shared_bytes_per_block);
  test_half_convert(half_convert);
  test_bad_launches(vector_add);
  test_parallel_compiles(cc);
  std::printf("performance:\n");
  test_launch_overhead(empty);
  test_copy_bandwidth(copy, mib << 20, sms);

  if (g_failures) {
    std::printf("SMOKE FAILED (%d)\n", g_failures);
    return 1;
  }
  std::printf("SMOKE PASSED\n");
  return 0;
}
