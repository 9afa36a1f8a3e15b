// src/report/include/vramscope/report/watch_line.hpp -- `vramscope watch` table format: one compact line per GPU per sample
#pragma once

#include <string>

#include "vramscope/report/table_report.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::report {

/// One '\n'-terminated line per device, e.g.
/// "22:30:01.123  gpu 0  used 40960MiB  free 102289MiB  torch alloc 20480MiB resv 24576MiB";
/// the torch part (sums over the device's agents) appears only when an agent publishes for it.
/// Times are local wall-clock time with milliseconds.
std::string format_watch_lines(const SystemSample& sample, UnitStyle units);

}  // namespace vramscope::report
