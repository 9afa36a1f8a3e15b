// tests/fuzz/fuzz_recording_format.cpp -- libFuzzer target that knows format 3: what `show`,
// `show --scan` and every other reader do with a recording forged behind valid checksums
//
// The custom mutator (LLVMFuzzerCustomMutator) splits the input at its chunks and changes fields
// of index chunks (offsets, counts, times), their CBOR digests (byte by byte, or nested ~200,000
// deep, or declaring 2^64-1 entries), packed chunk headers, the encoded samples and string
// references inside a zstd stream, the parts of an agent's driver breakdown (decoded, set at and
// just past the sums readers check, encoded again), the file header's metadata, or the order of
// chunks (copies, drops, cuts, `cat a b`, a stray trailer), then writes every checksum right again
// (recording_pieces.hpp). Half the time it mutates bytes as libFuzzer would, so that damage
// checksums catch is fuzzed too.
//
// Each input is read as `show` reads it (summarise_recording: every sample; the index digests
// are not trusted) and as a plain loop over the samples does (also binned as `report` bins
// them), which traps on any sample handed on that is not plausible (core/plausible.hpp);
// ASan/UBSan, -rss_limit_mb and -timeout turn a crash, a memory bound broken or a reader slower
// than linear into a failure. With VRAMSCOPE_FUZZ_SHOW_EQUALS_SCAN=1 it also traps when the two
// disagree on the sample count or the tail (docs/recording-format.md promises they agree).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "recording_pieces.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/report/timeline.hpp"
#include "vramscope/status.hpp"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

struct Reading {
  uint64_t samples = 0;
  vramscope::TailState tail = vramscope::TailState::Clean;
};

/// Summarises `bytes` as `show` (use_index) or `show --scan` does; nullopt when it fails to
/// open. The scan also bins every sample as `report` does (its default 1,000 bins).
std::optional<Reading> read(const std::string& bytes, bool use_index) {
  try {
    auto reader = vramscope::RecordingReader::open_bytes(bytes, "fuzz");
    vramscope::report::RecordingTail tail;
    vramscope::report::RecordingSummary summary;
    if (use_index) {
      summary = vramscope::report::summarise_recording(*reader, tail);
    } else {
      vramscope::report::TimelineCollector timeline(1000, 0);
      vramscope::SystemSample sample;
      while (reader->next(sample)) {
        // What a reader hands on is plausible: each byte count, and each driver breakdown as a
        // whole (its parts within the driver's reading and the device).
        if (!vramscope::implausible_bytes(sample).empty()) __builtin_trap();
        summary.add(sample);
        timeline.add(sample);
      }
      timeline.finish();
      tail.state = reader->tail_state();
      tail.message = reader->tail_message();
    }
    // A tail message exists exactly when the tail is not clean.
    if ((tail.state == vramscope::TailState::Clean) != tail.message.empty()) __builtin_trap();
    return Reading{summary.sample_count(), tail.state};
  } catch (const vramscope::Error&) {
    return std::nullopt;  // rejected at open
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<Reading> shown = read(bytes, true);
  const std::optional<Reading> scanned = read(bytes, false);
  static const bool strict = std::getenv("VRAMSCOPE_FUZZ_SHOW_EQUALS_SCAN") != nullptr;
  if (strict && shown && scanned &&
      (shown->samples != scanned->samples || shown->tail != scanned->tail)) {
    __builtin_trap();
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937_64 random(seed);
  if (random() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<vramscope::fuzz::Piece> pieces =
      vramscope::fuzz::split_recording(std::string_view(reinterpret_cast<char*>(data), size));
  if (!vramscope::fuzz::mutate_structure(pieces, random, LLVMFuzzerMutate)) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  const std::string out = vramscope::fuzz::join(pieces);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
