// tests/cpp/backends/test_nvml.cpp -- the NVML backend through the real dlopen path, against the double
#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <string>

#include "nvml_double_fixture.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/backends/proc_info.hpp"

namespace vramscope {
namespace {

using testing::NvmlDoubleTest;
using NvmlBackendTest = NvmlDoubleTest;

constexpr uint64_t mib = 1ULL << 20U;
constexpr uint64_t gib = 1ULL << 30U;
constexpr uint64_t h200_total = 150754820096ULL;
constexpr uint64_t h200_reserved = 553648128ULL;

/// One GPU with distinct memory numbers (so that a field read from the wrong offset shows).
std::string one_gpu(const std::string& extra = "") {
  return R"({"driver_version": "555.42.06", "devices": [{
    "name": "NVIDIA H200", "uuid": "GPU-0000aaaa-bbbb-cccc-dddd-eeeeffff0000",
    "pci": {"domain": 1, "bus": 171, "device": 2},
    "memory": {"total": 1000000, "reserved": 1000, "used": 200000, "free": 799000},
    "bar1": {"total": 4096, "used": 1024}, "mig_mode": 0,
    "processes": [{"pid": 5009001, "used": 123456, "kinds": ["compute"]}])" +
         extra + "}]}";
}

TEST_F(NvmlBackendTest, TwoGpusExactValues) {
  use_data_script("two_gpus.json");
  auto backend = open_ok();
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "nvml");
  EXPECT_EQ(backend->driver_version(), "580.159.03");
  ASSERT_EQ(backend->device_count(), 2U);

  const auto samples = sample(*backend);
  ASSERT_EQ(samples.size(), 2U);
  const DeviceSample& gpu0 = samples[0];
  EXPECT_EQ(gpu0.index, 0U);
  EXPECT_EQ(gpu0.name, "NVIDIA H200");
  EXPECT_EQ(gpu0.uuid, "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00");
  EXPECT_EQ(gpu0.pci_bus_id, "00000000:18:00.0");
  EXPECT_TRUE(gpu0.memory_v2);
  EXPECT_EQ(gpu0.total_bytes, h200_total);
  EXPECT_EQ(gpu0.reserved_bytes, h200_reserved);
  EXPECT_EQ(gpu0.used_bytes, 77 * gib + 512 * mib);
  EXPECT_EQ(gpu0.free_bytes, h200_total - h200_reserved - (77 * gib + 512 * mib));
  EXPECT_EQ(gpu0.bar1_total_bytes, 262144 * mib);
  EXPECT_EQ(gpu0.bar1_used_bytes, 5 * mib);
  EXPECT_EQ(gpu0.mig_enabled, false);
  EXPECT_TRUE(gpu0.mig_instances.empty());
  EXPECT_FALSE(gpu0.lost);
  EXPECT_EQ(gpu0.error, "");
  EXPECT_TRUE(gpu0.processes_supported);
  ASSERT_EQ(gpu0.processes.size(), 2U);
  EXPECT_EQ(gpu0.processes[0].pid, 5001001U);
  EXPECT_EQ(gpu0.processes[0].used_bytes, 76 * gib);
  EXPECT_EQ(gpu0.processes[0].kinds, ProcessKindCompute);
  EXPECT_FALSE(gpu0.processes[0].gpu_instance_id.has_value());
  EXPECT_FALSE(gpu0.processes[0].compute_instance_id.has_value());
  EXPECT_EQ(gpu0.processes[1].pid, 5001002U);
  EXPECT_EQ(gpu0.processes[1].used_bytes, gib);
  EXPECT_EQ(gpu0.processes[1].kinds, ProcessKindCompute | ProcessKindGraphics);

  const DeviceSample& gpu1 = samples[1];
  EXPECT_EQ(gpu1.index, 1U);
  EXPECT_EQ(gpu1.uuid, "GPU-5d0c1a53-1c2e-4c3f-9b7e-0a1b2c3d4e01");
  EXPECT_EQ(gpu1.pci_bus_id, "00000000:2A:00.0");
  EXPECT_EQ(gpu1.used_bytes, 20 * gib + 512 * mib);
  ASSERT_EQ(gpu1.processes.size(), 2U);
  EXPECT_EQ(gpu1.processes[1].pid, 5001004U);
  EXPECT_EQ(gpu1.processes[1].kinds, ProcessKindMps);
  // NVML_VALUE_NOT_AVAILABLE is "unknown", never a huge number.
  EXPECT_FALSE(gpu1.processes[1].used_bytes.has_value());
}

TEST_F(NvmlBackendTest, HostPidFromAnotherNamespaceIsNotVisible) {
  use_data_script("two_gpus.json");
  auto backend = open_ok();
  const auto samples = sample(*backend);
  const ProcessSample& process = samples[0].processes[0];
  EXPECT_FALSE(process.visible);
  EXPECT_EQ(process.user, "");
  EXPECT_EQ(process.command, "");
}

TEST_F(NvmlBackendTest, OwnPidIsResolvedFromProc) {
  use_script(one_gpu(R"(, "errors": {}}, {"name": "x", "memory": {"total": 10},
                       "processes": [{"pid": "self", "used": 42}])"));
  auto backend = open_ok();
  const auto samples = sample(*backend);
  ASSERT_EQ(samples[1].processes.size(), 1U);
  const ProcessSample& self = samples[1].processes[0];
  EXPECT_EQ(self.pid, static_cast<uint32_t>(getpid()));
  EXPECT_TRUE(self.visible);
  EXPECT_EQ(self.user, user_name_of(getuid()));
  EXPECT_NE(self.command.find("test_backends"), std::string::npos) << self.command;
}

TEST_F(NvmlBackendTest, FieldsAreReadFromTheRightOffsets) {
  use_script(one_gpu());
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_EQ(gpu.pci_bus_id, "00000001:AB:02.0");
  EXPECT_EQ(gpu.total_bytes, 1000000U);
  EXPECT_EQ(gpu.reserved_bytes, 1000U);
  EXPECT_EQ(gpu.used_bytes, 200000U);
  EXPECT_EQ(gpu.free_bytes, 799000U);
  EXPECT_EQ(gpu.bar1_total_bytes, 4096U);
  EXPECT_EQ(gpu.bar1_used_bytes, 1024U);
  ASSERT_EQ(gpu.processes.size(), 1U);
  EXPECT_EQ(gpu.processes[0].used_bytes, 123456U);
}

TEST_F(NvmlBackendTest, FallsBackToUnversionedSymbols) {
  use_script(one_gpu());
  auto backend = open_ok(VRAMSCOPE_NVML_DOUBLE_NOV2_PATH);
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_FALSE(gpu.memory_v2);
  EXPECT_FALSE(gpu.reserved_bytes.has_value());
  // v1 "used" includes the reserved memory.
  EXPECT_EQ(gpu.used_bytes, 201000U);
  EXPECT_EQ(gpu.total_bytes, 1000000U);
  EXPECT_EQ(gpu.free_bytes, 799000U);
  // The old PCI call fills no 8-digit busId: it is formatted from the numbers.
  EXPECT_EQ(gpu.pci_bus_id, "00000001:AB:02.0");
  // The old process call fills 16-byte entries without MIG ids.
  ASSERT_EQ(gpu.processes.size(), 1U);
  EXPECT_EQ(gpu.processes[0].pid, 5009001U);
  EXPECT_EQ(gpu.processes[0].used_bytes, 123456U);
  EXPECT_FALSE(gpu.processes[0].gpu_instance_id.has_value());
  EXPECT_EQ(calls("nvmlInit"), 1U);
  // Count, then fill; the next sample fills the kept buffer at once.
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses"), 2U);
  sample(*backend);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses"), 3U);
}

TEST_F(NvmlBackendTest, MinimalLibraryLeavesOptionalFieldsEmpty) {
  use_script(one_gpu());
  auto backend = open_ok(VRAMSCOPE_NVML_DOUBLE_MIN_PATH);
  EXPECT_EQ(backend->driver_version(), "");
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_EQ(gpu.name, "");
  EXPECT_EQ(gpu.uuid, "");
  EXPECT_EQ(gpu.total_bytes, 1000000U);
  EXPECT_FALSE(gpu.bar1_total_bytes.has_value());
  EXPECT_FALSE(gpu.mig_enabled.has_value());
  EXPECT_FALSE(gpu.processes_supported);
  EXPECT_TRUE(gpu.processes.empty());
  EXPECT_EQ(gpu.error, "");
}

TEST_F(NvmlBackendTest, NotSupportedFieldsAreEmptyNotZero) {
  use_script(R"({"devices": [{"name": "GB10", "uuid": "GPU-1",
      "errors": {"memory_v2": "NOT_SUPPORTED", "memory": "NOT_SUPPORTED",
                 "compute_processes": "NOT_SUPPORTED", "graphics_processes": "NOT_SUPPORTED",
                 "mps_processes": "NOT_SUPPORTED"}}]})");
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_FALSE(gpu.total_bytes.has_value());
  EXPECT_FALSE(gpu.used_bytes.has_value());
  EXPECT_FALSE(gpu.free_bytes.has_value());
  EXPECT_FALSE(gpu.reserved_bytes.has_value());
  EXPECT_FALSE(gpu.bar1_total_bytes.has_value());
  EXPECT_FALSE(gpu.mig_enabled.has_value());
  EXPECT_FALSE(gpu.processes_supported);
  EXPECT_FALSE(gpu.lost);
  EXPECT_EQ(gpu.error, "");  // unsupported is not an error
}

TEST_F(NvmlBackendTest, NoPermissionLeavesFieldEmptyWithReason) {
  use_script(one_gpu(R"(, "errors": {"bar1": "NO_PERMISSION"})"));
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_FALSE(gpu.bar1_total_bytes.has_value());
  EXPECT_EQ(gpu.total_bytes, 1000000U);
  EXPECT_EQ(gpu.error, "no permission to read BAR1 memory (NVML: Insufficient Permissions)");
}

class MemoryV2Fallback : public NvmlDoubleTest,
                         public ::testing::WithParamInterface<const char*> {};

TEST_P(MemoryV2Fallback, UsesV1AndStopsAskingV2) {
  use_script(one_gpu(std::string(R"(, "errors": {"memory_v2": ")") + GetParam() + "\"}"));
  auto backend = open_ok();
  for (int i = 0; i < 5; ++i) {
    const DeviceSample gpu = sample(*backend)[0];
    EXPECT_FALSE(gpu.memory_v2);
    EXPECT_FALSE(gpu.reserved_bytes.has_value());
    EXPECT_EQ(gpu.used_bytes, 201000U);
    EXPECT_EQ(gpu.error, "");
  }
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 1U);
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo"), 5U);
}

INSTANTIATE_TEST_SUITE_P(OldDriverAnswers, MemoryV2Fallback,
                         ::testing::Values("FUNCTION_NOT_FOUND", "ARGUMENT_VERSION_MISMATCH",
                                           "UNKNOWN", "NOT_SUPPORTED"));

TEST_F(NvmlBackendTest, SteadyStateMakesFiveCallsPerGpu) {
  use_data_script("eight_gpus_64_procs.json");
  auto backend = open_ok();
  sample(*backend);
  reset_calls();
  const auto samples = sample(*backend);
  ASSERT_EQ(samples.size(), 8U);
  EXPECT_EQ(samples[7].processes.size(), 8U);
  // Identity is cached; the MIG mode is rechecked once a second, not per sample.
  EXPECT_EQ(calls("nvmlDeviceGetName"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetUUID"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetPciInfo_v3"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetHandleByIndex_v2"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMigMode"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetBAR1MemoryInfo"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetGraphicsRunningProcesses_v3"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetMPSComputeRunningProcesses_v3"), 8U);
}

TEST_F(NvmlBackendTest, FastSamplingRepeatsTheDriverBetweenRefreshesUntilMarkedChanged) {
  use_data_script("eight_gpus_64_procs.json");
  NvmlOptions options;
  options.bar1_refresh_ns = int64_t{3600} * 1'000'000'000;  // never again within the test
  options.driver_refresh_ns = int64_t{3600} * 1'000'000'000;
  auto backend = open_ok(VRAMSCOPE_NVML_DOUBLE_PATH, options);
  const auto first = sample(*backend);
  reset_calls();
  const auto second = sample(*backend);
  ASSERT_EQ(second.size(), 8U);
  // No driver call runs: the memory, BAR1 and the three lists are repeated (a 1 kHz sample
  // pays 15-20 µs for the memory call alone after a sleep on an H100).
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetBAR1MemoryInfo"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetGraphicsRunningProcesses_v3"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetMPSComputeRunningProcesses_v3"), 0U);
  // Marked changed (an allocator's reserved bytes moved), the next sample reads the memory
  // and the lists of every GPU afresh; the one after repeats them again.
  backend->mark_changed();
  const auto third = sample(*backend);
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 8U);
  EXPECT_EQ(calls("nvmlDeviceGetBAR1MemoryInfo"), 0U);
  reset_calls();
  (void)sample(*backend);
  EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 0U);
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 0U);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(second[i].used_bytes, first[i].used_bytes);
    EXPECT_EQ(second[i].free_bytes, first[i].free_bytes);
    EXPECT_EQ(second[i].reserved_bytes, first[i].reserved_bytes);
    EXPECT_EQ(second[i].total_bytes, first[i].total_bytes);
    EXPECT_EQ(second[i].memory_v2, first[i].memory_v2);
    EXPECT_EQ(third[i].used_bytes, first[i].used_bytes);
    EXPECT_EQ(second[i].bar1_used_bytes, first[i].bar1_used_bytes);
    EXPECT_EQ(second[i].processes_supported, first[i].processes_supported);
    ASSERT_EQ(second[i].processes.size(), first[i].processes.size());
    for (std::size_t p = 0; p < first[i].processes.size(); ++p) {
      EXPECT_EQ(second[i].processes[p].pid, first[i].processes[p].pid);
      EXPECT_EQ(second[i].processes[p].used_bytes, first[i].processes[p].used_bytes);
      EXPECT_EQ(second[i].processes[p].command, first[i].processes[p].command);
    }
  }
}

TEST_F(NvmlBackendTest, ADriverReadingIsDueAQuarterOfItsPeriodEarly) {
  // Samples every 10 ms come a little early or late: each must still read the driver. A
  // period of 4 ms and samples at least 3.2 ms apart (a sleep never ends early): every one.
  use_data_script("eight_gpus_64_procs.json");
  NvmlOptions options;
  options.driver_refresh_ns = 4'000'000;
  auto backend = open_ok(VRAMSCOPE_NVML_DOUBLE_PATH, options);
  (void)sample(*backend);
  for (int i = 0; i < 3; ++i) {
    reset_calls();
    const timespec pause{0, 3'200'000};
    nanosleep(&pause, nullptr);
    (void)sample(*backend);
    EXPECT_EQ(calls("nvmlDeviceGetMemoryInfo_v2"), 8U) << i;
    EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 8U) << i;
  }
}

TEST_F(NvmlBackendTest, ProcessListGrowingBetweenCallsIsRetried) {
  use_script(one_gpu(R"(, "grow_processes": {"times": 3, "by": 100})"));
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_EQ(gpu.error, "");
  EXPECT_TRUE(gpu.processes_supported);
  ASSERT_EQ(gpu.processes.size(), 301U);
  EXPECT_EQ(gpu.processes[0].pid, 5009001U);
  EXPECT_EQ(gpu.processes[300].pid, 90000299U);
  EXPECT_GE(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 4U);
}

TEST_F(NvmlBackendTest, FastGrowingListIsCaughtUp) {
  use_script(one_gpu(R"(, "grow_processes": {"times": 4, "by": 1000})"));
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_EQ(gpu.error, "");
  EXPECT_EQ(gpu.processes.size(), 4001U);
}

TEST_F(NvmlBackendTest, EndlesslyGrowingListGivesUpWithReason) {
  // INSUFFICIENT_SIZE whatever the buffer: the retries must be bounded.
  use_script(one_gpu(R"(, "errors": {"compute_processes": "INSUFFICIENT_SIZE"})"));
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  EXPECT_NE(gpu.error.find("kept growing"), std::string::npos) << gpu.error;
  EXPECT_EQ(calls("nvmlDeviceGetComputeRunningProcesses_v3"), 8U);
  EXPECT_EQ(gpu.total_bytes, 1000000U);  // the rest of the sample is intact
}

TEST_F(NvmlBackendTest, LostGpuLeavesOthersAndRecovers) {
  use_data_script("lost_gpu.json");
  auto backend = open_ok();
  ASSERT_EQ(backend->device_count(), 2U);
  auto samples = sample(*backend);
  EXPECT_FALSE(samples[0].lost);
  EXPECT_EQ(samples[0].used_bytes.has_value(), true);
  ASSERT_EQ(samples[0].processes.size(), 1U);
  EXPECT_TRUE(samples[1].lost);
  EXPECT_EQ(samples[1].error, "GPU has fallen off the bus (NVML: GPU is lost)");
  EXPECT_FALSE(samples[1].total_bytes.has_value());

  // The GPU comes back (e.g. after a reset): the next sample finds it again.
  reload(R"({"devices": [{"name": "A", "memory": {"total": 1}},
                         {"name": "NVIDIA H200", "uuid": "GPU-back", "memory": {"total": 7, "used": 2}}]})");
  samples = sample(*backend);
  EXPECT_FALSE(samples[1].lost);
  EXPECT_EQ(samples[1].error, "");
  EXPECT_EQ(samples[1].uuid, "GPU-back");
  EXPECT_EQ(samples[1].used_bytes, 2U);
}

TEST_F(NvmlBackendTest, GpuLostMidSampleIsRetriedWithAFreshHandle) {
  use_script(one_gpu(
      R"(, "errors": {"memory_v2": "GPU_IS_LOST"}}, {"name": "B", "memory": {"total": 5})"));
  auto backend = open_ok();
  auto samples = sample(*backend);
  EXPECT_TRUE(samples[0].lost);
  EXPECT_EQ(samples[0].error, "GPU has fallen off the bus (NVML: GPU is lost)");
  EXPECT_FALSE(samples[0].processes_supported);
  EXPECT_EQ(samples[0].uuid, "GPU-0000aaaa-bbbb-cccc-dddd-eeeeffff0000");  // identity kept
  EXPECT_FALSE(samples[1].lost);
  EXPECT_EQ(samples[1].total_bytes, 5U);
  reset_calls();
  sample(*backend);
  EXPECT_EQ(calls("nvmlDeviceGetHandleByIndex_v2"), 1U);
}

TEST_F(NvmlBackendTest, MigInstancesAndTheirProcessesAreListed) {
  use_data_script("mig.json");
  auto backend = open_ok();
  const auto samples = sample(*backend);
  const DeviceSample& gpu = samples[0];
  EXPECT_EQ(gpu.mig_enabled, true);
  ASSERT_EQ(gpu.mig_instances.size(), 3U);
  EXPECT_EQ(gpu.mig_instances[0].index, 0U);
  EXPECT_EQ(gpu.mig_instances[0].uuid, "MIG-7a0c1b00-aaaa-5bbb-8ccc-012345678900");
  EXPECT_EQ(gpu.mig_instances[0].gpu_instance_id, 1U);
  EXPECT_EQ(gpu.mig_instances[0].compute_instance_id, 0U);
  EXPECT_EQ(gpu.mig_instances[0].total_bytes, 71 * gib + 512 * mib);
  EXPECT_EQ(gpu.mig_instances[0].used_bytes, 60 * gib + 16 * mib);
  EXPECT_EQ(gpu.mig_instances[2].index, 3U);  // slot 2 is empty
  EXPECT_EQ(gpu.mig_instances[2].gpu_instance_id, 13U);
  EXPECT_EQ(gpu.mig_instances[2].used_bytes, 0U);
  // Each process once, although both the GPU and its MIG device list it.
  ASSERT_EQ(gpu.processes.size(), 2U);
  EXPECT_EQ(gpu.processes[0].pid, 5003001U);
  EXPECT_EQ(gpu.processes[0].gpu_instance_id, 1U);
  EXPECT_EQ(gpu.processes[1].gpu_instance_id, 5U);
  EXPECT_EQ(gpu.processes[1].compute_instance_id, 0U);
  EXPECT_EQ(samples[1].mig_enabled, false);
  EXPECT_TRUE(samples[1].mig_instances.empty());
}

TEST_F(NvmlBackendTest, MigDeviceListsWithoutIdsTakeTheInstanceIds) {
  use_script(R"({"devices": [{"name": "H200", "mig_mode": 1, "memory": {"total": 100},
      "errors": {"compute_processes": "NO_PERMISSION"},
      "mig_instances": [{"slot": 2, "uuid": "MIG-x", "gpu_instance_id": 9, "compute_instance_id": 1,
                         "memory": {"total": 50, "used": 20}, "processes": [{"pid": 5004001, "used": 20}]}]}]})");
  auto backend = open_ok();
  const DeviceSample gpu = sample(*backend)[0];
  ASSERT_EQ(gpu.processes.size(), 1U);
  EXPECT_EQ(gpu.processes[0].gpu_instance_id, 9U);
  EXPECT_EQ(gpu.processes[0].compute_instance_id, 1U);
  EXPECT_TRUE(gpu.processes_supported);
  EXPECT_NE(gpu.error.find("no permission to read the process list"), std::string::npos);
}

TEST_F(NvmlBackendTest, ShutsDownOncePerInit) {
  use_script(one_gpu());
  {
    auto backend = open_ok();
    sample(*backend);
    EXPECT_EQ(calls("nvmlShutdown"), 0U);
  }
  EXPECT_EQ(calls("nvmlInit_v2"), 1U);
  EXPECT_EQ(calls("nvmlInit"), 0U);
  EXPECT_EQ(calls("nvmlShutdown"), 1U);
}

TEST_F(NvmlBackendTest, ReusedOutputVectorGetsFreshValues) {
  use_data_script("two_gpus.json");
  auto backend = open_ok();
  std::vector<DeviceSample> samples(5);
  samples[1].lost = true;
  samples[1].error = "stale";
  samples[1].processes.resize(9);
  backend->sample_devices(samples);
  ASSERT_EQ(samples.size(), 2U);
  EXPECT_FALSE(samples[1].lost);
  EXPECT_EQ(samples[1].error, "");
  EXPECT_EQ(samples[1].processes.size(), 2U);
}

TEST_F(NvmlBackendTest, GpuLostInAReusedSampleShowsNoStaleProcesses) {
  use_data_script("two_gpus.json");
  auto backend = open_ok();
  std::vector<DeviceSample> samples;
  backend->sample_devices(samples);
  ASSERT_EQ(samples.size(), 2U);
  ASSERT_FALSE(samples[1].processes.empty());
  reload(R"({"devices": [{"name": "A", "memory": {"total": 1}},
                         {"name": "B", "memory": {"total": 1}, "errors": {"memory_v2": "GPU_IS_LOST"}}]})");
  backend->sample_devices(samples);  // the same vector: the backend reuses its elements
  EXPECT_TRUE(samples[1].lost);
  EXPECT_TRUE(samples[1].processes.empty());
  EXPECT_FALSE(samples[1].processes_supported);
}

}  // namespace
}  // namespace vramscope
