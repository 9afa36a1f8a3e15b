// tests/cpp/backends/test_nvml_open.cpp -- why open_nvml_backend() fails, in one line each
#include <gtest/gtest.h>

#include <string>

#include "nvml_double_fixture.hpp"
#include "vramscope/backends/nvml_errors.hpp"
#include "vramscope/backends/nvml_loader.hpp"
#include "vramscope/backends/open_sampler.hpp"

namespace vramscope {
namespace {

using NvmlOpenTest = testing::NvmlDoubleTest;

/// The message is one line the CLI can print after "vramscope: ".
void expect_one_line(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST_F(NvmlOpenTest, DriverNotLoaded) {
  use_script(R"({"init": "DRIVER_NOT_LOADED"})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.backend, nullptr);
  EXPECT_EQ(result.failure, BackendFailure::DriverNotLoaded);
  EXPECT_EQ(result.message, "NVIDIA driver not loaded (NVML: Driver Not Loaded)");
  EXPECT_EQ(calls("nvmlShutdown"), 0U);  // a failed init is not shut down
}

TEST_F(NvmlOpenTest, VersionMismatchSuggestsReboot) {
  use_script(R"({"init": "LIB_RM_VERSION_MISMATCH"})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.failure, BackendFailure::DriverNotLoaded);
  EXPECT_NE(result.message.find("reboot after a driver upgrade?"), std::string::npos)
      << result.message;
  expect_one_line(result.message);
}

TEST_F(NvmlOpenTest, NoPermission) {
  use_script(R"({"init": "NO_PERMISSION"})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.failure, BackendFailure::NoPermission);
  expect_one_line(result.message);
}

TEST_F(NvmlOpenTest, OtherInitFailureNamesNvmlText) {
  use_script(R"({"init": 999})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.failure, BackendFailure::Other);
  EXPECT_EQ(result.message, "NVML initialisation failed (NVML: Unknown Error)");
}

TEST_F(NvmlOpenTest, NoDevices) {
  use_script(R"({"devices": []})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.failure, BackendFailure::NoDevices);
  EXPECT_EQ(result.message, "the NVIDIA driver is loaded but reports no GPU");
  EXPECT_EQ(calls("nvmlShutdown"), 1U);
}

TEST_F(NvmlOpenTest, CountFailure) {
  use_script(R"({"count": "NO_PERMISSION", "devices": [{"name": "x"}]})");
  const BackendOpenResult result = open();
  EXPECT_EQ(result.failure, BackendFailure::NoPermission);
  EXPECT_EQ(result.message, "cannot count the GPUs (NVML: Insufficient Permissions)");
  EXPECT_EQ(calls("nvmlShutdown"), 1U);
}

TEST_F(NvmlOpenTest, LibraryNotFoundCarriesDlerror) {
  NvmlOptions options;
  options.library_path = "/nonexistent/libnvidia-ml.so.1";
  const BackendOpenResult result = open_nvml_backend(options);
  EXPECT_EQ(result.failure, BackendFailure::LibraryNotFound);
  EXPECT_NE(result.message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << result.message;
  EXPECT_NE(result.message.find("No such file"), std::string::npos) << result.message;
  expect_one_line(result.message);
}

TEST_F(NvmlOpenTest, CudaToolkitStubIsRefused) {
  NvmlOptions options;
  options.library_path = "/usr/local/cuda/lib64/stubs/libnvidia-ml.so";
  const BackendOpenResult result = open_nvml_backend(options);
  EXPECT_EQ(result.failure, BackendFailure::LibraryNotFound);
  EXPECT_NE(result.message.find("link-time stub"), std::string::npos) << result.message;
  expect_one_line(result.message);
}

TEST_F(NvmlOpenTest, EnvironmentChoosesTheLibrary) {
  use_script(R"({"devices": [{"name": "from env", "memory": {"total": 3}}]})");
  setenv("VRAMSCOPE_NVML_LIBRARY", VRAMSCOPE_NVML_DOUBLE_PATH, 1);
  const BackendOpenResult result = open_nvml_backend({});
  ASSERT_EQ(result.failure, BackendFailure::None) << result.message;
  std::vector<DeviceSample> samples;
  result.backend->sample_devices(samples);
  EXPECT_EQ(samples.at(0).name, "from env");

  setenv("VRAMSCOPE_NVML_LIBRARY", "/opt/cuda/targets/x86_64-linux/lib/stubs/libnvidia-ml.so", 1);
  EXPECT_EQ(open_nvml_backend({}).failure, BackendFailure::LibraryNotFound);
}

TEST_F(NvmlOpenTest, MissingMandatorySymbol) {
  use_script(R"({"devices": [{"name": "x"}]})");
  const BackendOpenResult result = open(VRAMSCOPE_NVML_DOUBLE_NOCOUNT_PATH);
  EXPECT_EQ(result.failure, BackendFailure::MissingSymbol);
  EXPECT_NE(result.message.find("lacks nvmlDeviceGetCount_v2"), std::string::npos)
      << result.message;
  expect_one_line(result.message);
}

TEST(NvmlLoader, CandidatesInOrder) {
  unsetenv("VRAMSCOPE_NVML_LIBRARY");
  EXPECT_EQ(nvml::library_candidates(""),
            (std::vector<std::string>{"libnvidia-ml.so.1", "libnvidia-ml.so"}));
  EXPECT_EQ(nvml::library_candidates("/x/lib.so"), (std::vector<std::string>{"/x/lib.so"}));
  setenv("VRAMSCOPE_NVML_LIBRARY", "/y/lib.so", 1);
  EXPECT_EQ(nvml::library_candidates(""), (std::vector<std::string>{"/y/lib.so"}));
  EXPECT_EQ(nvml::library_candidates("/x/lib.so"), (std::vector<std::string>{"/x/lib.so"}));
  unsetenv("VRAMSCOPE_NVML_LIBRARY");
}

TEST(NvmlLoader, StubPaths) {
  EXPECT_TRUE(
      nvml::is_stub_path("/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libnvidia-ml.so"));
  EXPECT_FALSE(nvml::is_stub_path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"));
  EXPECT_FALSE(nvml::is_stub_path("libnvidia-ml.so.1"));
}

TEST(NvmlErrors, InitFailureKinds) {
  EXPECT_EQ(nvml::init_failure_kind(nvml::ErrorDriverNotLoaded), BackendFailure::DriverNotLoaded);
  EXPECT_EQ(nvml::init_failure_kind(nvml::ErrorLibRmVersionMismatch),
            BackendFailure::DriverNotLoaded);
  EXPECT_EQ(nvml::init_failure_kind(nvml::ErrorNoPermission), BackendFailure::NoPermission);
  EXPECT_EQ(nvml::init_failure_kind(nvml::ErrorUnknown), BackendFailure::Other);
}

TEST(NvmlErrors, TextWithoutErrorString) {
  const nvml::Api api;  // no nvmlErrorString resolved
  EXPECT_EQ(nvml::error_text(api, nvml::ErrorGpuIsLost), "NVML: GPU_IS_LOST");
  EXPECT_EQ(nvml::error_text(api, 12345), "NVML: ERROR_12345");
  EXPECT_EQ(nvml::device_error_message(api, nvml::ErrorTimeout, "memory"),
            "cannot read memory (NVML: TIMEOUT)");
}

}  // namespace
}  // namespace vramscope
