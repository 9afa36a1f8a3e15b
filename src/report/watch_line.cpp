// src/report/watch_line.cpp -- compact per-GPU lines for streaming
#include "vramscope/report/watch_line.hpp"

#include <cstdio>

#include "vramscope/clock.hpp"
#include "vramscope/join.hpp"

namespace vramscope::report {

std::string format_watch_lines(const SystemSample& sample, UnitStyle units) {
  const std::string when = local_time_text(sample.timestamp_ns, TimeText::ClockMillis);
  const JoinResult joined = join_processes(sample);
  std::string out;
  for (const JoinedDevice& jd : joined.devices) {
    const DeviceSample& d = sample.devices[jd.device_position];
    std::string text = when + "  gpu " + std::to_string(d.index);
    if (d.lost) {
      text += "  GPU lost";
      if (!d.error.empty()) text += ": " + d.error;
      out += text + "\n";
      continue;
    }
    text += "  used " + format_amount(d.used_bytes, units) + "  free " +
            format_amount(d.free_bytes, units);
    uint64_t allocated = 0;
    uint64_t reserved = 0;
    bool any_agent = false;
    for (const JoinedProcess& row : jd.processes) {
      if (!row.torch) continue;
      any_agent = true;
      allocated += row.torch->allocated_bytes;
      reserved += row.torch->reserved_bytes;
    }
    if (any_agent) {
      text += "  torch alloc " + format_amount(allocated, units) + " resv " +
              format_amount(reserved, units);
    }
    out += text + "\n";
  }
  return out;
}

}  // namespace vramscope::report
