// src/report/include/vramscope/report/table_report.hpp -- the one-shot table of `vramscope`: every GPU and its processes
//
// Numbers are whole MiB rounded up by default so that they equal nvidia-smi's; the layout is
// fixed so that it fits 80 columns (only the command column grows on a wider terminal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope::report {

/// How byte counts are printed.
enum class UnitStyle {
  /// "81559MiB": whole MiB, rounded up, like nvidia-smi.
  Mib,
  /// "79.6 GiB": binary units chosen per value.
  Human,
};

/// Presentation choices of the table.
struct TableOptions {
  UnitStyle units = UnitStyle::Mib;
  /// Emit ANSI colours? (the CLI decides from --color, the TTY, NO_COLOR and TERM)
  bool color = false;
  /// Terminal width in columns; values below 80 are treated as 80.
  std::size_t width_columns = 80;
};

/// A byte count in the chosen style; "N/A" when unsupported.
std::string format_amount(const std::optional<uint64_t>& bytes, UnitStyle units);

/// An agent's non-PyTorch bytes part by part, e.g. "context 614MiB + other 4810MiB (NCCL 2.28.9
/// within)", with "; parts exceed driver by N" when they do (the table's line and `show`'s).
std::string non_pytorch_parts_text(const DriverBreakdown& parts, UnitStyle units);

/// The whole table, one '\n'-terminated line each, including the footnotes and hints.
std::string format_sample_table(const SystemSample& sample, const TableOptions& options);

}  // namespace vramscope::report
