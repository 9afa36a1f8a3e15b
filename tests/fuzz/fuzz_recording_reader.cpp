// tests/fuzz/fuzz_recording_reader.cpp -- libFuzzer target: the reader must survive any bytes
//
// Any input either fails to open with vramscope::Error or reads to a tail state; nothing may
// crash, leak, hang or allocate without bound (ASan/UBSan and -rss_limit_mb enforce that).
#include <cstddef>
#include <cstdint>
#include <string>

#include "vramscope/format/recording.hpp"
#include "vramscope/status.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto reader = vramscope::RecordingReader::open_bytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    vramscope::SystemSample sample;
    uint64_t samples = 0;
    while (reader->next(sample)) ++samples;
    // A tail message exists exactly when the tail is not clean.
    const bool clean = reader->tail_state() == vramscope::TailState::Clean;
    if (clean != reader->tail_message().empty()) __builtin_trap();
  } catch (const vramscope::Error&) {
    // Rejected at open: the expected outcome for most random inputs.
  }
  return 0;
}
