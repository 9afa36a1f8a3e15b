// src/exporters/include/vramscope/exporters/chrome_trace.hpp -- Chrome / Perfetto JSON trace of memory timelines
//
// Layout (notes §12), one trace "process" per track owner so both viewers group sensibly:
//   pid 100000000+N  "GPU N (<model>, <uuid>)": counters "GPUN used", "GPUN reserved (driver)",
//                    "GPUN free", each its own counter name so chrome://tracing does not stack
//                    them.
//   pid <host pid>   "pid P rank R (<command>)": counters "GPUN driver used", "GPUN torch
//                    allocated", "GPUN torch reserved"; one complete event per training step
//                    (args: peaks, rank, category bytes) on thread "GPUN steps"; for processes that
//                    track categories, counters "GPUN step peak <category>" (what each step's
//                    peak was made of, set at the step's start); OOMs as global instant events.
// Synthetic GPU pids start above Linux's pid_max (2^22), so they never collide with host pids.
// Counters are written only when a value changes (they are step functions, so nothing is lost)
// and every track's last value is repeated at the final timestamp so it extends to the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "vramscope/exporters/sink.hpp"

namespace vramscope::exporters {

/// Trace pid of GPU `index`'s track group.
inline constexpr int64_t chrome_trace_gpu_pid_base = 100000000;

/// Bytes of a process's command its trace name shows ("pid P rank R (<command>)"), and all
/// the writer keeps of it: a process's name is written at close(), and the commands of every
/// pid seen until then are held that long (docs/security.md).
inline constexpr std::size_t chrome_trace_command_bytes = 80;

/// Options of the trace writer.
struct ChromeTraceOptions {
  /// Upper bound on counter and step events; past it they are dropped (metadata and OOMs are always
  /// kept) and otherData.dropped_events says how many. 2 M events stay near 250 MB, well under the
  /// ~500 MB where chrome://tracing and the Perfetto UI struggle.
  uint64_t max_events = 2000000;
  /// Emit per-process driver counters? (Agent counters and steps are always written.)
  bool per_process = true;
  /// Replace an existing file?
  bool overwrite = false;
};

/// Streams a trace file: {"displayTimeUnit":"ms","traceEvents":[...],"otherData":{...}}.
/// The file is valid, closed JSON once close() (or the destructor) ran.
class ChromeTraceWriter : public Sink {
 public:
  /// Creates `path` (0600). Throws vramscope::Error on failure.
  ChromeTraceWriter(const std::string& path, const ChromeTraceOptions& options);
  ~ChromeTraceWriter() override;
  void write(const SystemSample& sample) override;
  void flush() override;
  /// Repeats last counter values at the end, writes the closing brackets and closes the file.
  void close();
  /// Events written and dropped by the max_events bound so far.
  uint64_t events_written() const { return m_events_written; }
  uint64_t events_dropped() const { return m_events_dropped; }

 private:
  struct Track {
    int64_t pid;
    std::string name;
    bool operator<(const Track& other) const {
      return std::tie(pid, name) < std::tie(other.pid, other.name);
    }
  };

  void emit(const std::string& event_json, bool bounded);
  void counter(int64_t pid, const std::string& name, uint64_t value, int64_t timestamp_ns);
  /// Remembers what is known about a trace pid; metadata is written at close(), when the driver's
  /// command line and the agent's rank (which arrive separately) are both known.
  void note_process(int64_t pid, const std::string& name, int64_t sort_index);
  void note_host_process(uint32_t pid, int32_t rank, int32_t world_size,
                         const std::string& command);
  std::string gpu_label(const SystemSample& sample, const std::string& uuid,
                        int32_t cuda_device) const;

  ChromeTraceOptions m_options;
  std::unique_ptr<BufferedFile> m_file;
  bool m_first_event = true;
  bool m_closed = false;
  uint64_t m_events_written = 0;
  uint64_t m_events_dropped = 0;
  int64_t m_first_ns = 0;
  int64_t m_last_ns = 0;
  /// Last value written per track and when, to skip unchanged values and extend tracks at close.
  std::map<Track, std::pair<uint64_t, int64_t>> m_last_value;
  struct ProcessInfo {
    std::string name;
    int64_t sort_index = 0;
    int32_t rank = -1;
    int32_t world_size = -1;
    /// The first chrome_trace_command_bytes of the driver's command line.
    std::string command;
  };
  std::map<int64_t, ProcessInfo> m_processes;
  std::set<std::pair<int64_t, int64_t>> m_named_threads;
  std::string m_hostname;
};

}  // namespace vramscope::exporters
