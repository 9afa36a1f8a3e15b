// src/format/include/vramscope/format/process_identity.hpp -- who wrote a segment: pid start time and pid namespace
//
// A pid alone does not identify a process: pids are reused, and the same process has different
// pids in different pid namespaces (containers). Segment writers record both values below so
// readers can tell a live writer from a dead one whose pid was recycled.
#pragma once

#include <cstdint>
#include <optional>

namespace vramscope::format {

/// Field 22 of /proc/<pid>/stat: the process start time in clock ticks since boot.
/// Empty when the process does not exist or /proc is not readable.
std::optional<uint64_t> process_start_ticks(uint32_t pid);

/// Inode of /proc/self/ns/pid, identifying our pid namespace; 0 when unknown.
uint64_t pid_namespace_inode();

/// The kernel's pid_max (/proc/sys/kernel/pid_max): every pid is below it. Falls back to the
/// kernel's hard limit (2^22) when unreadable.
uint32_t max_pid();

/// Is `pid` (seen in our pid namespace) still the process that started at `start_ticks`?
/// `start_ticks` 0 means unknown: then only existence is checked. Pid 0 and pids at or above
/// max_pid() are never alive (they would name a process group or every process to kill()).
bool process_is_alive(uint32_t pid, uint64_t start_ticks);

}  // namespace vramscope::format
