// tests/cpp/core/test_join.cpp -- the per-process join: arithmetic and the inconsistent cases
#include <gtest/gtest.h>
#include <unistd.h>

#include "build_limits.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/join.hpp"

namespace vramscope {
namespace {

using testing::make_allocator;
using testing::make_device;
using testing::make_process;
using testing::mib;

TEST(Join, DecomposesDriverUsedIntoNonPytorchCacheAndAllocated) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(100, 30000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 20480, 24576));

  const JoinResult r = join_processes(s);
  ASSERT_EQ(r.devices.size(), 1U);
  ASSERT_EQ(r.devices[0].processes.size(), 1U);
  const JoinedProcess& row = r.devices[0].processes[0];
  ASSERT_TRUE(row.driver && row.torch);
  EXPECT_EQ(row.issues, 0);
  EXPECT_EQ(row.cached_free_bytes, (24576 - 20480) * mib);
  EXPECT_EQ(row.non_pytorch_bytes, (30000 - 24576) * mib);
  // The three parts add up to what the driver reports.
  EXPECT_EQ(*row.non_pytorch_bytes + *row.cached_free_bytes + row.torch->allocated_bytes,
            *row.driver->used_bytes);
  EXPECT_TRUE(r.any_torch);
  EXPECT_TRUE(r.unmatched_allocators.empty());
}

TEST(Join, MatchesByPidAndDeviceUuidNotByPidAlone) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices.push_back(make_device(1));
  s.devices[0].processes.push_back(make_process(100, 1000));
  s.devices[1].processes.push_back(make_process(100, 5000));
  s.allocators.push_back(make_allocator(100, s.devices[1], 3000, 4000));

  const JoinResult r = join_processes(s);
  EXPECT_FALSE(r.devices[0].processes[0].torch);
  ASSERT_TRUE(r.devices[1].processes[0].torch);
  EXPECT_EQ(r.devices[1].processes[0].non_pytorch_bytes, 1000 * mib);
}

TEST(Join, ReservedAboveDriverUsedLeavesNonPytorchUnknown) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(100, 2000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 1000, 2500));

  const JoinResult r = join_processes(s);
  const JoinedProcess& row = r.devices[0].processes[0];
  EXPECT_FALSE(row.non_pytorch_bytes);
  EXPECT_EQ(row.cached_free_bytes, 1500 * mib);
  EXPECT_EQ(row.issues, JoinIssueReservedExceedsDriverUsed);
  EXPECT_EQ(describe_join_issues(row.issues), "torch reserved > driver used");
}

TEST(Join, AllocatedAboveReservedLeavesCacheUnknown) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(100, 9000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 5000, 4000));

  const JoinResult r = join_processes(s);
  const JoinedProcess& row = r.devices[0].processes[0];
  EXPECT_FALSE(row.cached_free_bytes);
  EXPECT_EQ(row.non_pytorch_bytes, 5000 * mib);
  EXPECT_EQ(row.issues, JoinIssueAllocatedExceedsReserved);
}

TEST(Join, AgentClaimingMoreThanTheGpuHasTakesPartInNoArithmetic) {
  // A forged segment: 16 PiB reserved on a 140 GiB GPU.
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(100, 9000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 1000, 16ULL << 30U));

  const JoinResult r = join_processes(s);
  const JoinedProcess& row = r.devices[0].processes[0];
  ASSERT_TRUE(row.torch);
  EXPECT_FALSE(row.cached_free_bytes);
  EXPECT_FALSE(row.non_pytorch_bytes);
  EXPECT_EQ(row.issues, JoinIssueExceedsDeviceTotal);
  EXPECT_EQ(describe_join_issues(row.issues), "torch numbers > GPU total (damaged agent segment?)");
}

TEST(Join, AgentPidMissingFromDriverListIsShownApartNotGuessed) {
  // Inside a container the agent knows pid 7 while NVML lists host pid 31337: exactly one
  // unmatched process, and still no guess.
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(31337, 6000, false));
  s.allocators.push_back(make_allocator(7, s.devices[0], 3000, 4000));

  const JoinResult r = join_processes(s);
  ASSERT_EQ(r.devices[0].processes.size(), 2U);
  const JoinedProcess& driver_row = r.devices[0].processes[0];
  const JoinedProcess& agent_row = r.devices[0].processes[1];
  EXPECT_EQ(driver_row.pid, 31337U);
  EXPECT_FALSE(driver_row.torch);
  EXPECT_EQ(agent_row.pid, 7U);
  EXPECT_FALSE(agent_row.driver);
  EXPECT_FALSE(agent_row.non_pytorch_bytes);
  EXPECT_EQ(agent_row.cached_free_bytes, 1000 * mib);
  EXPECT_EQ(agent_row.issues, JoinIssuePidNotInDriverList);
  EXPECT_EQ(describe_join_issues(agent_row.issues), "pid not in driver list (container?)");
}

TEST(Join, AgentSlotOfADeviceTheProcessNeverUsedGivesNoRow) {
  // DDP rank 1 (pid 200) uses GPU 1 only, but its agent publishes a slot for every visible GPU.
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices.push_back(make_device(1));
  s.devices[0].processes.push_back(make_process(100, 6000));
  s.devices[1].processes.push_back(make_process(200, 6000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 3000, 4000));
  s.allocators.push_back(make_allocator(200, s.devices[0], 0, 0));
  s.allocators.push_back(make_allocator(200, s.devices[1], 3000, 4000));

  const JoinResult r = join_processes(s);
  ASSERT_EQ(r.devices[0].processes.size(), 1U);
  EXPECT_EQ(r.devices[0].processes[0].pid, 100U);
  ASSERT_EQ(r.devices[1].processes.size(), 1U);
  EXPECT_TRUE(r.devices[1].processes[0].torch);
  EXPECT_TRUE(r.unmatched_allocators.empty());

  // Once it held memory there it is shown, even without a driver row (a container).
  s.allocators[1].peak_reserved_bytes = 2 * mib;
  EXPECT_EQ(join_processes(s).devices[0].processes.size(), 2U);
}

TEST(Join, DriverUsedNotAvailableIsFlagged) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(100, 0));
  s.devices[0].processes[0].used_bytes.reset();
  s.allocators.push_back(make_allocator(100, s.devices[0], 10, 20));

  const JoinResult r = join_processes(s);
  const JoinedProcess& row = r.devices[0].processes[0];
  EXPECT_FALSE(row.non_pytorch_bytes);
  EXPECT_EQ(row.issues, JoinIssueDriverUsedUnknown);
}

TEST(Join, AgentOnUnknownDeviceIsUnmatched) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  AllocatorSample stray = make_allocator(100, s.devices[0], 1, 2);
  stray.device_uuid = "GPU-ffffffff-0000-0000-0000-000000000000";
  s.allocators.push_back(stray);

  const JoinResult r = join_processes(s);
  EXPECT_TRUE(r.devices[0].processes.empty());
  ASSERT_EQ(r.unmatched_allocators.size(), 1U);
  EXPECT_EQ(r.unmatched_allocators[0].device_uuid, stray.device_uuid);
  EXPECT_FALSE(r.any_torch);
}

TEST(Join, AgentOnMigInstanceJoinsItsParentDevice) {
  SystemSample s;
  s.devices.push_back(make_device(0));
  MigInstanceSample mig;
  mig.uuid = "MIG-11111111-2222-3333-4444-555555555555";
  s.devices[0].mig_instances.push_back(mig);
  s.devices[0].processes.push_back(make_process(100, 4000));
  AllocatorSample a = make_allocator(100, s.devices[0], 1000, 3000);
  a.device_uuid = mig.uuid;
  s.allocators.push_back(a);

  const JoinResult r = join_processes(s);
  const JoinedProcess& row = r.devices[0].processes[0];
  ASSERT_TRUE(row.torch);
  EXPECT_EQ(row.non_pytorch_bytes, 1000 * mib);
}

/// One row of a join as a line, for comparing two joins.
std::string describe_row(uint32_t pid, const ProcessSample* driver, const AllocatorSample* torch,
                         const std::optional<uint64_t>& cached,
                         const std::optional<uint64_t>& non_pytorch, uint8_t issues) {
  const auto opt = [](const std::optional<uint64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  return "  pid " + std::to_string(pid) + " driver " +
         (driver != nullptr
              ? std::to_string(driver->pid) + "/" + opt(driver->used_bytes) + "/" + driver->command
              : "-") +
         " torch " +
         (torch != nullptr ? std::to_string(torch->pid) + "/" + torch->device_uuid + "/" +
                                 std::to_string(torch->reserved_bytes)
                           : "-") +
         " cached " + opt(cached) + " non-pytorch " + opt(non_pytorch) + " issues " +
         std::to_string(issues) + "\n";
}

/// Every field of a join, one line per row.
std::string describe(const JoinResult& r) {
  std::string out = r.any_torch ? "torch\n" : "no torch\n";
  for (const JoinedDevice& d : r.devices) {
    for (const JoinedProcess& p : d.processes) {
      out += "device " + std::to_string(d.device_position) +
             describe_row(p.pid, p.driver ? &*p.driver : nullptr, p.torch ? &*p.torch : nullptr,
                          p.cached_free_bytes, p.non_pytorch_bytes, p.issues);
    }
  }
  for (const AllocatorSample& a : r.unmatched_allocators) {
    out += "unmatched " + std::to_string(a.pid) + " " + a.device_uuid + "\n";
  }
  return out;
}

/// The same for a join as references.
std::string describe(const JoinedRows& r) {
  std::string out = r.any_torch ? "torch\n" : "no torch\n";
  for (const JoinedRow& p : r.rows) {
    out +=
        "device " + std::to_string(p.device_position) +
        describe_row(p.pid, p.driver, p.torch, p.cached_free_bytes, p.non_pytorch_bytes, p.issues);
  }
  for (const AllocatorSample* a : r.unmatched_allocators) {
    out += "unmatched " + std::to_string(a->pid) + " " + a->device_uuid + "\n";
  }
  return out;
}

/// Two GPUs, one with a MIG instance; pids repeated on a GPU (the k-th process of a pid takes
/// its k-th agent), an agent of a pid the driver does not list, one of a GPU nobody has, one
/// on the MIG instance, and an agent slot of a GPU its process never used.
SystemSample tangled_sample() {
  SystemSample s;
  s.devices.push_back(make_device(0));
  s.devices.push_back(make_device(1));
  MigInstanceSample mig;
  mig.uuid = "MIG-11111111-2222-3333-4444-555555555555";
  s.devices[1].mig_instances.push_back(mig);
  s.devices[0].processes.push_back(make_process(100, 30000));
  s.devices[0].processes.push_back(make_process(100, 20000, true, "python worker.py"));
  s.devices[0].processes.push_back(make_process(200, 900, false));
  s.devices[1].processes.push_back(make_process(300, 5000));
  s.devices[1].processes.push_back(make_process(100, 7000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 10000, 12000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 9000, 11000));
  s.allocators.push_back(make_allocator(100, s.devices[0], 1, 2));      // a third: left over
  s.allocators.push_back(make_allocator(400, s.devices[0], 100, 200));  // pid not listed
  AllocatorSample on_mig = make_allocator(300, s.devices[1], 1000, 3000);
  on_mig.device_uuid = mig.uuid;
  s.allocators.push_back(on_mig);
  s.allocators.push_back(make_allocator(500, s.devices[1], 0, 0));  // untouched slot: no row
  AllocatorSample stray = make_allocator(600, s.devices[0], 10, 20);
  stray.device_uuid = "GPU-not-in-this-sample";
  s.allocators.push_back(stray);
  return s;
}

TEST(Join, AJoinerReusedOverSamplesOfAnyShapeJoinsEachAsJoinProcessesDoes) {
  // The Joiner keeps its rows from one sample to the next: nothing of an earlier sample may
  // linger in a row (a torch, a cache, an issue), whatever shape follows which; and its rows
  // refer to the sample where join_processes() copies it.
  std::vector<SystemSample> samples;
  // One row on GPU 0, in turn: an agent the driver does not list (flagged, no driver), its
  // process listed (torch and driver, no issue), the process without its agent (no torch).
  SystemSample agent_only;
  agent_only.devices.push_back(make_device(0));
  agent_only.allocators.push_back(make_allocator(700, agent_only.devices[0], 1000, 2000));
  SystemSample both = agent_only;
  both.devices[0].processes.push_back(make_process(700, 2500));
  SystemSample driver_only = both;
  driver_only.allocators.clear();
  for (const SystemSample* s : {&agent_only, &both, &driver_only, &agent_only}) {
    samples.push_back(*s);
  }
  samples.push_back(tangled_sample());
  samples.push_back(testing::make_two_gpu_sample());
  samples.push_back(SystemSample{});
  SystemSample one = tangled_sample();
  one.devices.erase(one.devices.begin());
  one.allocators.resize(2);
  samples.push_back(one);
  SystemSample swapped = tangled_sample();
  std::swap(swapped.devices[0], swapped.devices[1]);
  samples.push_back(swapped);
  samples.push_back(tangled_sample());
  Joiner joiner;
  Joiner scratch;
  JoinResult reused;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const std::string fresh = describe(join_processes(samples[i]));
      EXPECT_EQ(describe(joiner.join(samples[i])), fresh) << "sample " << i;
      // The copying join into rows kept from the samples before.
      join_processes(samples[i], scratch, reused);
      EXPECT_EQ(describe(reused), fresh) << "sample " << i;
    }
  }
}

TEST(Join, ASampleTooLargeToScanJoinsAsASmallOneDoes) {
  // Past a few thousand (agent, process) pairs the join goes through maps instead of scans:
  // the rows must come out the same. 5,000 agents of a GPU nobody has push the tangled sample
  // past that; they only add to the unmatched list.
  const SystemSample small = tangled_sample();
  SystemSample large = small;
  for (uint32_t k = 0; k < 5000; ++k) {
    AllocatorSample a = make_allocator(10000 + k, large.devices[0], 1, 1);
    a.device_uuid = "GPU-elsewhere";
    large.allocators.push_back(a);
  }
  std::string expected = describe(join_processes(small));
  for (uint32_t k = 0; k < 5000; ++k) {
    expected += "unmatched " + std::to_string(10000 + k) + " GPU-elsewhere\n";
  }
  EXPECT_EQ(describe(join_processes(large)), expected);
  EXPECT_NE(describe(join_processes(small)).find("issues"), std::string::npos);
}

TEST(Join, DevicePositionsFindTheFirstDeviceAUuidNamesInSmallAndLargeSamples) {
  // Scanned up to 16 uuids, mapped past them: the same answers either way.
  for (const uint32_t devices : {2U, 3U, 20U}) {
    SystemSample s;
    for (uint32_t d = 0; d < devices; ++d) s.devices.push_back(make_device(d));
    MigInstanceSample mig;
    mig.uuid = "MIG-11111111-2222-3333-4444-555555555555";
    s.devices[1].mig_instances.push_back(mig);
    s.devices.push_back(make_device(0));  // a second device with GPU 0's uuid: the first wins
    const DevicePositions positions(s);
    for (uint32_t d = 0; d < devices; ++d) EXPECT_EQ(positions.find(s.devices[d].uuid), d);
    EXPECT_EQ(positions.find(mig.uuid), 1U) << devices;
    EXPECT_EQ(positions.find(""), DevicePositions::none) << devices;
    EXPECT_EQ(positions.find("GPU-nowhere"), DevicePositions::none) << devices;
  }
}

TEST(Join, DescribesSeveralIssuesInOneLine) {
  EXPECT_EQ(describe_join_issues(0), "");
  EXPECT_EQ(describe_join_issues(JoinIssuePidNotInDriverList | JoinIssueAllocatedExceedsReserved),
            "pid not in driver list (container?); torch allocated > reserved");
}

TEST(Join, TakesTimeLinearInTheSample) {
  VRAMSCOPE_SKIP_TIME_BOUND_UNDER_TSAN();
  // 65,536 processes and as many agents whose pids all differ: every process compared with
  // every agent, ~4 billion steps a sample, seconds each for a file of a few repeated samples.
  SystemSample s;
  s.devices.push_back(make_device(0));
  for (uint32_t k = 0; k < 65536; ++k) {
    s.devices[0].processes.push_back(make_process(k + 1, 1));
    s.allocators.push_back(make_allocator(1'000'000 + k, s.devices[0], 0, 1));
  }
  s.allocators.back().pid = 65536;  // the last process finds its agent
  EXPECT_EXIT(
      {
        testing::limit_cpu_seconds(1);  // 0.2 s on the dev build
        const JoinResult joined = join_processes(s);
        const bool right = joined.devices.at(0).processes.size() == 65536 + 65535 &&
                           joined.devices[0].processes[65535].torch.has_value();
        ::_exit(right ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace vramscope
