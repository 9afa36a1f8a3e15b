// agent/oom_capture.cpp -- the OOM snapshot and the Python post-mortem hook (see oom_capture.hpp)
#include "oom_capture.hpp"

#include <nanobind/stl/string.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "py_records.hpp"
#include "torch_hooks.hpp"

namespace nb = nanobind;

namespace vramscope::agent {

OomSnapshot take_oom_snapshot(tracking::AgentCore& core, attribution::AttributionSession& session,
                              DriverProbe& driver, std::size_t device) {
  OomSnapshot snapshot;
  snapshot.device = device;
  if (const std::optional<OomRecord> oom = core.last_oom()) snapshot.record = *oom;
  snapshot.stats = core.stats(device);
  snapshot.driver_breakdown = core.driver_breakdown(device);
  // The NVML reading after the counters: both after the failed allocation, the same segments.
  if (const std::string& uuid = core.device_uuid(device); !uuid.empty()) {
    snapshot.driver_process_bytes = driver.process_bytes(uuid, static_cast<uint32_t>(::getpid()));
  }
  try {
    snapshot.segments = capture_segments(max_captured_blocks);
  } catch (...) {
    // Without segments the report still has the counters; fragmentation reads as unknown.
  }
  for (std::size_t d = 0; d < core.device_count(); ++d) {
    snapshot.recent_events.push_back(core.recent_events(d));
  }
  snapshot.attributed = session.with_ledger(device, [&](attribution::Ledger& ledger) {
    snapshot.ops = ledger.ops(attribution::PeakMark::Profile);
    snapshot.categories = ledger.categories(attribution::PeakMark::Step);
  });
  for (const attribution::OpTotals& row : snapshot.ops) {
    snapshot.op_names.push_back(session.registry().name(row.op_id));
  }
  return snapshot;
}

void OomCapture::on_oom(tracking::AgentCore& core, attribution::AttributionSession& session,
                        DriverProbe& driver, std::size_t device) noexcept {
  try {
    OomSnapshot snapshot = take_oom_snapshot(core, session, driver, device);
    {
      std::lock_guard lock(m_mutex);
      m_last = std::move(snapshot);
    }
    if (m_callback == nullptr || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    try {
      (*m_callback)(device);
    } catch (const nb::python_error& error) {
      // The post-mortem must never replace the OutOfMemoryError the program is about to see.
      PyErr_Clear();
      static_cast<void>(error);
    }
  } catch (...) {
  }
}

void OomCapture::set_callback(nb::object callback) {
  nb::object* previous = m_callback;
  m_callback = callback.is_none() ? nullptr : new nb::object(std::move(callback));
  // The previous callback object is leaked: the observer may be running it right now on
  // another thread, and an OOM handler is set once or twice per process.
  static_cast<void>(previous);
}

nb::list OomCapture::segments_at_oom() {
  std::lock_guard lock(m_mutex);
  return m_last ? segments_list(m_last->segments) : nb::list();
}

nb::object OomCapture::snapshot_object() {
  std::lock_guard lock(m_mutex);
  if (!m_last) return nb::none();
  return oom_snapshot_dict(*m_last);
}

nb::dict oom_snapshot_dict(const OomSnapshot& s) {
  nb::dict d;
  d["device"] = s.device;
  d["oom"] = oom_dict(s.record);
  d["stats"] = stats_dict(s.stats);
  if (s.driver_process_bytes) {
    d["driver_process_bytes"] = *s.driver_process_bytes;
  } else {
    d["driver_process_bytes"] = nb::none();
  }
  d["driver_breakdown"] = breakdown_object(s.driver_breakdown);
  d["segments"] = segments_list(s.segments);
  nb::list events;
  for (const std::vector<tracking::Event>& device_events : s.recent_events) {
    events.append(events_list(device_events));
  }
  d["recent_events"] = events;
  if (s.attributed) {
    nb::list ops;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      nb::dict row;
      row["name"] = s.op_names[i];
      row["live_bytes"] = s.ops[i].live_bytes;
      row["live_at_peak_bytes"] = s.ops[i].live_at_peak_bytes;
      row["allocated_bytes"] = s.ops[i].allocated_bytes;
      ops.append(row);
    }
    d["ops"] = ops;
    d["categories"] = categories_dict(s.categories);
  } else {
    d["ops"] = nb::none();
    d["categories"] = nb::none();
  }
  return d;
}

}  // namespace vramscope::agent
