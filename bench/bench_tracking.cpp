// bench/bench_tracking.cpp -- cost of the trace-tracker callback's work and of reading stats
//
// BM_CallbackNoop is the floor (a std::function call through the same path, doing nothing);
// BM_CallbackCountersAndRing is what the agent's callback does per event. Their difference is
// vramscope's cost per allocator event on top of torch's own tracker overhead.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::tracking {
namespace {

/// The event mix of an alloc/free pair (torch emits these three per cached allocation).
constexpr Action pair_actions[3] = {Action::Alloc, Action::FreeRequested, Action::FreeCompleted};

StatsProvider zero_provider() {
  return [](std::size_t) -> std::optional<TorchStats> { return TorchStats{}; };
}

/// Calls `callback` once per iteration with the actions of an alloc/free pair in turn (the same
/// std::function indirection torch puts in front of every tracker).
void run_pairs(benchmark::State& state, const std::function<void(Action, uint64_t)>& callback) {
  uint64_t i = 0;
  for (auto _ : state) {
    callback(pair_actions[i % 3], 4096);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_CallbackNoop(benchmark::State& state) {
  // torch stores trackers as std::function; calling through one is part of every variant.
  std::function<void(Action, uint64_t)> callback = [](Action action, uint64_t size) {
    benchmark::DoNotOptimize(action);
    benchmark::DoNotOptimize(size);
  };
  run_pairs(state, callback);
}
BENCHMARK(BM_CallbackNoop);

void BM_CallbackCountersOnly(benchmark::State& state) {
  DeviceCounters counters;
  std::function<void(Action, uint64_t)> callback = [&](Action action, uint64_t size) {
    counters.on_event(action, size);
  };
  run_pairs(state, callback);
}
BENCHMARK(BM_CallbackCountersOnly);

void BM_CallbackCountersAndRecorder(benchmark::State& state) {
  // The callback outside attribution: counters and the recorder (no ring, nothing to drain).
  AgentCore core({"GPU-bench"}, zero_provider(), AgentConfig{}, nullptr);
  core.seed(0);
  std::function<void(Action, uint64_t)> callback = [&](Action action, uint64_t size) {
    core.on_event(0, action, size, 0x7f0000000000, static_cast<uint8_t>(action));
  };
  run_pairs(state, callback);
}
BENCHMARK(BM_CallbackCountersAndRecorder);

void BM_CallbackCountersAndRing(benchmark::State& state) {
  // The callback while attribution streams events: counters, recorder and ring.
  AgentConfig config;
  config.ring_capacity = 1U << 16U;
  AgentCore core({"GPU-bench"}, zero_provider(), config, nullptr);
  core.seed(0);
  core.set_streaming(true);
  std::function<void(Action, uint64_t)> callback = [&](Action action, uint64_t size) {
    core.on_event(0, action, size, 0x7f0000000000, static_cast<uint8_t>(action));
  };
  std::vector<Event> sink;
  sink.reserve(config.ring_capacity);
  uint64_t i = 0;
  for (auto _ : state) {
    callback(pair_actions[i % 3], 4096);
    ++i;
    // Drain like the agent thread would (outside the timed region), so pushes never drop.
    if ((i & 0x3FFFU) == 0) {
      state.PauseTiming();
      core.tick();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["dropped"] = static_cast<double>(core.stats(0).dropped_event_count);
}
BENCHMARK(BM_CallbackCountersAndRing);

void BM_CallbackWithTickingAgentThread(benchmark::State& state) {
  // As in the agent: a second thread ticks (drains the ring, polls stats, publishes) every
  // range(0) microseconds while the allocating thread records; range(1): 1 while streaming
  // (attribution), 0 not. Shows what the concurrent consumer (shared cache lines) costs the
  // producer, e.g. in an allocator-heavy step.
  AgentConfig config;
  config.ring_capacity = 1U << 16U;
  AgentCore core({"GPU-bench"}, zero_provider(), config, nullptr);
  core.seed(0);
  core.set_streaming(state.range(1) != 0);
  std::atomic<bool> stop{false};
  const auto interval = std::chrono::microseconds(state.range(0));
  std::thread agent([&] {
    auto deadline = std::chrono::steady_clock::now();
    while (!stop.load(std::memory_order_relaxed)) {
      core.tick();
      deadline += interval;
      std::this_thread::sleep_until(deadline);
    }
  });
  std::function<void(Action, uint64_t)> callback = [&](Action action, uint64_t size) {
    core.on_event(0, action, size, 0x7f0000000000, static_cast<uint8_t>(action));
  };
  run_pairs(state, callback);
  stop.store(true);
  agent.join();
  state.counters["dropped"] = static_cast<double>(core.stats(0).dropped_event_count);
}
BENCHMARK(BM_CallbackWithTickingAgentThread)->ArgsProduct({{10000, 1000}, {0, 1}})->UseRealTime();

/// ~2.5 us of interpreter and dispatcher work between two allocator events in a launch-bound
/// step touches about a megabyte: 64 random cache lines of a 1 MiB buffer stand in for it.
class CacheHeavyWork {
 public:
  void run() {
    for (int k = 0; k < 64; ++k) {
      m_x ^= m_x << 13U;
      m_x ^= m_x >> 7U;
      m_x ^= m_x << 17U;
      m_work[(m_x % lines) * 8] += m_x;  // xorshift: no pattern the prefetcher learns
    }
  }
  ~CacheHeavyWork() { benchmark::DoNotOptimize(m_work.data()); }

 private:
  static constexpr std::size_t lines = (1U << 20U) / 64;
  std::vector<uint64_t> m_work = std::vector<uint64_t>(lines * 8, 1);
  uint64_t m_x = 88172645463325252ULL;
};

void BM_CallbackInCacheHeavyLoop(benchmark::State& state) {
  // Per-event cost when the work between events evicts the callback's state, as in a real
  // step (the tight loops above keep everything in L1). range(0): 0 no event, 1 counters only,
  // 2 ring push only (as the callback pushes, drained every 10 ms by a second thread), 3 the
  // whole callback outside attribution (counters and recorder of a core ticked every 10 ms by
  // a second thread, as in the agent), 4 the same reached the agent's way (a std::function
  // whose closure holds the producers, reading the attribution context:
  // agent/torchlib/torch_library.cpp), 5 as 4 while streaming (attribution: the ring too).
  const auto variant = state.range(0);
  AgentConfig config;
  config.ring_capacity = 1U << 16U;
  AgentCore core({"GPU-bench"}, zero_provider(), config, nullptr);
  core.seed(0);
  core.set_streaming(variant == 5);
  DeviceCounters counters;
  EventRing ring(1U << 16U);
  std::vector<Event> drained;
  std::atomic<bool> stop{false};
  std::thread agent([&] {
    auto deadline = std::chrono::steady_clock::now();
    while (!stop.load(std::memory_order_relaxed)) {
      if (variant == 2) {
        drained.clear();
        ring.drain(drained);
      } else {
        core.tick();
      }
      deadline += std::chrono::milliseconds(10);
      std::this_thread::sleep_until(deadline);
    }
  });
  // What torch stores: the agent's tracker closure, around the core's tracker target.
  const std::function<void(int64_t, Action, uint64_t)> tracker =
      [target = core.tracker_target()](int64_t device, Action action, uint64_t size) {
        target.on_trace_entry(device, static_cast<int64_t>(action), size, 0x7f0000000000,
                              [] { return attribution::current_op(); });
      };
  CacheHeavyWork work;
  uint64_t i = 0;
  for (auto _ : state) {
    work.run();
    const Action action = pair_actions[i % 3];
    if (variant == 1) counters.on_event(action, 4096);
    if (variant == 2) ring.push(Event{4096, 0x7f0000000000, 0, action});
    if (variant == 3) core.on_event(0, action, 4096, 0x7f0000000000, static_cast<uint8_t>(action));
    if (variant >= 4) tracker(0, action, 4096);
    ++i;
  }
  stop.store(true);
  agent.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CallbackInCacheHeavyLoop)->DenseRange(0, 5)->UseRealTime();

void BM_TickWithPendingEvents(benchmark::State& state) {
  // One agent-thread tick with range(0) events waiting in the ring (a launch-bound step under
  // attribution queues ~4000 per 10 ms tick): drain, poll, publish. It runs beside the training
  // thread, so its length is what the agent thread takes from the machine every interval.
  const auto pending = static_cast<uint64_t>(state.range(0));
  AgentConfig config;
  config.ring_capacity = 1U << 16U;
  AgentCore core({"GPU-bench"}, zero_provider(), config, nullptr);
  core.seed(0);
  core.set_streaming(true);
  for (auto _ : state) {
    state.PauseTiming();
    for (uint64_t i = 0; i < pending; ++i) {
      const Action action = pair_actions[i % 3];
      core.on_event(0, action, 4096, 0x7f0000000000 + 4096 * (i / 3), static_cast<uint8_t>(action));
    }
    state.ResumeTiming();
    core.tick();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(pending));
}
BENCHMARK(BM_TickWithPendingEvents)->Arg(0)->Arg(4000)->Unit(benchmark::kMicrosecond);

void BM_RingPushFull(benchmark::State& state) {
  // The overflow path: a full ring must stay as cheap as a successful push.
  EventRing ring(2);
  ring.push(Event{});
  ring.push(Event{});
  for (auto _ : state) benchmark::DoNotOptimize(ring.push(Event{}));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingPushFull);

void BM_ReadCurrentCounters(benchmark::State& state) {
  DeviceCounters counters;
  counters.seed([]() -> std::optional<CounterSeed> { return CounterSeed{1, 1, 1, 1}; });
  for (auto _ : state) {
    benchmark::DoNotOptimize(counters.reserved_bytes());
    benchmark::DoNotOptimize(counters.requested_bytes());
  }
}
BENCHMARK(BM_ReadCurrentCounters);

void BM_StatsView(benchmark::State& state) {
  AgentCore core({"GPU-bench"}, zero_provider(), AgentConfig{}, nullptr);
  core.seed(0);
  for (auto _ : state) benchmark::DoNotOptimize(core.stats(0));
}
BENCHMARK(BM_StatsView);

}  // namespace
}  // namespace vramscope::tracking

BENCHMARK_MAIN();
