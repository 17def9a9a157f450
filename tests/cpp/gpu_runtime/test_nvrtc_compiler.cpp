// CUDA C → PTX with NVRTC. Needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpu_codegen/runtime/nvrtc_compiler.h"
#include "test_support.h"

namespace cppi::gpu {
namespace {

using testing::kVectorAddSource;

TEST(NvrtcCompiler, FlagsKeepIeeeNumerics) {
  const std::vector<std::string> flags = nvrtc_flags(90, {});
  auto has = [&](const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  };
  EXPECT_TRUE(has("-arch=compute_90"));
  EXPECT_TRUE(has("--std=c++17"));
  EXPECT_TRUE(has("-default-device"));
  EXPECT_TRUE(has("--fmad=true"));
  EXPECT_TRUE(has("--ftz=false"));
  EXPECT_TRUE(has("--prec-div=true"));
  EXPECT_TRUE(has("--prec-sqrt=true"));
  for (const std::string& f : flags) EXPECT_EQ(f.find("fast_math"), std::string::npos) << f;
  // --minimal only where NVRTC knows it (12.4 on).
  EXPECT_FALSE(has("--minimal"));
  const std::vector<std::string> new_flags = nvrtc_flags(90, {}, 1300);
  EXPECT_NE(std::find(new_flags.begin(), new_flags.end(), "--minimal"), new_flags.end());
  const std::vector<std::string> old_flags = nvrtc_flags(90, {}, 1203);
  EXPECT_EQ(std::find(old_flags.begin(), old_flags.end(), "--minimal"), old_flags.end());
  // The prelude as an automatic precompiled header: 12.8 on.
  EXPECT_FALSE(has("-pch"));
  EXPECT_NE(std::find(new_flags.begin(), new_flags.end(), "-pch"), new_flags.end());
  const std::vector<std::string> pre_pch = nvrtc_flags(90, {}, 1207);
  EXPECT_EQ(std::find(pre_pch.begin(), pre_pch.end(), "-pch"), pre_pch.end());
}

TEST(NvrtcCompiler, ArchSpecificTargetsTheDevicesOwnFeatures) {
  NvrtcOptions o;
  o.arch_specific = true;
  const std::vector<std::string> flags = nvrtc_flags(90, o, 1300);
  EXPECT_NE(std::find(flags.begin(), flags.end(), "-arch=compute_90a"), flags.end());
  EXPECT_EQ(std::find(flags.begin(), flags.end(), "-arch=compute_90"), flags.end());
}

TEST(NvrtcCompiler, FastCompileLevelsWhereNvrtcKnowsThem) {
  auto has = [](const std::vector<std::string>& flags, const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  };
  NvrtcOptions o;
  EXPECT_EQ(o.fast_compile, FastCompile::Min);
  o.fast_compile = FastCompile::Off;
  for (const std::string& f : nvrtc_flags(90, o, 1300)) EXPECT_EQ(f.find("-Ofast-compile"), std::string::npos) << f;
  o.fast_compile = FastCompile::Min;
  EXPECT_TRUE(has(nvrtc_flags(90, o, 1300), "--Ofast-compile=min"));
  EXPECT_TRUE(has(nvrtc_flags(90, o, 1209), "--Ofast-compile=min"));
  for (const std::string& f : nvrtc_flags(90, o, 1208)) EXPECT_EQ(f.find("-Ofast-compile"), std::string::npos) << f;
  o.fast_compile = FastCompile::Max;
  EXPECT_TRUE(has(nvrtc_flags(90, o, 1300), "--Ofast-compile=max"));
}

TEST(NvrtcCompiler, CubinTargetsTheDevicesMachineCode) {
  auto has = [](const std::vector<std::string>& flags, const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  };
  NvrtcOptions o;
  o.cubin = true;
  EXPECT_TRUE(has(nvrtc_flags(90, o, 1300), "-arch=sm_90"));
  o.arch_specific = true;
  EXPECT_TRUE(has(nvrtc_flags(90, o, 1300), "-arch=sm_90a"));
  for (const std::string& f : nvrtc_flags(90, o, 1300)) EXPECT_EQ(f.find("compute_"), std::string::npos) << f;
}

TEST(NvrtcCompiler, CompilesAKernelToACubin) {
  CPPI_REQUIRE_NVRTC();
  NvrtcOptions o;
  o.cubin = true;
  Expected<PtxProgram> program = compile_cuda(kVectorAddSource, "vector_add_cubin", 90, o);
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_TRUE(program->ptx.empty());
  ASSERT_GT(program->cubin.size(), 4u);
  EXPECT_EQ(program->cubin.substr(0, 4), "\x7f" "ELF");  // a cubin is an ELF image
  EXPECT_EQ(program->arch, 90);
  // The kernel's name is in the image's symbol table.
  EXPECT_NE(program->cubin.find("vector_add"), std::string::npos);
  // compile_to_ptx asks for PTX whatever the options say.
  Expected<std::string> ptx = compile_to_ptx(kVectorAddSource, "vector_add_cubin", 90, o);
  ASSERT_TRUE(ptx.ok()) << ptx.error().message;
  EXPECT_NE(ptx->find(".entry vector_add("), std::string::npos);
}

TEST(NvrtcCompiler, CubinsComeBackFromTheDiskCache) {
  CPPI_REQUIRE_NVRTC();
  char dir_template[] = "/tmp/cppi_cubin_cache_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const char* old = std::getenv("CPPINDUCTOR_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("CPPINDUCTOR_CACHE_DIR", dir.c_str(), 1);
  NvrtcOptions o;
  o.cubin = true;
  const std::string source = std::string(kVectorAddSource) + "// disk cache test\n";
  const NvrtcCounters before = nvrtc_counters();
  Expected<PtxProgram> first = compile_cuda(source, "disk_cached", 90, o);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->from_cache);

  // Another process: nothing in memory, the entry on disk.
  clear_ptx_cache();
  Expected<PtxProgram> second = compile_cuda(source, "disk_cached", 90, o);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->log, first->log);
  EXPECT_EQ(nvrtc_counters().compiles, before.compiles + 1);
  EXPECT_EQ(nvrtc_counters().disk_cache_hits, before.disk_cache_hits + 1);

  // A corrupted entry is compiled again (and written again).
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/cuda")) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  {
    std::fstream f(entries[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  clear_ptx_cache();
  Expected<PtxProgram> third = compile_cuda(source, "disk_cached", 90, o);
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_FALSE(third->from_cache);
  EXPECT_EQ(third->cubin, first->cubin);
  EXPECT_EQ(nvrtc_counters().compiles, before.compiles + 2);
  EXPECT_EQ(nvrtc_counters().disk_cache_corrupt, before.disk_cache_corrupt + 1);
  clear_ptx_cache();
  Expected<PtxProgram> fourth = compile_cuda(source, "disk_cached", 90, o);
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE(fourth->from_cache);

  // PTX is not stored: the driver keeps what it compiles from PTX itself.
  clear_ptx_cache();
  ASSERT_TRUE(compile_cuda(source, "disk_cached", 90).ok());
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir + "/cuda")) ++files;
  EXPECT_EQ(files, 1u);

  if (old) setenv("CPPINDUCTOR_CACHE_DIR", saved.c_str(), 1); else unsetenv("CPPINDUCTOR_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST(NvrtcCompiler, CubinForADeviceNewerThanNvrtcIsPtx) {
  CPPI_REQUIRE_NVRTC();
  NvrtcOptions o;
  o.cubin = true;
  Expected<PtxProgram> program = compile_cuda(kVectorAddSource, "future_device_cubin", 999, o);
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_TRUE(program->cubin.empty());
  EXPECT_NE(program->ptx.find(".entry vector_add("), std::string::npos);
  EXPECT_LT(program->arch, 999);
}

TEST(NvrtcCompiler, FastCompileKeepsTheKernelsEntryPoints) {
  CPPI_REQUIRE_NVRTC();
  NvrtcOptions o;
  o.fast_compile = FastCompile::Min;
  Expected<PtxProgram> program = compile_cuda(kVectorAddSource, "vector_add_fast", 90, o);
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_NE(program->ptx.find(".entry vector_add("), std::string::npos) << program->ptx;
}

TEST(NvrtcCompiler, CompilesAKernelToPtxForTheRequestedArch) {
  CPPI_REQUIRE_NVRTC();
  Expected<PtxProgram> program = compile_cuda(kVectorAddSource, "vector_add_sm90", 90);
  ASSERT_TRUE(program.ok()) << program.error().message;
  const std::string& ptx = program->ptx;
  EXPECT_NE(ptx.find(".entry vector_add("), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos) << ptx;
  EXPECT_EQ(program->arch, 90);
  EXPECT_FALSE(program->from_cache);
  EXPECT_GT(program->compile_ms, 0.0);
  EXPECT_EQ(ptx.find('\0'), std::string::npos);
}

TEST(NvrtcCompiler, SecondCompileComesFromTheCache) {
  CPPI_REQUIRE_NVRTC();
  const std::string source = std::string(kVectorAddSource) + "// cache test\n";
  const NvrtcCounters before = nvrtc_counters();
  Expected<std::string> first = compile_to_ptx(source, "cached", 80);
  ASSERT_TRUE(first.ok()) << first.error().message;
  Expected<PtxProgram> second = compile_cuda(source, "cached", 80);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->ptx, first.value());
  const NvrtcCounters after = nvrtc_counters();
  EXPECT_EQ(after.compiles, before.compiles + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);

  // Another arch or other options are another program.
  Expected<PtxProgram> other_arch = compile_cuda(source, "cached", 90);
  ASSERT_TRUE(other_arch.ok());
  EXPECT_FALSE(other_arch->from_cache);
  NvrtcOptions line_info;
  line_info.line_info = true;
  Expected<PtxProgram> other_options = compile_cuda(source, "cached", 80, line_info);
  ASSERT_TRUE(other_options.ok());
  EXPECT_FALSE(other_options->from_cache);
  EXPECT_EQ(nvrtc_counters().compiles, before.compiles + 3);

  clear_ptx_cache();
  Expected<PtxProgram> again = compile_cuda(source, "cached", 80);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->from_cache);
}

TEST(NvrtcCompiler, SyntaxErrorReturnsTheNvrtcLog) {
  CPPI_REQUIRE_NVRTC();
  const NvrtcCounters before = nvrtc_counters();
  Expected<std::string> ptx = compile_to_ptx(
      "extern \"C\" __global__ void broken(float* x) { x[0] = undeclared_name + ; }\n",
      "broken_kernel", 90);
  ASSERT_FALSE(ptx.ok());
  const Error& e = ptx.error();
  EXPECT_EQ(e.kind, Error::Kind::CompileFailed);
  EXPECT_NE(e.message.find("broken_kernel.cu"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << e.message;
  // The log itself: NVRTC names the identifier and the line.
  EXPECT_NE(e.message.find("undeclared_name"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("(1)"), std::string::npos) << e.message;
  EXPECT_EQ(nvrtc_counters().failures, before.failures + 1);
}

TEST(NvrtcCompiler, NewerDeviceThanNvrtcGetsTheNewestPtxItKnows) {
  CPPI_REQUIRE_NVRTC();
  Expected<PtxProgram> program = compile_cuda(kVectorAddSource, "future_device", 999);
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_GE(program->arch, 90);
  EXPECT_LT(program->arch, 999);
}

TEST(NvrtcCompiler, DeviceOlderThanNvrtcSupportsIsUnsupported) {
  CPPI_REQUIRE_NVRTC();
  Expected<std::string> ptx = compile_to_ptx(kVectorAddSource, "old_device", 20);
  ASSERT_FALSE(ptx.ok());
  EXPECT_EQ(ptx.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(ptx.error().message.find("compute capability 20"), std::string::npos)
      << ptx.error().message;
}

TEST(NvrtcCompiler, ExtraOptionsReachNvrtc) {
  CPPI_REQUIRE_NVRTC();
  const char* source = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void scaled(float* x) { x[threadIdx.x] *= SCALE; }
)";
  EXPECT_FALSE(compile_to_ptx(source, "needs_define", 90).ok());
  NvrtcOptions options;
  options.extra = {"-DSCALE=2.0f"};
  Expected<std::string> ptx = compile_to_ptx(source, "needs_define", 90, options);
  ASSERT_TRUE(ptx.ok()) << ptx.error().message;
  EXPECT_NE(ptx->find(".entry scaled("), std::string::npos);
}

// The prelude compiles with NVRTC and every helper instantiates for the
// types the printer will use.
TEST(NvrtcCompiler, PreludeCompilesForEveryHelper) {
  CPPI_REQUIRE_NVRTC();
  const char* source = R"(
#include "cppinductor_cuda_prelude.cuh"
extern "C" __global__ void uses_prelude(const cppi_half* h, const cppi_bf16* b, const double* d,
                                        const int64_t* i, float* out, cppi_half* h_out,
                                        cppi_bf16* b_out, double* d_out, int64_t* i_out) {
  __shared__ float fs[32];
  __shared__ double ds[32];
  __shared__ int64_t is[32];
  __shared__ cppi_welford<float> ws[32];
  __shared__ cppi_arg<float> as[32];
  const float x = cppi_to_float(h[threadIdx.x]) + cppi_to_float(b[threadIdx.x]);
  const float s = cppi_block_reduce_sum(x, fs);
  const float mx = cppi_block_reduce_max(x, -__int_as_float(0x7f800000), fs);
  const float mn = cppi_block_reduce_min(x, __int_as_float(0x7f800000), fs);
  const double ds_ = cppi_block_reduce_sum(d[threadIdx.x], ds);
  const int64_t im = cppi_block_reduce_max(i[threadIdx.x], (int64_t)(-9223372036854775807LL - 1), is);
  cppi_welford<float> w = cppi_welford_update(cppi_welford_init<float>(), x);
  w = cppi_block_reduce_welford(w, ws);
  const cppi_arg<float> amax = cppi_block_reduce_argmax(cppi_arg_make(x, (int64_t)threadIdx.x), as);
  const cppi_arg<float> amin = cppi_block_reduce_argmin(cppi_arg_make(x, (int64_t)threadIdx.x), as);
  const float ws_ = cppi_warp_reduce_sum(x) + cppi_warp_reduce_max(x) + cppi_warp_reduce_min(x);
  const cppi_welford<double> wd = cppi_warp_reduce_welford(cppi_welford_update(cppi_welford_init<double>(), 1.0));
  out[threadIdx.x] = s + mx + mn + w.mean + w.m2 / w.weight + ws_;
  h_out[threadIdx.x] = cppi_float_to_half(x);
  b_out[threadIdx.x] = cppi_float_to_bf16(x);
  d_out[threadIdx.x] = ds_ + wd.mean;
  i_out[threadIdx.x] = im + amax.index + amin.index;
  static_assert(sizeof(int64_t) == 8 && sizeof(uint64_t) == 8 && sizeof(uint8_t) == 1, "");
  static_assert(sizeof(cppi_half) == 2 && sizeof(cppi_bf16) == 2, "");
}
)";
  for (int arch : {75, 80, 90}) {
    Expected<PtxProgram> program = compile_cuda(source, "uses_prelude", arch);
    ASSERT_TRUE(program.ok()) << "compute_" << arch << ": " << program.error().message;
    EXPECT_NE(program->ptx.find("shfl.sync.bfly"), std::string::npos);
    EXPECT_EQ(program->log, "") << "warnings for compute_" << arch;
  }
}

}  // namespace
}  // namespace cppi::gpu
