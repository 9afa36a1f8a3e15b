// include/vramscope/sample.hpp -- the data model: what one look at the GPUs and the agents yields
//
// Every source (NVML, an agent's shared-memory segment, a recording being replayed) fills these
// structs, and every sink (table, JSON, recording, TUI, exporters) reads them. A field the source
// could not read is an empty std::optional: "unsupported" is never shown as zero.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace vramscope {

/// Which process lists a pid was found in (NVML keeps compute, graphics and MPS lists apart).
enum ProcessKind : uint8_t {
  ProcessKindCompute = 1U << 0U,
  ProcessKindGraphics = 1U << 1U,
  ProcessKindMps = 1U << 2U,
};

/// One process holding memory on one device, as the driver reports it.
struct ProcessSample {
  /// Host pid: the driver knows no pid namespaces.
  uint32_t pid = 0;
  /// Driver-side bytes of this process on this device; empty when NVML says "not available".
  std::optional<uint64_t> used_bytes;
  /// MIG GPU instance / compute instance ids; empty without MIG.
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
  /// Bitmask of ProcessKind.
  uint8_t kinds = 0;
  /// Is /proc/<pid> visible from here (same pid namespace)? If not, user and command are empty.
  bool visible = false;
  /// Owner's user name (or numeric uid) from /proc, when visible.
  std::string user;
  /// Command line from /proc/<pid>/cmdline (arguments joined by spaces), when visible.
  std::string command;

  bool operator==(const ProcessSample&) const = default;
};

/// One MIG instance of a MIG-enabled GPU.
struct MigInstanceSample {
  uint32_t index = 0;
  std::string uuid;
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
  std::optional<uint64_t> total_bytes;
  std::optional<uint64_t> used_bytes;
  std::optional<uint64_t> free_bytes;

  bool operator==(const MigInstanceSample&) const = default;
};

/// One GPU at one instant, as the driver reports it.
struct DeviceSample {
  /// NVML index (not the CUDA ordinal: CUDA_VISIBLE_DEVICES does not apply to NVML).
  uint32_t index = 0;
  std::string name;
  /// "GPU-…" UUID: the stable key used to join with agents and with dcgm-exporter series.
  std::string uuid;
  /// PCI bus id in NVML's "%08X:%02X:%02X.0" form.
  std::string pci_bus_id;

  /// Framebuffer total; ECC reduces it.
  std::optional<uint64_t> total_bytes;
  /// Memory the driver and firmware keep (nvmlDeviceGetMemoryInfo_v2 only).
  std::optional<uint64_t> reserved_bytes;
  /// Used by allocations, excluding reserved (v2), or including it (v1 fallback).
  std::optional<uint64_t> used_bytes;
  std::optional<uint64_t> free_bytes;
  /// Did the memory numbers come from the v2 call? If false, "used" includes "reserved".
  bool memory_v2 = false;

  /// BAR1: the CPU/peer mapping window, not framebuffer use.
  std::optional<uint64_t> bar1_total_bytes;
  std::optional<uint64_t> bar1_used_bytes;

  /// Is MIG enabled? Empty when the GPU does not support MIG.
  std::optional<bool> mig_enabled;
  std::vector<MigInstanceSample> mig_instances;

  /// Was the process list read? (false when the calls failed, e.g. no permission)
  bool processes_supported = false;
  std::vector<ProcessSample> processes;

  /// Has this GPU fallen off the bus (GPU_IS_LOST)? The others keep being monitored.
  bool lost = false;
  /// One-line reason when some part of this sample could not be read; empty when all was fine.
  std::string error;

  bool operator==(const DeviceSample&) const = default;
};

/// What the driver charges one process on one device, named part by part. The agent pairs the
/// driver's reading with torch's reserved bytes at one instant -- no segment was allocated or
/// freed for a guard time before the reading and after it -- and lists the device allocations
/// made outside torch's caching allocator. At that instant:
///   driver = reserved + nccl (when reported) + other + context,
/// where context is what no allocation accounts for: the CUDA context and the modules loaded
/// into it. A part that could not be measured is empty, never zero.
struct DriverBreakdown {
  /// CLOCK_REALTIME ns of the driver's reading this breakdown splits.
  int64_t paired_ns = 0;
  /// The driver's bytes for the process on this device (NVML) at the pairing.
  uint64_t driver_bytes = 0;
  /// torch's reserved bytes at the same instant (every pool).
  uint64_t reserved_bytes = 0;
  /// Of reserved, the bytes in private pools: CUDA graphs (torch.cuda.graph, torch.compile's
  /// reduce-overhead), torch.cuda.MemPool. Empty when this torch's events carry no pool.
  std::optional<uint64_t> private_pool_bytes;
  /// NCCL's device memory as NCCL reports it (torch's Backend.memory_stats(), NCCL >= 2.29.7);
  /// empty when no communicator reports it (its bytes are then inside other_bytes).
  std::optional<uint64_t> nccl_bytes;
  /// Device allocations outside torch's caching allocator (another library's cudaMalloc, cuBLAS
  /// or cuDNN's own, NCCL's when NCCL does not report): empty when they could not be listed.
  std::optional<uint64_t> other_bytes;
  /// The CUDA context and its modules: the driver's bytes no allocation accounts for.
  uint64_t context_bytes = 0;
  /// The context at the agent's first pairing (at CUDA init under `vramscope run`).
  std::optional<uint64_t> first_context_bytes;
  /// Bytes by which the parts found exceeded the driver's reading (0 when they fit): shown,
  /// never hidden by clamping a part to zero.
  uint64_t excess_bytes = 0;
  /// NCCL's version as major*10000 + minor*100 + patch when the process has a NCCL
  /// communicator; 0 when it has none (or it is not known).
  uint32_t nccl_version = 0;
  /// Pairings tried and found unsettled (a segment moved around the reading) since attach.
  uint32_t unsettled_count = 0;

  /// Everything the driver charges that is not torch's: context + other + NCCL (the fields
  /// breakdown_fields marks non_pytorch).
  uint64_t non_pytorch_bytes() const;

  bool operator==(const DriverBreakdown&) const = default;
};

/// One field of DriverBreakdown. Every representation of a breakdown iterates breakdown_fields
/// (plausibility, JSON, the recording codec, the index digest, the agent segment's slot, the
/// Python dict, the tests), so a new field is its member plus one row there; the static_asserts
/// below, in vramscope/format/agent_segment_layout.hpp and in sample_codec.cpp then ask for it
/// and for the two format versions.
struct BreakdownField {
  /// The member; its type says what the field holds and how each format stores it: a
  /// CLOCK_REALTIME time, bytes always measured, bytes that may be unmeasured (empty, never
  /// zero), or a 32-bit number (a version or a count).
  using Member =
      std::variant<int64_t DriverBreakdown::*, uint64_t DriverBreakdown::*,
                   std::optional<uint64_t> DriverBreakdown::*, uint32_t DriverBreakdown::*>;
  /// Field name: the JSON key and the Python dict key.
  std::string_view name;
  Member member;
  /// Is it one of the parts that make non_pytorch_bytes() (what the driver charges that is not
  /// torch's)? Those parts, with torch's reserved, are what the driver's reading is split into.
  bool non_pytorch = false;
};

/// The fields of DriverBreakdown, in declaration order: the order of the JSON keys, of the
/// index digest's array and of the segment's words. The recording codec stores them grouped
/// by type (the time, the bytes always measured, the presence flags, the optional bytes, the
/// numbers), each group in this order.
inline constexpr std::array<BreakdownField, 11> breakdown_fields = {{
    {"paired_ns", &DriverBreakdown::paired_ns},
    {"driver_bytes", &DriverBreakdown::driver_bytes},
    {"reserved_bytes", &DriverBreakdown::reserved_bytes},
    {"private_pool_bytes", &DriverBreakdown::private_pool_bytes},
    {"nccl_bytes", &DriverBreakdown::nccl_bytes, true},
    {"other_bytes", &DriverBreakdown::other_bytes, true},
    {"context_bytes", &DriverBreakdown::context_bytes, true},
    {"first_context_bytes", &DriverBreakdown::first_context_bytes},
    {"excess_bytes", &DriverBreakdown::excess_bytes},
    {"nccl_version", &DriverBreakdown::nccl_version},
    {"unsettled_count", &DriverBreakdown::unsettled_count},
}};

/// The bytes of one member type of breakdown_fields.
inline constexpr std::size_t breakdown_member_bytes(const BreakdownField::Member& member) {
  switch (member.index()) {
    case 0:
      return sizeof(int64_t);
    case 1:
      return sizeof(uint64_t);
    case 2:
      return sizeof(std::optional<uint64_t>);
    default:
      return sizeof(uint32_t);
  }
}

/// How many rows of breakdown_fields hold a member of type T.
template <typename T>
inline constexpr std::size_t breakdown_field_count() {
  std::size_t count = 0;
  for (const BreakdownField& field : breakdown_fields) {
    if (std::holds_alternative<T DriverBreakdown::*>(field.member)) ++count;
  }
  return count;
}

// The struct is exactly its rows (no padding): a new member without a row changes its size.
static_assert(
    [] {
      std::size_t bytes = 0;
      for (const BreakdownField& field : breakdown_fields) {
        bytes += breakdown_member_bytes(field.member);
      }
      return bytes;
    }() == sizeof(DriverBreakdown),
    "a field was added to DriverBreakdown: add it to breakdown_fields too");

/// The byte count `field` holds in `b` (empty when unmeasured), or empty for a field that is
/// not bytes (the time, the numbers). is_breakdown_bytes() tells the two empties apart.
inline std::optional<uint64_t> breakdown_bytes(const DriverBreakdown& b,
                                               const BreakdownField& field) {
  if (const auto* bytes = std::get_if<uint64_t DriverBreakdown::*>(&field.member)) {
    return b.**bytes;
  }
  if (const auto* bytes = std::get_if<std::optional<uint64_t> DriverBreakdown::*>(&field.member)) {
    return b.**bytes;
  }
  return std::nullopt;
}

/// Does `field` hold bytes (always measured or optional)?
inline constexpr bool is_breakdown_bytes(const BreakdownField& field) {
  return std::holds_alternative<uint64_t DriverBreakdown::*>(field.member) ||
         std::holds_alternative<std::optional<uint64_t> DriverBreakdown::*>(field.member);
}

inline uint64_t DriverBreakdown::non_pytorch_bytes() const {
  uint64_t sum = 0;
  for (const BreakdownField& field : breakdown_fields) {
    if (field.non_pytorch) sum += breakdown_bytes(*this, field).value_or(0);
  }
  return sum;
}

/// "2.28.9" for a DriverBreakdown::nccl_version of 22809.
inline std::string nccl_version_text(uint32_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

/// What a breakdown says of NCCL: "reported", "not reported by NCCL 2.28.9" (its bytes are then
/// in other), or "no NCCL communicator".
inline std::string nccl_status_text(const DriverBreakdown& b) {
  if (b.nccl_bytes) return "reported";
  if (b.nccl_version != 0) return "not reported by NCCL " + nccl_version_text(b.nccl_version);
  return "no NCCL communicator";
}

/// Live allocator statistics one agent publishes for one CUDA device of its process.
struct AllocatorSample {
  uint32_t pid = 0;
  /// torch.distributed rank and world size; -1 when not distributed.
  int32_t rank = -1;
  int32_t world_size = -1;
  /// CUDA ordinal inside that process (after CUDA_VISIBLE_DEVICES).
  int32_t cuda_device = 0;
  /// UUID of the device ("GPU-…"), used to join with the driver's view.
  std::string device_uuid;
  /// Caching allocator numbers. requested/reserved are exact from events; allocated/active
  /// and inactive_split come from getDeviceStats polls. Every uint64_t field from here to
  /// dropped_event_count is a row of allocator_counters (below): a new one goes there too.
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t active_bytes = 0;
  uint64_t inactive_split_bytes = 0;
  /// Peaks since the agent attached (vramscope's own; torch's peaks are never reset).
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  /// Current training step (0 before the first step() call) and the previous step's peaks.
  uint64_t step = 0;
  uint64_t step_peak_allocated_bytes = 0;
  uint64_t step_peak_reserved_bytes = 0;
  /// Out-of-memory errors seen by the agent's observer.
  uint64_t oom_count = 0;
  /// Events handled and events dropped because the ring was full.
  uint64_t event_count = 0;
  uint64_t dropped_event_count = 0;
  /// Is the agent polling only (no trace events: cudaMallocAsync / pluggable allocator, or the
  /// Python fallback without a torch-facing library)? Its peaks are then the highest values
  /// polls saw, not exact.
  bool polling_only = false;
  /// Why it polls, one line ending in its fix, as the process published it (untrusted text:
  /// shown through the sanitising cells); empty when it does not poll or did not say.
  std::string polling_reason;
  /// When the agent last published, CLOCK_REALTIME in ns.
  int64_t updated_ns = 0;
  /// The driver's bytes for this process, part by part, at the agent's last settled pairing;
  /// empty before the first one (or where the agent cannot read the driver).
  std::optional<DriverBreakdown> breakdown;

  bool operator==(const AllocatorSample&) const = default;
};

/// What an allocator counter counts: the readers' plausibility bound and the exports' type
/// follow from it.
enum class CounterUnit : uint8_t {
  /// Bytes on one device (a reader refuses more than any allocator can hold).
  Bytes,
  /// A training step number.
  Steps,
  /// A running total of events (a Prometheus counter, never reset while the agent lives).
  Total,
};

/// One counter of AllocatorSample. Every representation of the counters iterates
/// allocator_counters (the agent segment's slot, the recording codec, JSON, Prometheus), so a
/// new counter is its field plus one row here; the static_asserts in
/// vramscope/format/agent_segment_layout.hpp and sample_codec.cpp then ask for the two format
/// versions.
struct AllocatorCounter {
  /// Field name: the JSON key, in the order the segment and the recording store the counters.
  std::string_view name;
  uint64_t AllocatorSample::*member;
  CounterUnit unit;
  /// Prometheus family name; its type is "counter" for CounterUnit::Total, else "gauge".
  std::string_view metric;
  /// Prometheus HELP text.
  std::string_view help;
};

/// The counters of AllocatorSample, in declaration order (which is also their stored order).
inline constexpr std::array<AllocatorCounter, 13> allocator_counters = {{
    {"allocated_bytes", &AllocatorSample::allocated_bytes, CounterUnit::Bytes,
     "vramscope_torch_allocated_bytes",
     "Bytes in tensors the PyTorch caching allocator handed out (memory_allocated)."},
    {"reserved_bytes", &AllocatorSample::reserved_bytes, CounterUnit::Bytes,
     "vramscope_torch_reserved_bytes",
     "Bytes the PyTorch caching allocator holds from the driver, cached free blocks included "
     "(memory_reserved)."},
    {"requested_bytes", &AllocatorSample::requested_bytes, CounterUnit::Bytes,
     "vramscope_torch_requested_bytes",
     "Bytes requested by tensors before the allocator's rounding."},
    {"active_bytes", &AllocatorSample::active_bytes, CounterUnit::Bytes,
     "vramscope_torch_active_bytes", "Bytes in active blocks (allocated or awaiting stream sync)."},
    {"inactive_split_bytes", &AllocatorSample::inactive_split_bytes, CounterUnit::Bytes,
     "vramscope_torch_inactive_split_bytes",
     "Bytes in free pieces of split blocks (fragmentation)."},
    {"peak_allocated_bytes", &AllocatorSample::peak_allocated_bytes, CounterUnit::Bytes,
     "vramscope_torch_peak_allocated_bytes",
     "Peak allocated bytes since the agent attached (torch's own peaks are never reset)."},
    {"peak_reserved_bytes", &AllocatorSample::peak_reserved_bytes, CounterUnit::Bytes,
     "vramscope_torch_peak_reserved_bytes", "Peak reserved bytes since the agent attached."},
    {"step", &AllocatorSample::step, CounterUnit::Steps, "vramscope_torch_step",
     "Current training step (0 before the first Monitor.step())."},
    {"step_peak_allocated_bytes", &AllocatorSample::step_peak_allocated_bytes, CounterUnit::Bytes,
     "vramscope_torch_step_peak_allocated_bytes",
     "Peak allocated bytes inside the last completed step."},
    {"step_peak_reserved_bytes", &AllocatorSample::step_peak_reserved_bytes, CounterUnit::Bytes,
     "vramscope_torch_step_peak_reserved_bytes",
     "Peak reserved bytes inside the last completed step."},
    {"oom_count", &AllocatorSample::oom_count, CounterUnit::Total, "vramscope_torch_ooms_total",
     "CUDA out-of-memory errors the agent observed."},
    {"event_count", &AllocatorSample::event_count, CounterUnit::Total,
     "vramscope_torch_events_total", "Allocator events the agent handled."},
    {"dropped_event_count", &AllocatorSample::dropped_event_count, CounterUnit::Total,
     "vramscope_torch_dropped_events_total",
     "Allocator events dropped because the agent's ring was full."},
}};
inline constexpr std::size_t allocator_counter_count = allocator_counters.size();

/// What live memory is, in the order every export lists it (torch's memory-timeline categories).
enum class MemoryCategory : uint8_t {
  Parameters = 0,
  Gradients = 1,
  OptimizerState = 2,
  /// Allocated during a forward pass and not tagged otherwise.
  Activations = 3,
  /// Allocated during backward or the optimizer step and not a gradient or optimizer state.
  Temporaries = 4,
  /// Everything else (inputs, memory live before tracking started, untagged buffers).
  Other = 5,
};
inline constexpr std::size_t memory_category_count = 6;

/// Lower-case names, indexed by MemoryCategory: the names used in tags, labels and columns.
inline constexpr std::array<std::string_view, memory_category_count> memory_category_names = {
    "parameters", "gradients", "optimizer_state", "activations", "temporaries", "other"};

/// Requested bytes per MemoryCategory (index = the enum value).
using CategoryBytes = std::array<uint64_t, memory_category_count>;

/// One completed training step of one process on one device: exact peaks from allocator events.
struct StepRecord {
  uint32_t pid = 0;
  int32_t rank = -1;
  int32_t cuda_device = 0;
  std::string device_uuid;
  /// The step that ended (1 for the first step() call).
  uint64_t step = 0;
  /// When the step ended (CLOCK_REALTIME ns) and how long it lasted.
  int64_t end_ns = 0;
  int64_t duration_ns = 0;
  /// Peaks inside the step, exact from events (requested/reserved) or polls (allocated). These
  /// and the values at the end are the rows of step_byte_fields (below): a new one goes there.
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t peak_requested_bytes = 0;
  /// Values at the end of the step.
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  /// What the step's peak was made of: requested bytes per category live at the moment of the
  /// step's requested-bytes peak (they sum to that peak). Empty unless the process tracks
  /// categories (Monitor(model=...)).
  std::optional<CategoryBytes> category_bytes;

  bool operator==(const StepRecord&) const = default;
};

/// An out-of-memory error one agent observed.
struct OomRecord {
  uint32_t pid = 0;
  int32_t rank = -1;
  int32_t cuda_device = 0;
  std::string device_uuid;
  int64_t timestamp_ns = 0;
  /// The (rounded) request that failed, the device total and free bytes at that moment. These
  /// and the allocator state are the rows of oom_byte_fields (below): a new one goes there.
  uint64_t requested_bytes = 0;
  uint64_t device_total_bytes = 0;
  uint64_t device_free_bytes = 0;
  /// Allocator state at the OOM.
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;

  bool operator==(const OomRecord&) const = default;
};

/// One uint64_t field of a record and its name (JSON key, CSV column, trace argument).
template <typename Record>
struct RecordField {
  std::string_view name;
  uint64_t Record::*member;
};

/// StepRecord's byte counts, in declaration order: the segment's step ring, the recording codec,
/// JSON, the CSV step rows, the Chrome trace and the agent's step dicts carry them through this
/// table.
inline constexpr std::array<RecordField<StepRecord>, 5> step_byte_fields = {{
    {"peak_allocated_bytes", &StepRecord::peak_allocated_bytes},
    {"peak_reserved_bytes", &StepRecord::peak_reserved_bytes},
    {"peak_requested_bytes", &StepRecord::peak_requested_bytes},
    {"allocated_bytes", &StepRecord::allocated_bytes},
    {"reserved_bytes", &StepRecord::reserved_bytes},
}};

/// OomRecord's byte counts, in declaration order, carried the same way.
inline constexpr std::array<RecordField<OomRecord>, 5> oom_byte_fields = {{
    {"requested_bytes", &OomRecord::requested_bytes},
    {"device_total_bytes", &OomRecord::device_total_bytes},
    {"device_free_bytes", &OomRecord::device_free_bytes},
    {"allocated_bytes", &OomRecord::allocated_bytes},
    {"reserved_bytes", &OomRecord::reserved_bytes},
}};

/// Everything seen at one instant: all GPUs from the driver plus all live agents.
struct SystemSample {
  /// CLOCK_REALTIME in ns since the epoch.
  int64_t timestamp_ns = 0;
  std::string hostname;
  std::string driver_version;
  std::vector<DeviceSample> devices;
  std::vector<AllocatorSample> allocators;
  /// Steps that completed since the previous SystemSample (none are lost between samples).
  std::vector<StepRecord> steps;
  /// OOMs observed since the previous SystemSample.
  std::vector<OomRecord> ooms;

  bool operator==(const SystemSample&) const = default;
};

/// Which step records of one sample have sampled rather than exact peaks: those of a process
/// (pid and device) with an allocator record in the sample that polls. Its agent then took the
/// step's peaks from polls (the highest they saw, at least that). A step record carries no flag of
/// its own; its sample does. Made once per sample, so that a sample of many steps and many
/// allocators costs n log n, never steps x allocators; empty (no allocation) when no agent polls.
/// It points into `sample`, which must outlive it.
class PolledSteps {
 public:
  explicit PolledSteps(const SystemSample& sample) {
    for (const AllocatorSample& a : sample.allocators) {
      if (a.polling_only) m_polled.emplace(a.pid, a.device_uuid);
    }
  }
  /// Are `step`'s peaks sampled (its process's agent polls)?
  bool sampled(const StepRecord& step) const {
    return !m_polled.empty() && m_polled.count({step.pid, step.device_uuid}) != 0;
  }

 private:
  /// (pid, device UUID) of each polling allocator record.
  std::set<std::pair<uint32_t, std::string_view>> m_polled;
};

}  // namespace vramscope
