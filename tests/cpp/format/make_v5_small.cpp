// tests/cpp/format/make_v5_small.cpp -- writes tests/data/recordings/v5_small.vsrec
//
// Usage: make_v5_small OUTPUT.vsrec   (see docs/recording-format.md, "Compatibility files").
// The writer always writes the current format, so this generator serves the current version
// only; v1_small.vsrec to v4_small.vsrec came from its predecessors and are never regenerated.
// Version 5 writes the samples of v5_small_fixture.hpp, one chunk per flush.
// Run only when a new format version is introduced, to add that version's file; never to
// regenerate an existing one.
#include <cstdio>

#include "format/v5_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/status.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT.vsrec\n", argv[0]);
    return vramscope::ExitUsage;
  }
  try {
    vramscope::RecordingWriterOptions options;
    options.overwrite = true;
    auto writer = vramscope::RecordingWriter::create(
        argv[1], vramscope::testing::v5_small_metadata(), options);
    for (const auto& chunk : vramscope::testing::v5_small_chunks()) {
      for (const auto& sample : chunk) writer->append(sample);
      writer->flush();
    }
    writer->close();
  } catch (const vramscope::Error& error) {
    std::fprintf(stderr, "make_v5_small: %s\n", error.what());
    return vramscope::ExitError;
  }
  return vramscope::ExitOk;
}
