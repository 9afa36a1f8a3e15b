// src/report/table_report.cpp -- the one-shot table: devices, their processes, footnotes
#include "vramscope/report/table_report.hpp"

#include <time.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/clock.hpp"
#include "vramscope/join.hpp"
#include "vramscope/report/process_type.hpp"
#include "vramscope/report/text_cells.hpp"
#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

// Device row:  "  0  " + name(25) + 4 x (" " + amount(10)) + " " + pct(5)  = 80 columns.
constexpr std::size_t index_columns = 3;
constexpr std::size_t name_columns = 25;
constexpr std::size_t amount_columns = 10;
constexpr std::size_t percent_columns = 5;
// Process row: pid(9) user(8) type(4) used(9), two blanks, then the command takes the rest. The
// agent's numbers go on a line of their own below, so the command keeps room to be recognised.
constexpr std::size_t pid_columns = 9;
constexpr std::size_t user_columns = 8;
constexpr std::size_t type_columns = 4;
constexpr std::size_t used_columns = 9;
constexpr std::size_t minimum_width = 80;

constexpr const char* not_visible_text = "(not visible here: other pid namespace)";

/// ANSI colours, applied after padding so they never change a column's width.
enum class Tone { Plain, Bold, Green, Yellow, Red, Dim };

class Painter {
 public:
  explicit Painter(bool enabled) : m_enabled(enabled) {}
  /// `text` wrapped in the escape sequences of `tone` (unchanged without colour).
  std::string operator()(const std::string& text, Tone tone) const {
    if (!m_enabled || tone == Tone::Plain) return text;
    static constexpr std::array<const char*, 6> codes = {"", "1", "32", "33", "31", "2"};
    return std::string("\x1b[") + codes[static_cast<std::size_t>(tone)] + "m" + text + "\x1b[0m";
  }

 private:
  bool m_enabled;
};

/// Used as a share of total, coloured by how close the GPU is to full.
std::string percent_cell(const DeviceSample& d, const Painter& paint) {
  if (!d.total_bytes || !d.used_bytes || *d.total_bytes == 0) {
    return pad_left("N/A", percent_columns);
  }
  const uint64_t percent = *d.used_bytes * 100 / *d.total_bytes;
  const Tone tone = percent >= 90 ? Tone::Red : percent >= 70 ? Tone::Yellow : Tone::Green;
  return paint(pad_left(std::to_string(percent) + "%", percent_columns), tone);
}

std::string amount_cells(const std::optional<uint64_t>& total,
                         const std::optional<uint64_t>& reserved,
                         const std::optional<uint64_t>& used, const std::optional<uint64_t>& free,
                         UnitStyle units) {
  std::string cells;
  for (const auto* value : {&total, &reserved, &used, &free}) {
    cells += " " + pad_left(format_amount(*value, units), amount_columns);
  }
  return cells;
}

/// Everything a table needs to remember while writing rows, for the footnotes.
struct TableState {
  bool any_not_visible = false;
  bool any_torch = false;
  /// The processes whose agent polls (peaks sampled), in the order first shown, each with the
  /// reason it gave (empty when it did not say).
  std::vector<std::pair<uint32_t, std::string>> polling;
};

class TableWriter {
 public:
  TableWriter(const SystemSample& sample, const TableOptions& options)
      : m_sample(sample),
        m_options(options),
        m_paint(options.color),
        m_width(std::max(options.width_columns, minimum_width)),
        m_join(join_processes(sample)) {
    m_state.any_torch = m_join.any_torch;
  }

  std::string write() {
    header();
    for (const JoinedDevice& jd : m_join.devices) device(m_sample.devices[jd.device_position], jd);
    if (!m_join.unmatched_allocators.empty()) unmatched();
    footnotes();
    return m_out;
  }

 private:
  void line(const std::string& text) { m_out += text + "\n"; }

  /// A message under a device row, wrapped rather than cut: it says why numbers are missing.
  void note(const std::string& text, Tone tone) {
    for (const std::string& part : wrap_text(text, m_width - 5))
      line(m_paint("     " + part, tone));
  }

  void header() {
    std::string text = local_time_text(m_sample.timestamp_ns);
    text += "  driver " +
            (m_sample.driver_version.empty() ? std::string("N/A") : m_sample.driver_version);
    text += "  host " + m_sample.hostname;
    line(fit_text(text, m_width));
    line(m_paint(pad_left("GPU", index_columns) + "  " + pad_right("Name", name_columns) + " " +
                     pad_left("Total", amount_columns) + " " +
                     pad_left("Reserved", amount_columns) + " " + pad_left("Used", amount_columns) +
                     " " + pad_left("Free", amount_columns) + " " +
                     pad_left("Use%", percent_columns),
                 Tone::Bold));
  }

  void device(const DeviceSample& d, const JoinedDevice& jd) {
    const std::string lead =
        pad_left(std::to_string(d.index), index_columns) + "  " + pad_right(d.name, name_columns);
    if (d.lost) {
      // The reason gets a line of its own: it is the one thing worth reading about this GPU.
      line(lead + " " + m_paint("GPU lost", Tone::Red));
      if (!d.error.empty()) note(d.error, Tone::Red);
      return;
    }
    line(
        lead +
        amount_cells(d.total_bytes, d.reserved_bytes, d.used_bytes, d.free_bytes, m_options.units) +
        " " + percent_cell(d, m_paint));
    for (const MigInstanceSample& mig : d.mig_instances) {
      std::string name = "MIG " + std::to_string(mig.index);
      if (mig.gpu_instance_id) name += " GI " + std::to_string(*mig.gpu_instance_id);
      if (mig.compute_instance_id) name += " CI " + std::to_string(*mig.compute_instance_id);
      line(std::string(index_columns + 2, ' ') + pad_right("  " + name, name_columns) +
           amount_cells(mig.total_bytes, std::nullopt, mig.used_bytes, mig.free_bytes,
                        m_options.units));
    }
    if (!d.error.empty()) note("note: " + d.error, Tone::Yellow);
    if (!d.processes_supported && jd.processes.empty()) {
      line(fit_text("     processes: N/A", m_width));
      return;
    }
    if (jd.processes.empty()) {
      line("     no processes");
      return;
    }
    process_header();
    for (const JoinedProcess& row : jd.processes) process(row);
  }

  std::size_t command_columns() const {
    return m_width - (pid_columns + 1 + user_columns + 1 + type_columns + 1 + used_columns + 2);
  }

  void process_header() {
    line(m_paint(pad_left("PID", pid_columns) + " " + pad_right("User", user_columns) + " " +
                     pad_right("Type", type_columns) + " " + pad_left("Used", used_columns) +
                     "  Command",
                 Tone::Bold));
  }

  void process(const JoinedProcess& row) {
    const ProcessSample* p = row.driver ? &*row.driver : nullptr;
    std::string user = "?";
    std::string command;
    if (p != nullptr && p->visible) {
      user = p->user.empty() ? std::string("?") : p->user;
      command = p->command;
    } else if (p != nullptr) {
      user = "-";
      command = not_visible_text;
      m_state.any_not_visible = true;
    }
    std::string text =
        pad_left(std::to_string(row.pid), pid_columns) + " " + pad_right(user, user_columns) + " " +
        pad_right(p ? process_type_text(p->kinds) : "-", type_columns) + " " +
        pad_left(p ? format_amount(p->used_bytes, m_options.units) : "-", used_columns) + "  " +
        fit_text(command, command_columns());
    // No trailing blanks when the command is empty (an agent-only row).
    while (!text.empty() && text.back() == ' ') text.pop_back();
    line(text);
    const std::string indent(pid_columns + 1, ' ');
    if (row.torch) {
      if (row.torch->polling_only) remember_polling(*row.torch);
      line(fit_text(indent +
                        (row.torch->polling_only ? "torch (polled): alloc " : "torch: alloc ") +
                        format_amount(row.torch->allocated_bytes, m_options.units) + "  reserved " +
                        format_amount(row.torch->reserved_bytes, m_options.units) +
                        "  non-PyTorch " + format_amount(row.non_pytorch_bytes, m_options.units),
                    m_width));
      if (row.torch->breakdown) parts(indent, *row.torch->breakdown);
    }
    if (row.issues != 0) {
      line(m_paint(fit_text(indent + "note: " + describe_join_issues(row.issues), m_width),
                   Tone::Yellow));
    }
  }

  /// The non-PyTorch bytes named, e.g. "non-PyTorch = context 614MiB + other 4810MiB (NCCL
  /// 2.28.9 within)", and torch's private pools when it has some.
  void parts(const std::string& indent, const DriverBreakdown& b) {
    line(fit_text(indent + "non-PyTorch = " + non_pytorch_parts_text(b, m_options.units), m_width));
    if (b.private_pool_bytes && *b.private_pool_bytes > 0) {
      const std::string pools = format_amount(b.private_pool_bytes, m_options.units);
      line(fit_text(indent + "of reserved: " + pools + " in private pools (CUDA graphs, MemPool)",
                    m_width));
    }
  }

  /// Notes that `a`'s process polls, once per process, for the footnotes.
  void remember_polling(const AllocatorSample& a) {
    for (const auto& [pid, reason] : m_state.polling) {
      if (pid == a.pid) return;
    }
    m_state.polling.emplace_back(a.pid, a.polling_reason);
  }

  void unmatched() {
    line(m_paint("Agents on devices the driver did not report:", Tone::Yellow));
    for (const AllocatorSample& a : m_join.unmatched_allocators) {
      if (a.polling_only) remember_polling(a);
      line(fit_text("  pid " + std::to_string(a.pid) + " cuda:" + std::to_string(a.cuda_device) +
                        " " + a.device_uuid + "  alloc " +
                        format_amount(a.allocated_bytes, m_options.units) + "  resv " +
                        format_amount(a.reserved_bytes, m_options.units) +
                        (a.polling_only ? "  (polled)" : ""),
                    m_width));
    }
  }

  void footnotes() {
    if (m_state.any_torch) {
      line(m_paint("Process Used = non-PyTorch (CUDA context, NCCL, cuBLAS...) + torch reserved;",
                   Tone::Dim));
      line(m_paint("torch reserved = alloc + cached free blocks. GPU Reserved is the driver's.",
                   Tone::Dim));
    }
    // Sampled numbers are said with the process's own reason and fix, wrapped rather than cut:
    // the fix is the reason's last words.
    for (const auto& [pid, reason] : m_state.polling) {
      std::string text = "pid " + std::to_string(pid) +
                         ": polling mode, peaks sampled (the highest its polls saw, not exact)";
      if (!reason.empty()) text += ": " + reason;
      for (const std::string& part : wrap_text(text, m_width)) line(m_paint(part, Tone::Yellow));
    }
    if (m_state.any_not_visible) {
      line(m_paint("Hint: NVML reports host pids; processes in another pid namespace (containers)",
                   Tone::Dim));
      line(m_paint("are not visible here. Run on the host or with --pid=host to see them.",
                   Tone::Dim));
    }
  }

  const SystemSample& m_sample;
  const TableOptions& m_options;
  Painter m_paint;
  std::size_t m_width;
  JoinResult m_join;
  TableState m_state;
  std::string m_out;
};

}  // namespace

std::string format_amount(const std::optional<uint64_t>& bytes, UnitStyle units) {
  if (!bytes) return "N/A";
  if (units == UnitStyle::Human) return format_bytes(*bytes);
  return std::to_string(to_mib(*bytes)) + "MiB";
}

std::string non_pytorch_parts_text(const DriverBreakdown& b, UnitStyle units) {
  const auto amount = [units](uint64_t bytes) {
    return format_amount(std::optional<uint64_t>(bytes), units);
  };
  std::string text = "context " + amount(b.context_bytes);
  text += b.other_bytes ? " + other " + amount(*b.other_bytes) : std::string(" (other within)");
  if (b.nccl_bytes) {
    text += " + NCCL " + amount(*b.nccl_bytes);
  } else if (b.nccl_version != 0) {
    text += " (NCCL " + nccl_version_text(b.nccl_version) + " within)";
  }
  if (b.excess_bytes > 0) text += "; parts exceed driver by " + amount(b.excess_bytes);
  return text;
}

std::string format_sample_table(const SystemSample& sample, const TableOptions& options) {
  return TableWriter(sample, options).write();
}

}  // namespace vramscope::report
