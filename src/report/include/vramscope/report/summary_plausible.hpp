// src/report/include/vramscope/report/summary_plausible.hpp -- a summary (an index digest) holding a byte count no GPU can
#pragma once

#include <string>

#include "vramscope/report/recording_summary.hpp"

namespace vramscope::report {

/// The first peak of `summary` above max_plausible_bytes (vramscope/core/plausible.hpp), named for
/// a message ("GPU 0 peak_used_bytes 18446744073709551615"), or "" when every one is plausible. A
/// digest that holds one is not used: its segment is read sample by sample instead, where the
/// reader ends the data at the impossible sample.
std::string implausible_bytes(const RecordingSummary& summary);

}  // namespace vramscope::report
