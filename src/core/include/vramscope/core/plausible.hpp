// src/core/include/vramscope/core/plausible.hpp -- byte counts no GPU can hold, refused where a file or segment is read
//
// A recording or an index digest with valid checksums can still hold any number. A byte count
// above max_plausible_bytes is not a measurement but damage or forgery: readers refuse it at
// read instead of printing "16.0 EiB" as a peak or letting a difference of two such values wrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope {

/// 1 PiB: thousands of times any GPU's memory, and far from 2^63, so that a difference of two
/// plausible byte counts is always an exact int64_t.
inline constexpr uint64_t max_plausible_bytes = uint64_t{1} << 50U;

/// Is `bytes` (when known) a byte count a GPU could hold?
inline bool is_plausible_bytes(std::optional<uint64_t> bytes) {
  return !bytes || *bytes <= max_plausible_bytes;
}

/// The first byte count of `sample` above max_plausible_bytes, named for a message ("GPU 0
/// used_bytes 18446744073709551615"), or an agent's driver breakdown that cannot be (below,
/// against the total of the device its uuid names), or "" when every one is plausible. An OOM
/// record's request is not checked: an absurd request is what an OOM can be about.
std::string implausible_bytes(const SystemSample& sample);

/// Why an agent's driver breakdown cannot be, named after `who` ("agent of pid 7 driver parts
/// other_bytes 18446744073709551615"), or "" when it can. Refused: a part above
/// max_plausible_bytes; non-PyTorch parts (context + other + NCCL) summing above the driver's
/// reading they were taken out of; reserved and those parts summing above that reading plus
/// the excess the agent named; and, when `device_total_bytes` is known, a part (but the excess)
/// above the device's total. Samples, index digests and agent segments are checked by this one
/// function.
std::string implausible_bytes(const std::string& who, const DriverBreakdown& parts,
                              std::optional<uint64_t> device_total_bytes = std::nullopt);

}  // namespace vramscope
