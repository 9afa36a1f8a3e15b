// include/vramscope/clock.hpp -- the two clocks vramscope uses, named so call sites say which
#pragma once

#include <cstdint>

namespace vramscope {

/// CLOCK_REALTIME in ns: timestamps stored in samples and recordings.
int64_t wall_time_ns();

/// CLOCK_MONOTONIC in ns: intervals, deadlines and durations.
int64_t monotonic_ns();

}  // namespace vramscope
