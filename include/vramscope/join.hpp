// include/vramscope/join.hpp -- one row per process: the driver's view joined with the allocator's
//
// NVML says how much a process holds on a device; an agent inside that process says how much of
// it PyTorch's caching allocator reserved and allocated. Keyed by (pid, device uuid):
//
//   driver used = non-PyTorch  +  cached free           +  allocated
//                 (context,       (reserved - allocated:   (live tensors)
//                  NCCL, cuBLAS)   the allocator's cache)
//
// The two views are read at different instants and from different pid namespaces, so the join
// says when they do not add up instead of printing a negative or guessed number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramscope/sample.hpp"

namespace vramscope {

/// Why a joined row's arithmetic cannot be trusted (bitmask).
enum JoinIssue : uint8_t {
  /// The agent's pid is absent from the device's NVML process list: usually a pid namespace
  /// (the agent runs in a container and knows only its own pid; NVML gives host pids).
  JoinIssuePidNotInDriverList = 1U << 0U,
  /// The allocator reserved more than the driver says the process uses (reads at different
  /// instants, or memory the driver does not count): non-PyTorch is unknown.
  JoinIssueReservedExceedsDriverUsed = 1U << 1U,
  /// allocated > reserved (polled allocated is newer than event-exact reserved): cache unknown.
  JoinIssueAllocatedExceedsReserved = 1U << 2U,
  /// The driver could not say how much this process uses (NVML "not available").
  JoinIssueDriverUsedUnknown = 1U << 3U,
  /// The agent claims more allocated or reserved bytes than the GPU has: its segment is damaged
  /// or forged, and its numbers take part in no sum.
  JoinIssueExceedsDeviceTotal = 1U << 4U,
  /// The driver's reading of this frame and the agent's reserved were taken while segments
  /// moved (they differ from the agent's last settled pairing by more than a page):
  /// non-PyTorch is the settled value, and this frame's parts do not add up to the driver's.
  JoinIssueUnsettled = 1U << 5U,
};

/// One process on one device, with whatever each view knows about it.
struct JoinedProcess {
  /// The driver's row; empty when only an agent reports this process (see issues).
  std::optional<ProcessSample> driver;
  /// The agent's row; empty when no agent publishes for this pid on this device.
  std::optional<AllocatorSample> torch;
  /// Pid shown to the user: the driver's host pid, else the agent's (namespace) pid.
  uint32_t pid = 0;
  /// reserved - allocated: free blocks the allocator keeps cached. Empty without an agent or
  /// when allocated > reserved.
  std::optional<uint64_t> cached_free_bytes;
  /// What the driver charges beyond torch's reserved: CUDA context, NCCL, other libraries.
  /// The agent's last settled pairing when it has one (torch->breakdown), else driver used -
  /// reserved of this frame. Empty without an agent, without a driver number, or when
  /// reserved > driver used without a settled pairing.
  std::optional<uint64_t> non_pytorch_bytes;
  /// Bitmask of JoinIssue; 0 when the decomposition adds up.
  uint8_t issues = 0;
};

/// The processes of one device (index into SystemSample::devices).
struct JoinedDevice {
  std::size_t device_position = 0;
  /// Driver rows in driver order, each with its agent if any, then agent-only rows.
  std::vector<JoinedProcess> processes;
};

/// The whole join of one SystemSample.
struct JoinResult {
  /// One entry per device of the sample, same order.
  std::vector<JoinedDevice> devices;
  /// Agents whose device uuid matches no device the driver reported.
  std::vector<AllocatorSample> unmatched_allocators;
  /// Did at least one agent row land on a device?
  bool any_torch = false;
};

/// Position in sample.devices of the first device that each uuid names, directly or as one of
/// its MIG instances (empty uuids left out). Built in one pass, so that finding the device of
/// each of a sample's records takes time linear in the sample; the views point into `sample`.
std::unordered_map<std::string_view, std::size_t> device_positions(const SystemSample& sample);

/// device_positions() for a few lookups: a small sample (up to 16 uuids) is scanned for each,
/// a larger one gets the map, so that a sample's lookups stay linear in it.
class DevicePositions {
 public:
  /// What find() returns for a uuid no device has.
  static constexpr std::size_t none = std::string::npos;
  /// Refers to `sample`, which must outlive it.
  explicit DevicePositions(const SystemSample& sample);
  /// Position in sample.devices of the first device that `uuid` names (none for "").
  std::size_t find(std::string_view uuid) const;

 private:
  const SystemSample& m_sample;
  /// The map, made only for a large sample.
  std::optional<std::unordered_map<std::string_view, std::size_t>> m_positions;
};

/// Joins driver processes and allocator samples by (pid, device uuid). An agent whose uuid is a
/// MIG instance's joins the parent device. Never guesses a pid mapping across namespaces.
JoinResult join_processes(const SystemSample& sample);

/// One row of a join as references into the sample joined: a JoinedProcess that copies no
/// record.
struct JoinedRow {
  /// Position in SystemSample::devices of the row's device.
  std::size_t device_position = 0;
  /// The driver's row and the agent's, in the sample; null when that view does not report the
  /// process.
  const ProcessSample* driver = nullptr;
  const AllocatorSample* torch = nullptr;
  /// As in JoinedProcess.
  uint32_t pid = 0;
  std::optional<uint64_t> cached_free_bytes;
  std::optional<uint64_t> non_pytorch_bytes;
  uint8_t issues = 0;
};

/// A join as references into one sample.
struct JoinedRows {
  /// Every device's rows in device order: its driver rows in driver order, then its agent-only
  /// rows (JoinedDevice::processes, one device after the other).
  std::vector<JoinedRow> rows;
  /// Agents whose device uuid matches no device the driver reported.
  std::vector<const AllocatorSample*> unmatched_allocators;
  /// Did at least one agent row land on a device?
  bool any_torch = false;
};

/// join_processes() for sample after sample, as references into each: a reader joins every
/// sample of a recording, and copying each row's records (commands, uuids) cost more than
/// decoding them. Its memory is reused, so once a recording's samples settle into their shape a
/// join allocates nothing. Small samples are joined by scanning (a few GPUs and agents); large
/// ones through maps, so the time stays linear in the sample.
class Joiner {
 public:
  /// The join of `sample`, equal to join_processes(sample) row for row; valid until the next
  /// join() and while `sample` is unchanged.
  const JoinedRows& join(const SystemSample& sample);

 private:
  JoinedRows m_joined;
  /// Per allocator: the position of its device (npos: none), and has it joined a row?
  std::vector<std::size_t> m_owner;
  std::vector<bool> m_used;
};

/// join_processes() into `out`, whose rows (and the strings of their copies) are reused: a
/// reader that joins every sample of a recording this way allocates nothing once the samples
/// settle. `joiner` is scratch, kept by the caller for the same reason.
void join_processes(const SystemSample& sample, Joiner& joiner, JoinResult& out);

/// One short phrase per issue bit, e.g. "pid not in driver list (container?)"; "" for none.
std::string describe_join_issues(uint8_t issues);

}  // namespace vramscope
