// src/exporters/prometheus.cpp -- Prometheus text exposition (0.0.4) of device and agent samples
#include "vramscope/exporters/prometheus.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "vramscope/core/utf8.hpp"

namespace vramscope::exporters {

namespace {

/// Backslash-escapes backslashes and newlines (and double quotes when `quotes`) after making the
/// text valid UTF-8: the exposition format is UTF-8, and a scraper may drop the whole scrape over
/// one bad byte of a command line, so ill-formed sequences become U+FFFD first.
std::string escape_text(std::string_view raw, bool quotes) {
  const std::string text = to_valid_utf8(raw);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view raw) { return escape_text(raw, /*quotes=*/true); }

std::string escape_help_text(std::string_view raw) { return escape_text(raw, /*quotes=*/false); }

namespace {

/// Builds `{a="x",b="y"}` incrementally; labels with empty values are left out, as Prometheus
/// treats an empty label value as an absent label anyway.
class Labels {
 public:
  Labels& add(std::string_view name, std::string_view value) {
    if (value.empty()) return *this;
    m_text += m_text.empty() ? "{" : ",";
    m_text.append(name);
    m_text += "=\"";
    m_text += escape_label_value(value);
    m_text += '"';
    return *this;
  }
  Labels& add(std::string_view name, uint64_t value) {
    return add(name, std::string_view(fmt::format_int(value).c_str()));
  }
  /// The rendered set, "" when no label was added.
  std::string text() const { return m_text.empty() ? std::string() : m_text + "}"; }

 private:
  std::string m_text;
};

/// Writes families in order; a family's HELP and TYPE appear only once it has a first sample, so
/// a family with nothing to report (no agent, no MIG) is left out entirely.
class Exposition {
 public:
  explicit Exposition(std::string& out) : m_out(out) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    m_name = name;
    m_type = type;
    m_help = help;
    m_header_written = false;
  }

  void sample(const std::string& labels, uint64_t value) {
    line(labels, fmt::format_int(value).c_str());
  }
  void sample(const std::string& labels, double value) { line(labels, fmt::format("{}", value)); }
  void sample(const std::string& labels, const std::optional<uint64_t>& value) {
    if (value) sample(labels, *value);
  }

 private:
  void line(const std::string& labels, std::string_view value) {
    if (!m_header_written) {
      fmt::format_to(std::back_inserter(m_out), "# HELP {} {}\n# TYPE {} {}\n", m_name,
                     escape_help_text(m_help), m_name, m_type);
      m_header_written = true;
    }
    m_out.append(m_name);
    m_out += labels;
    m_out += ' ';
    m_out.append(value);
    m_out += '\n';
  }

  std::string& m_out;
  std::string_view m_name;
  std::string_view m_type;
  std::string_view m_help;
  bool m_header_written = false;
};

/// Labels shared by every per-GPU series: the same label values dcgm-exporter uses (gpu, uuid,
/// pci_bus_id, model_name, hostname), so the two join without relabelling.
std::string device_labels(const DeviceSample& device, const std::string& hostname) {
  return Labels()
      .add("gpu", device.index)
      .add("uuid", device.uuid)
      .add("pci_bus_id", device.pci_bus_id)
      .add("model_name", device.name)
      .add("hostname", hostname)
      .text();
}

/// Appends extra labels to an already rendered label set.
std::string extend(const std::string& base, const Labels& extra) {
  std::string more = extra.text();  // not const: `return more` moves it
  if (more.empty()) return base;
  if (base.empty()) return more;
  return base.substr(0, base.size() - 1) + "," + more.substr(1);
}

void render_devices(Exposition& out, const SystemSample& sample,
                    const std::vector<std::string>& labels) {
  const auto& devices = sample.devices;
  out.family("vramscope_gpu_info", "gauge",
             "GPU identity: always 1, the labels carry driver version, memory API and MIG mode.");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    Labels extra;
    extra.add("driver_version", sample.driver_version)
        .add("memory_info_version", devices[i].memory_v2 ? "v2" : "v1");
    if (devices[i].mig_enabled)
      extra.add("mig_mode", *devices[i].mig_enabled ? "enabled" : "disabled");
    out.sample(extend(labels[i], extra), uint64_t{1});
  }
  out.family("vramscope_gpu_lost", "gauge",
             "1 when the GPU fell off the bus (NVML GPU_IS_LOST), else 0.");
  for (std::size_t i = 0; i < devices.size(); ++i)
    out.sample(labels[i], uint64_t{devices[i].lost ? 1U : 0U});

  struct Field {
    const char* name;
    const char* help;
    std::optional<uint64_t> DeviceSample::*member;
  };
  static const Field fields[] = {
      {"vramscope_gpu_memory_total_bytes",
       "Framebuffer size reported by the driver (ECC reduces it).", &DeviceSample::total_bytes},
      {"vramscope_gpu_memory_reserved_bytes",
       "Framebuffer kept by the driver and firmware (NVML memory info v2).",
       &DeviceSample::reserved_bytes},
      {"vramscope_gpu_memory_used_bytes",
       "Framebuffer used by allocations; excludes reserved unless memory_info_version is v1.",
       &DeviceSample::used_bytes},
      {"vramscope_gpu_memory_free_bytes", "Framebuffer free for new allocations.",
       &DeviceSample::free_bytes},
      {"vramscope_bar1_total_bytes",
       "BAR1 aperture size (CPU/peer mapping window, not framebuffer use).",
       &DeviceSample::bar1_total_bytes},
      {"vramscope_bar1_used_bytes", "BAR1 aperture in use.", &DeviceSample::bar1_used_bytes},
  };
  for (const Field& field : fields) {
    out.family(field.name, "gauge", field.help);
    for (std::size_t i = 0; i < devices.size(); ++i)
      out.sample(labels[i], devices[i].*field.member);
  }

  struct MigField {
    const char* name;
    const char* help;
    std::optional<uint64_t> MigInstanceSample::*member;
  };
  static const MigField mig_fields[] = {
      {"vramscope_mig_memory_total_bytes", "Framebuffer size of one MIG instance.",
       &MigInstanceSample::total_bytes},
      {"vramscope_mig_memory_used_bytes", "Framebuffer used in one MIG instance.",
       &MigInstanceSample::used_bytes},
      {"vramscope_mig_memory_free_bytes", "Framebuffer free in one MIG instance.",
       &MigInstanceSample::free_bytes},
  };
  for (const MigField& field : mig_fields) {
    out.family(field.name, "gauge", field.help);
    for (std::size_t i = 0; i < devices.size(); ++i) {
      for (const MigInstanceSample& mig : devices[i].mig_instances) {
        Labels extra;
        extra.add("mig_uuid", mig.uuid).add("mig_index", mig.index);
        if (mig.gpu_instance_id) extra.add("gpu_instance_id", *mig.gpu_instance_id);
        if (mig.compute_instance_id) extra.add("compute_instance_id", *mig.compute_instance_id);
        out.sample(extend(labels[i], extra), mig.*field.member);
      }
    }
  }

  out.family("vramscope_gpu_processes", "gauge",
             "Processes holding memory on the GPU (compute, graphics and MPS lists merged).");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].processes_supported)
      out.sample(labels[i], uint64_t{devices[i].processes.size()});
  }
}

void render_processes(Exposition& out, const SystemSample& sample) {
  out.family("vramscope_process_gpu_memory_used_bytes", "gauge",
             "Driver-side memory of one process on one GPU (host pid; the driver knows no pid "
             "namespaces).");
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> seen;
  for (const DeviceSample& device : sample.devices) {
    const std::string base = Labels()
                                 .add("gpu", device.index)
                                 .add("uuid", device.uuid)
                                 .add("hostname", sample.hostname)
                                 .text();
    for (const ProcessSample& process : device.processes) {
      if (!process.used_bytes) continue;
      const uint32_t gi = process.gpu_instance_id.value_or(UINT32_MAX);
      const uint32_t ci = process.compute_instance_id.value_or(UINT32_MAX);
      // A duplicate (gpu, pid, instance) would make two identical series; the first one wins.
      if (!seen.emplace(device.index, process.pid, gi, ci).second) continue;
      Labels extra;
      extra.add("pid", process.pid);
      if (process.gpu_instance_id) extra.add("gpu_instance_id", *process.gpu_instance_id);
      if (process.compute_instance_id)
        extra.add("compute_instance_id", *process.compute_instance_id);
      out.sample(extend(base, extra), process.used_bytes);
    }
  }
}

/// NVML index of each device UUID the driver listed.
std::unordered_map<std::string, uint32_t> device_index_of_uuid(const SystemSample& sample) {
  std::unordered_map<std::string, uint32_t> out;
  for (const DeviceSample& device : sample.devices) out.emplace(device.uuid, device.index);
  return out;
}

/// The labels of one process's series on one device (an AllocatorSample or a StepRecord):
/// gpu (when the device UUID is one the driver listed), uuid, hostname, pid, cuda_device, rank.
template <typename Record>
std::string process_labels(const std::unordered_map<std::string, uint32_t>& index_of_uuid,
                           const std::string& hostname, const Record& record) {
  Labels set;
  const auto found = index_of_uuid.find(record.device_uuid);
  if (found != index_of_uuid.end() && !record.device_uuid.empty()) set.add("gpu", found->second);
  set.add("uuid", record.device_uuid).add("hostname", hostname).add("pid", record.pid);
  set.add("cuda_device", fmt::format("{}", record.cuda_device));
  if (record.rank >= 0) set.add("rank", fmt::format("{}", record.rank));
  return set.text();
}

void render_allocators(Exposition& out, const SystemSample& sample) {
  const auto index_of_uuid = device_index_of_uuid(sample);

  // One label set per (pid, cuda_device): duplicates (a stale segment of the same pid) are dropped.
  std::vector<const AllocatorSample*> allocators;
  std::vector<std::string> labels;
  std::set<std::pair<uint32_t, int32_t>> seen;
  for (const AllocatorSample& allocator : sample.allocators) {
    if (!seen.emplace(allocator.pid, allocator.cuda_device).second) continue;
    allocators.push_back(&allocator);
    labels.push_back(process_labels(index_of_uuid, sample.hostname, allocator));
  }

  out.family("vramscope_torch_info", "gauge",
             "A process with the vramscope agent: always 1, labels carry world size and mode.");
  for (std::size_t i = 0; i < allocators.size(); ++i) {
    Labels extra;
    if (allocators[i]->world_size >= 0)
      extra.add("world_size", fmt::format("{}", allocators[i]->world_size));
    extra.add("polling_only", allocators[i]->polling_only ? "true" : "false");
    out.sample(extend(labels[i], extra), uint64_t{1});
  }

  for (const AllocatorCounter& counter : allocator_counters) {
    out.family(counter.metric, counter.unit == CounterUnit::Total ? "counter" : "gauge",
               counter.help);
    for (std::size_t i = 0; i < allocators.size(); ++i) {
      out.sample(labels[i], allocators[i]->*counter.member);
    }
  }

  // The driver's bytes named part by part, from the agent's last settled pairing: no sample
  // before one, and none for a part that was not measured (NCCL's when NCCL does not report).
  using Part = std::optional<uint64_t> (*)(const DriverBreakdown&);
  struct PartFamily {
    std::string_view metric;
    std::string_view help;
    Part part;
  };
  static constexpr PartFamily part_families[] = {
      {"vramscope_torch_non_pytorch_bytes",
       "Bytes the driver charges the process beyond torch's reserved (context + other + NCCL), "
       "at the agent's last settled pairing.",
       [](const DriverBreakdown& b) -> std::optional<uint64_t> { return b.non_pytorch_bytes(); }},
      {"vramscope_torch_context_bytes",
       "The CUDA context and its modules: the driver's bytes no allocation accounts for.",
       [](const DriverBreakdown& b) -> std::optional<uint64_t> { return b.context_bytes; }},
      {"vramscope_torch_other_bytes",
       "Device allocations outside torch's caching allocator (other libraries; NCCL's when "
       "NCCL does not report them).",
       [](const DriverBreakdown& b) { return b.other_bytes; }},
      {"vramscope_torch_nccl_bytes", "NCCL's device memory as NCCL reports it.",
       [](const DriverBreakdown& b) { return b.nccl_bytes; }},
      {"vramscope_torch_private_pool_bytes",
       "Of torch's reserved bytes, those in private pools (CUDA graphs, MemPool).",
       [](const DriverBreakdown& b) { return b.private_pool_bytes; }},
  };
  for (const PartFamily& family : part_families) {
    out.family(family.metric, "gauge", family.help);
    for (std::size_t i = 0; i < allocators.size(); ++i) {
      if (allocators[i]->breakdown) out.sample(labels[i], family.part(*allocators[i]->breakdown));
    }
  }
}

void render_categories(Exposition& out, const SystemSample& sample) {
  // The latest step that carries categories, per (pid, cuda_device).
  std::map<std::pair<uint32_t, int32_t>, const StepRecord*> latest;
  for (const StepRecord& step : sample.steps) {
    if (!step.category_bytes) continue;
    const StepRecord*& slot = latest[{step.pid, step.cuda_device}];
    if (slot == nullptr || step.step >= slot->step) slot = &step;
  }
  if (latest.empty()) return;
  const auto index_of_uuid = device_index_of_uuid(sample);

  out.family(
      "vramscope_category_bytes", "gauge",
      "What the last completed training step's peak was made of: requested bytes per category "
      "(parameters, gradients, optimizer_state, activations, temporaries, other) live at the "
      "step's "
      "peak; only for processes that track categories (Monitor(model=...)).");
  for (const auto& [key, step] : latest) {
    // The same label set as the vramscope_torch_* series of that process and device.
    const std::string base = process_labels(index_of_uuid, sample.hostname, *step);
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      out.sample(extend(base, Labels().add("category", memory_category_names[c])),
                 (*step->category_bytes)[c]);
    }
  }
}

}  // namespace

std::string render_prometheus(const SystemSample& sample, const PrometheusOptions& options,
                              const PrometheusStatus& status) {
  std::string body;
  // About 150 bytes per series; reserving avoids regrowth on large hosts (8 GPUs x 64 processes).
  std::size_t processes = 0;
  for (const DeviceSample& device : sample.devices) processes += device.processes.size();
  body.reserve(2048 + sample.devices.size() * 2048 + processes * 160 +
               sample.allocators.size() * 3000);

  Exposition out(body);
  out.family("vramscope_up", "gauge",
             "1 when the driver backend delivered the last sample, else 0.");
  out.sample("", uint64_t{status.up ? 1U : 0U});
  if (status.sample_duration_seconds) {
    out.family(
        "vramscope_scrape_duration_seconds", "gauge",
        "Seconds the last sampling of driver and agents took (scrapes serve a cached sample).");
    out.sample("", *status.sample_duration_seconds);
  }

  std::vector<std::string> labels;
  labels.reserve(sample.devices.size());
  for (const DeviceSample& device : sample.devices)
    labels.push_back(device_labels(device, sample.hostname));
  render_devices(out, sample, labels);
  if (options.per_process) render_processes(out, sample);
  render_allocators(out, sample);
  render_categories(out, sample);
  return body;
}

}  // namespace vramscope::exporters
