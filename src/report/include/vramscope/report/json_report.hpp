// src/report/include/vramscope/report/json_report.hpp -- SystemSample as versioned JSON (`vramscope --json`, watch jsonl)
//
// The schema is a contract documented in docs/json-schema.md: byte counts are integers in keys
// ending `_bytes`, an unsupported value is null (never 0), and new keys may be added without
// bumping json_schema_version; renaming or retyping one bumps it.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "vramscope/sample.hpp"

namespace vramscope::report {

/// Version of the JSON document written by format_sample_json().
inline constexpr int json_schema_version = 1;

/// The sample as one JSON document; `pretty` indents by two spaces, otherwise one line
/// (what `watch --format jsonl` prints, through write_sample_json()).
std::string format_sample_json(const SystemSample& sample, bool pretty);

/// The one-line document of format_sample_json(sample, false), handed to `write` in pieces
/// (about 64 KiB each; no newline) as it is made: each process row is a document of its own,
/// never the whole sample, so a sample of 9 GPUs x 65,536 processes costs its join and one
/// row rather than a document of 600,000 objects (`export --jsonl`; docs/security.md).
void write_sample_json(const SystemSample& sample,
                       const std::function<void(std::string_view)>& write);

/// The driver's bytes part by part (an agent's settled pairing: `driver_parts` in every document
/// that names them), or null without one.
nlohmann::ordered_json driver_parts_json(const std::optional<DriverBreakdown>& parts);

}  // namespace vramscope::report
