// src/tracking/include/vramscope/tracking/driver_pairing.hpp -- the driver's bytes paired with torch's reserved at one instant, and named part by part
//
// The driver (NVML) and the allocator count the same segments at different moments: torch
// traces SEGMENT_ALLOC after cudaMalloc returned and SEGMENT_FREE before cudaFree ran, and a
// reading of the driver takes its own time. Subtracting reserved from a driver reading taken
// while segments move invents non-PyTorch memory (the peak, where memory moves fastest, is the
// frame it happens in). A pairing is therefore only kept when it is *settled*:
//
//   time ─────┬──────── guard ────────┬── reading ──┬──────── guard ────────┬───▶
//             t0: count c0,           t1: count    driver d1, reserved,      t2: count
//             driver d0               must be c0   allocations listed        must be c0,
//                                                                            driver d2
//
// No segment event (the device's segment-event count) in [t0, t2]: every cudaMalloc traced
// before t0 returned more than a guard before the reading, none was traced until a guard after
// it, so the driver and the allocator saw the same segments. And the driver's number the same
// at t0, t1 and t2 (d0 = d1 = d2): a cudaFree traced before t0 but still running, or a
// cudaMalloc charged but not yet returned, moves the driver without a trace event inside the
// window; the three equal readings leave only an operation that spans the whole window (over
// two guards) to go unseen. Otherwise the pairing is counted as unsettled and the previous
// settled breakdown stays (marked by its time).
//
// The parts: driver = reserved + other + context, where `other` is every device allocation of
// the process outside torch's segments (listed by the DriverSource: torch's segments are among
// them, so other = listed - reserved) and `context` is what no allocation accounts for: the CUDA
// context and the modules loaded into it. NCCL, when it reports its bytes, is named out of
// other. A part never goes below zero: what the parts exceed the reading by is `excess`.
//
// Threads: advance() runs on its own thread (the agent's driver thread), never on the
// allocator's callback and never under the core's lock: a reading costs NVML's process list and
// a walk of the address space (milliseconds), which a step() call must not wait for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "vramscope/sample.hpp"
#include "vramscope/tracking/device_counters.hpp"

namespace vramscope::tracking {

/// The driver's side of a pairing: NVML and the CUDA driver in the agent, synthetic in tests.
class DriverSource {
 public:
  virtual ~DriverSource() = default;
  /// The driver's bytes for this process on `device` (torch's index); empty when it cannot
  /// say (no NVML, a MIG instance, the pid not listed).
  virtual std::optional<uint64_t> process_bytes(std::size_t device) = 0;
  /// Bytes of every device allocation this process holds on `device`, torch's segments
  /// included; empty when they cannot be listed.
  virtual std::optional<uint64_t> allocation_bytes(std::size_t device) = 0;
};

/// Tunables of a DriverPairing.
struct PairingConfig {
  /// Quiet time demanded before and after the reading (longer than a cudaMalloc or cudaFree of
  /// a large segment takes).
  int64_t guard_ns = 50'000'000;
  /// Time between two settled pairings. A pairing is one NVML process-list call (9-16 us on
  /// an H200) and the walk only when driver - reserved moved, so four a second cost nothing
  /// measurable and follow the first steps' module loads within a fraction of a second.
  int64_t interval_ns = 250'000'000;
  /// Time before the next try after an unsettled one (segments were moving).
  int64_t retry_ns = 100'000'000;
  /// Change of driver - reserved that makes the next reading list the allocations again
  /// (one 2 MiB page: the driver's granularity).
  uint64_t relist_bytes = uint64_t{2} << 20U;
};

/// The pairing state machine for every device of one process.
class DriverPairing {
 public:
  /// One entry of `devices` per tracked device: its counters (never moved, outliving this).
  DriverPairing(std::vector<const DeviceCounters*> devices, DriverSource& source,
                PairingConfig config = {});

  /// Does the next piece of work due at `now_ns` (CLOCK_MONOTONIC) and returns when to call
  /// again (an absolute CLOCK_MONOTONIC time). `wall_ns` (CLOCK_REALTIME) stamps a reading.
  int64_t advance(int64_t now_ns, int64_t wall_ns);

  /// The last settled breakdown of `device`, or empty before the first one.
  std::optional<DriverBreakdown> breakdown(std::size_t device) const;
  /// NCCL as torch reports it (set from Python at step ends): its version (0: no
  /// communicator) and its bytes on `device` (empty: not reported by this NCCL).
  void set_nccl(std::size_t device, uint32_t version, std::optional<uint64_t> bytes);

  /// The parts of one settled reading: pure arithmetic, shared with tests.
  static DriverBreakdown split(uint64_t driver_bytes, uint64_t reserved_bytes,
                               std::optional<uint64_t> listed_bytes,
                               std::optional<uint64_t> nccl_bytes);

 private:
  enum class Phase : uint8_t { Idle, Quiet, Settle };
  struct Reading {
    /// paired_ns, driver, reserved and private pools as read; settle() has split() name the
    /// rest.
    DriverBreakdown parts;
    /// Every device allocation listed (torch's segments among them) minus torch's reserved, at
    /// this reading or carried from the last listing; negative when the listing missed some of
    /// torch's segments (split() then names an excess). Empty: the allocations were not listed.
    std::optional<int64_t> listed_beyond_reserved;
    /// Was the listing done at this reading (not carried)?
    bool listed = false;
  };
  struct Device {
    const DeviceCounters* counters = nullptr;
    /// Segment-event count and the driver's bytes at t0 (empty: the driver could not say).
    uint64_t count_at_start = 0;
    std::optional<uint64_t> driver_at_start;
    std::optional<Reading> reading;
    std::optional<DriverBreakdown> settled;
    /// driver - reserved, and Reading::listed_beyond_reserved, at the last listing.
    std::optional<uint64_t> unexplained_at_listing;
    std::optional<int64_t> beyond_at_listing;
    std::optional<uint64_t> first_context_bytes;
    /// Pairings not kept since attach: not quiet before the reading, or segments moved after.
    uint32_t unsettled = 0;
    uint32_t nccl_version = 0;
    std::optional<uint64_t> nccl_bytes;
  };

  /// The position of `device` in m_devices (the DriverSource's device index).
  std::size_t index_of(const Device& device) const;
  /// Pairs `driver_bytes`, just read, with torch's reserved and (when needed) the allocation
  /// list of `device`.
  Reading read(Device& device, uint64_t driver_bytes);
  /// Keeps `device`'s reading as its settled breakdown.
  void settle(Device& device, const Reading& reading);
  /// Counts a pairing of `device` not kept (segments moved around it).
  void count_unsettled(Device& device);

  DriverSource& m_source;
  PairingConfig m_config;
  Phase m_phase = Phase::Idle;
  int64_t m_due_ns = 0;
  /// Guards m_devices' settled breakdowns and NCCL fields (read by publishers and Python).
  mutable std::mutex m_mutex;
  std::vector<Device> m_devices;
};

}  // namespace vramscope::tracking
