// tests/cpp/core/test_sampler.cpp -- Sampler stitching: what it adds around its backend and agents
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
    out.assign(1, d);  // replaces, as the DeviceBackend contract asks
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

TEST(Sampler, ReservedSignatureMovesWithEveryAllocatorsReservedBytes) {
  std::vector<AllocatorSample> allocators(2);
  allocators[0].pid = 10;
  allocators[0].reserved_bytes = 2 << 20;
  allocators[1].pid = 11;
  allocators[1].cuda_device = 1;
  allocators[1].reserved_bytes = 4 << 20;
  const uint64_t base = reserved_signature(allocators);
  EXPECT_EQ(reserved_signature(allocators), base);
  auto changed = allocators;
  changed[1].reserved_bytes += 2 << 20;  // a new segment
  EXPECT_NE(reserved_signature(changed), base);
  changed = allocators;
  changed[0].allocated_bytes += 512;  // allocated moves within reserved: the driver does not
  EXPECT_EQ(reserved_signature(changed), base);
  changed = allocators;
  changed[1].cuda_device = 0;
  EXPECT_NE(reserved_signature(changed), base);
  changed.pop_back();  // an allocator went away
  EXPECT_NE(reserved_signature(changed), base);
  EXPECT_NE(reserved_signature({}), base);
}

/// Counts the driver readings the Sampler asks to be fresh.
class CountingBackend : public OneDeviceBackend {
 public:
  int marked = 0;
  void mark_changed() override { ++marked; }
};

TEST(Sampler, WithoutAgentsTheDriverIsNeverMarkedChangedAfterTheFirstSample) {
  auto backend = std::make_unique<CountingBackend>();
  CountingBackend* counting = backend.get();
  Sampler sampler(std::move(backend), nullptr);
  SystemSample sample;
  for (int i = 0; i < 5; ++i) sampler.sample(sample);
  // The first sample's signature differs from the none-yet state; then nothing moves.
  EXPECT_EQ(counting->marked, 1);
}

}  // namespace
}  // namespace vramscope
