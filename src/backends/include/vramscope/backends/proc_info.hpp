// src/backends/include/vramscope/backends/proc_info.hpp -- user and command of a pid from /proc, cached across samples
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "vramscope/sample.hpp"

namespace vramscope {

/// What /proc says about one process.
struct ProcIdentity {
  /// Does /proc/<pid> exist here? NVML reports host pids, which another pid namespace lacks.
  bool visible = false;
  /// Start time in clock ticks since boot (field 22 of /proc/<pid>/stat): with the pid, it
  /// names one process, since pids are reused.
  uint64_t start_ticks = 0;
  /// Real uid from /proc/<pid>/status.
  std::optional<uint32_t> uid;
  /// Arguments of /proc/<pid>/cmdline joined by spaces, or "[comm]" when it is empty (a kernel
  /// thread or a zombie), cut to max_command_bytes.
  std::string command;
};

/// Longest command line kept; the rest is cut (a training script's argv can be very long).
inline constexpr std::size_t max_command_bytes = 4096;

/// Reads /proc/<pid>/stat, status and cmdline under `proc_root` (tests use a fake tree).
ProcIdentity read_proc_identity(uint32_t pid, const std::string& proc_root = "/proc");

/// Reads only the start time of <pid>; empty when /proc/<pid> is gone or unreadable.
std::optional<uint64_t> read_start_ticks(uint32_t pid, const std::string& proc_root = "/proc");

/// The user name of `uid` (getpwuid_r), or the number as text when it has no name.
std::string user_name_of(uint32_t uid);

/// Fills ProcessSample::visible, user and command, reading /proc only when needed.
///
/// Sampling runs up to 1 kHz with dozens of processes: reading three /proc files each time
/// would cost more than NVML itself. A pid seen in the previous sample is taken as the same
/// process and revalidated (one read of its start time) at most every `revalidate_ns`; a new
/// pid, or one whose start time changed, is read in full.
class ProcCache {
 public:
  /// `revalidate_ns`: how often a known pid's start time is checked for reuse.
  explicit ProcCache(int64_t revalidate_ns = 1'000'000'000, std::string proc_root = "/proc");

  /// Starts one sample taken at `now_ns` (monotonic clock).
  void begin_sample(int64_t now_ns);
  /// Fills `process` from the cache or /proc.
  void resolve(ProcessSample& process);
  /// Ends the sample: forgets pids that did not appear in it.
  void end_sample();

  /// How many full /proc reads happened (for tests and benchmarks).
  uint64_t full_reads() const { return m_full_reads; }

 private:
  struct Entry {
    ProcIdentity identity;
    std::string user;
    int64_t checked_ns = 0;
    uint64_t seen_sample = 0;
  };
  /// Refreshes `entry` from /proc for `pid`.
  void read_entry(uint32_t pid, Entry& entry);

  std::unordered_map<uint32_t, Entry> m_entries;
  std::unordered_map<uint32_t, std::string> m_user_names;
  std::string m_proc_root;
  int64_t m_revalidate_ns;
  int64_t m_now_ns = 0;
  uint64_t m_sample = 0;
  uint64_t m_full_reads = 0;
};

}  // namespace vramscope
