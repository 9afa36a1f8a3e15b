// src/exporters/chrome_trace.cpp -- streaming Chrome / Perfetto JSON trace writer
#include "vramscope/exporters/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "vramscope/clock.hpp"
#include "vramscope/core/utf8.hpp"
#include "vramscope/version.hpp"

namespace vramscope::exporters {

namespace {

using nlohmann::json;
// Every event goes through json_text(): names and commands come from other processes, and bad
// UTF-8 must become U+FFFD, not an exception that ends the trace.

double to_trace_us(int64_t timestamp_ns) { return static_cast<double>(timestamp_ns) / 1000.0; }

std::string describe_process(uint32_t pid, int32_t rank, int32_t world_size,
                             const std::string& command) {
  std::string name = "pid " + std::to_string(pid);
  if (rank >= 0) {
    name += " rank " + std::to_string(rank);
    if (world_size > 0) name += "/" + std::to_string(world_size);
  }
  if (!command.empty()) name += " (" + command.substr(0, chrome_trace_command_bytes) + ")";
  return name;
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(const std::string& path, const ChromeTraceOptions& options)
    : m_options(options), m_file(std::make_unique<BufferedFile>(path, options.overwrite)) {
  m_file->append_record("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
}

ChromeTraceWriter::~ChromeTraceWriter() {
  // Unwinding: the trace is incomplete and BufferedFile removes it; closing would commit it.
  if (!m_closed && m_file->abandoned()) return;
  try {
    close();
  } catch (const std::exception&) {
    // Destructors cannot report; callers that care call close().
  }
}

void ChromeTraceWriter::emit(const std::string& event_json, bool bounded) {
  if (bounded && m_events_written >= m_options.max_events) {
    ++m_events_dropped;
    return;
  }
  std::string record = m_first_event ? "\n" : ",\n";
  record += event_json;
  m_first_event = false;
  m_file->append_record(record);
  ++m_events_written;
}

void ChromeTraceWriter::counter(int64_t pid, const std::string& name, uint64_t value,
                                int64_t timestamp_ns) {
  const Track track{pid, name};
  const auto found = m_last_value.find(track);
  if (found != m_last_value.end() && found->second.first == value) return;
  if (m_events_written >= m_options.max_events) {
    ++m_events_dropped;
    return;  // Do not record the value: the final repeat must not invent a change we dropped.
  }
  m_last_value[track] = {value, timestamp_ns};
  const json event = {{"name", name}, {"ph", "C"}, {"ts", to_trace_us(timestamp_ns)},
                      {"pid", pid},   {"tid", 0},  {"args", {{"bytes", value}}}};
  emit(json_text(event), true);
}

void ChromeTraceWriter::note_process(int64_t pid, const std::string& name, int64_t sort_index) {
  ProcessInfo& info = m_processes[pid];
  info.name = name;
  info.sort_index = sort_index;
}

void ChromeTraceWriter::note_host_process(uint32_t pid, int32_t rank, int32_t world_size,
                                          const std::string& command) {
  ProcessInfo& info = m_processes[pid];
  if (rank >= 0) info.rank = rank;
  if (world_size >= 0) info.world_size = world_size;
  // Only what the name shows is kept: a trace outlives every process it saw, and new pids with
  // long commands in every sample would otherwise hold each whole command to the end.
  if (!command.empty()) info.command = command.substr(0, chrome_trace_command_bytes);
  info.name = describe_process(pid, info.rank, info.world_size, info.command);
  // Ranks first, in rank order; then other processes by pid.
  info.sort_index = info.rank >= 0 ? 100 + info.rank : 1000 + static_cast<int64_t>(pid);
}

std::string ChromeTraceWriter::gpu_label(const SystemSample& sample, const std::string& uuid,
                                         int32_t cuda_device) const {
  for (const DeviceSample& device : sample.devices) {
    if (!uuid.empty() && device.uuid == uuid) return "GPU" + std::to_string(device.index);
  }
  return "cuda" + std::to_string(cuda_device);
}

void ChromeTraceWriter::write(const SystemSample& sample) {
  if (m_closed) return;
  if (m_first_ns == 0) m_first_ns = sample.timestamp_ns;
  m_last_ns = std::max(m_last_ns, sample.timestamp_ns);
  if (m_hostname.empty()) m_hostname = sample.hostname;
  const int64_t ts = sample.timestamp_ns;

  for (const DeviceSample& device : sample.devices) {
    const int64_t pid = chrome_trace_gpu_pid_base + device.index;
    const std::string gpu = "GPU" + std::to_string(device.index);
    note_process(
        pid, "GPU " + std::to_string(device.index) + " (" + device.name + ", " + device.uuid + ")",
        device.index);
    if (device.used_bytes) counter(pid, gpu + " used", *device.used_bytes, ts);
    if (device.reserved_bytes) counter(pid, gpu + " reserved (driver)", *device.reserved_bytes, ts);
    if (device.free_bytes) counter(pid, gpu + " free", *device.free_bytes, ts);
    if (!m_options.per_process) continue;
    for (const ProcessSample& process : device.processes) {
      if (!process.used_bytes) continue;
      note_host_process(process.pid, -1, -1, process.command);
      counter(process.pid, gpu + " driver used", *process.used_bytes, ts);
    }
  }

  for (const AllocatorSample& allocator : sample.allocators) {
    const int64_t pid = allocator.pid;
    const std::string gpu = gpu_label(sample, allocator.device_uuid, allocator.cuda_device);
    note_host_process(allocator.pid, allocator.rank, allocator.world_size, {});
    counter(pid, gpu + " torch allocated", allocator.allocated_bytes, ts);
    counter(pid, gpu + " torch reserved", allocator.reserved_bytes, ts);
    // Format 4: the non-PyTorch bytes of the agent's last settled pairing.
    if (allocator.breakdown) {
      counter(pid, gpu + " non-PyTorch", allocator.breakdown->non_pytorch_bytes(), ts);
    }
  }

  const PolledSteps polled(sample);
  for (const StepRecord& step : sample.steps) {
    const int64_t pid = step.pid;
    const std::string gpu = gpu_label(sample, step.device_uuid, step.cuda_device);
    const int64_t tid = 1 + step.cuda_device;
    if (m_named_threads.emplace(pid, tid).second) {
      emit(json_text(json{{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", pid},
                          {"tid", tid},
                          {"args", {{"name", gpu + " steps"}}}}),
           false);
    }
    json args = {{"step", step.step}, {"device_uuid", step.device_uuid}};
    for (const auto& field : step_byte_fields) args[std::string(field.name)] = step.*field.member;
    if (step.rank >= 0) args["rank"] = step.rank;
    // False: the process's agent polls, and these peaks are the highest its polls saw.
    args["peaks_exact"] = !polled.sampled(step);
    const int64_t start_ns = saturating_sub_ns(step.end_ns, step.duration_ns);
    if (step.category_bytes) {
      json categories = json::object();
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        categories[std::string(memory_category_names[c])] = (*step.category_bytes)[c];
      }
      args["category_bytes"] = categories;
    }
    emit(json_text(json{{"name", "step " + std::to_string(step.step)},
                        {"cat", "step"},
                        {"ph", "X"},
                        {"ts", to_trace_us(start_ns)},
                        {"dur", to_trace_us(step.duration_ns)},
                        {"pid", pid},
                        {"tid", tid},
                        {"args", args}}),
         true);
    if (step.category_bytes) {
      // One counter per category, set at the step's start: the value then spans the step whose
      // peak it describes.
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        counter(pid, gpu + " step peak " + std::string(memory_category_names[c]),
                (*step.category_bytes)[c], start_ns);
      }
    }
  }

  for (const OomRecord& oom : sample.ooms) {
    json args = {{"device_uuid", oom.device_uuid}, {"cuda_device", oom.cuda_device}};
    for (const auto& field : oom_byte_fields) args[std::string(field.name)] = oom.*field.member;
    if (oom.rank >= 0) args["rank"] = oom.rank;
    // Global scope: an OOM is the moment everyone looking at the trace wants to find.
    emit(json_text(json{{"name", "OOM pid " + std::to_string(oom.pid)},
                        {"cat", "oom"},
                        {"ph", "i"},
                        {"s", "g"},
                        {"ts", to_trace_us(oom.timestamp_ns)},
                        {"pid", static_cast<int64_t>(oom.pid)},
                        {"tid", 0},
                        {"args", args}}),
         false);
  }
}

void ChromeTraceWriter::flush() {
  if (!m_closed) m_file->flush();
}

void ChromeTraceWriter::close() {
  if (m_closed) return;
  m_closed = true;
  // Extend every counter to the last sample, else a flat tail looks like the data ends early.
  for (const auto& [track, last] : m_last_value) {
    const auto [value, written_ns] = last;
    if (written_ns >= m_last_ns) continue;
    const json event = {{"name", track.name}, {"ph", "C"}, {"ts", to_trace_us(m_last_ns)},
                        {"pid", track.pid},   {"tid", 0},  {"args", {{"bytes", value}}}};
    emit(json_text(event), false);
  }
  for (const auto& [pid, info] : m_processes) {
    emit(json_text(json{{"name", "process_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"name", info.name}}}}),
         false);
    emit(json_text(json{{"name", "process_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"sort_index", info.sort_index}}}}),
         false);
  }
  const json other = {{"generator", std::string("vramscope ") + version},
                      {"schema_version", 1},
                      {"hostname", m_hostname},
                      {"start_time_ns", m_first_ns},
                      {"end_time_ns", m_last_ns},
                      {"events", m_events_written},
                      {"dropped_events", m_events_dropped},
                      {"max_events", m_options.max_events}};
  m_file->append_record("\n],\"otherData\":" + json_text(other) + "}\n");
  m_file->close();
}

}  // namespace vramscope::exporters
