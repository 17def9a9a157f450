// Loading PTX and launching kernels. Needs a GPU and NVRTC; skips without.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "gpu_codegen/prelude/cppinductor_cuda_prelude.cuh"
#include "gpu_codegen/runtime/cuda_module.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "test_support.h"

namespace cppi::gpu {
namespace {

using testing::kVectorAddSource;

// Compiles for the current device and loads; fails the test on error.
CudaKernel load_kernel(const std::string& source, const std::string& kernel_name) {
  Expected<int> cc = current_device_compute_capability();
  if (!cc.ok()) throw CompilerError(cc.error());
  Expected<std::string> ptx = compile_to_ptx(source, kernel_name, cc.value());
  if (!ptx.ok()) throw CompilerError(ptx.error());
  Expected<CudaModule> module = CudaModule::load_ptx(ptx.value());
  if (!module.ok()) throw CompilerError(module.error());
  return module->function(kernel_name).value();
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer buffer = DeviceBuffer::allocate(host.size() * sizeof(T)).value();
  buffer.upload(host.data(), host.size() * sizeof(T)).throw_if_error();
  return buffer;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& buffer) {
  std::vector<T> host(buffer.bytes() / sizeof(T));
  buffer.download(host.data(), buffer.bytes()).throw_if_error();
  return host;
}

TEST(CudaModule, PropertiesOfTheCurrentDevice) {
  CPPI_REQUIRE_GPU();
  Expected<int> cc = current_device_compute_capability();
  ASSERT_TRUE(cc.ok()) << cc.error().message;
  EXPECT_GE(cc.value(), 75);
  Expected<DeviceProperties> properties = current_device_properties();
  ASSERT_TRUE(properties.ok()) << properties.error().message;
  EXPECT_EQ(properties->compute_capability, cc.value());
  EXPECT_FALSE(properties->name.empty());
  EXPECT_GT(properties->multiprocessors, 0);
  EXPECT_GE(properties->max_threads_per_block, 1024);
  EXPECT_GT(properties->max_shared_bytes_per_block, 48 * 1024);
}

TEST(CudaModule, VectorAdd) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(kVectorAddSource, "vector_add");
  EXPECT_GE(kernel.max_threads_per_block(), 256);
  const int64_t n = (1 << 20) + 3;  // not a multiple of the block
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 1.0f - static_cast<float>(i % 7);
  }
  DeviceBuffer da = to_device(a), db = to_device(b);
  DeviceBuffer dout = DeviceBuffer::allocate(n * sizeof(float)).value();
  ASSERT_TRUE(dout.fill_bytes(0xFF).ok());
  CUdeviceptr pa = da.ptr(), pb = db.ptr(), pout = dout.ptr();
  int64_t count = n;
  void* args[] = {&pa, &pb, &pout, &count};
  const unsigned block = 256;
  Status s = launch(kernel, {static_cast<unsigned>((n + block - 1) / block)}, {block}, 0, 0, args);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(synchronize_context().ok());
  std::vector<float> out = to_host<float>(dout);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << "at " << i;
}

TEST(CudaModule, BadLaunchesAreErrors) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(kVectorAddSource, "vector_add");
  DeviceBuffer buffer = DeviceBuffer::allocate(1024).value();
  CUdeviceptr p = buffer.ptr();
  int64_t zero = 0;
  void* args[] = {&p, &p, &p, &zero};

  Status too_many_threads = launch(kernel, {1}, {2048}, 0, 0, args);
  ASSERT_FALSE(too_many_threads.ok());
  EXPECT_EQ(too_many_threads.error().kind, Error::Kind::InvalidInput);
  EXPECT_NE(too_many_threads.error().message.find("2048 threads"), std::string::npos);

  Status empty = launch(kernel, {0}, {128}, 0, 0, args);
  ASSERT_FALSE(empty.ok());

  Status grid_too_tall = launch(kernel, {1, 1u << 20}, {128}, 0, 0, args);  // y is at most 65535
  ASSERT_FALSE(grid_too_tall.ok());
  EXPECT_NE(grid_too_tall.error().message.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos)
      << grid_too_tall.error().message;
  EXPECT_NE(grid_too_tall.error().message.find("vector_add"), std::string::npos);

  Status too_much_shared = launch(kernel, {1}, {128}, 64u << 20, 0, args);
  ASSERT_FALSE(too_much_shared.ok());
  EXPECT_NE(too_much_shared.error().message.find("dynamic shared memory"), std::string::npos)
      << too_much_shared.error().message;

  // The context is still usable after refused launches.
  ASSERT_TRUE(launch(kernel, {1}, {128}, 0, 0, args).ok());
  EXPECT_TRUE(synchronize_context().ok());
}

TEST(CudaModule, MissingKernelAndBadPtxAreErrors) {
  CPPI_REQUIRE_GPU();
  Expected<int> cc = current_device_compute_capability();
  ASSERT_TRUE(cc.ok());
  Expected<CudaModule> module =
      CudaModule::load_ptx(compile_to_ptx(kVectorAddSource, "vector_add", cc.value()).value());
  ASSERT_TRUE(module.ok()) << module.error().message;
  Expected<CudaKernel> missing = module->function("no_such_kernel");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, Error::Kind::InvalidInput);
  EXPECT_NE(missing.error().message.find("no_such_kernel"), std::string::npos);

  Expected<CudaModule> bad = CudaModule::load_ptx(
      ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus.instruction; "
      "}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, Error::Kind::CompileFailed);
  EXPECT_NE(bad.error().message.find("cuModuleLoadDataEx"), std::string::npos)
      << bad.error().message;
}

TEST(CudaModule, DynamicSharedMemoryAbove48KiB) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void shared_reverse(const float* in, float* out, int n) {
  extern __shared__ float buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
)",
                                  "shared_reverse");
  const int n = 100 * 1024 / sizeof(float);
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i);
  DeviceBuffer din = to_device(in);
  DeviceBuffer dout = DeviceBuffer::allocate(n * sizeof(float)).value();
  CUdeviceptr pin = din.ptr(), pout = dout.ptr();
  int count = n;
  void* args[] = {&pin, &pout, &count};
  Status s = launch(kernel, {1}, {256}, n * sizeof(float), 0, args);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(synchronize_context().ok());
  std::vector<float> out = to_host<float>(dout);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], in[n - 1 - i]);
}

// Block reductions with 256 threads: every thread must see the block's result.
TEST(CudaModule, PreludeBlockReductions) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void reductions(const float* x, float* out) {
  __shared__ float scratch[32];
  __shared__ cppi_welford<float> wscratch[32];
  __shared__ cppi_arg<float> ascratch[32];
  const float inf = __int_as_float(0x7f800000);
  const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  const cppi_arg<float> amax = cppi_block_reduce_argmax(cppi_arg_make(v, (int64_t)threadIdx.x), ascratch);
  const cppi_arg<float> amin = cppi_block_reduce_argmin(cppi_arg_make(v, (int64_t)threadIdx.x), ascratch);
  const float s = cppi_block_reduce_sum(v, scratch);
  const float mx = cppi_block_reduce_max(v, -inf, scratch);
  const float mn = cppi_block_reduce_min(v, inf, scratch);
  cppi_welford<float> w = cppi_welford_update(cppi_welford_init<float>(), v);
  w = cppi_block_reduce_welford(w, wscratch);
  float* o = out + (blockIdx.x * blockDim.x + threadIdx.x) * 7;
  o[0] = s; o[1] = mx; o[2] = mn; o[3] = w.mean; o[4] = w.m2 / w.weight;
  o[5] = (float)amax.index; o[6] = (float)amin.index;
}
)",
                                  "reductions");
  const int threads = 256, blocks = 3;
  std::vector<float> x(threads * blocks);
  for (int i = 0; i < threads * blocks; ++i) x[i] = std::sin(0.37f * i) * 10.0f;
  x[threads + 17] = std::numeric_limits<float>::quiet_NaN();  // block 1 sees a NaN
  x[2 * threads + 200] = x[2 * threads + 40] = 1000.0f;       // block 2: a tie, first wins
  x[2 * threads + 230] = x[2 * threads + 99] = -1000.0f;
  DeviceBuffer dx = to_device(x);
  DeviceBuffer dout = DeviceBuffer::allocate(x.size() * 7 * sizeof(float)).value();
  CUdeviceptr px = dx.ptr(), pout = dout.ptr();
  void* args[] = {&px, &pout};
  ASSERT_TRUE(launch(kernel, {blocks}, {threads}, 0, 0, args).ok());
  ASSERT_TRUE(synchronize_context().ok());
  std::vector<float> out = to_host<float>(dout);
  for (int b = 0; b < blocks; ++b) {
    double sum = 0, sum_abs = 0, mean = 0, var = 0;
    float mx = -INFINITY, mn = INFINITY;
    int argmax = -1, argmin = -1;
    for (int t = 0; t < threads; ++t) {
      const float v = x[b * threads + t];
      sum += v;
      sum_abs += std::fabs(v);
      if (v > mx) mx = v, argmax = t;
      if (v < mn) mn = v, argmin = t;
    }
    mean = sum / threads;
    for (int t = 0; t < threads; ++t)
      var += (x[b * threads + t] - mean) * (x[b * threads + t] - mean);
    var /= threads;
    for (int t = 0; t < threads; ++t) {
      const float* o = &out[(b * threads + t) * 7];
      if (b == 1) {  // NaN propagates through every reduction; arg* point at it
        for (int k = 0; k < 5; ++k) ASSERT_TRUE(std::isnan(o[k])) << "block 1 result " << k;
        ASSERT_EQ(o[5], 17.0f);
        ASSERT_EQ(o[6], 17.0f);
        continue;
      }
      // A tree of 256 float adds is within log2(256) roundings of the sum.
      ASSERT_NEAR(o[0], sum, 1e-6 * sum_abs + 1e-5) << "block " << b << " thread " << t;
      ASSERT_EQ(o[1], mx);
      ASSERT_EQ(o[2], mn);
      ASSERT_NEAR(o[3], mean, 1e-5 * (1 + std::fabs(mean)));
      ASSERT_NEAR(o[4], var, 1e-4 * var);
      ASSERT_EQ(o[5], static_cast<float>(argmax));
      ASSERT_EQ(o[6], static_cast<float>(argmin));
      if (b == 2) {
        ASSERT_EQ(argmax, 40);
        ASSERT_EQ(argmin, 99);
      }
      // Every thread holds bit-identical results.
      ASSERT_EQ(std::memcmp(o, &out[b * threads * 7], 7 * sizeof(float)), 0);
    }
  }
}

// The device conversions (cvt instructions) agree with the host ones.
TEST(CudaModule, PreludeHalfAndBf16ConversionsMatchTheHost) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void conversions(const uint32_t* floats, uint16_t* half_out,
                                       uint16_t* bf16_out, uint32_t* widened, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float f = __uint_as_float(floats[i]);
  half_out[i] = cppi_float_to_half(f).bits;
  bf16_out[i] = cppi_float_to_bf16(f).bits;
  cppi_half h; h.bits = (uint16_t)(i & 0xFFFF);
  cppi_bf16 b; b.bits = (uint16_t)(i & 0xFFFF);
  widened[2 * i] = __float_as_uint(cppi_to_float(h));
  widened[2 * i + 1] = __float_as_uint(cppi_to_float(b));
}
)",
                                  "conversions");
  std::vector<uint32_t> floats;
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu})
      floats.push_back((high << 13) | low);
  const int n = static_cast<int>(floats.size());
  DeviceBuffer df = to_device(floats);
  DeviceBuffer dh = DeviceBuffer::allocate(n * 2).value();
  DeviceBuffer db = DeviceBuffer::allocate(n * 2).value();
  DeviceBuffer dw = DeviceBuffer::allocate(n * 8).value();
  CUdeviceptr pf = df.ptr(), ph = dh.ptr(), pb = db.ptr(), pw = dw.ptr();
  void* args[] = {&pf, &ph, &pb, &pw, const_cast<int*>(&n)};
  ASSERT_TRUE(launch(kernel, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, 0, args).ok());
  ASSERT_TRUE(synchronize_context().ok());
  std::vector<uint16_t> halves = to_host<uint16_t>(dh), bf16s = to_host<uint16_t>(db);
  std::vector<uint32_t> widened = to_host<uint32_t>(dw);
  int mismatches = 0;
  for (int i = 0; i < n && mismatches < 10; ++i) {
    const float f = cppi_bits_float(floats[i]);
    if (std::isnan(f)) continue;  // NaN payloads may differ; NaN-ness is checked on the host
    if (halves[i] != cppi_float_to_half_bits(f) || bf16s[i] != cppi_float_to_bf16_bits(f)) {
      ADD_FAILURE() << "float bits 0x" << std::hex << floats[i] << ": device half " << halves[i]
                    << " bf16 " << bf16s[i];
      ++mismatches;
    }
  }
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float dev_half = cppi_bits_float(widened[2 * h]);
    if (!std::isnan(dev_half)) {
      ASSERT_EQ(dev_half, cppi_half_bits_to_float(h)) << std::hex << h;
    }
    ASSERT_EQ(widened[2 * h + 1], h << 16);
  }
}

// A thread with no current context (a fresh std::thread) still launches.
TEST(CudaModule, LaunchFromAThreadWithoutContext) {
  CPPI_REQUIRE_GPU();
  CudaKernel kernel = load_kernel(kVectorAddSource, "vector_add");
  DeviceBuffer buffer = DeviceBuffer::allocate(256 * sizeof(float)).value();
  ASSERT_TRUE(buffer.fill_bytes(0).ok());
  Status from_thread;
  std::thread worker([&] {
    CUdeviceptr p = buffer.ptr();
    int64_t n = 256;
    void* args[] = {&p, &p, &p, &n};
    from_thread = launch(kernel, {1}, {256}, 0, 0, args);
    if (from_thread.ok()) from_thread = synchronize_context();
  });
  worker.join();
  EXPECT_TRUE(from_thread.ok()) << from_thread.error().message;
}

}  // namespace
}  // namespace cppi::gpu
