// tests/cpp/format/test_recording_index.cpp -- finding and reading the index of hostile files in
// bounded time and memory: trailer magics everywhere, digests that declare 16 MiB each
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "build_limits.hpp"
#include "format/forge_recording.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_index.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope::format {
namespace {

TEST(RecordingIndex, TrailerMagicsEverywhereAreSearchedInLinearTime) {
  // 4 MiB of trailers each claiming a 2 MiB index chunk: reading each candidate whole before
  // checking it read ~500 GB (`show` took 58 s on a file of this shape, `top --replay` hung).
  const std::string bytes = forge::forge_trailer_flood(4U << 20U);
  uint64_t read_bytes = 0;
  const uint64_t most = bytes.size() + max_index_candidate_bytes + (1U << 20U);
  const ReadAt read_at = [&](uint64_t offset, char* out, std::size_t size) -> std::size_t {
    read_bytes += size;
    if (read_bytes > most) throw std::runtime_error("read more than the file and the budget");
    if (offset >= bytes.size()) return 0;
    const std::size_t count = std::min<uint64_t>(size, bytes.size() - offset);
    std::copy_n(bytes.data() + offset, count, out);
    return count;
  };
  std::vector<RecordingSegment> segments;
  ASSERT_NO_THROW(segments = read_index(read_at, bytes.size(), forge::first_chunk_offset()));
  EXPECT_EQ(segments.size(), 1U) << "the genuine file's index, behind the flood";
  EXPECT_LE(read_bytes, most);
}

TEST(RecordingIndex, DigestsAreExpandedOnlyWhenReadAndWithinABudget) {
  // 100 segments whose digests declare 16 MiB each: 1.6 GB expanded from a ~100 KB file.
  const std::string bytes = forge::forge_big_digests(100);
  ASSERT_LT(bytes.size(), 256U << 10U);
  auto reader = RecordingReader::open_bytes(bytes);
  const std::vector<RecordingSegment> segments = reader->segments();
  ASSERT_EQ(segments.size(), 100U);
  for (const RecordingSegment& segment : segments) {
    EXPECT_TRUE(segment.digest.empty()) << "segments() expands no digest";
    EXPECT_EQ(segment.digest_bytes, max_digest_bytes);
  }
  // The total a reader expands: 64 MiB plus 16 times the file, i.e. the first four here.
  const uint64_t budget =
      max_digest_total_fixed_bytes + max_digest_total_per_file_byte * bytes.size();
  const uint64_t within = budget / max_digest_bytes;
  for (uint64_t k = 0; k < segments.size(); ++k) {
    const std::optional<std::string> digest = reader->read_digest(segments[k]);
    if (k < within) {
      ASSERT_TRUE(digest.has_value()) << k;
      EXPECT_EQ(*digest, std::string(max_digest_bytes, '\0'));
    } else {
      EXPECT_FALSE(digest.has_value()) << k << ": past the budget";
    }
  }
}

TEST(RecordingIndex, ASegmentMustStartWithAKeyChunkWhereTheIndexSays) {
  // Two one-segment files end to end (`cat a b`), the second's index at the end: with headers of
  // the same size its segment lies where the first file's does and its offsets check out (no
  // index records where it was written; readers of samples check that, see below, and `show`
  // reads every sample).
  const std::string a = forge::genuine(10);
  const std::string b = forge::genuine(10);
  const std::string joined = a + b;
  EXPECT_FALSE(RecordingReader::open_bytes(joined)->segments().empty())
      << "the index of `b` tiles `a` exactly: nothing in it says where it was written";
  // The reader of samples is not fooled: it reads `a`, then refuses `b`'s header.
  auto reader = RecordingReader::open_bytes(joined);
  uint64_t count = 0;
  for (SystemSample s; reader->next(s);) ++count;
  EXPECT_EQ(count, 10U);
  EXPECT_EQ(reader->tail_state(), TailState::Corrupt) << reader->tail_message();
  // An index whose segment starts anywhere but at a key chunk is no index.
  std::string shifted = joined;
  shifted.at(forge::first_chunk_offset()) = packed_chunk_marker;
  EXPECT_TRUE(RecordingReader::open_bytes(shifted)->segments().empty());
}

TEST(RecordingIndex, AFileOfManySmallSegmentsReadsInLinearTime) {
  VRAMSCOPE_SKIP_TIME_BOUND_UNDER_TSAN();
  // 100,000 one-sample segments, each closed by an index chunk of ~20 bytes: a reader that read
  // the most an index chunk may take (4 MiB) at each one read ~400 GB for a 5 MB file.
  const std::string bytes = forge::genuine(100'000, nullptr, 1);
  EXPECT_EXIT(
      {
        testing::limit_cpu_seconds(5);  // 1.9 s on the dev build
        auto reader = RecordingReader::open_bytes(bytes);
        uint64_t count = 0;
        for (SystemSample s; reader->next(s);) ++count;
        ::_exit(count == 100'000 && reader->tail_state() == TailState::Clean ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace vramscope::format
