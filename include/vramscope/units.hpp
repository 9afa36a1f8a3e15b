// include/vramscope/units.hpp -- parsing intervals and sizes, printing bytes like nvidia-smi
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vramscope {

/// Parses "10ms", "0.5s", "2" (seconds), "250us", "1m", "1h" into nanoseconds.
/// Returns empty on malformed, negative or overflowing input.
std::optional<int64_t> parse_duration_ns(std::string_view text);

/// Parses "512", "4KiB", "1.5GiB", "2GB", "10MiB" into bytes (KB/MB/GB are powers of 1000,
/// KiB/MiB/GiB powers of 1024, K/M/G alone powers of 1024). Empty on malformed input.
std::optional<uint64_t> parse_size_bytes(std::string_view text);

/// Bytes in whole MiB, rounded UP as nvidia-smi does: measured on an H200 (driver 580), its
/// reserved 615.06 MiB prints as 616 and free 141603.13 MiB as 141604 ("81559MiB").
uint64_t to_mib(uint64_t bytes);

/// Human form with one or two significant decimals: "512 B", "3.0 KiB", "81.6 GiB".
std::string format_bytes(uint64_t bytes);

/// Human form of a signed difference: "+1.2 GiB", "-300 MiB", "0 B".
std::string format_bytes_delta(int64_t delta_bytes);

/// Human duration: "850 ms", "12.5 s", "3m05s", "2h01m".
std::string format_duration_ns(int64_t duration_ns);

/// Bytes in at most 5 cells, binary units (the TUI's columns): "0B", "512B", "9.5K", "12.3G",
/// "140G", "1.2T".
std::string format_bytes_compact(uint64_t bytes);

/// Short duration for the TUI: "850ms", "12s", "3m05s", "2h01m" (negative reads as 0).
std::string format_duration_compact(int64_t duration_ns);

}  // namespace vramscope
