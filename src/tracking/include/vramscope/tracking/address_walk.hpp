// src/tracking/include/vramscope/tracking/address_walk.hpp -- the walk over a process's address space that lists its device allocations (pure: the agent gives it the driver)
//
// agent/device_allocations.cpp walks /proc/self/maps with the CUDA driver as the probe; tests
// walk synthetic address spaces with synthetic probes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vramscope::tracking {

/// One mapping of /proc/self/maps that may hold device memory: [begin, end).
struct AddressRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// The mappings of a /proc/<pid>/maps text that may hold device memory: anonymous ones and
/// the driver's own (/dev/nvidia*). Pure (tests feed it text).
std::vector<AddressRange> device_candidate_ranges(const std::string& maps_text);

/// Walks `ranges` at `granularity`-aligned addresses, asking `probe(address, &base, &size)`
/// (true: an allocation [base, base + size) holds the address) and jumping over what it finds;
/// `keep(base, size)` says whether a found allocation counts. Returns the bytes kept, or empty
/// past `max_probes` probes. Pure (tests feed it a synthetic address space).
template <typename Probe, typename Keep>
std::optional<uint64_t> walk_allocations(const std::vector<AddressRange>& ranges,
                                         uint64_t granularity, std::size_t max_probes,
                                         Probe&& probe, Keep&& keep) {
  uint64_t total = 0;
  std::size_t probes = 0;
  uint64_t last_end = 0;  // one allocation may span two mappings: count it once
  for (const AddressRange& range : ranges) {
    uint64_t address = (range.begin + granularity - 1) / granularity * granularity;
    while (address < range.end) {
      if (++probes > max_probes) return std::nullopt;
      uint64_t base = 0;
      uint64_t size = 0;
      if (probe(address, &base, &size) && size > 0 && base <= address) {
        if (base >= last_end && keep(base, size)) total += size;
        if (base + size > last_end) last_end = base + size;
        const uint64_t next = (base + size + granularity - 1) / granularity * granularity;
        address = next > address ? next : address + granularity;
      } else {
        address += granularity;
      }
    }
  }
  return total;
}

}  // namespace vramscope::tracking
