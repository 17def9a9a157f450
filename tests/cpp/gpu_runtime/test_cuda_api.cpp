// The loader: missing or wrong libraries are reported, never crash.
#include <gtest/gtest.h>

#include "gpu_codegen/runtime/cuda_api.h"
#include "gpu_codegen/runtime/cuda_module.h"
#include "test_support.h"

namespace cppi::gpu {
namespace {

TEST(CudaApi, DriverIsAvailableOrCleanlyUnsupported) {
  Expected<const CudaDriverApi*> driver = cuda_driver();
  if (driver.ok()) {
    EXPECT_TRUE(cuda_driver_available());
    EXPECT_GT(driver.value()->driver_version, 0);
    return;
  }
  EXPECT_FALSE(cuda_driver_available());
  EXPECT_EQ(driver.error().kind, Error::Kind::Unsupported);
  EXPECT_FALSE(driver.error().message.empty());
  // Everything that needs a context reports the same, without crashing.
  Expected<int> cc = current_device_compute_capability();
  ASSERT_FALSE(cc.ok());
  EXPECT_EQ(cc.error().kind, Error::Kind::Unsupported);
  Expected<CudaModule> module = CudaModule::load_ptx(".version 8.0\n");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.error().kind, Error::Kind::Unsupported);
}

TEST(CudaApi, MissingLibraryIsUnsupportedWithTheDlopenReason) {
  Expected<const CudaDriverApi*> driver = load_cuda_driver_library("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.error().kind, Error::Kind::Unsupported);
  EXPECT_NE(driver.error().message.find("/nonexistent/libcuda.so.1"), std::string::npos)
      << driver.error().message;
  EXPECT_NE(driver.error().message.find("No such file"), std::string::npos)
      << driver.error().message;

  Expected<const NvrtcApi*> nvrtc_api = load_nvrtc_library("/nonexistent/libnvrtc.so.13");
  ASSERT_FALSE(nvrtc_api.ok());
  EXPECT_EQ(nvrtc_api.error().kind, Error::Kind::Unsupported);
}

TEST(CudaApi, WrongLibraryNamesTheMissingSymbol) {
  Expected<const CudaDriverApi*> driver = load_cuda_driver_library("libm.so.6");
  ASSERT_FALSE(driver.ok());
  EXPECT_NE(driver.error().message.find("no symbol cuInit"), std::string::npos)
      << driver.error().message;

  Expected<const NvrtcApi*> nvrtc_api = load_nvrtc_library("libm.so.6");
  ASSERT_FALSE(nvrtc_api.ok());
  EXPECT_NE(nvrtc_api.error().message.find("no symbol nvrtcVersion"), std::string::npos)
      << nvrtc_api.error().message;
}

TEST(CudaApi, FailedSetNvrtcLibraryKeepsTheCurrentOne) {
  const bool before = testing::have_nvrtc();
  const std::string library_before = before ? nvrtc().value()->library : "";
  Status s = set_nvrtc_library("/nonexistent/libnvrtc.so");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, Error::Kind::Unsupported);
  EXPECT_EQ(nvrtc_available(), before);
  if (before) {
    EXPECT_EQ(nvrtc().value()->library, library_before);
  }
}

TEST(CudaApi, NvrtcReportsItsVersion) {
  CPPI_REQUIRE_NVRTC();
  const NvrtcApi& api = *nvrtc().value();
  EXPECT_GE(api.version_major, 11);
  EXPECT_NE(std::string(api.nvrtcGetErrorString(cu::NVRTC_ERROR_COMPILATION)).find("COMPILATION"),
            std::string::npos);
}

}  // namespace
}  // namespace cppi::gpu
