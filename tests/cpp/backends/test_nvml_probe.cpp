// tests/cpp/backends/test_nvml_probe.cpp -- one process's driver bytes by GPU UUID, through the
// real dlopen path against the NVML test double
#include <gtest/gtest.h>

#include "nvml_double_fixture.hpp"
#include "vramscope/backends/nvml_process_probe.hpp"

namespace vramscope {
namespace {

class NvmlProbeTest : public testing::NvmlDoubleTest {
 protected:
  void SetUp() override { load_double(); }
};

constexpr const char* gpu0 = "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00";
constexpr const char* gpu1 = "GPU-5d0c1a53-1c2e-4c3f-9b7e-0a1b2c3d4e01";

std::unique_ptr<nvml::ProcessMemoryProbe> open_probe(
    const char* library = VRAMSCOPE_NVML_DOUBLE_PATH) {
  std::string error;
  auto probe = nvml::ProcessMemoryProbe::open(library, error);
  EXPECT_NE(probe, nullptr) << error;
  return probe;
}

TEST_F(NvmlProbeTest, FindsThePidOnTheGpuNamedByUuid) {
  use_data_script("two_gpus.json");
  auto probe = open_probe();
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->used_bytes(gpu0, 5001001), 81604378624U);
  // Listed as compute and graphics: counted once.
  EXPECT_EQ(probe->used_bytes(gpu0, 5001002), 1073741824U);
  EXPECT_EQ(probe->used_bytes(gpu1, 5001003), 21474836480U);
  // The same pid on the other GPU is not there.
  EXPECT_FALSE(probe->used_bytes(gpu1, 5001001));
}

TEST_F(NvmlProbeTest, UnknownGpuPidOrAmountGivesNothing) {
  use_data_script("two_gpus.json");
  auto probe = open_probe();
  ASSERT_NE(probe, nullptr);
  EXPECT_FALSE(probe->used_bytes(gpu1, 5001004)) << "NVML said the amount is not available";
  EXPECT_FALSE(probe->used_bytes(gpu0, 4242)) << "another pid namespace: no guess";
  EXPECT_FALSE(probe->used_bytes("GPU-not-here", 5001001));
  EXPECT_FALSE(probe->used_bytes("MIG-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00", 5001001));
  EXPECT_FALSE(probe->used_bytes("", 5001001));
}

TEST_F(NvmlProbeTest, AComputeProcessCostsOneListAndNothingElse) {
  use_data_script("two_gpus.json");
  auto probe = open_probe();
  ASSERT_NE(probe, nullptr);
  probe->used_bytes(gpu0, 5001001);  // sizes the reader's buffer
  reset_calls();
  EXPECT_EQ(probe->used_bytes(gpu0, 5001001), 81604378624U);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 1U);
  EXPECT_EQ(calls("nvmlDeviceGetGraphicsRunningProcesses_v3"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMPSComputeRunningProcesses_v3"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetBAR1MemoryInfo"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMigMode"), 0U);
  // A pid in no list: all three are read, then nothing is guessed.
  reset_calls();
  EXPECT_FALSE(probe->used_bytes(gpu0, 4242));
  EXPECT_GE(calls("nvmlDeviceGetGraphicsRunningProcesses_v3"), 1U);
  EXPECT_GE(calls("nvmlDeviceGetMPSComputeRunningProcesses_v3"), 1U);
}

TEST_F(NvmlProbeTest, MissingDriverIsAReasonNotACrash) {
  use_data_script("two_gpus.json");
  std::string error;
  EXPECT_EQ(nvml::ProcessMemoryProbe::open("/nonexistent/libnvidia-ml.so.1", error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST_F(NvmlProbeTest, ShutsNvmlDownWhenDestroyed) {
  use_data_script("two_gpus.json");
  {
    auto probe = open_probe();
    ASSERT_NE(probe, nullptr);
    reset_calls();
  }
  EXPECT_EQ(calls("nvmlShutdown"), 1U);
}

}  // namespace
}  // namespace vramscope
