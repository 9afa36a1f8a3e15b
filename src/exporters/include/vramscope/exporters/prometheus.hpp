// src/exporters/include/vramscope/exporters/prometheus.hpp -- Prometheus text exposition (format 0.0.4) of one SystemSample
//
// The family list, label scheme and the mapping to dcgm-exporter are documented in
// docs/prometheus.md. Rules kept here (notes §10): one HELP and TYPE per family, families
// contiguous, base units only, no timestamps, a value the source could not read is omitted
// (never rendered as 0), every name + label set unique.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "vramscope/sample.hpp"

namespace vramscope::exporters {

/// The Content-Type a /metrics response must carry, exactly (Prometheus 3 rejects variants).
inline constexpr std::string_view prometheus_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

/// What to render besides the sample itself.
struct PrometheusOptions {
  /// Emit vramscope_process_gpu_memory_used_bytes per (GPU, pid)? On by default: per-process memory
  /// is the gap dcgm-exporter leaves; --no-per-process turns it off where pid churn is costly.
  bool per_process = true;
};

/// Health of the sampling that produced the sample (vramscope_up,
/// vramscope_scrape_duration_seconds).
struct PrometheusStatus {
  /// Did the driver backend deliver a sample? false renders vramscope_up 0 (agent data still
  /// shown).
  bool up = true;
  /// How long collecting the sample took; omitted when unknown.
  std::optional<double> sample_duration_seconds;
};

/// Renders `sample` as a complete exposition body ending with a newline. Per-category bytes
/// (vramscope_category_bytes) come from the latest of `sample.steps` per process and device;
/// MetricsCache keeps each process's latest step there between samples.
std::string render_prometheus(const SystemSample& sample, const PrometheusOptions& options,
                              const PrometheusStatus& status);

/// Escapes a label value: backslash, double quote and newline (0.0.4 rules); ill-formed UTF-8
/// becomes U+FFFD.
std::string escape_label_value(std::string_view value);

/// Escapes HELP text: backslash and newline; ill-formed UTF-8 becomes U+FFFD.
std::string escape_help_text(std::string_view text);

}  // namespace vramscope::exporters
