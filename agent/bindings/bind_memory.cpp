// agent/bindings/bind_memory.cpp -- the memory readers: current bytes, vramscope's peaks, stats(), empty_cache()
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "py_records.hpp"
#include "torch_hooks.hpp"
#include "vramscope/tracking/device_stats.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {

/// Reserved/requested: exact event counters, or a fresh poll when there are no events.
uint64_t reserved_now(Attachment& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).reserved_bytes;
  return state.core->counters(device).reserved_bytes();
}

uint64_t requested_now(Attachment& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).requested_bytes;
  return state.core->counters(device).requested_bytes();
}

}  // namespace

void bind_memory(nb::module_& m) {
  m.def(
      "memory_allocated",
      [](int device) {
        Attachment& state = attached();
        return allocated_bytes_now(checked_device(state, device));
      },
      "device"_a, "Bytes in allocated blocks now (torch's counter, exact).");
  m.def(
      "memory_reserved",
      [](int device) {
        Attachment& state = attached();
        return reserved_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes reserved by the caching allocator now (exact, from events).");
  m.def(
      "memory_requested",
      [](int device) {
        Attachment& state = attached();
        return requested_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes the program asked for, before rounding (exact, from events).");
  m.def(
      "max_memory_allocated",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.allocated_bytes;
      },
      "device"_a, "vramscope's allocated peak since attach or reset_peak().");
  m.def(
      "max_memory_reserved",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.reserved_bytes;
      },
      "device"_a, "vramscope's reserved peak since attach or reset_peak() (exact).");
  m.def(
      "max_memory_requested",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.requested_bytes;
      },
      "device"_a, "vramscope's requested peak since attach or reset_peak() (exact).");
  m.def(
      "reset_peak",
      [](int device) {
        Attachment& state = attached();
        state.core->reset_peak(checked_device(state, device));
      },
      "device"_a, "Restart vramscope's peaks at the current values; torch's are never reset.");
  m.def(
      "stats",
      [](int device) {
        Attachment& state = attached();
        return stats_dict(state.core->stats(checked_device(state, device)));
      },
      "device"_a, "Every counter of one device as a dict.");
  // stats()'s keys in order, readable without attaching: tests/python/test_stubs.py holds the
  // stub, the docs and the polling fallback to them.
  nb::list fields;
  for (const tracking::DeviceStatsField& field : tracking::device_stats_fields) {
    fields.append(nb::str(field.name.data(), field.name.size()));
  }
  m.attr("_device_stats_fields") = nb::tuple(fields);
  m.def(
      "empty_cache",
      [] {
        Attachment& state = attached();
        uint64_t before = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d)
          before += reserved_now(state, d);
        empty_cache();
        uint64_t after = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d)
          after += reserved_now(state, d);
        return before > after ? before - after : uint64_t{0};
      },
      "Release cached memory (torch.cuda.empty_cache); returns the reserved bytes released.");
}

}  // namespace vramscope::agent
