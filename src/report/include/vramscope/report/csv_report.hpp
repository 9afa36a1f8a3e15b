// src/report/include/vramscope/report/csv_report.hpp -- SystemSample as CSV rows (RFC 4180): per device, process or step
//
// Columns are fixed and documented in docs/json-schema.md (CSV section); unsupported values are
// empty fields, never 0. The header is separate so that `watch --format csv` prints it once.
#pragma once

#include <string>
#include <string_view>

#include "vramscope/sample.hpp"

namespace vramscope::report {

/// Which rows a CSV table holds: one per device, per process, or per completed training step
/// (with the step's per-category bytes when the process tracked them).
enum class CsvRows { Devices, Processes, Steps };

/// One text field of another process's making (command, user, device name), safe to print and
/// to open in a spreadsheet: ill-formed UTF-8 and control characters (C0, DEL, C1) become
/// U+FFFD; a field starting with = + - or @ (a formula to spreadsheets, OWASP "CSV injection")
/// gets a leading apostrophe; then it is quoted per RFC 4180 (inner quotes doubled) when it
/// holds a comma or a quote, starts or ends with a space, or was a formula.
std::string csv_field(std::string_view text);

/// The header line (with CRLF, as RFC 4180 says) for `rows`.
std::string csv_header(CsvRows rows);

/// One CRLF-terminated line per device (or per process of every device, or per step) of
/// `sample`.
std::string csv_rows(const SystemSample& sample, CsvRows rows);

}  // namespace vramscope::report
