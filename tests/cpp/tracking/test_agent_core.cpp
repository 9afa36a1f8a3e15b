// tests/cpp/tracking/test_agent_core.cpp -- the agent's tick/step/OOM logic with synthetic torch
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "tracking/reference_allocator.hpp"
#include "vramscope/attribution/attributor.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::tracking {
namespace {

namespace fs = std::filesystem;
using testing::ReferenceAllocator;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "vramscope-core-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    m_path = pattern;
  }
  ~TempDir() { fs::remove_all(m_path); }
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

/// torch's numbers for allocated bytes, set by the test (allocated is never event-derived).
struct FakeTorch {
  std::mutex mutex;
  std::vector<TorchStats> devices;
  explicit FakeTorch(std::size_t n) : devices(n) {}
  void set_allocated(std::size_t device, uint64_t bytes) {
    std::lock_guard lock(mutex);
    TorchStats& s = devices[device];
    s.allocated_bytes = bytes;
    s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, bytes);
    s.active_bytes = bytes + 1;
    s.inactive_split_bytes = 7;
  }
  StatsProvider provider() {
    return [this](std::size_t device) -> std::optional<TorchStats> {
      std::lock_guard lock(mutex);
      return devices[device];
    };
  }
};

AgentConfig config() {
  AgentConfig c;
  c.pid = static_cast<uint32_t>(::getpid());
  c.rank = 1;
  c.world_size = 2;
  c.ring_capacity = 1024;
  c.history_events = 16;
  return c;
}

/// torch's getDeviceStats for a reference allocator.
StatsProvider provider_of(std::vector<std::unique_ptr<ReferenceAllocator>>& models) {
  return [&models](std::size_t device) -> std::optional<TorchStats> {
    ReferenceAllocator& model = *models[device];
    TorchStats s;
    model.locked([&] {
      const CounterSeed truth = model.stats();
      const AllocatorTotals totals = model.totals();
      s.allocated_bytes = truth.allocated_bytes;
      s.peak_allocated_bytes = truth.peak_allocated_bytes;
      s.reserved_bytes = truth.reserved_bytes;
      s.peak_reserved_bytes = truth.peak_reserved_bytes;
      s.requested_bytes = truth.requested_bytes;
      s.peak_requested_bytes = truth.peak_requested_bytes;
      s.active_bytes = totals.active_bytes;
    });
    return s;
  };
}

/// A core tracking `models` (one device each) the way the agent wires it: a tracker per device
/// feeding the producer, a probe reading the model from inside the callback, then seeding.
std::unique_ptr<AgentCore> tracking_core(std::vector<std::unique_ptr<ReferenceAllocator>>& models,
                                         std::unique_ptr<AgentSegmentWriter> writer = nullptr) {
  std::vector<std::string> uuids;
  for (std::size_t d = 0; d < models.size(); ++d) uuids.push_back("GPU-" + std::to_string(d));
  auto core = std::make_unique<AgentCore>(uuids, provider_of(models), config(), std::move(writer));
  for (std::size_t d = 0; d < models.size(); ++d) {
    core->set_totals_probe(d, &ReferenceAllocator::probe, models[d].get());
    models[d]->attach([producer = core->producers() + d](Action action, uint64_t size,
                                                         uint64_t address, uint8_t raw) {
      producer->on_event(action, size, address, raw, 0, 0);
    });
    EXPECT_TRUE(core->seed(d));
  }
  return core;
}

TEST(AgentCore, StepRecordsCarryTorchsBlockPeaksAndArePublished) {
  TempDir dir;
  std::vector<std::unique_ptr<ReferenceAllocator>> models;
  models.push_back(std::make_unique<ReferenceAllocator>(1, false));
  auto core = tracking_core(models, open_agent_segment_writer(config().pid, 1, dir.path()));
  ReferenceAllocator& torch = *models[0];

  // A 700000-byte request is a 700416-byte block; a (19 MiB - 100) request takes a whole 20 MiB
  // segment, the 1 MiB left being too little to split off.
  const uint64_t small = torch.allocate_bytes(700000);
  const uint64_t large = torch.allocate_bytes((uint64_t{19} << 20U) - 100);
  torch.free_address(large);
  torch.free_address(small);
  std::vector<StepRecord> steps = core->step();
  ASSERT_EQ(steps.size(), 1U);
  EXPECT_EQ(steps[0].step, 1U);
  EXPECT_EQ(steps[0].rank, 1);
  EXPECT_EQ(steps[0].device_uuid, "GPU-0");
  EXPECT_EQ(steps[0].peak_allocated_bytes, 700416U + (20U << 20U));
  EXPECT_EQ(steps[0].peak_requested_bytes, 700000U + (19U << 20U) - 100U);
  EXPECT_EQ(steps[0].peak_reserved_bytes, (2U << 20U) + (20U << 20U));
  EXPECT_EQ(steps[0].allocated_bytes, 0U);
  EXPECT_GT(steps[0].duration_ns, 0);

  // The second step's high is below the first's (and below torch's all-time peak).
  const uint64_t again = torch.allocate_bytes(1000);
  steps = core->step();
  EXPECT_EQ(steps[0].step, 2U);
  EXPECT_EQ(steps[0].peak_allocated_bytes, 1024U);
  EXPECT_EQ(steps[0].allocated_bytes, 1024U);
  torch.free_address(again);

  core->tick();
  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> published;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, published, ooms);
  ASSERT_EQ(published.size(), 2U);
  EXPECT_EQ(published[0].peak_allocated_bytes, 700416U + (20U << 20U));
  ASSERT_EQ(allocators.size(), 1U);
  EXPECT_EQ(allocators[0].allocated_bytes, 0U);
  EXPECT_EQ(allocators[0].peak_allocated_bytes, 700416U + (20U << 20U));
  EXPECT_EQ(allocators[0].step, 2U);
  EXPECT_EQ(allocators[0].step_peak_allocated_bytes, 1024U);
  EXPECT_EQ(allocators[0].rank, 1);
  EXPECT_EQ(allocators[0].world_size, 2);
}

TEST(AgentCore, StepAndGlobalAllocatedPeaksAreTorchsOverTheSameIntervals) {
  // Two devices, one with expandable segments; the program resets torch's peaks now and then
  // (a common habit) and the agent ticks at random moments: every step's allocated peak equals
  // the true peak of its interval, and the global one torch's own (never reset here).
  std::vector<std::unique_ptr<ReferenceAllocator>> models;
  models.push_back(std::make_unique<ReferenceAllocator>(11, false));
  models.push_back(std::make_unique<ReferenceAllocator>(12, true));
  for (auto& model : models) {
    for (int op = 0; op < 300; ++op) model->random_operation();  // before attach
  }
  auto core = tracking_core(models);
  core->step();
  for (auto& model : models) static_cast<void>(model->take_interval_peak_allocated());
  std::mt19937_64 rng(5);
  uint64_t global[2] = {models[0]->stats().peak_allocated_bytes,
                        models[1]->stats().peak_allocated_bytes};
  uint64_t profiled[2] = {0, 0};  // a profile() from step 250 on
  for (int step = 0; step < 400; ++step) {
    if (step == 250) {
      core->restart_profile_peaks();
      for (std::size_t d = 0; d < 2; ++d) profiled[d] = models[d]->stats().allocated_bytes;
    }
    for (int op = 0, n = 1 + static_cast<int>(rng() % 60); op < n; ++op) {
      const std::size_t d = rng() % 2;
      models[d]->random_operation();
      if (rng() % 50 == 0) core->tick();
    }
    const std::vector<StepRecord> records = core->step();
    for (std::size_t d = 0; d < 2; ++d) {
      const uint64_t truth = models[d]->take_interval_peak_allocated();
      global[d] = std::max(global[d], truth);
      if (step >= 250) profiled[d] = std::max(profiled[d], truth);
      ASSERT_EQ(records[d].peak_allocated_bytes, truth) << "device " << d << " step " << step;
      ASSERT_EQ(records[d].allocated_bytes, models[d]->stats().allocated_bytes);
    }
    if (step % 7 == 0) models[step % 2]->reset_peaks();
  }
  for (std::size_t d = 0; d < 2; ++d) {
    const DeviceStatsView view = core->stats(d);
    EXPECT_EQ(view.peak.allocated_bytes, global[d]);
    EXPECT_EQ(core->profile_peaks(d).allocated_bytes, profiled[d]);
    EXPECT_EQ(view.allocated_mismatch_count, 0U);
    EXPECT_EQ(view.unsettled_count, 0U);
  }
}

TEST(AgentCore, GlobalPeaksStartAtTorchsAndResetOnlyOurs) {
  FakeTorch torch(1);
  torch.set_allocated(0, 5000);
  torch.set_allocated(0, 1000);
  torch.devices[0].reserved_bytes = 8000;
  torch.devices[0].peak_reserved_bytes = 9000;
  AgentCore core({"GPU-a"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  DeviceStatsView view = core.stats(0);
  EXPECT_EQ(view.peak.allocated_bytes, 5000U);
  EXPECT_EQ(view.peak.reserved_bytes, 9000U);
  EXPECT_EQ(view.reserved_bytes, 8000U);

  core.reset_peak(0);
  view = core.stats(0);
  EXPECT_EQ(view.peak.allocated_bytes, 1000U);
  EXPECT_EQ(view.peak.reserved_bytes, 8000U);
  EXPECT_EQ(torch.devices[0].peak_allocated_bytes, 5000U) << "torch's own peak untouched";
  EXPECT_EQ(core.segment_path(), "");
}

TEST(AgentCore, OomIsRecordedWithTheEventsLeadingToIt) {
  TempDir dir;
  FakeTorch torch(2);
  auto writer = open_agent_segment_writer(config().pid, 2, dir.path());
  AgentCore core({"GPU-0", "GPU-1"}, torch.provider(), config(), std::move(writer));
  ASSERT_TRUE(core.seed(0));
  ASSERT_TRUE(core.seed(1));
  EXPECT_FALSE(core.last_oom().has_value());
  for (uint64_t i = 0; i < 40; ++i) core.on_event(1, Action::SegmentAlloc, 1000 + i, i, 3);
  core.on_event(1, Action::Oom, 1ULL << 40U, 12345, 8);
  torch.set_allocated(1, 777);
  const OomRecord oom = core.record_oom(1, 1ULL << 40U, 80ULL << 30U, 12345);
  EXPECT_EQ(oom.cuda_device, 1);
  EXPECT_EQ(oom.device_uuid, "GPU-1");
  EXPECT_EQ(oom.allocated_bytes, 777U);
  EXPECT_EQ(oom.reserved_bytes, 40 * 1000U + 780U);
  ASSERT_TRUE(core.last_oom().has_value());
  EXPECT_EQ(core.last_oom()->requested_bytes, 1ULL << 40U);
  EXPECT_EQ(core.stats(1).oom_count, 1U);
  EXPECT_EQ(core.stats(0).oom_count, 0U);

  const std::vector<Event> history = core.recent_events(1);
  ASSERT_EQ(history.size(), 15U) << "bounded history: the recorder's 16 slots less the next one";
  EXPECT_EQ(history.back().action, Action::Oom);
  EXPECT_EQ(history.front().address, 26U) << "oldest kept first";
  EXPECT_TRUE(core.recent_events(0).empty());

  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  ASSERT_EQ(ooms.size(), 1U);
  EXPECT_EQ(ooms[0].device_free_bytes, 12345U);
}

TEST(AgentCore, EventsCarryTheLastTicksClockNeverAfterTheyHappened) {
  // The callback reads no clock: it copies the coarse clock the agent thread stored at its
  // last tick, so a stamp is never after its event and at most one tick before it.
  FakeTorch torch(1);
  AgentCore core({"GPU-test"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  const int64_t constructed_by = coarse_monotonic_ns();
  core.on_event(0, Action::Alloc, 512, 0x10, 0);
  // The coarse clock moves every few ms: wait for its next value, so that a tick can only
  // store a later stamp than the construction did.
  while (coarse_monotonic_ns() == constructed_by) {
  }
  const int64_t before_tick = coarse_monotonic_ns();
  core.tick();
  const int64_t after_tick = coarse_monotonic_ns();
  core.on_event(0, Action::FreeRequested, 512, 0x10, 1);
  core.on_event(0, Action::FreeCompleted, 512, 0x10, 2);
  const std::vector<Event> history = core.recent_events(0);
  ASSERT_EQ(history.size(), 3U);
  EXPECT_LE(history[0].timestamp_ns, constructed_by) << "stamped with the construction's clock";
  EXPECT_GT(history[0].timestamp_ns, 0);
  for (std::size_t i = 1; i < history.size(); ++i) {
    EXPECT_GE(history[i].timestamp_ns, before_tick) << i;
    EXPECT_LE(history[i].timestamp_ns, after_tick) << i;
  }
}

TEST(AgentCore, OnlyStreamingSendsEventsToTheConsumerTheRecorderSeesThemAll) {
  FakeTorch torch(1);
  AgentCore core({"GPU-test"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  std::vector<uint64_t> consumed;
  core.set_event_consumer([&](std::size_t, const std::vector<Event>& events) {
    for (const Event& e : events) consumed.push_back(e.address);
  });
  core.on_event(0, Action::Alloc, 512, 0x1, 0);
  core.set_streaming(true);
  core.on_event(0, Action::Alloc, 512, 0x2, 0);
  core.on_event(0, Action::Alloc, 512, 0x3, 0);
  core.set_streaming(false);
  core.on_event(0, Action::Alloc, 512, 0x4, 0);
  core.tick();
  EXPECT_EQ(consumed, (std::vector<uint64_t>{0x2, 0x3}));
  EXPECT_EQ(core.stats(0).requested_bytes, 4 * 512U) << "counters see every event";
  EXPECT_EQ(core.stats(0).dropped_event_count, 0U);
  const std::vector<Event> history = core.recent_events(0);
  ASSERT_EQ(history.size(), 4U);
  EXPECT_EQ(history.front().address, 0x1U);
  EXPECT_EQ(history.back().address, 0x4U);
}

TEST(AgentCore, WindowPeaksRollOver) {
  FakeTorch torch(1);
  AgentConfig c = config();
  c.window_ns = 0;  // every tick closes a window
  AgentCore core({"GPU-w"}, torch.provider(), c, nullptr);
  ASSERT_TRUE(core.seed(0));
  core.on_event(0, Action::SegmentAlloc, 5000, 0, 3);
  core.on_event(0, Action::SegmentFree, 5000, 0, 4);
  core.tick();
  EXPECT_EQ(core.stats(0).window_peak.reserved_bytes, 5000U);
  core.tick();
  EXPECT_EQ(core.stats(0).window_peak.reserved_bytes, 0U);
}

TEST(AgentCore, PollingOnlyDevicesFollowTheProvider) {
  FakeTorch torch(1);
  torch.devices[0].reserved_bytes = 3000;
  torch.devices[0].peak_reserved_bytes = 4000;
  torch.set_allocated(0, 1200);
  AgentCore core({"GPU-p"}, torch.provider(), config(), nullptr);
  core.set_polling_only(0);
  DeviceStatsView view = core.stats(0);
  EXPECT_TRUE(view.polling_only);
  EXPECT_EQ(view.reserved_bytes, 3000U);
  EXPECT_EQ(view.peak.reserved_bytes, 4000U);
  EXPECT_EQ(view.allocated_bytes, 1200U);
  EXPECT_EQ(view.active_bytes, 1201U);
  EXPECT_EQ(view.inactive_split_bytes, 7U);
  EXPECT_EQ(view.event_count, 0U);
}

TEST(AgentCore, APollingCoreSaysWhyBesideItsPolledSlots) {
  TempDir dir;
  FakeTorch torch(2);
  torch.set_allocated(0, 1200);
  AgentCore core({"GPU-p", "GPU-q"}, torch.provider(), config(),
                 open_agent_segment_writer(config().pid, 2, dir.path()));
  core.set_polling_only(0);
  core.set_polling_reason("cudaMallocAsync allocator has no trace events");
  core.tick();
  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  ASSERT_EQ(allocators.size(), 2U);
  EXPECT_TRUE(allocators[0].polling_only);
  EXPECT_EQ(allocators[0].polling_reason, "cudaMallocAsync allocator has no trace events");
  EXPECT_FALSE(allocators[1].polling_only);
  EXPECT_EQ(allocators[1].polling_reason, "");
  // Without a writer there is nowhere to say it, and nothing fails.
  AgentCore quiet({"GPU-p"}, torch.provider(), config(), nullptr);
  quiet.set_polling_reason("unpublished");
}

TEST(AgentCore, TheTrackersProducerPointerFeedsTheCoresDevice) {
  // The agent's tracker keeps core.producers() and calls DeviceProducer::on_event() itself:
  // what it feeds must be the device the core reports, and only that device.
  FakeTorch torch(2);
  AgentCore core({"GPU-0", "GPU-1"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  ASSERT_TRUE(core.seed(1));
  DeviceProducer* producers = core.producers();
  producers[1].on_event(Action::SegmentAlloc, 2 << 20, 0x2000, 3, 0, 0);
  producers[1].on_event(Action::Alloc, 4096, 0x2000, 0, 0, 0);
  core.tick();
  const DeviceStatsView one = core.stats(1);
  EXPECT_EQ(one.event_count, 2U);
  EXPECT_EQ(one.reserved_bytes, 2U << 20);
  EXPECT_EQ(one.requested_bytes, 4096U);
  ASSERT_EQ(core.recent_events(1).size(), 2U);
  EXPECT_EQ(core.recent_events(1)[1].address, 0x2000U);
  EXPECT_EQ(core.stats(0).event_count, 0U);
  EXPECT_TRUE(core.recent_events(0).empty());
  EXPECT_EQ(&core.counters(1), &producers[1].counters);
}

TEST(AgentCore, ItsTrackerTargetAppliesEntriesOfItsDevicesOnly) {
  // The tracker's whole path from torch's entry fields: a known device reaches its producer
  // (action decoded from torch's raw value), an index outside the core is ignored, not applied.
  FakeTorch torch(2);
  AgentCore core({"GPU-0", "GPU-1"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  ASSERT_TRUE(core.seed(1));
  const TrackerTarget target = core.tracker_target();
  const auto no_op = [] { return 0U; };
  constexpr auto raw_alloc = static_cast<int64_t>(Action::Alloc);  // torch's TraceEntry::ALLOC
  target.on_trace_entry(1, raw_alloc, 4096, 0x1000, no_op);
  target.on_trace_entry(2, raw_alloc, 512, 0x2000, no_op);
  target.on_trace_entry(-1, raw_alloc, 512, 0x3000, no_op);
  core.tick();
  EXPECT_EQ(core.stats(0).event_count, 0U);
  EXPECT_EQ(core.stats(1).event_count, 1U);
  EXPECT_EQ(core.stats(1).requested_bytes, 4096U);
  ASSERT_EQ(core.recent_events(1).size(), 1U);
  EXPECT_EQ(core.recent_events(1)[0].address, 0x1000U);
  EXPECT_EQ(core.recent_events(1)[0].action, Action::Alloc);
}

#if VRAMSCOPE_BENCH_HOOKS  // the pause exists in benchmark builds only
TEST(AgentCore, APausedTrackerTargetIgnoresEventsUntilResumed) {
  // The benchmark's pause (vramscope._agent._bench_pause_tracking) must drop vramscope's whole
  // share of an event, counters and recorder alike, and resuming must count again.
  FakeTorch torch(1);
  AgentCore core({"GPU-0"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  const TrackerTarget target = core.tracker_target();
  const auto no_op = [] { return 0U; };
  constexpr auto raw_alloc = static_cast<int64_t>(Action::Alloc);  // torch's TraceEntry::ALLOC
  pause_tracking(true);
  target.on_trace_entry(0, raw_alloc, 4096, 0x1000, no_op);
  EXPECT_EQ(core.counters(0).total_event_count(), 0U);
  EXPECT_TRUE(core.recent_events(0).empty());
  pause_tracking(false);
  target.on_trace_entry(0, raw_alloc, 512, 0x2000, no_op);
  core.tick();
  EXPECT_EQ(core.stats(0).requested_bytes, 512U);
  ASSERT_EQ(core.recent_events(0).size(), 1U);
  EXPECT_EQ(core.recent_events(0)[0].address, 0x2000U);
}
#endif

TEST(AgentCore, ConcurrentProducersOnSeveralDevices) {
  // Two allocating threads per device (serialised by the model's lock, as torch serialises
  // callbacks per device), four devices in parallel, and an agent thread ticking and stepping
  // throughout. At the end every device's numbers equal its model's.
  constexpr std::size_t devices = 4;
  constexpr int operations_per_thread = 20'000;
  std::vector<std::unique_ptr<ReferenceAllocator>> models;
  for (std::size_t d = 0; d < devices; ++d) {
    models.push_back(std::make_unique<ReferenceAllocator>(100 + d, d % 2 == 1));
  }
  StatsProvider provider = [&](std::size_t device) -> std::optional<TorchStats> {
    const CounterSeed truth = models[device]->stats();
    TorchStats s;
    s.reserved_bytes = truth.reserved_bytes;
    s.peak_reserved_bytes = truth.peak_reserved_bytes;
    s.requested_bytes = truth.requested_bytes;
    s.peak_requested_bytes = truth.peak_requested_bytes;
    return s;
  };
  AgentConfig c = config();
  c.ring_capacity = 256;  // small enough that some events drop
  AgentCore core({"GPU-0", "GPU-1", "GPU-2", "GPU-3"}, provider, c, nullptr);
  std::vector<std::atomic<uint64_t>> emitted(devices);
  for (std::size_t d = 0; d < devices; ++d) {
    models[d]->attach([&core, &emitted, d](Action action, uint64_t size, uint64_t, uint8_t raw) {
      core.on_event(d, action, size, 0, raw);
      emitted[d].fetch_add(1, std::memory_order_relaxed);
    });
    ASSERT_TRUE(core.seed(d));
  }
  std::atomic<bool> stop{false};
  std::thread agent([&] {
    while (!stop.load(std::memory_order_acquire)) {
      core.tick();
      core.step();
    }
  });
  std::vector<std::thread> producers;
  for (std::size_t d = 0; d < devices; ++d) {
    for (int t = 0; t < 2; ++t) {
      producers.emplace_back([&, d] {
        for (int op = 0; op < operations_per_thread; ++op) models[d]->random_operation();
      });
    }
  }
  for (std::thread& p : producers) p.join();
  stop.store(true, std::memory_order_release);
  agent.join();
  core.tick();
  for (std::size_t d = 0; d < devices; ++d) {
    const CounterSeed truth = models[d]->stats();
    const DeviceStatsView view = core.stats(d);
    EXPECT_EQ(view.reserved_bytes, truth.reserved_bytes) << "device " << d;
    EXPECT_EQ(view.requested_bytes, truth.requested_bytes) << "device " << d;
    EXPECT_EQ(view.peak.reserved_bytes, truth.peak_reserved_bytes) << "device " << d;
    EXPECT_EQ(view.peak.requested_bytes, truth.peak_requested_bytes) << "device " << d;
    EXPECT_EQ(view.event_count, emitted[d].load()) << "device " << d;
    EXPECT_EQ(view.anomaly_count, 0U);
  }
}

}  // namespace
}  // namespace vramscope::tracking

namespace vramscope::tracking {
namespace {

/// The wiring of attribution into steps (src/attribution/session.cpp), with a real
/// Attributor: events reach the ledger only when drained, so step() must drain before asking.
TEST(AgentCore, StepAnnotatorSeesEveryEventOfTheStepAndPublishesItsBreakdown) {
  TempDir dir;
  FakeTorch torch(1);
  auto writer = open_agent_segment_writer(config().pid, 1, dir.path());
  AgentCore core({"GPU-test"}, torch.provider(), config(), std::move(writer));
  ASSERT_TRUE(core.seed(0));
  attribution::Attributor attributor(1);
  ASSERT_TRUE(attributor.acquire({0}));
  core.set_streaming(true);  // as the agent does while ledgers are held
  core.set_event_consumer([&](std::size_t device, const std::vector<Event>& events) {
    attributor.consume(device, events);
  });
  core.set_step_annotator([&](std::size_t device) -> std::optional<CategoryBytes> {
    std::optional<CategoryBytes> out;
    attributor.with_ledger(device, [&](attribution::Ledger& ledger) {
      out = attribution::category_bytes_at_peak(ledger.categories(attribution::PeakMark::Step));
      ledger.restart_peak(attribution::PeakMark::Step);
    });
    return out;
  });
  const auto forward = static_cast<uint8_t>(attribution::Phase::Forward);
  const auto backward = static_cast<uint8_t>(attribution::Phase::Backward);
  // Step 1: a 1000-byte activation from forward, a 300-byte temporary from backward, the
  // activation freed after the peak (1300), and 50 bytes allocated outside any phase.
  core.on_event(0, Action::Alloc, 1000, 0xA000, 0, forward);
  core.on_event(0, Action::Alloc, 300, 0xB000, 0, backward);
  core.on_event(0, Action::FreeRequested, 1000, 0xA000, 1);
  core.on_event(0, Action::FreeCompleted, 1000, 0xA000, 2);
  core.on_event(0, Action::Alloc, 50, 0xC000, 0);
  // No tick() ran: only step() itself can have drained these events into the ledger.
  const std::vector<StepRecord> first = core.step();
  ASSERT_EQ(first.size(), 1U);
  ASSERT_TRUE(first[0].category_bytes.has_value());
  const CategoryBytes& at_peak = *first[0].category_bytes;
  const auto bytes_of = [&](const CategoryBytes& b, MemoryCategory c) {
    return b[static_cast<std::size_t>(c)];
  };
  EXPECT_EQ(bytes_of(at_peak, MemoryCategory::Activations), 1000U);
  EXPECT_EQ(bytes_of(at_peak, MemoryCategory::Temporaries), 300U);
  EXPECT_EQ(bytes_of(at_peak, MemoryCategory::Other), 0U) << "allocated after the peak";
  uint64_t sum = 0;
  for (uint64_t b : at_peak) sum += b;
  EXPECT_EQ(sum, first[0].peak_requested_bytes)
      << "the breakdown sums to the step's requested peak";

  // Step 2 starts from the live bytes (350): its peak is what is live then.
  const std::vector<StepRecord> second = core.step();
  ASSERT_TRUE(second[0].category_bytes.has_value());
  EXPECT_EQ(bytes_of(*second[0].category_bytes, MemoryCategory::Temporaries), 300U);
  EXPECT_EQ(bytes_of(*second[0].category_bytes, MemoryCategory::Other), 50U);
  EXPECT_EQ(bytes_of(*second[0].category_bytes, MemoryCategory::Activations), 0U);

  // The published step records carry the same breakdown.
  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  ASSERT_EQ(steps.size(), 2U);
  ASSERT_TRUE(steps[0].category_bytes.has_value());
  EXPECT_EQ(*steps[0].category_bytes, at_peak);
}

TEST(AgentCore, WithoutAnAnnotatorStepsCarryNoCategories) {
  FakeTorch torch(1);
  AgentCore core({"GPU-test"}, torch.provider(), config(), nullptr);
  ASSERT_TRUE(core.seed(0));
  const std::vector<StepRecord> steps = core.step();
  ASSERT_EQ(steps.size(), 1U);
  EXPECT_FALSE(steps[0].category_bytes.has_value());
}

/// A driver that never moves: a pairing over it settles once its guards have passed.
class QuietDriver final : public DriverSource {
 public:
  std::optional<uint64_t> process_bytes(std::size_t device) override {
    return (600 + 10 * device) << 20U;
  }
  std::optional<uint64_t> allocation_bytes(std::size_t) override { return uint64_t{100} << 20U; }
};

TEST(AgentCore, DriverBreakdownIsThePairingsLastSettledOne) {
  // What the OOM snapshot and Python's driver_breakdown() read: the pairing the core publishes.
  FakeTorch torch(3);
  AgentCore core({"GPU-a", "GPU-b", "GPU-c"}, torch.provider(), config(), nullptr);
  EXPECT_EQ(core.device_uuid(1), "GPU-b");
  EXPECT_FALSE(core.driver_breakdown(0).has_value()) << "no pairing yet";
  QuietDriver driver;
  // The first two devices are paired; the third is not.
  DriverPairing pairing({&core.counters(0), &core.counters(1)}, driver);
  core.set_pairing(&pairing);
  EXPECT_FALSE(core.driver_breakdown(0).has_value()) << "nothing settled yet";
  int64_t now = 0;
  for (int i = 0; i < 100 && !(pairing.breakdown(0) && pairing.breakdown(1)); ++i) {
    now = pairing.advance(now, now);
  }
  ASSERT_TRUE(pairing.breakdown(0).has_value() && pairing.breakdown(1).has_value());
  for (std::size_t d = 0; d < 2; ++d) {
    const std::optional<DriverBreakdown> b = core.driver_breakdown(d);
    ASSERT_TRUE(b.has_value()) << d;
    EXPECT_EQ(*b, *pairing.breakdown(d)) << d;
    EXPECT_EQ(b->driver_bytes, (600 + 10 * d) << 20U) << d;
  }
  EXPECT_FALSE(core.driver_breakdown(2).has_value()) << "a device the pairing does not pair";
}

TEST(DeviceProducer, TheStampLineAndTheCountersFirstLineAreOne128BytePair) {
  // device_producer.hpp's layout: a free must touch one aligned 128-byte pair (the stamp, flags
  // and recorder line, then the counters' current values) besides the recorder's slot. A
  // member added to the wrong place would silently cost every event a line.
  DeviceProducers producers(3, 64, 64);
  for (std::size_t d = 0; d < 3; ++d) {
    const auto base = reinterpret_cast<std::uintptr_t>(&producers[d]);
    const auto at = [](const auto& member) { return reinterpret_cast<std::uintptr_t>(&member); };
    EXPECT_EQ(base % 128, 0U) << d;
    EXPECT_EQ(at(producers[d].tick_ns), base);
    EXPECT_LE(at(producers[d].recorder) + sizeof(EventRecorder), base + 64);
    EXPECT_EQ(at(producers[d].counters), base + 64);
  }
}

}  // namespace
}  // namespace vramscope::tracking
