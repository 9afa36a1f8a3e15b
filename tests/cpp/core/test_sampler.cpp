// tests/cpp/core/test_sampler.cpp -- Sampler stitching and the mapping of open failures to exits
#include <gtest/gtest.h>

#include "vramscope/clock.hpp"
#include "vramscope/sampler.hpp"

namespace vramscope {
namespace {

/// A backend with one fixed device: enough to see what the Sampler adds around it.
class OneDeviceBackend : public DeviceBackend {
 public:
  std::string name() const override { return "one-device"; }
  std::string driver_version() const override { return "123.45"; }
  unsigned device_count() const override { return 1; }
  void sample_devices(std::vector<DeviceSample>& out) override {
    DeviceSample d;
    d.index = 0;
    d.uuid = "GPU-x";
    d.used_bytes = 42;
    out.push_back(d);
  }
};

TEST(Sampler, FillsTimestampHostDriverAndReplacesThePreviousSample) {
  Sampler sampler(std::make_unique<OneDeviceBackend>(), nullptr);
  SystemSample sample;
  sample.devices.resize(3);
  sample.steps.resize(2);
  sample.allocators.resize(1);
  const int64_t before_ns = wall_time_ns();
  sampler.sample(sample);
  EXPECT_GE(sample.timestamp_ns, before_ns);
  EXPECT_LE(sample.timestamp_ns, wall_time_ns());
  EXPECT_EQ(sample.driver_version, "123.45");
  EXPECT_EQ(sample.hostname, local_hostname());
  EXPECT_FALSE(sample.hostname.empty());
  ASSERT_EQ(sample.devices.size(), 1U);
  EXPECT_EQ(sample.devices[0].used_bytes, 42U);
  EXPECT_TRUE(sample.steps.empty());
  EXPECT_TRUE(sample.allocators.empty());
}

TEST(Sampler, OpenFailuresMapToExitCodes) {
  EXPECT_EQ(backend_open_error(BackendFailure::LibraryNotFound, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::DriverNotLoaded, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::NoDevices, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::MissingSymbol, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::NoPermission, "x").exit_code(), ExitError);
  EXPECT_EQ(backend_open_error(BackendFailure::Other, "x").exit_code(), ExitError);
}

TEST(Sampler, OpenFailureMessagesAreOneLineAndSayWhatToDo) {
  unsetenv("VRAMSCOPE_NVML_LIBRARY");
  const std::string missing =
      backend_open_error(BackendFailure::LibraryNotFound, "libnvidia-ml.so.1: cannot open").what();
  EXPECT_EQ(missing,
            "no NVIDIA driver: libnvidia-ml.so.1: cannot open (set VRAMSCOPE_NVML_LIBRARY to use "
            "another NVML)");
  EXPECT_EQ(std::string(backend_open_error(BackendFailure::NoDevices, "zero devices").what()),
            "no GPU: zero devices");
  // A message that already names the problem is not prefixed twice.
  EXPECT_EQ(std::string(backend_open_error(BackendFailure::DriverNotLoaded,
                                           "NVIDIA driver not loaded (NVML: Driver Not Loaded)")
                            .what()),
            "NVIDIA driver not loaded (NVML: Driver Not Loaded)");
  for (auto failure : {BackendFailure::LibraryNotFound, BackendFailure::Other}) {
    EXPECT_EQ(std::string(backend_open_error(failure, "").what()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace vramscope
