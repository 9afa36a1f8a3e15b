// src/backends/include/vramscope/backends/nvml_processes.hpp -- reading NVML process lists and merging them per device
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vramscope/backends/nvml_api.hpp"

namespace vramscope::nvml {

/// How many times a list may grow between two calls before we give up for this sample.
inline constexpr int max_process_list_attempts = 8;

/// Reads one Get*RunningProcesses list with count-then-fill, reusing its buffers.
///
/// The buffer keeps its size across samples, so in the steady state one call fills it. When
/// the list grew since (INSUFFICIENT_SIZE, *count = what is needed), the buffer grows with
/// headroom and the call is retried, at most max_process_list_attempts times.
class ProcessListReader {
 public:
  /// Reads `call`'s list of `device`; on Success, entries() holds it (v1 entries converted).
  Return read(const ProcessListCall& call, Device device);
  /// The entries of the last successful read.
  std::span<const ProcessInfo> entries() const { return {m_infos.data(), m_count}; }

 private:
  std::vector<ProcessInfo> m_infos;
  std::vector<ProcessInfoV1> m_infos_v1;
  std::size_t m_count = 0;
};

/// One process of one device after merging the compute, graphics and MPS lists.
struct MergedProcess {
  uint32_t pid = 0;
  /// value_not_available when no list knew the amount.
  uint64_t used_bytes = value_not_available;
  uint32_t gpu_instance_id = no_instance_id;
  uint32_t compute_instance_id = no_instance_id;
  /// ProcessKind bits.
  uint8_t kinds = 0;
};

/// Adds `entries` (of one list, of kind `kind`) to `merged`: a process already there (same
/// pid and MIG instance) gains the kind bit. `default_gi`/`default_ci` replace
/// no_instance_id (a MIG device handle's lists do not always carry the instance ids).
void merge_processes(std::vector<MergedProcess>& merged, std::span<const ProcessInfo> entries,
                     uint8_t kind, uint32_t default_gi = no_instance_id,
                     uint32_t default_ci = no_instance_id);

/// Sorts by pid, then MIG instance, so that output is stable across samples.
void sort_processes(std::vector<MergedProcess>& merged);

}  // namespace vramscope::nvml
