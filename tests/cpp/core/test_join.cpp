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
