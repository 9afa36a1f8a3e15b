// tests/cpp/backends/test_nvml_real.cpp -- the backend on the real driver, checked against nvidia-smi
//
// Runs only with VRAMSCOPE_TEST_REAL_NVML=1 (tests/gpu/test_nvml_backend.py sets it on a GPU
// machine); skipped everywhere else.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vramscope/backend.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/units.hpp"

namespace vramscope {
namespace {

bool real_nvml_requested() {
  const char* value = std::getenv("VRAMSCOPE_TEST_REAL_NVML");
  return value != nullptr && std::string(value) == "1";
}

/// Lines of `command`'s stdout.
std::vector<std::string> run_lines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buffer[1024];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  pclose(pipe);
  return lines;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) {
    const auto begin = field.find_first_not_of(' ');
    fields.push_back(begin == std::string::npos ? "" : field.substr(begin));
  }
  return fields;
}

constexpr uint64_t mib = 1ULL << 20U;

TEST(RealNvml, MatchesNvidiaSmi) {
  if (!real_nvml_requested()) GTEST_SKIP() << "set VRAMSCOPE_TEST_REAL_NVML=1 on a GPU machine";
  BackendOpenResult opened = open_nvml_backend({});
  ASSERT_EQ(opened.failure, BackendFailure::None) << opened.message;
  std::vector<DeviceSample> samples;
  opened.backend->sample_devices(samples);

  const auto smi = run_lines(
      "nvidia-smi "
      "--query-gpu=index,uuid,pci.bus_id,memory.total,memory.reserved,memory.used,memory.free "
      "--format=csv,noheader,nounits");
  ASSERT_EQ(smi.size(), samples.size());
  for (std::size_t i = 0; i < smi.size(); ++i) {
    const auto f = split_csv(smi[i]);
    ASSERT_EQ(f.size(), 7U) << smi[i];
    const DeviceSample& gpu = samples.at(std::stoul(f[0]));
    SCOPED_TRACE(gpu.uuid);
    EXPECT_EQ(gpu.uuid, f[1]);
    EXPECT_EQ(gpu.pci_bus_id, f[2]);
    EXPECT_FALSE(gpu.lost);
    EXPECT_EQ(gpu.error, "");
    EXPECT_TRUE(gpu.memory_v2) << "GetMemoryInfo_v2 failed: the version word is wrong?";
    ASSERT_TRUE(gpu.total_bytes && gpu.reserved_bytes && gpu.used_bytes && gpu.free_bytes);
    EXPECT_EQ(to_mib(*gpu.total_bytes), std::stoull(f[3]));
    EXPECT_EQ(to_mib(*gpu.reserved_bytes), std::stoull(f[4]));
    // used/free move while other work runs: allow 256 MiB between the two reads.
    EXPECT_NEAR(static_cast<double>(to_mib(*gpu.used_bytes)), std::stod(f[5]), 256);
    EXPECT_NEAR(static_cast<double>(to_mib(*gpu.free_bytes)), std::stod(f[6]), 256);
    const uint64_t parts = *gpu.reserved_bytes + *gpu.used_bytes + *gpu.free_bytes;
    EXPECT_NEAR(static_cast<double>(parts), static_cast<double>(*gpu.total_bytes),
                static_cast<double>(*gpu.total_bytes) * 0.01);
  }
}

TEST(RealNvml, ProcessesMatchNvidiaSmi) {
  if (!real_nvml_requested()) GTEST_SKIP() << "set VRAMSCOPE_TEST_REAL_NVML=1 on a GPU machine";
  BackendOpenResult opened = open_nvml_backend({});
  ASSERT_EQ(opened.failure, BackendFailure::None) << opened.message;
  // Processes come and go: retry a few times until both views agree.
  std::set<std::pair<std::string, uint32_t>> ours;
  std::set<std::pair<std::string, uint32_t>> theirs;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<DeviceSample> samples;
    opened.backend->sample_devices(samples);
    ours.clear();
    for (const DeviceSample& gpu : samples) {
      EXPECT_TRUE(gpu.processes_supported) << gpu.uuid;
      for (const ProcessSample& p : gpu.processes) {
        if ((p.kinds & ProcessKindCompute) != 0) ours.insert({gpu.uuid, p.pid});
      }
    }
    theirs.clear();
    for (const std::string& line :
         run_lines("nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader,nounits")) {
      const auto f = split_csv(line);
      if (f.size() == 2) theirs.insert({f[0], static_cast<uint32_t>(std::stoul(f[1]))});
    }
    if (ours == theirs) break;
  }
  EXPECT_EQ(ours, theirs);
}

TEST(RealNvml, ThousandSamplesWithoutErrors) {
  if (!real_nvml_requested()) GTEST_SKIP() << "set VRAMSCOPE_TEST_REAL_NVML=1 on a GPU machine";
  BackendOpenResult opened = open_nvml_backend({});
  ASSERT_EQ(opened.failure, BackendFailure::None) << opened.message;
  std::vector<DeviceSample> samples;
  for (int i = 0; i < 1000; ++i) {
    opened.backend->sample_devices(samples);
    for (const DeviceSample& gpu : samples) {
      ASSERT_EQ(gpu.error, "") << "sample " << i << ", GPU " << gpu.index;
      ASSERT_TRUE(gpu.used_bytes.has_value());
    }
  }
}

}  // namespace
}  // namespace vramscope
