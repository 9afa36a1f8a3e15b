// tests/cpp/view/test_model.cpp -- the view model: driver/allocator join, sort, filter, selection
#include <gtest/gtest.h>

#include <vector>

#include "fixtures.hpp"
#include "view/model.hpp"

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

}  // namespace
}  // namespace vramscope::view
