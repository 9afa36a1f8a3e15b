// tests/cpp/view/test_model.cpp -- the view model: driver/allocator join, sort, filter, selection
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vramscope/join.hpp"
#include "vramscope/view/model.hpp"

namespace vramscope::view {
namespace {

using fixtures::gib;

std::vector<uint32_t> pids(const ViewModel& model) {
  std::vector<uint32_t> out;
  for (const auto& row : model.rows()) out.push_back(row.pid);
  return out;
}

TEST(ViewModel, SplitsDriverUsedIntoNonPytorchCachedAllocatedAndOther) {
  ViewModel model;
  model.ingest(fixtures::one_gpu());
  ASSERT_EQ(model.gpus().size(), 1U);
  const MemorySplit& split = model.gpus()[0].split;
  EXPECT_TRUE(split.has_agents);
  EXPECT_EQ(split.allocated_bytes, 8 * gib);
  EXPECT_EQ(split.cached_free_bytes, 2 * gib);
  EXPECT_EQ(split.non_pytorch_bytes, 2 * gib);  // 12 GiB driver-used - 10 GiB reserved
  EXPECT_EQ(split.other_bytes, 3 * gib);        // 15 GiB used - 12 GiB of the agent's process
  EXPECT_EQ(split.driver_reserved_bytes, 512 * fixtures::mib);
  EXPECT_EQ(split.allocated_bytes + split.cached_free_bytes + split.non_pytorch_bytes +
                split.other_bytes + split.driver_reserved_bytes + split.free_bytes,
            split.total_bytes);
  EXPECT_EQ(model.gpus()[0].torch_reserved_bytes, 10 * gib);
}

TEST(ViewModel, AFrameTakenWhileSegmentsMoveKeepsTheSettledNonPytorch) {
  // The agent's settled pairing: 2 GiB beyond reserved. This frame's driver reading caught
  // 4 GiB of segments torch has not traced yet (12 + 4 GiB used by the process).
  SystemSample sample = fixtures::one_gpu();
  DriverBreakdown parts;
  parts.driver_bytes = 12 * gib;
  parts.reserved_bytes = 10 * gib;
  parts.context_bytes = 2 * gib;
  parts.other_bytes = 0;
  sample.allocators[0].breakdown = parts;
  sample.devices[0].processes[0].used_bytes = 16 * gib;
  *sample.devices[0].used_bytes += 4 * gib;
  *sample.devices[0].free_bytes -= 4 * gib;
  ViewModel model;
  model.ingest(sample);
  const MemorySplit& split = model.gpus()[0].split;
  EXPECT_EQ(split.non_pytorch_bytes, 2 * gib) << "not 6 GiB of invented non-PyTorch memory";
  EXPECT_EQ(split.cached_free_bytes, 2 * gib + 4 * gib) << "the segments in flight are torch's";
  EXPECT_EQ(split.other_bytes, 3 * gib);
  EXPECT_EQ(split.allocated_bytes + split.cached_free_bytes + split.non_pytorch_bytes +
                split.other_bytes + split.driver_reserved_bytes + split.free_bytes,
            split.total_bytes);
}

TEST(ViewModel, AgentClaimingMoreThanTheGpuHasIsLeftOutOfTheSplit) {
  // A forged segment must not turn a 140 GB GPU into "cached 16384P".
  SystemSample sample = fixtures::one_gpu();
  sample.allocators[0].reserved_bytes = uint64_t{1} << 50U;
  ViewModel model;
  model.ingest(sample);
  const MemorySplit& split = model.gpus()[0].split;
  EXPECT_FALSE(split.has_agents);
  EXPECT_EQ(split.cached_free_bytes, 0U);
  EXPECT_LE(split.allocated_bytes + split.cached_free_bytes + split.non_pytorch_bytes +
                split.other_bytes + split.driver_reserved_bytes + split.free_bytes,
            split.total_bytes);
  ASSERT_FALSE(model.rows().empty());
  EXPECT_FALSE(model.rows()[0].has_agent);
  EXPECT_NE(model.rows()[0].join_issues & vramscope::JoinIssueExceedsDeviceTotal, 0);
}

TEST(ViewModel, RowsJoinTheAgentOnPidAndGpu) {
  ViewModel model;
  model.ingest(fixtures::one_gpu());
  ASSERT_EQ(pids(model), (std::vector<uint32_t>{4242, 777}));  // memory, descending
  const ProcessRow& trainer = model.rows()[0];
  EXPECT_TRUE(trainer.has_agent);
  EXPECT_EQ(trainer.driver_used_bytes, 12 * gib);
  EXPECT_EQ(trainer.torch_allocated_bytes, 8 * gib);
  EXPECT_EQ(trainer.torch_reserved_bytes, 10 * gib);
  EXPECT_EQ(trainer.step, 120U);
  const ProcessRow& other = model.rows()[1];
  EXPECT_FALSE(other.has_agent);
  EXPECT_FALSE(other.torch_allocated_bytes.has_value());
  EXPECT_EQ(other.user, "bob");
}

TEST(ViewModel, APollingAgentsRowSaysItsPeaksAreSampledAndWhy) {
  ViewModel model;
  model.ingest(fixtures::one_gpu());
  ASSERT_EQ(model.rows()[0].pid, 4242U);
  EXPECT_FALSE(model.rows()[0].peaks_sampled);
  EXPECT_EQ(model.rows()[0].polling_reason, "");
  model.ingest(fixtures::one_gpu_polling());
  ASSERT_EQ(model.rows()[0].pid, 4242U);
  EXPECT_TRUE(model.rows()[0].peaks_sampled);
  EXPECT_EQ(model.rows()[0].polling_reason, fixtures::polling_reason);
  EXPECT_FALSE(model.rows()[1].peaks_sampled) << "a process without an agent samples nothing";
}

TEST(ViewModel, AgentWhosePidTheDriverDoesNotListStillGetsARow) {
  SystemSample sample = fixtures::one_gpu();
  sample.allocators[0].pid = 17;  // as seen inside a container
  ViewModel model;
  model.ingest(sample);
  ASSERT_EQ(model.total_row_count(), 3U);
  const auto it = std::find_if(model.rows().begin(), model.rows().end(),
                               [](const ProcessRow& r) { return r.pid == 17; });
  ASSERT_NE(it, model.rows().end());
  EXPECT_FALSE(it->in_driver_list);
  EXPECT_TRUE(it->has_agent);
  EXPECT_FALSE(it->driver_used_bytes.has_value());
  // Its reserve is attributed to it; the rest of "used" stays "other".
  EXPECT_EQ(model.gpus()[0].split.other_bytes, 5 * gib);
  EXPECT_EQ(model.gpus()[0].split.non_pytorch_bytes, 0U);
}

TEST(ViewModel, AgentOnAnUnknownDeviceIsIgnored) {
  SystemSample sample = fixtures::one_gpu();
  sample.allocators[0].device_uuid = "GPU-not-here";
  ViewModel model;
  model.ingest(sample);
  EXPECT_EQ(model.total_row_count(), 2U);
  EXPECT_FALSE(model.gpus()[0].split.has_agents);
}

TEST(ViewModel, ExitedProcessesAndGpusDisappearButHistoriesSurvive) {
  ViewModel model(3);
  model.ingest(fixtures::one_gpu(0));
  SystemSample next = fixtures::one_gpu(1);
  next.devices[0].processes.pop_back();  // pid 777 exited
  model.ingest(next);
  EXPECT_EQ(pids(model), std::vector<uint32_t>{4242});
  model.ingest(fixtures::one_gpu(2));
  model.ingest(fixtures::one_gpu(3));
  const auto& history = model.gpus()[0].history;
  ASSERT_EQ(history.size(), 3U) << "bounded by the capacity";
  EXPECT_EQ(history.front().timestamp_ns, fixtures::one_gpu(1).timestamp_ns);
  EXPECT_EQ(history.back().torch_allocated_bytes, 8 * gib + 3 * gib / 2);
  model.ingest(SystemSample{});
  EXPECT_TRUE(model.gpus().empty());
  EXPECT_TRUE(model.rows().empty());
}

TEST(ViewModel, SortKeysOrderRows) {
  ViewModel model;
  model.ingest(fixtures::eight_gpus());
  EXPECT_EQ(model.rows().front().pid, 10056U);  // the rank on GPU 7 uses the most
  model.set_sort_key(SortKey::Pid);
  EXPECT_EQ(model.rows().front().pid, 10000U);
  EXPECT_EQ(model.rows().back().pid, 10063U);
  model.set_sort_key(SortKey::Allocated);
  EXPECT_EQ(model.rows()[0].pid, 10056U);
  EXPECT_EQ(model.rows()[7].pid, 10000U);
  EXPECT_FALSE(model.rows()[8].has_agent) << "rows without an agent come last";
  model.set_sort_key(SortKey::Gpu);
  EXPECT_EQ(model.rows()[0].gpu_index, 0U);
  EXPECT_EQ(model.rows()[0].pid, 10000U);  // largest on GPU 0 first
  EXPECT_EQ(model.rows()[63].gpu_index, 7U);
  model.set_sort_key(SortKey::Command);
  EXPECT_EQ(model.rows()[0].command, "python -m torch.distributed.run train.py");
  EXPECT_EQ(model.rows()[63].command, "worker-6");
}

TEST(ViewModel, CycleSortVisitsEveryKeyAndWrapsAround) {
  ViewModel model;
  std::vector<std::string_view> seen;
  for (int i = 0; i < 6; ++i) {
    seen.push_back(sort_key_name(model.sort_key()));
    model.cycle_sort_key();
  }
  EXPECT_EQ(seen, (std::vector<std::string_view>{"memory", "pid", "allocated", "gpu", "command",
                                                 "memory"}));
  EXPECT_EQ(parse_sort_key("gpu"), SortKey::Gpu);
  EXPECT_FALSE(parse_sort_key("GPU-util").has_value());
}

TEST(ViewModel, FilterMatchesCommandUserOrPidIgnoringCase) {
  ViewModel model;
  model.ingest(fixtures::one_gpu());
  model.set_filter("OLLAMA");
  EXPECT_EQ(pids(model), std::vector<uint32_t>{777});
  model.set_filter("alice");
  EXPECT_EQ(pids(model), std::vector<uint32_t>{4242});
  model.set_filter("77");
  EXPECT_EQ(pids(model), std::vector<uint32_t>{777});
  model.set_filter("nothing-like-this");
  EXPECT_TRUE(model.rows().empty());
  EXPECT_EQ(model.total_row_count(), 2U);
  model.set_filter("");
  EXPECT_EQ(model.rows().size(), 2U);
}

TEST(ViewModel, SelectionFollowsTheProcessAcrossSortsAndIsClamped) {
  ViewModel model;
  model.ingest(fixtures::eight_gpus());
  EXPECT_FALSE(model.selected_index().has_value());
  model.move_selection(1);  // nothing selected yet: the first row
  EXPECT_EQ(model.selected_index(), 0U);
  model.move_selection(3);
  const uint32_t pid = model.rows()[3].pid;
  model.set_sort_key(SortKey::Pid);
  ASSERT_TRUE(model.selected_index().has_value());
  EXPECT_EQ(model.rows()[*model.selected_index()].pid, pid);
  model.move_selection(-1000);
  EXPECT_EQ(model.selected_index(), 0U);
  model.move_selection(1000);
  EXPECT_EQ(model.selected_index(), 63U);
  model.set_filter("no-such-process");
  EXPECT_FALSE(model.selected_index().has_value());
  model.move_selection(1);  // no rows: nothing to select, no crash
  EXPECT_FALSE(model.selected_index().has_value());
}

TEST(ViewModel, RemembersTheLastOom) {
  ViewModel model;
  SystemSample sample = fixtures::one_gpu();
  OomRecord oom;
  oom.pid = 4242;
  oom.timestamp_ns = sample.timestamp_ns;
  sample.ooms.push_back(oom);
  model.ingest(sample);
  model.ingest(fixtures::one_gpu(1));
  ASSERT_TRUE(model.last_oom().has_value());
  EXPECT_EQ(model.last_oom()->pid, 4242U);
}

/// A breakdown whose six numbers say which (pid, device, step) it came from.
CategoryBytes categories(uint64_t tag) {
  return {tag, tag + 1, tag + 2, tag + 3, tag + 4, tag + 5};
}

const ProcessRow& row_of(const ViewModel& model, uint32_t pid, uint32_t gpu) {
  const auto it = std::find_if(model.rows().begin(), model.rows().end(), [&](const ProcessRow& r) {
    return r.pid == pid && r.gpu_index == gpu;
  });
  if (it == model.rows().end()) throw std::runtime_error("no row for pid " + std::to_string(pid));
  return *it;
}

TEST(ViewModel, StepCategoriesLandOnTheirProcessAndDevice) {
  SystemSample sample = fixtures::eight_gpus();
  // The rank of GPU 0 (pid 10000) also works on GPU 1, next to GPU 1's own rank (pid 10008).
  sample.devices[1].processes.push_back(fixtures::process(10000, 4 * gib, "python train.py"));
  sample.allocators.push_back(fixtures::agent(10000, sample.devices[1], 2 * gib, 3 * gib));
  sample.steps.push_back(fixtures::step(10000, "GPU-00000000", 7, categories(100)));
  sample.steps.push_back(fixtures::step(10000, "GPU-00000001", 7, categories(200)));
  sample.steps.push_back(fixtures::step(10008, "GPU-00000001", 9, categories(300)));
  ViewModel model;
  model.ingest(sample);
  EXPECT_EQ(row_of(model, 10000, 0).step_categories, categories(100));
  EXPECT_EQ(row_of(model, 10000, 1).step_categories, categories(200));
  EXPECT_EQ(row_of(model, 10008, 1).step_categories, categories(300));
  EXPECT_EQ(row_of(model, 10008, 1).categories_step, 9U);
  EXPECT_EQ(row_of(model, 10008, 1).categories_peak_bytes, 6 * 300U + 15U);
  EXPECT_FALSE(row_of(model, 10016, 2).step_categories.has_value()) << "rank without steps";
  EXPECT_FALSE(row_of(model, 10001, 0).step_categories.has_value()) << "process without agent";
}

TEST(ViewModel, NewerStepReplacesTheBreakdownAndOneWithoutCategoriesKeepsIt) {
  ViewModel model;
  SystemSample sample = fixtures::one_gpu(0);
  sample.steps.push_back(fixtures::step(4242, "GPU-00000000", 5, categories(10)));
  model.ingest(sample);
  EXPECT_EQ(row_of(model, 4242, 0).step_categories, categories(10));

  sample = fixtures::one_gpu(1);
  sample.steps.push_back(fixtures::step(4242, "GPU-00000000", 6, std::nullopt));
  model.ingest(sample);
  model.ingest(fixtures::one_gpu(2));  // no step at all in this sample
  EXPECT_EQ(row_of(model, 4242, 0).step_categories, categories(10));
  EXPECT_EQ(row_of(model, 4242, 0).categories_step, 5U);

  sample = fixtures::one_gpu(3);
  sample.steps.push_back(fixtures::step(4242, "GPU-00000000", 7, categories(20)));
  sample.steps.push_back(fixtures::step(4242, "GPU-00000000", 8, categories(30)));
  model.ingest(sample);
  EXPECT_EQ(row_of(model, 4242, 0).step_categories, categories(30));
  EXPECT_EQ(row_of(model, 4242, 0).categories_step, 8U);
}

TEST(ViewModel, ExitedAgentDropsItsBreakdown) {
  ViewModel model;
  SystemSample sample = fixtures::one_gpu(0);
  sample.steps.push_back(fixtures::step(4242, "GPU-00000000", 5, categories(10)));
  model.ingest(sample);
  sample = fixtures::one_gpu(1);
  sample.allocators.clear();  // the agent is gone (its segment was removed)
  model.ingest(sample);
  EXPECT_FALSE(row_of(model, 4242, 0).step_categories.has_value());
  model.ingest(fixtures::one_gpu(2));  // a new agent under the same pid starts without one
  EXPECT_FALSE(row_of(model, 4242, 0).step_categories.has_value());
}

TEST(ViewModel, RememberedStepsShowAtTheNextIngestAndASeekForgetsThem) {
  ViewModel model;
  model.ingest(fixtures::one_gpu(0));
  model.remember_steps({fixtures::step(4242, "GPU-00000000", 5, categories(10))});
  EXPECT_FALSE(row_of(model, 4242, 0).step_categories.has_value()) << "frozen until ingest";
  model.ingest(fixtures::one_gpu(1));
  EXPECT_EQ(row_of(model, 4242, 0).step_categories, categories(10));
  model.clear_history();
  model.ingest(fixtures::one_gpu(2));
  EXPECT_FALSE(row_of(model, 4242, 0).step_categories.has_value());
}

}  // namespace
}  // namespace vramscope::view
