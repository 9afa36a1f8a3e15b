// agent/bindings/bind_polling.cpp -- the polling segment: what Python's polls read, published for `vramscope top`
//
// vramscope._core.session opens it when the process falls back to polling (no torch-facing
// library for its torch, or the agent could not attach), and its PollingReader publishes what
// each read and step polled. None of it needs torch or the torch-facing library.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.hpp"
#include "vramscope/sample.hpp"
#include "vramscope/status.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

namespace {

/// An AllocatorSample whose counters are `counters`' values, keyed by the names of
/// allocator_counters (a missing one is 0); ValueError on any other key or on a value that is
/// no non-negative int below 2^64, so that a misspelt key is never published as a silent 0.
AllocatorSample sample_of(const nb::dict& counters) {
  AllocatorSample sample;
  for (const auto& [key, value] : counters) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    const auto* counter = std::find_if(allocator_counters.begin(), allocator_counters.end(),
                                       [&](const AllocatorCounter& c) { return c.name == name; });
    if (counter == allocator_counters.end()) {
      throw nb::value_error(("not a counter of the segment: " + name).c_str());
    }
    uint64_t count = 0;
    if (!nb::isinstance<nb::int_>(value) || !nb::try_cast<uint64_t>(value, count)) {
      throw nb::value_error((name + " must be an int in [0, 2**64)").c_str());
    }
    sample.*counter->member = count;
  }
  return sample;
}

}  // namespace

void bind_polling(nb::module_& m) {
  m.def(
      "polling_segment_open",
      [](const std::string& reason, const std::vector<std::string>& device_uuids, int rank,
         int world_size) {
        if (attached_or_null() != nullptr) {
          throw std::runtime_error("the agent is attached: it publishes its own segment");
        }
        if (device_uuids.empty()) throw nb::value_error("no device to publish");
        try {
          AgentState::instance().polling().open(reason, device_uuids, rank, world_size);
        } catch (const Error& error) {
          throw std::runtime_error(error.what());
        }
        return AgentState::instance().polling().path();
      },
      "reason"_a, "device_uuids"_a, "rank"_a = -1, "world_size"_a = -1,
      "Create this process's segment for a process that polls (no agent attached): one slot "
      "per CUDA device, named by `device_uuids` (NVML's names), marked polled, with `reason` "
      "(why it polls, ending in its fix) in its note. Returns its path. Raises RuntimeError "
      "when the agent is attached or the segment cannot be created.");
  m.def(
      "polling_segment_publish",
      [](std::size_t device, const nb::dict& counters) {
        AllocatorSample sample = sample_of(counters);
        try {
          AgentState::instance().polling().publish(device, std::move(sample));
        } catch (const std::out_of_range& error) {
          throw nb::index_error(error.what());
        }
      },
      "device"_a, "counters"_a,
      "Publish what a poll read on CUDA device `device`: `counters` by the names of the "
      "segment's counters (allocated_bytes ... dropped_event_count; a missing one is 0). "
      "Nothing when no polling segment is open.");
  m.def(
      "polling_segment_set_rank",
      [](int rank, int world_size) { AgentState::instance().polling().set_rank(rank, world_size); },
      "rank"_a, "world_size"_a, "The rank and world size the polling segment publishes.");
  m.def(
      "polling_segment_close", [] { AgentState::instance().polling().close(); },
      "Remove the polling segment (also done at exit).");
}

}  // namespace vramscope::agent
