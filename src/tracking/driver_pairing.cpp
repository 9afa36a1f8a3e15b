// src/tracking/driver_pairing.cpp -- settled pairings of the driver's bytes with torch's reserved (see driver_pairing.hpp)
#include "vramscope/tracking/driver_pairing.hpp"

#include <algorithm>

namespace vramscope::tracking {

DriverPairing::DriverPairing(std::vector<const DeviceCounters*> devices, DriverSource& source,
                             PairingConfig config)
    : m_source(source), m_config(config) {
  m_devices.resize(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) m_devices[i].counters = devices[i];
}

DriverBreakdown DriverPairing::split(uint64_t driver_bytes, uint64_t reserved_bytes,
                                     std::optional<uint64_t> listed_bytes,
                                     std::optional<uint64_t> nccl_bytes) {
  DriverBreakdown b;
  b.driver_bytes = driver_bytes;
  b.reserved_bytes = reserved_bytes;
  // Every part is taken out of what is left; a part larger than what is left is cut to it and
  // the cut is the excess (a mismatch shown, never hidden).
  uint64_t left = driver_bytes;
  auto take = [&left, &b](uint64_t part) {
    const uint64_t taken = std::min(part, left);
    b.excess_bytes += part - taken;
    left -= taken;
    return taken;
  };
  take(reserved_bytes);
  if (listed_bytes) {
    // torch's segments are among the listed allocations.
    uint64_t outside = *listed_bytes >= reserved_bytes ? *listed_bytes - reserved_bytes : 0;
    b.excess_bytes += *listed_bytes >= reserved_bytes ? 0 : reserved_bytes - *listed_bytes;
    if (nccl_bytes) {
      // NCCL's buffers are device allocations of their own (cuMem*), listed with the others.
      const uint64_t nccl = std::min(*nccl_bytes, outside);
      b.nccl_bytes = take(nccl);
      outside -= nccl;
    }
    b.other_bytes = take(outside);
  } else if (nccl_bytes) {
    b.nccl_bytes = take(*nccl_bytes);
  }
  b.context_bytes = left;
  return b;
}

namespace {

/// |a - b| of two byte counts.
uint64_t distance(uint64_t a, uint64_t b) { return std::max(a, b) - std::min(a, b); }

/// driver - reserved, or 0 when torch holds more than the driver charged (the reading is then
/// one whose segments moved, or one split() names an excess for).
uint64_t unexplained(const DriverBreakdown& parts) {
  return parts.driver_bytes > parts.reserved_bytes ? parts.driver_bytes - parts.reserved_bytes : 0;
}

}  // namespace

std::size_t DriverPairing::index_of(const Device& device) const {
  return static_cast<std::size_t>(&device - m_devices.data());
}

DriverPairing::Reading DriverPairing::read(Device& device, uint64_t driver_bytes) {
  const std::size_t index = index_of(device);
  Reading reading;
  reading.parts.driver_bytes = driver_bytes;
  reading.parts.reserved_bytes = device.counters->reserved_bytes();
  if (device.counters->pools_tracked()) {
    reading.parts.private_pool_bytes = device.counters->private_pool_bytes();
  }
  // The listing walks the address space: only when what torch does not hold has moved. Else
  // the allocations outside torch are the last listing's (torch's own may have moved since).
  if (!device.unexplained_at_listing ||
      distance(unexplained(reading.parts), *device.unexplained_at_listing) >=
          m_config.relist_bytes) {
    reading.listed = true;
    if (const std::optional<uint64_t> listed = m_source.allocation_bytes(index)) {
      // Both are plausible byte counts (< 2^63): the difference is exact.
      reading.listed_beyond_reserved =
          static_cast<int64_t>(*listed) - static_cast<int64_t>(reading.parts.reserved_bytes);
    }
  } else {
    reading.listed_beyond_reserved = device.beyond_at_listing;
  }
  return reading;
}

void DriverPairing::settle(Device& device, const Reading& reading) {
  if (reading.listed) {
    device.unexplained_at_listing = unexplained(reading.parts);
    device.beyond_at_listing = reading.listed_beyond_reserved;
  }
  std::optional<uint64_t> listed;
  if (const std::optional<int64_t> beyond = reading.listed_beyond_reserved) {
    const uint64_t reserved = reading.parts.reserved_bytes;
    const uint64_t missed = *beyond < 0 ? uint64_t{0} - static_cast<uint64_t>(*beyond) : 0;
    listed = *beyond >= 0 ? reserved + static_cast<uint64_t>(*beyond)
                          : reserved - std::min(reserved, missed);
  }
  std::lock_guard lock(m_mutex);
  DriverBreakdown b =
      split(reading.parts.driver_bytes, reading.parts.reserved_bytes, listed, device.nccl_bytes);
  b.paired_ns = reading.parts.paired_ns;
  b.private_pool_bytes = reading.parts.private_pool_bytes;
  b.nccl_version = device.nccl_version;
  b.unsettled_count = device.unsettled;
  if (!device.first_context_bytes && b.other_bytes) device.first_context_bytes = b.context_bytes;
  b.first_context_bytes = device.first_context_bytes;
  device.settled = b;
}

void DriverPairing::count_unsettled(Device& device) {
  std::lock_guard lock(m_mutex);
  ++device.unsettled;
  if (device.settled) device.settled->unsettled_count = device.unsettled;
}

int64_t DriverPairing::advance(int64_t now_ns, int64_t wall_ns) {
  if (now_ns < m_due_ns) return m_due_ns;
  switch (m_phase) {
    case Phase::Idle:
      for (Device& device : m_devices) {
        device.count_at_start = device.counters->segment_event_count();
        device.driver_at_start = m_source.process_bytes(index_of(device));
        device.reading.reset();
      }
      m_phase = Phase::Quiet;
      m_due_ns = now_ns + m_config.guard_ns;
      return m_due_ns;
    case Phase::Quiet: {
      bool any = false;
      for (Device& device : m_devices) {
        if (!device.driver_at_start) continue;  // the driver cannot say: nothing to pair
        // Not quiet: no reading for this device this round.
        if (device.counters->segment_event_count() != device.count_at_start) {
          count_unsettled(device);
          continue;
        }
        const std::optional<uint64_t> driver = m_source.process_bytes(index_of(device));
        if (!driver) continue;
        if (*driver != *device.driver_at_start) {
          // The driver moved without a segment event: an operation still running (checked
          // before torch is read and the allocations listed, which would be wasted).
          count_unsettled(device);
          continue;
        }
        device.reading = read(device, *driver);
        device.reading->parts.paired_ns = wall_ns;
        any = true;
      }
      if (!any) {
        m_phase = Phase::Idle;
        m_due_ns = now_ns + m_config.retry_ns;
        return m_due_ns;
      }
      m_phase = Phase::Settle;
      m_due_ns = now_ns + m_config.guard_ns;
      return m_due_ns;
    }
    case Phase::Settle: {
      bool all_settled = true;
      for (Device& device : m_devices) {
        if (!device.reading) continue;
        if (device.counters->segment_event_count() == device.count_at_start &&
            m_source.process_bytes(index_of(device)) == device.reading->parts.driver_bytes) {
          settle(device, *device.reading);
        } else {
          all_settled = false;
          count_unsettled(device);
        }
        device.reading.reset();
      }
      m_phase = Phase::Idle;
      m_due_ns = now_ns + (all_settled ? m_config.interval_ns : m_config.retry_ns);
      return m_due_ns;
    }
  }
  return m_due_ns;
}

std::optional<DriverBreakdown> DriverPairing::breakdown(std::size_t device) const {
  std::lock_guard lock(m_mutex);
  if (device >= m_devices.size()) return std::nullopt;
  return m_devices[device].settled;
}

void DriverPairing::set_nccl(std::size_t device, uint32_t version, std::optional<uint64_t> bytes) {
  std::lock_guard lock(m_mutex);
  if (device >= m_devices.size()) return;
  m_devices[device].nccl_version = version;
  m_devices[device].nccl_bytes = bytes;
}

}  // namespace vramscope::tracking
