// src/tracking/include/vramscope/tracking/events.hpp -- allocator events as the torch-free tracking core sees them
//
// The agent's trace-tracker callback converts each c10 TraceEntry into this POD and hands it to
// the core; nothing here depends on torch, so the whole tracking logic is testable with
// synthetic event streams.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vramscope::tracking {

/// Mirrors c10's TraceEntry::Action (values measured on torch 2.11). Anything else -- an action
/// added by a later torch -- maps to Unknown and is counted, never interpreted.
enum class Action : uint8_t {
  Alloc = 0,
  FreeRequested = 1,
  FreeCompleted = 2,
  SegmentAlloc = 3,
  SegmentFree = 4,
  SegmentMap = 5,
  SegmentUnmap = 6,
  Snapshot = 7,
  Oom = 8,
  Unknown = 9,
};

/// Number of Action values, Unknown included (sizes per-action counter arrays).
inline constexpr std::size_t action_count = 10;

/// The Action for a raw TraceEntry action value.
constexpr Action action_from_raw(int64_t raw) {
  return raw >= 0 && raw <= static_cast<int64_t>(Action::Oom) ? static_cast<Action>(raw)
                                                              : Action::Unknown;
}

/// Lower-case name as torch's memory_viz spells it ("alloc", "segment_map", …; "unknown").
std::string_view action_name(Action action);

/// One allocator event, 32 bytes so a ring of them stays cache-friendly.
struct Event {
  /// TraceEntry::size_ (requested, segment or mapped size depending on the action).
  uint64_t size_bytes = 0;
  /// TraceEntry::addr_ (for Oom: the device's free bytes).
  uint64_t address = 0;
  /// coarse_monotonic_ns() at the agent thread's last tick before the event: never after the
  /// callback ran, at most one agent interval (10 ms by default) plus the coarse clock's
  /// resolution before it. The order of events is their recording order; the OOM post-mortem's
  /// event history needs no more.
  int64_t timestamp_ns = 0;
  Action action = Action::Unknown;
  /// The raw action value, kept so unknown actions can be reported as they came.
  uint8_t raw_action = 0;
  /// Training phase when the event happened (attribution::Phase; 0 when not attributing).
  uint8_t phase = 0;
  /// Innermost profiled operator on the event's thread (attribution op id; 0: none).
  uint32_t op_id = 0;
};
static_assert(sizeof(Event) == 32);

/// CLOCK_MONOTONIC_COARSE in ns: a vDSO read with tick (1-4 ms) resolution.
inline int64_t coarse_monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

}  // namespace vramscope::tracking
