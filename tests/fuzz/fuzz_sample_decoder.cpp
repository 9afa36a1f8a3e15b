// tests/fuzz/fuzz_sample_decoder.cpp -- libFuzzer target: the sample decoder behind the checksums
//
// Random bytes rarely pass a chunk's CRC, so the reader target seldom reaches the decoder with
// damaged payloads. This target feeds bytes straight to SampleDecoder, as a chunk payload whose
// checksum matched (a buggy or hostile writer). It must throw FormatError or decode, nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vramscope/format/sample_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  vramscope::format::SampleDecoder decoder;
  vramscope::SystemSample sample;
  int64_t base_ns = 0;
  try {
    while (!bytes.empty()) {
      decoder.decode(bytes, base_ns, sample);
      base_ns = sample.timestamp_ns;
      // Re-encoding what was decoded must succeed: the decoder only accepts encodable samples.
      vramscope::format::SampleEncoder encoder;
      std::string again;
      if (!encoder.encode(sample, sample.timestamp_ns, again)) __builtin_trap();
    }
  } catch (const vramscope::format::FormatError&) {
    // Malformed input, rejected as it must be.
  }
  return 0;
}
