// src/report/run_diff.cpp -- matching two runs' devices and processes and comparing their peaks
#include "vramscope/report/run_diff.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

/// One process of one run, with what matching needs.
struct Entry {
  const ProcessPeak* peak = nullptr;
  const ProcessSteps* steps = nullptr;
  int32_t rank = -1;
  /// Did an agent publish for it (torch numbers or steps)?
  bool has_torch = false;
  /// Has it been matched (or listed alone) already?
  bool taken = false;
};

/// A run's processes by device index, each list in pid order.
std::map<uint32_t, std::vector<Entry>> entries_by_device(const RunProfile& run) {
  std::map<uint32_t, std::vector<Entry>> out;
  for (const auto& [key, peak] : run.summary.processes()) {
    Entry e;
    e.peak = &peak;
    const auto steps = run.steps.find(key);
    if (steps != run.steps.end()) {
      e.steps = &steps->second;
      e.rank = steps->second.rank;
    }
    e.has_torch = peak.torch_peak_allocated_bytes.has_value() || peak.step_count.has_value();
    out[peak.device_index].push_back(e);
  }
  return out;
}

/// The step statistics of one run's process into the A or B side of `row`.
void fill_side(ProcessDiff& row, const Entry& e, bool is_a) {
  const auto set = [is_a](Change& c, const std::optional<uint64_t>& value) {
    (is_a ? c.a : c.b) = value;
  };
  const ProcessPeak& p = *e.peak;
  (is_a ? row.a : row.b) = p;
  set(row.peak_used_bytes, p.peak_used_bytes);
  set(row.torch_peak_allocated_bytes, p.torch_peak_allocated_bytes);
  set(row.torch_peak_reserved_bytes, p.torch_peak_reserved_bytes);
  if (p.parts_at_peak) {
    set(row.non_pytorch_at_peak_bytes, p.parts_at_peak->non_pytorch_bytes());
    set(row.context_at_peak_bytes, p.parts_at_peak->context_bytes);
    set(row.other_at_peak_bytes, p.parts_at_peak->other_bytes);
  }
  set(row.step_count, p.step_count);
  set(row.step_peak_max_bytes, p.max_step_peak_allocated_bytes);
  if (e.steps != nullptr) {
    if (const auto d = allocated_distribution(e.steps->steps)) {
      set(row.step_peak_median_bytes, d->median_bytes);
      set(row.step_peak_p99_bytes, d->p99_bytes);
    }
  }
  if (p.category_step_bytes) {
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      set(row.category_bytes[c], (*p.category_step_bytes)[c]);
    }
  }
}

/// A row for `a` and/or `b` (either may be null, not both).
ProcessDiff make_row(uint32_t device_index, Entry* a, Entry* b) {
  ProcessDiff row;
  row.device_index = device_index;
  if (a != nullptr) {
    a->taken = true;
    fill_side(row, *a, true);
  }
  if (b != nullptr) {
    b->taken = true;
    fill_side(row, *b, false);
  }
  const Entry& any = a != nullptr ? *a : *b;
  row.rank = any.rank;
  if (row.rank >= 0) {
    row.label = "rank " + std::to_string(row.rank);
  } else if (!any.peak->command.empty()) {
    row.label = any.peak->command;
  } else if (a != nullptr && b != nullptr && a->peak->pid != b->peak->pid) {
    row.label = "pid " + std::to_string(a->peak->pid) + " / " + std::to_string(b->peak->pid);
  } else {
    row.label = "pid " + std::to_string(any.peak->pid);
  }
  return row;
}

/// Pairs each untaken process of `a`, in order, with the first untaken one of `b` that has the
/// same key (`key` returns nullopt for a process that this pass does not pair). Through a map
/// of `b` by key, so that a run of 16,384 processes pairs in n log n, not n^2 comparisons of
/// command lines.
template <typename Key, typename KeyOf>
void pair_by(uint32_t index, std::vector<Entry>& a, std::vector<Entry>& b, KeyOf key_of,
             std::vector<ProcessDiff>& out) {
  std::map<Key, std::vector<std::size_t>> in_b;
  for (std::size_t j = 0; j < b.size(); ++j) {
    if (b[j].taken) continue;
    if (const std::optional<Key> key = key_of(b[j])) in_b[*key].push_back(j);
  }
  std::map<Key, std::size_t> next;
  for (Entry& x : a) {
    if (x.taken) continue;
    const std::optional<Key> key = key_of(x);
    if (!key) continue;
    const auto same = in_b.find(*key);
    if (same == in_b.end()) continue;
    std::size_t& at = next[*key];
    while (at < same->second.size() && b[same->second[at]].taken) ++at;
    if (at == same->second.size()) continue;
    out.push_back(make_row(index, &x, &b[same->second[at++]]));
  }
}

/// Matches the processes of one device: rank, then command, then order within agent/no agent.
void match_device(uint32_t index, std::vector<Entry>& a, std::vector<Entry>& b,
                  std::vector<ProcessDiff>& out) {
  pair_by<int32_t>(
      index, a, b,
      [](const Entry& e) { return e.rank >= 0 ? std::optional<int32_t>(e.rank) : std::nullopt; },
      out);
  pair_by<std::string_view>(
      index, a, b,
      [](const Entry& e) {
        return e.rank < 0 && !e.peak->command.empty()
                   ? std::optional<std::string_view>(e.peak->command)
                   : std::nullopt;
      },
      out);
  pair_by<bool>(
      index, a, b,
      [](const Entry& e) { return e.rank < 0 ? std::optional<bool>(e.has_torch) : std::nullopt; },
      out);
  for (Entry& x : a) {
    if (!x.taken) out.push_back(make_row(index, &x, nullptr));
  }
  for (Entry& y : b) {
    if (!y.taken) out.push_back(make_row(index, nullptr, &y));
  }
}

std::string percent_text(double percent) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%+.1f%%", percent);
  return text.data();
}

/// Adds a line to `out` when `c` grew by more than `percent` percent.
void check_growth(const Change& c, double percent, const std::string& what,
                  std::vector<std::string>& out) {
  if (!c.a || !c.b || *c.b <= *c.a) return;
  const std::optional<double> grown = c.delta_percent();
  // From zero any growth is unbounded.
  if (grown && *grown <= percent) return;
  out.push_back(what + " grew " + format_bytes_delta(*c.delta()) +
                (grown ? " (" + percent_text(*grown) + ")" : std::string(" (from 0)")));
}

}  // namespace

std::optional<int64_t> Change::delta() const {
  if (!a || !b) return std::nullopt;
  // Readers refuse byte counts above 2^50, but a difference is never left to wrap: a growth
  // beyond 2^63 once printed as a shrink. Saturates at the ends of int64_t.
  constexpr uint64_t int64_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (*b >= *a) {
    const uint64_t grown = *b - *a;
    return grown > int64_max ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(grown);
  }
  const uint64_t shrunk = *a - *b;
  return shrunk > int64_max ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(shrunk);
}

std::optional<double> Change::delta_percent() const {
  if (!a || !b || *a == 0) return std::nullopt;
  return 100.0 * (static_cast<double>(*b) - static_cast<double>(*a)) / static_cast<double>(*a);
}

RunDiff compare_runs(const RunProfile& a, const RunProfile& b) {
  RunDiff diff;
  std::map<uint32_t, DeviceDiff> devices;
  for (const auto& [uuid, d] : a.summary.devices()) {
    DeviceDiff& row = devices[d.index];
    row.index = d.index;
    row.a = d;
    row.peak_used_bytes.a = d.peak_used_bytes;
  }
  for (const auto& [uuid, d] : b.summary.devices()) {
    DeviceDiff& row = devices[d.index];
    row.index = d.index;
    row.b = d;
    row.peak_used_bytes.b = d.peak_used_bytes;
  }
  for (auto& [index, row] : devices) diff.devices.push_back(std::move(row));

  std::map<uint32_t, std::vector<Entry>> in_a = entries_by_device(a);
  std::map<uint32_t, std::vector<Entry>> in_b = entries_by_device(b);
  std::set<uint32_t> indices;
  for (const auto& [index, list] : in_a) indices.insert(index);
  for (const auto& [index, list] : in_b) indices.insert(index);
  for (const uint32_t index : indices)
    match_device(index, in_a[index], in_b[index], diff.processes);
  return diff;
}

std::vector<std::string> peaks_grown(const RunDiff& diff, double percent) {
  std::vector<std::string> out;
  for (const DeviceDiff& d : diff.devices) {
    check_growth(d.peak_used_bytes, percent, "GPU " + std::to_string(d.index) + " peak used", out);
  }
  for (const ProcessDiff& p : diff.processes) {
    const std::string who = "GPU " + std::to_string(p.device_index) + " " + p.label + ": ";
    check_growth(p.peak_used_bytes, percent, who + "peak used", out);
    check_growth(p.torch_peak_allocated_bytes, percent, who + "torch peak allocated", out);
    check_growth(p.torch_peak_reserved_bytes, percent, who + "torch peak reserved", out);
    check_growth(p.step_peak_max_bytes, percent, who + "max step peak", out);
  }
  return out;
}

std::optional<double> parse_percent(const std::string& text) {
  std::string number = text;
  if (!number.empty() && number.back() == '%') number.pop_back();
  if (number.empty()) return std::nullopt;
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (error != std::errc() || end != number.data() + number.size()) return std::nullopt;
  if (!std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

}  // namespace vramscope::report
