// src/tracking/include/vramscope/tracking/peak_mark.hpp -- the intervals a peak is measured over, for counters and ledger
//
// One enum for both peak keepers: DeviceCounters keeps all four marks; the attribution ledger
// keeps the two that its breakdowns are asked for (Step and Profile).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vramscope::tracking {

/// Which peak a mark tracks. Each restarts independently.
enum class PeakMark : uint8_t {
  /// Since attach or the last reset_peak().
  Global = 0,
  /// Since the last step boundary.
  Step = 1,
  /// Since the agent thread last closed its time window.
  Window = 2,
  /// Since the current (or last) vramscope.profile() started (or the ledger started).
  Profile = 3,
};
inline constexpr std::size_t peak_mark_count = 4;

}  // namespace vramscope::tracking
