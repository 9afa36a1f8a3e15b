// src/tracking/include/vramscope/tracking/bench_gate.hpp -- the benchmark builds' pause of the tracker callback: the one header that reads VRAMSCOPE_BENCH_HOOKS
//
// bench/bench_turns.py (agent_toggled) times blocks of a step with the callback working against
// blocks with it paused (vramscope._agent._bench_pause_tracking), in one process. The pause is
// a flag alone on its cache line that the tracker reads before it touches any producer: a paused
// tracker costs an empty tracker's work plus this line and a working one its own work plus the
// same line, so torch's share (building the TraceEntry, calling the tracker) is in both.
//
// Every other build has no pause: tracking_paused() is then the constant false, and the branch
// on it compiles to nothing, so the tracker's instructions are those of a tracker without it.
// Either way TrackerTarget (device_producer.hpp) has one layout.
#pragma once

#include <atomic>

#ifndef VRAMSCOPE_BENCH_HOOKS
// Set by the build for every target (CMakeLists.txt: VRAMSCOPE_BENCH_HOOKS), so that every
// translation unit agrees on what the tracker does.
#error "VRAMSCOPE_BENCH_HOOKS must be defined (0 or 1) by the build"
#endif

namespace vramscope::tracking {

/// Are the benchmark hooks compiled in (VRAMSCOPE_BENCH_HOOKS=ON, docs/benchmarks.md)?
inline constexpr bool bench_hooks = VRAMSCOPE_BENCH_HOOKS != 0;

#if VRAMSCOPE_BENCH_HOOKS
/// The tracker's off switch, on a line of its own. One per process, as the agent attaches one
/// core per process.
struct alignas(64) BenchGate {
  /// Are events ignored? While set no event is counted: the numbers stop being exact for good.
  std::atomic<bool> paused{false};
};
inline BenchGate bench_gate;

/// Is every tracker of the process skipping its work?
inline bool tracking_paused() noexcept { return bench_gate.paused.load(std::memory_order_relaxed); }
/// Pauses (true) or resumes (false) every tracker of the process.
inline void pause_tracking(bool paused) noexcept {
  bench_gate.paused.store(paused, std::memory_order_relaxed);
}
#else
/// Without the hooks nothing pauses the tracker.
constexpr bool tracking_paused() noexcept { return false; }
#endif

}  // namespace vramscope::tracking
