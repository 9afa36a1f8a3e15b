// src/report/csv_report.cpp -- CSV rows of devices and processes
#include "vramscope/report/csv_report.hpp"

#include <initializer_list>
#include <optional>
#include <string_view>

#include "vramscope/core/utf8.hpp"
#include "vramscope/join.hpp"
#include "vramscope/report/process_type.hpp"

namespace vramscope::report {
namespace {

template <typename T>
std::string number_or_empty(const std::optional<T>& value) {
  return value ? std::to_string(*value) : std::string();
}

/// Appends already-quoted fields joined with commas to `out`, and ends the record with CRLF.
/// Views, not strings: the fields are appended, never copied first.
void record(std::string& out, std::initializer_list<std::string_view> fields) {
  bool first = true;
  for (const std::string_view field : fields) {
    if (!first) out += ',';
    out += field;
    first = false;
  }
  out += "\r\n";
}

/// Printable ASCII with no quote or comma, no space at either end and no formula sign in
/// front: its own CSV field (GPU names, uuids, bus ids, most commands).
bool is_plain_field(std::string_view text) {
  if (!text.empty() && (text.front() == ' ' || text.back() == ' ' ||
                        std::string_view("=+-@").find(text.front()) != std::string_view::npos)) {
    return false;
  }
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20U || byte >= 0x7FU || c == ',' || c == '"') return false;
  }
  return true;
}

/// csv_field(text) as a view: `text` itself when it is plain, else the field made into
/// `scratch` (one per field of a record).
std::string_view field_view(std::string_view text, std::string& scratch) {
  if (is_plain_field(text)) return text;
  scratch = csv_field(text);
  return scratch;
}

const char* bool_text(bool value) { return value ? "true" : "false"; }

}  // namespace

std::string csv_field(std::string_view text) {
  // A plain field is taken as it is, without the copies and scans below, which every field of
  // every row of an export paid.
  if (is_plain_field(text)) return std::string(text);
  // Ill-formed UTF-8 first becomes U+FFFD, then every control character: a command line is
  // another user's text, and `--csv --processes` or `watch -f csv` print it to a terminal, where
  // ESC starts an escape sequence, BEL rings and a lone CR overwrites the line.
  std::string clean = to_valid_utf8(text);
  for (std::size_t i = 0; i < clean.size(); ++i) {
    const auto c = static_cast<unsigned char>(clean[i]);
    if (c < 0x20U || c == 0x7FU) {
      clean.replace(i, 1, utf8_replacement);
      i += utf8_replacement.size() - 1;
    } else if (c == 0xC2U && i + 1 < clean.size() &&
               static_cast<unsigned char>(clean[i + 1]) <= 0x9FU) {
      // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F): U+009B is CSI to many terminals.
      clean.replace(i, 2, utf8_replacement);
      i += utf8_replacement.size() - 1;
    }
  }
  // OWASP's CSV injection rule: a spreadsheet takes a cell starting with = + - @ (or tab, CR,
  // both replaced above) as a formula. A leading apostrophe makes it text, and quoting keeps
  // the apostrophe part of the field for every reader.
  const bool is_formula =
      !clean.empty() && std::string_view("=+-@\t\r").find(clean.front()) != std::string_view::npos;
  if (is_formula) clean.insert(0, 1, '\'');
  const bool needs_quotes = is_formula || clean.find_first_of(",\"") != std::string::npos ||
                            (!clean.empty() && (clean.front() == ' ' || clean.back() == ' '));
  if (!needs_quotes) return clean;
  std::string quoted = "\"";
  for (char c : clean) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string csv_header(CsvRows rows) {
  if (rows == CsvRows::Devices) {
    return "timestamp_ns,hostname,index,name,uuid,pci_bus_id,total_bytes,reserved_bytes,"
           "used_bytes,free_bytes,memory_info_version,lost,error\r\n";
  }
  if (rows == CsvRows::Steps) {
    std::string header =
        "timestamp_ns,hostname,pid,rank,cuda_device,device_uuid,step,end_ns,duration_ns";
    for (const auto& field : step_byte_fields) {
      header += ',';
      header += field.name;
    }
    for (std::string_view name : memory_category_names) {
      header += ",category_";
      header += name;
      header += "_bytes";
    }
    // Last, so that readers by position from before it still read every other column.
    return header + ",peaks_exact\r\n";
  }
  return "timestamp_ns,hostname,index,uuid,pid,type,used_bytes,in_driver_list,visible,user,"
         "command,torch_allocated_bytes,torch_reserved_bytes,non_pytorch_bytes\r\n";
}

std::string csv_rows(const SystemSample& sample, CsvRows rows) {
  const std::string timestamp = std::to_string(sample.timestamp_ns);
  const std::string host = csv_field(sample.hostname);
  std::string out;
  // What field_view() makes of a field that is not plain, one string per field of a record.
  std::string scratch[4];
  if (rows == CsvRows::Devices) {
    for (const DeviceSample& d : sample.devices) {
      record(out, {timestamp, host, std::to_string(d.index), field_view(d.name, scratch[0]),
                   field_view(d.uuid, scratch[1]), field_view(d.pci_bus_id, scratch[2]),
                   number_or_empty(d.total_bytes), number_or_empty(d.reserved_bytes),
                   number_or_empty(d.used_bytes), number_or_empty(d.free_bytes),
                   d.memory_v2 ? "2" : "1", bool_text(d.lost), field_view(d.error, scratch[3])});
    }
    return out;
  }
  if (rows == CsvRows::Steps) {
    const PolledSteps polled(sample);
    for (const StepRecord& r : sample.steps) {
      std::string line;
      record(line,
             {timestamp, host, std::to_string(r.pid), std::to_string(r.rank),
              std::to_string(r.cuda_device), field_view(r.device_uuid, scratch[0]),
              std::to_string(r.step), std::to_string(r.end_ns), std::to_string(r.duration_ns)});
      line.resize(line.size() - 2);  // the byte and category fields follow before the CRLF
      for (const auto& field : step_byte_fields) line += ',' + std::to_string(r.*field.member);
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        line += ',';
        // Empty, never 0, when the process did not track categories.
        if (r.category_bytes) line += std::to_string((*r.category_bytes)[c]);
      }
      // 0: the process's agent polls and these peaks are the highest its polls saw.
      line += polled.sampled(r) ? ",0" : ",1";
      out += line + "\r\n";
    }
    return out;
  }
  const JoinResult joined = join_processes(sample);
  for (const JoinedDevice& jd : joined.devices) {
    const DeviceSample& d = sample.devices[jd.device_position];
    for (const JoinedProcess& row : jd.processes) {
      const ProcessSample* p = row.driver ? &*row.driver : nullptr;
      const bool visible = p != nullptr && p->visible;
      std::optional<uint64_t> torch_allocated;
      std::optional<uint64_t> torch_reserved;
      if (row.torch) {
        torch_allocated = row.torch->allocated_bytes;
        torch_reserved = row.torch->reserved_bytes;
      }
      const std::string type = p ? process_type_text(p->kinds) : std::string();
      record(out,
             {timestamp, host, std::to_string(d.index), field_view(d.uuid, scratch[0]),
              std::to_string(row.pid), type, p ? number_or_empty(p->used_bytes) : std::string(),
              bool_text(p != nullptr), bool_text(visible),
              visible ? field_view(p->user, scratch[1]) : std::string_view(),
              visible ? field_view(p->command, scratch[2]) : std::string_view(),
              number_or_empty(torch_allocated), number_or_empty(torch_reserved),
              number_or_empty(row.non_pytorch_bytes)});
    }
  }
  return out;
}

}  // namespace vramscope::report
