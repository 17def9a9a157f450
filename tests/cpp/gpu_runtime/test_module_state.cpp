// Kernels with module state (a split-row reduction's __device__ partials and
// arrival counter) launched on two streams at once: launch() must serialise
// them, or blocks of the two launches mix their partials. NVRTC-only parts
// run without a GPU; the rest skips without one.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "gpu_codegen/runtime/cuda_module.h"
#include "gpu_codegen/runtime/device_memory.h"
#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "test_support.h"

namespace cppi::gpu {
namespace {

// The split-row pattern in miniature: each of the grid's blocks sums a
// strided share of x into the module's partials, the last block to arrive
// (the module's counter) adds them in order and resets the counter. Two
// overlapping launches share both arrays, so their sums come out wrong.
constexpr int kBlocks = 16;
const char* kSplitSumSource = R"(
#include "cppinductor_cuda_prelude.cuh"
__device__ long long split_sum_partials[16];
__device__ unsigned int split_sum_arrivals;
extern "C" __global__ void __launch_bounds__(256)
split_sum(const int* x, long long* out, int64_t n) {
  __shared__ long long scratch[256];
  __shared__ bool last;
  long long acc = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    acc += x[i];
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    split_sum_partials[blockIdx.x] = scratch[0];
    __threadfence();
    last = atomicAdd(&split_sum_arrivals, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence();
    long long total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b)
      total += ((volatile long long*)split_sum_partials)[b];
    *out = total;
    split_sum_arrivals = 0;
  }
}
)";

TEST(ModuleState, SplitSumKernelCompiles) {
  CPPI_REQUIRE_NVRTC();
  Expected<std::string> ptx = compile_to_ptx(kSplitSumSource, "split_sum", 90);
  ASSERT_TRUE(ptx.ok()) << ptx.error().message;
  EXPECT_NE(ptx->find("split_sum_partials"), std::string::npos);
}

struct Stream {
  CUstream handle = nullptr;
  Stream() {
    const CudaDriverApi& d = *cuda_driver().value();
    check_cuda(d, d.cuStreamCreate(&handle, cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        .throw_if_error();
  }
  ~Stream() {
    const CudaDriverApi& d = *cuda_driver().value();
    d.cuStreamDestroy_v2(handle);
  }
  uintptr_t id() const { return reinterpret_cast<uintptr_t>(handle); }
  Status synchronize() const {
    const CudaDriverApi& d = *cuda_driver().value();
    return check_cuda(d, d.cuStreamSynchronize(handle), "cuStreamSynchronize");
  }
};

CudaKernel load_split_sum(bool module_state) {
  Expected<int> cc = current_device_compute_capability();
  if (!cc.ok()) throw CompilerError(cc.error());
  Expected<std::string> ptx = compile_to_ptx(kSplitSumSource, "split_sum", cc.value());
  if (!ptx.ok()) throw CompilerError(ptx.error());
  Expected<CudaModule> module = CudaModule::load_ptx(ptx.value());
  if (!module.ok()) throw CompilerError(module.error());
  return module->function("split_sum", module_state).value();
}

// An input of n copies of `value`, so its sum is known exactly.
DeviceBuffer filled(int64_t n, int value) {
  std::vector<int> host(n, value);
  DeviceBuffer buffer = DeviceBuffer::allocate(n * sizeof(int)).value();
  buffer.upload(host.data(), n * sizeof(int)).throw_if_error();
  // The tests' streams are non-blocking: they do not wait for the legacy
  // stream's copies and memsets by themselves.
  synchronize_context().throw_if_error();
  return buffer;
}

// `launches` launches of `kernel` summing `x` on `stream`, launch i into
// out[i]; returns what each launch wrote.
std::vector<long long> sum_repeatedly(const CudaKernel& kernel, const DeviceBuffer& x, int64_t n,
                                      const Stream& stream, int launches) {
  DeviceBuffer out = DeviceBuffer::allocate(launches * sizeof(long long)).value();
  out.fill_bytes(0).throw_if_error();
  synchronize_context().throw_if_error();
  for (int i = 0; i < launches; ++i) {
    CUdeviceptr px = x.ptr(), pout = out.ptr() + i * sizeof(long long);
    int64_t count = n;
    void* args[] = {&px, &pout, &count};
    launch(kernel, {kBlocks}, {256}, 0, stream.id(), args).throw_if_error();
  }
  stream.synchronize().throw_if_error();
  std::vector<long long> host(launches);
  out.download(host.data(), launches * sizeof(long long)).throw_if_error();
  return host;
}

// Two threads, each with its own stream and input, launch the one kernel
// many times at once; every sum must be its own input's.
TEST(ModuleState, LaunchesOnTwoStreamsAreSerialised) {
  CPPI_REQUIRE_GPU();
  const CudaKernel kernel = load_split_sum(/*module_state=*/true);
  const int64_t n = int64_t{1} << 22;  // long enough for two launches to overlap
  const int launches = 200;
  DeviceBuffer ones = filled(n, 1), threes = filled(n, 3);
  Stream a, b;
  std::vector<long long> sums_a, sums_b;
  std::thread other([&] { sums_b = sum_repeatedly(kernel, threes, n, b, launches); });
  sums_a = sum_repeatedly(kernel, ones, n, a, launches);
  other.join();
  for (int i = 0; i < launches; ++i) {
    ASSERT_EQ(sums_a[i], n) << "launch " << i << " on stream a";
    ASSERT_EQ(sums_b[i], 3 * n) << "launch " << i << " on stream b";
  }
}

// One thread alternating streams: each launch waits for the previous one.
TEST(ModuleState, AlternatingStreamsFromOneThread) {
  CPPI_REQUIRE_GPU();
  const CudaKernel kernel = load_split_sum(/*module_state=*/true);
  const int64_t n = int64_t{1} << 20;
  const int launches = 100;
  DeviceBuffer ones = filled(n, 1), threes = filled(n, 3);
  DeviceBuffer out = DeviceBuffer::allocate(2 * launches * sizeof(long long)).value();
  ASSERT_TRUE(out.fill_bytes(0).ok());
  ASSERT_TRUE(synchronize_context().ok());
  Stream a, b;
  for (int i = 0; i < 2 * launches; ++i) {
    const bool on_a = i % 2 == 0;
    CUdeviceptr px = (on_a ? ones : threes).ptr(), pout = out.ptr() + i * sizeof(long long);
    int64_t count = n;
    void* args[] = {&px, &pout, &count};
    Status s = launch(kernel, {kBlocks}, {256}, 0, (on_a ? a : b).id(), args);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  ASSERT_TRUE(a.synchronize().ok());
  ASSERT_TRUE(b.synchronize().ok());
  std::vector<long long> sums(2 * launches);
  ASSERT_TRUE(out.download(sums.data(), sums.size() * sizeof(long long)).ok());
  for (int i = 0; i < 2 * launches; ++i) ASSERT_EQ(sums[i], i % 2 == 0 ? n : 3 * n) << "launch " << i;
}

// Two CudaKernels taken for the same function of one module share its order
// (the state is the module's, not the handle's).
TEST(ModuleState, HandlesOfOneFunctionShareTheOrder) {
  CPPI_REQUIRE_GPU();
  Expected<int> cc = current_device_compute_capability();
  ASSERT_TRUE(cc.ok());
  Expected<CudaModule> module =
      CudaModule::load_ptx(compile_to_ptx(kSplitSumSource, "split_sum", cc.value()).value());
  ASSERT_TRUE(module.ok()) << module.error().message;
  const CudaKernel first = module->function("split_sum", true).value();
  const CudaKernel second = module->function("split_sum", true).value();
  const int64_t n = int64_t{1} << 22;
  const int launches = 100;
  DeviceBuffer ones = filled(n, 1), threes = filled(n, 3);
  Stream a, b;
  std::vector<long long> sums_a, sums_b;
  std::thread other([&] { sums_b = sum_repeatedly(second, threes, n, b, launches); });
  sums_a = sum_repeatedly(first, ones, n, a, launches);
  other.join();
  for (int i = 0; i < launches; ++i) {
    ASSERT_EQ(sums_a[i], n) << "launch " << i;
    ASSERT_EQ(sums_b[i], 3 * n) << "launch " << i;
  }
}

}  // namespace
}  // namespace cppi::gpu
