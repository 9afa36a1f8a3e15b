// src/view/model.cpp -- what `vramscope top` shows: the per-GPU and per-process join, sort, filter
#include "vramscope/view/model.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>
#include <utility>

#include "vramscope/join.hpp"

namespace vramscope::view {

namespace {

constexpr std::array<SortKey, 5> sort_order{SortKey::Memory, SortKey::Pid, SortKey::Allocated,
                                            SortKey::Gpu, SortKey::Command};

/// History is kept per GPU UUID so that it survives a GPU being renumbered or lost for a while.
std::string gpu_key(const DeviceSample& device) {
  return device.uuid.empty() ? "#" + std::to_string(device.index) : device.uuid;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Bytes the row stands for when sorting by memory: the driver's number, else the agent's.
uint64_t memory_of(const ProcessRow& row) {
  return row.driver_used_bytes.value_or(row.torch_reserved_bytes.value_or(0));
}

bool row_less(SortKey key, const ProcessRow& a, const ProcessRow& b) {
  const auto pid_gpu = [](const ProcessRow& r) { return std::tie(r.pid, r.gpu_index); };
  switch (key) {
    case SortKey::Memory:
      if (memory_of(a) != memory_of(b)) return memory_of(a) > memory_of(b);
      break;
    case SortKey::Pid:
      break;
    case SortKey::Allocated:
      // Rows without an agent sort after every row with one.
      if (a.torch_allocated_bytes.has_value() != b.torch_allocated_bytes.has_value()) {
        return a.torch_allocated_bytes.has_value();
      }
      if (a.torch_allocated_bytes != b.torch_allocated_bytes) {
        return a.torch_allocated_bytes > b.torch_allocated_bytes;
      }
      break;
    case SortKey::Gpu:
      if (a.gpu_index != b.gpu_index) return a.gpu_index < b.gpu_index;
      if (memory_of(a) != memory_of(b)) return memory_of(a) > memory_of(b);
      break;
    case SortKey::Command:
      if (a.command != b.command) return a.command < b.command;
      break;
  }
  return pid_gpu(a) < pid_gpu(b);
}

/// Splits one GPU's used memory between the agents' processes and everything else.
MemorySplit split_memory(const DeviceSample& device, const std::vector<ProcessRow>& rows) {
  MemorySplit split;
  split.total_bytes = device.total_bytes.value_or(0);
  split.driver_reserved_bytes = device.memory_v2 ? device.reserved_bytes.value_or(0) : 0;
  const uint64_t used = device.used_bytes.value_or(0);
  const uint64_t accounted = used + split.driver_reserved_bytes;
  split.free_bytes =
      device.free_bytes.value_or(split.total_bytes > accounted ? split.total_bytes - accounted : 0);
  uint64_t attributed = 0;
  for (const auto& row : rows) {
    if (row.gpu_index != device.index || !row.has_agent) continue;
    split.has_agents = true;
    const uint64_t allocated = row.torch_allocated_bytes.value_or(0);
    const uint64_t reserved = std::max(row.torch_reserved_bytes.value_or(0), allocated);
    split.allocated_bytes += allocated;
    split.cached_free_bytes += reserved - allocated;
    // The driver's number includes the allocator's reserve; what exceeds it is not PyTorch's.
    // Without a driver number (pid not listed) only the reserve is known to be this process's.
    const uint64_t driver = row.driver_used_bytes.value_or(reserved);
    if (row.driver_parts) {
      // The settled pairing's non-PyTorch bytes; what the driver's reading of this frame holds
      // beyond reserved + those is torch's segments in flight (cudaMalloc'd, not traced yet, or
      // traced free before cudaFree ran), so it stays on torch's side of the bar.
      const uint64_t settled = row.driver_parts->non_pytorch_bytes();
      split.non_pytorch_bytes += settled;
      if (driver > reserved + settled) split.cached_free_bytes += driver - reserved - settled;
      attributed += std::max(driver, reserved + settled);
      continue;
    }
    split.non_pytorch_bytes += driver > reserved ? driver - reserved : 0;
    attributed += std::max(driver, reserved);
  }
  split.other_bytes = used > attributed ? used - attributed : 0;
  return split;
}

}  // namespace

std::string_view sort_key_name(SortKey key) {
  switch (key) {
    case SortKey::Memory:
      return "memory";
    case SortKey::Pid:
      return "pid";
    case SortKey::Allocated:
      return "allocated";
    case SortKey::Gpu:
      return "gpu";
    case SortKey::Command:
      return "command";
  }
  return "memory";
}

std::optional<SortKey> parse_sort_key(std::string_view name) {
  for (const SortKey key : sort_order) {
    if (sort_key_name(key) == name) return key;
  }
  return std::nullopt;
}

ViewModel::ViewModel(std::size_t history_capacity)
    : m_history_capacity(std::max<std::size_t>(history_capacity, 1)) {}

void ViewModel::add_rows(const SystemSample& sample, const JoinResult& joined) {
  for (const auto& device : joined.devices) {
    const uint32_t gpu_index = sample.devices[device.device_position].index;
    for (const auto& process : device.processes) {
      ProcessRow row;
      row.pid = process.pid;
      row.gpu_index = gpu_index;
      row.join_issues = process.issues;
      if (process.driver) {
        row.user = process.driver->user;
        row.command = process.driver->command;
        row.driver_used_bytes = process.driver->used_bytes;
        row.in_driver_list = true;
      }
      // An agent claiming more than the GPU has would poison the GPU's bars and totals.
      const bool implausible = (process.issues & JoinIssueExceedsDeviceTotal) != 0;
      if (const auto& torch = process.torch; torch && !implausible) {
        row.has_agent = true;
        row.torch_allocated_bytes = torch->allocated_bytes;
        row.torch_reserved_bytes = torch->reserved_bytes;
        row.driver_parts = torch->breakdown;
        row.step_peak_allocated_bytes = torch->step_peak_allocated_bytes;
        row.step = torch->step;
        row.peaks_sampled = torch->polling_only;
        row.polling_reason = torch->polling_reason;
        if (torch->rank >= 0) row.rank = torch->rank;
        const auto step = m_category_steps.find({torch->pid, torch->device_uuid});
        if (step != m_category_steps.end()) {
          row.step_categories = step->second.category_bytes;
          row.categories_step = step->second.step;
          row.categories_peak_bytes = step->second.peak_requested_bytes;
        }
      }
      m_all_rows.push_back(std::move(row));
    }
  }
}

void ViewModel::ingest(const SystemSample& sample) {
  m_has_sample = true;
  m_timestamp_ns = sample.timestamp_ns;
  m_hostname = sample.hostname;
  m_driver_version = sample.driver_version;
  if (!sample.ooms.empty()) m_last_oom = sample.ooms.back();
  remember_steps(sample.steps);
  // Bounded: a breakdown lives as long as its agent is listed.
  std::erase_if(m_category_steps, [&](const auto& entry) {
    return std::none_of(sample.allocators.begin(), sample.allocators.end(),
                        [&](const AllocatorSample& a) {
                          return a.pid == entry.first.first && a.device_uuid == entry.first.second;
                        });
  });

  // Rows: one per (pid, GPU), from the project's one join of the two views. The join is gone
  // before rebuild_rows() copies the rows it keeps: a sample of 600,000 processes would
  // otherwise hold the join, every row and the shown rows at once (`top --replay`, ~1 GiB).
  m_all_rows.clear();
  {
    const JoinResult joined = join_processes(sample);
    std::size_t row_count = 0;
    for (const auto& device : joined.devices) row_count += device.processes.size();
    m_all_rows.reserve(row_count);
    add_rows(sample, joined);
  }

  std::vector<GpuView> gpus;
  gpus.reserve(sample.devices.size());
  for (const auto& device : sample.devices) {
    GpuView view;
    view.device = device;
    view.device.processes.clear();  // the rows own the per-process view
    view.split = split_memory(device, m_all_rows);
    if (view.split.has_agents) {
      view.torch_allocated_bytes = view.split.allocated_bytes;
      view.torch_reserved_bytes = view.split.allocated_bytes + view.split.cached_free_bytes;
    }
    const std::string key = gpu_key(device);
    for (auto& old : m_gpus) {
      if (gpu_key(old.device) == key) {
        view.history = std::move(old.history);
        break;
      }
    }
    view.history.push_back({sample.timestamp_ns, device.used_bytes, view.torch_allocated_bytes});
    while (view.history.size() > m_history_capacity) view.history.pop_front();
    gpus.push_back(std::move(view));
  }
  m_gpus = std::move(gpus);
  rebuild_rows();
}

void ViewModel::remember_steps(const std::vector<StepRecord>& steps) {
  // Steps arrive in the order they ended; a step without categories keeps the last breakdown.
  for (const auto& step : steps) {
    if (step.category_bytes) m_category_steps[{step.pid, step.device_uuid}] = step;
  }
}

void ViewModel::clear_history() {
  for (auto& gpu : m_gpus) gpu.history.clear();
  m_last_oom.reset();
  m_category_steps.clear();
}

void ViewModel::set_sort_key(SortKey key) {
  m_sort_key = key;
  rebuild_rows();
}

void ViewModel::cycle_sort_key() {
  const auto it = std::find(sort_order.begin(), sort_order.end(), m_sort_key);
  set_sort_key(std::next(it) == sort_order.end() ? sort_order.front() : *std::next(it));
}

void ViewModel::set_filter(std::string filter) {
  m_filter = std::move(filter);
  rebuild_rows();
}

void ViewModel::rebuild_rows() {
  const std::string needle = lower(m_filter);
  // Sorted as positions, then copied once in order: sorting the rows themselves took a buffer
  // of as many rows again.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < m_all_rows.size(); ++i) {
    const ProcessRow& row = m_all_rows[i];
    if (needle.empty() || lower(row.command).find(needle) != std::string::npos ||
        lower(row.user).find(needle) != std::string::npos ||
        std::to_string(row.pid).find(needle) != std::string::npos) {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
    return row_less(m_sort_key, m_all_rows[a], m_all_rows[b]);
  });
  m_rows.clear();
  m_rows.shrink_to_fit();
  m_rows.reserve(order.size());
  for (const std::size_t i : order) m_rows.push_back(m_all_rows[i]);
}

std::optional<std::size_t> ViewModel::selected_index() const {
  if (!m_selected) return std::nullopt;
  for (std::size_t i = 0; i < m_rows.size(); ++i) {
    if (m_rows[i].pid == m_selected->first && m_rows[i].gpu_index == m_selected->second) return i;
  }
  return std::nullopt;
}

void ViewModel::move_selection(int delta) {
  if (m_rows.empty()) return;
  const auto current = selected_index();
  const long last = static_cast<long>(m_rows.size()) - 1;
  const long target = current ? std::clamp(static_cast<long>(*current) + delta, 0L, last) : 0L;
  const auto& row = m_rows[static_cast<std::size_t>(target)];
  m_selected = std::make_pair(row.pid, row.gpu_index);
}

void ViewModel::select_first() {
  if (!m_rows.empty()) m_selected = std::make_pair(m_rows.front().pid, m_rows.front().gpu_index);
}

void ViewModel::select_last() {
  if (!m_rows.empty()) m_selected = std::make_pair(m_rows.back().pid, m_rows.back().gpu_index);
}

}  // namespace vramscope::view
