// tests/cpp/format/test_packed_chunk.cpp -- version 3 packed chunks: size, key chunks, hostile data
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/core/crc32c.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/sample_codec.hpp"

namespace vramscope {
namespace {

using testing::dump;
using testing::make_metadata;
using testing::make_sample;
using testing::read_file;
using testing::TempDir;

RecordingWriterOptions quick(uint64_t segment_bytes = 64U << 20U) {
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.segment_bytes = segment_bytes;
  return options;
}

/// A steady job: one sample every ~100 ms (with jitter), memory moving now and then.
std::vector<SystemSample> steady_samples(std::size_t count, int gpus, int processes) {
  std::vector<SystemSample> out;
  SystemSample s = make_sample(0, gpus, processes);
  for (std::size_t i = 0; i < count; ++i) {
    s.timestamp_ns += 100'000'000 + static_cast<int64_t>((i * 7919) % 40'000);
    if (i % 10 == 0) *s.devices[0].used_bytes += 2ULL << 20U;
    for (AllocatorSample& a : s.allocators) {
      a.updated_ns = s.timestamp_ns - 1'000'000;
      // The agent pairs the driver with torch four times a second, settled or not.
      constexpr int64_t pairing_ns = 250'000'000;
      if (a.breakdown) a.breakdown->paired_ns = s.timestamp_ns - s.timestamp_ns % pairing_ns;
    }
    out.push_back(s);
  }
  return out;
}

/// Writes `samples` to `path`, one chunk per sample (as `vramscope record` does at 100 ms).
uint64_t write_one_per_chunk(const std::string& path, const std::vector<SystemSample>& samples) {
  auto writer = RecordingWriter::create(path, make_metadata(), quick());
  const uint64_t header_bytes = writer->file_bytes();
  for (const SystemSample& s : samples) {
    writer->append(s);
    writer->flush();
  }
  writer->close();
  return writer->file_bytes() - header_bytes;
}

std::vector<SystemSample> read_samples(const std::string& bytes, TailState* tail = nullptr,
                                       std::string* message = nullptr) {
  auto reader = RecordingReader::open_bytes(bytes);
  std::vector<SystemSample> out;
  for (SystemSample s; reader->next(s);) out.push_back(s);
  if (tail != nullptr) *tail = reader->tail_state();
  if (message != nullptr) *message = reader->tail_message();
  return out;
}

/// The header of an empty current-version recording.
std::string file_header() {
  TempDir dir;
  RecordingWriter::create(dir.file("h.vsrec"), make_metadata(), quick())->close();
  return read_file(dir.file("h.vsrec"));
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80U) {
    out.push_back(static_cast<char>((value & 0x7FU) | 0x80U));
    value >>= 7U;
  }
  out.push_back(static_cast<char>(value));
}

/// A packed chunk built by hand from the drawing in recording_layout.hpp (not by the writer),
/// with valid checks around whatever `stored` holds.
std::string hand_chunk(char marker, const std::string& stored, uint64_t raw_bytes,
                       uint64_t sample_count) {
  std::string out(1, marker);
  put_varint(out, stored.size());
  put_varint(out, raw_bytes);
  put_varint(out, sample_count);
  const auto check = static_cast<uint16_t>(crc32c_mask(crc32c(out)) & 0xFFFFU);
  out.append(reinterpret_cast<const char*>(&check), sizeof check);
  const uint32_t crc = crc32c_mask(crc32c(stored));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return out + stored;
}

/// One complete zstd frame of `raw`, compressed with `window_log`.
std::string zstd_frame(const std::string& raw, int window_log = 20) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, window_log);
  std::string out(ZSTD_compressBound(raw.size()) + 64, '\0');
  ZSTD_inBuffer in{raw.data(), raw.size(), 0};
  ZSTD_outBuffer sink{out.data(), out.size(), 0};
  // Flush before ending, so zstd cannot shrink the window to the (then known) input size.
  ZSTD_compressStream2(context, &sink, &in, ZSTD_e_flush);
  ZSTD_inBuffer none{nullptr, 0, 0};
  while (ZSTD_compressStream2(context, &sink, &none, ZSTD_e_end) != 0) {
  }
  ZSTD_freeCCtx(context);
  out.resize(sink.pos);
  return out;
}

/// The encoded (uncompressed) bytes of `samples` as a chunk holds them.
std::string encode(const std::vector<SystemSample>& samples) {
  format::SampleEncoder encoder;
  std::string out;
  int64_t base_ns = 0;
  for (const SystemSample& s : samples) {
    encoder.encode(s, base_ns, out);
    base_ns = s.timestamp_ns;
  }
  return out;
}

TEST(PackedChunks, SteadyStateIsAtLeastTenTimesSmallerThanRawChunks) {
  TempDir dir;
  for (const auto& [gpus, processes] : {std::pair{1, 8}, std::pair{8, 64}}) {
    const std::vector<SystemSample> samples = steady_samples(2000, gpus, processes);
    // What version 2 stored per sample: a 40-byte chunk header and the encoded sample (its
    // strings already in the table, as in the steady state).
    format::SampleEncoder encoder;
    std::string raw;
    encoder.encode(samples[0], samples[0].timestamp_ns, raw);
    raw.clear();
    encoder.encode(samples[1], samples[0].timestamp_ns, raw);
    const double raw_per_sample = static_cast<double>(raw.size() + sizeof(format::ChunkHeader));
    const uint64_t packed = write_one_per_chunk(dir.file("steady.vsrec"), samples);
    const double packed_per_sample =
        static_cast<double>(packed) / static_cast<double>(samples.size());
    EXPECT_GE(raw_per_sample / packed_per_sample, 10.0)
        << gpus << "x" << processes << ": " << raw_per_sample << " B raw, " << packed_per_sample
        << " B packed per sample";
    const std::vector<SystemSample> back = read_samples(read_file(dir.file("steady.vsrec")));
    ASSERT_EQ(back.size(), samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) ASSERT_EQ(back[i], samples[i]);
  }
}

TEST(PackedChunks, TimestampsOfAnyValueRoundTrip) {
  TempDir dir;
  std::vector<SystemSample> samples;
  for (int64_t ts : {INT64_MIN, INT64_MAX, int64_t{0}, int64_t{-1}, INT64_MAX, INT64_MIN + 1,
                     int64_t{1'800'000'000'000'000'000}}) {
    SystemSample s = make_sample(samples.size());
    s.timestamp_ns = ts;
    samples.push_back(s);
  }
  write_one_per_chunk(dir.file("ts.vsrec"), samples);
  const std::vector<SystemSample> back = read_samples(read_file(dir.file("ts.vsrec")));
  ASSERT_EQ(back.size(), samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i)
    EXPECT_EQ(back[i].timestamp_ns, samples[i].timestamp_ns);
}

/// A digest that says how many samples it saw and the first one's timestamp.
class CountingDigest final : public SegmentDigest {
 public:
  void add(const SystemSample& sample) override {
    if (m_count++ == 0) m_first_ns = sample.timestamp_ns;
  }
  std::string take() override {
    std::string out = "n=" + std::to_string(m_count) + " first=" + std::to_string(m_first_ns);
    m_count = 0;
    return out;
  }

 private:
  uint64_t m_count = 0;
  int64_t m_first_ns = 0;
};

/// A recording of several segments (64 KiB of samples each), a chunk per 10 samples.
struct Segmented {
  std::string bytes;
  std::vector<SystemSample> samples;
  uint64_t header_bytes = 0;
  /// File size before close() added the last index chunk.
  uint64_t samples_end = 0;
};

Segmented write_segmented(const TempDir& dir) {
  Segmented out;
  const std::string path = dir.file("segments.vsrec");
  RecordingWriterOptions options = quick(64U << 10U);
  options.digest = std::make_shared<CountingDigest>();
  auto writer = RecordingWriter::create(path, make_metadata(), options);
  out.header_bytes = writer->file_bytes();
  for (uint64_t seed = 0; seed < 400; ++seed) {
    out.samples.push_back(make_sample(seed, 2, 8));
    writer->append(out.samples.back());
    if (seed % 10 == 9) writer->flush();
  }
  writer->flush();
  out.samples_end = writer->file_bytes();
  writer->close();
  out.bytes = read_file(path);
  return out;
}

/// Checks that `segments` tile the samples of `rec` in order, and returns the index of the
/// first sample of each.
std::vector<std::size_t> check_segments(const std::vector<RecordingSegment>& segments,
                                        const Segmented& rec) {
  auto reader = RecordingReader::open_bytes(rec.bytes);
  std::vector<std::size_t> firsts;
  std::size_t next = 0;
  uint64_t offset = rec.header_bytes;
  for (const RecordingSegment& segment : segments) {
    EXPECT_EQ(segment.offset, offset);
    firsts.push_back(next);
    EXPECT_EQ(segment.first_ns, rec.samples[next].timestamp_ns);
    next += segment.sample_count;
    EXPECT_EQ(segment.last_ns, rec.samples[next - 1].timestamp_ns);
    EXPECT_TRUE(segment.digest.empty()) << "digests are expanded only when read";
    EXPECT_EQ(reader->read_digest(segment), "n=" + std::to_string(segment.sample_count) +
                                                " first=" + std::to_string(segment.first_ns));
    offset = segment.end_offset;
  }
  return firsts;
}

TEST(RecordingIndex, DescribesEverySegmentAndSeeksToAny) {
  TempDir dir;
  const Segmented rec = write_segmented(dir);
  auto reader = RecordingReader::open_bytes(rec.bytes);
  const std::vector<RecordingSegment> segments = reader->segments();
  ASSERT_GE(segments.size(), 3U);
  const std::vector<std::size_t> firsts = check_segments(segments, rec);
  uint64_t total = 0;
  for (const RecordingSegment& segment : segments) total += segment.sample_count;
  EXPECT_EQ(total, rec.samples.size()) << "a closed file's index covers every sample";
  EXPECT_EQ(segments.back().end_offset, rec.bytes.size());
  // Reading on from any segment gives exactly the samples from its first on.
  for (std::size_t k : {std::size_t{1}, segments.size() - 1}) {
    reader->seek(segments[k].offset);
    std::size_t i = firsts[k];
    for (SystemSample s; reader->next(s); ++i) ASSERT_EQ(s, rec.samples[i]) << i;
    EXPECT_EQ(i, rec.samples.size());
    EXPECT_EQ(reader->tail_state(), TailState::Clean) << reader->tail_message();
  }
  // A sequential reader steps over the index chunks.
  EXPECT_EQ(read_samples(rec.bytes).size(), rec.samples.size());
}

TEST(RecordingIndex, AKilledRecordingKeepsTheIndexOfItsClosedSegments) {
  TempDir dir;
  const Segmented rec = write_segmented(dir);
  const std::vector<RecordingSegment> all = RecordingReader::open_bytes(rec.bytes)->segments();
  // As if killed before close(), and again with a torn chunk at the end: that loses the last
  // chunk's samples (write_segmented flushes every 10), and nothing else.
  for (const auto& [bytes, lost] : {std::pair{rec.bytes.substr(0, rec.samples_end), 0},
                                    std::pair{rec.bytes.substr(0, rec.samples_end - 3), 10}}) {
    auto reader = RecordingReader::open_bytes(bytes);
    const std::vector<RecordingSegment> segments = reader->segments();
    ASSERT_EQ(segments.size(), all.size() - 1) << "all but the last, unclosed segment";
    const std::vector<std::size_t> firsts = check_segments(segments, rec);
    reader->seek(segments.back().end_offset);
    std::size_t i = firsts.back() + segments.back().sample_count;
    for (SystemSample s; reader->next(s); ++i) ASSERT_EQ(s, rec.samples[i]) << i;
    EXPECT_EQ(i, rec.samples.size() - lost) << reader->tail_message();
  }
}

TEST(RecordingIndex, TruncationAnywhereInTheLastIndexChunkKeepsEverySample) {
  TempDir dir;
  const Segmented rec = write_segmented(dir);
  for (uint64_t size = rec.samples_end + 1; size < rec.bytes.size(); ++size) {
    TailState tail{};
    std::string message;
    const auto samples = read_samples(rec.bytes.substr(0, size), &tail, &message);
    ASSERT_EQ(tail, TailState::Truncated) << "cut at " << size << ": " << message;
    ASSERT_EQ(samples.size(), rec.samples.size());
  }
}

TEST(RecordingIndex, ADamagedIndexChunkIsCorruptAndDisablesTheIndex) {
  TempDir dir;
  const Segmented rec = write_segmented(dir);
  const std::vector<RecordingSegment> segments = RecordingReader::open_bytes(rec.bytes)->segments();
  ASSERT_GE(segments.size(), 3U);
  // A byte in the body of the first segment's index chunk.
  std::string damaged = rec.bytes;
  const uint64_t index_at = segments[1].offset - 20;
  damaged[index_at] = static_cast<char>(damaged[index_at] ^ 0x40);
  auto reader = RecordingReader::open_bytes(damaged);
  EXPECT_TRUE(reader->segments().empty()) << "an index that does not hold together is not used";
  uint64_t samples = 0;
  for (SystemSample s; reader->next(s);) ++samples;
  EXPECT_EQ(samples, segments[0].sample_count);
  EXPECT_EQ(reader->tail_state(), TailState::Corrupt);
  EXPECT_NE(reader->tail_message().find("index chunk"), std::string::npos)
      << reader->tail_message();
}

TEST(PackedChunks, AKeyChunkReadsWithoutAnythingBeforeIt) {
  TempDir dir;
  const Segmented rec = write_segmented(dir);
  const std::vector<RecordingSegment> segments = RecordingReader::open_bytes(rec.bytes)->segments();
  ASSERT_GE(segments.size(), 2U);
  const std::vector<std::size_t> firsts = check_segments(segments, rec);
  // The file header followed by the second segment decodes the same samples: nothing in a
  // segment refers to the one before. (Its index chunk then fails: it holds file offsets.)
  const std::string header = rec.bytes.substr(0, rec.header_bytes);
  const std::vector<SystemSample> back =
      read_samples(header + rec.bytes.substr(segments[1].offset));
  ASSERT_EQ(back.size(), segments[1].sample_count);
  for (std::size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], rec.samples[firsts[1] + i]);
  // A continuation chunk cannot be read that way.
  format::PackedChunkHeader key;
  std::string why;
  ASSERT_EQ(
      format::parse_packed_header(std::string_view(rec.bytes).substr(segments[1].offset), key, why),
      format::PackedHeaderStatus::Ok);
  const uint64_t continuation = segments[1].offset + key.header_bytes + key.stored_bytes;
  TailState tail{};
  std::string message;
  EXPECT_TRUE(read_samples(header + rec.bytes.substr(continuation), &tail, &message).empty());
  EXPECT_EQ(tail, TailState::Corrupt);
  EXPECT_NE(message.find("first chunk is not a key chunk"), std::string::npos) << message;
}

struct HostileCase {
  const char* name;
  std::string chunk;
  const char* message;
};

TEST(PackedChunks, HostileChunksAreCorruptAndBounded) {
  const std::vector<SystemSample> two{make_sample(0), make_sample(1)};
  const std::string raw = encode(two);
  const std::string good = hand_chunk('K', zstd_frame(raw), raw.size(), 2);
  // A bomb: 48 MiB of zeros in a small frame, under a header that promises 1000 bytes.
  const std::string bomb = zstd_frame(std::string(48U << 20U, '\0'));
  ASSERT_LT(bomb.size(), 1U << 20U);
  const std::vector<HostileCase> cases{
      {"expands past its header", hand_chunk('K', bomb, 1000, 2), "does not expand to the 1000"},
      {"expands short of its header", hand_chunk('K', zstd_frame(raw), raw.size() + 5, 2),
       "does not expand"},
      {"asks for a 128 MiB window", hand_chunk('K', zstd_frame(raw, 27), raw.size(), 2),
       "compressed data is damaged"},
      {"is not zstd", hand_chunk('K', raw, raw.size(), 2), "compressed data is damaged"},
      {"claims more than 64 MiB", hand_chunk('K', zstd_frame(raw), 65U << 20U, 2),
       "implausible chunk size"},
      {"claims no samples", hand_chunk('K', zstd_frame(raw), raw.size(), 0),
       "implausible sample count"},
      {"claims too many samples", hand_chunk('K', zstd_frame(raw), raw.size(), raw.size()),
       "implausible sample count"},
      {"has an unknown marker", hand_chunk('X', zstd_frame(raw), raw.size(), 2), "no chunk marker"},
      {"has a varint past 32 bits", std::string("K\xff\xff\xff\xff\x7f") + std::string(20, 'x'),
       "malformed chunk header"},
  };
  const std::string header = file_header();
  // The hand-built chunk is right, or the cases below would prove nothing.
  ASSERT_EQ(read_samples(header + good).size(), 2U);
  for (const HostileCase& c : cases) {
    TailState tail{};
    std::string message;
    const auto samples = read_samples(header + good + c.chunk, &tail, &message);
    EXPECT_EQ(samples.size(), 2U) << c.name;
    EXPECT_EQ(tail, TailState::Corrupt) << c.name << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.name << ": " << message;
  }
}

TEST(PackedChunks, DecompressorRefusesOutputBeyondTheHeader) {
  // Straight at the decompressor: the output buffer never grows past raw_bytes + 1.
  const std::string bomb = zstd_frame(std::string(8U << 20U, 'a'));
  format::PackedChunkHeader header;
  header.key = true;
  header.stored_bytes = static_cast<uint32_t>(bomb.size());
  header.raw_bytes = 4096;
  header.sample_count = 1;
  format::PackedChunkDecompressor decompressor;
  std::string raw;
  std::string why;
  EXPECT_FALSE(decompressor.decompress(header, bomb, raw, why));
  EXPECT_LE(raw.size(), 4097U);
  EXPECT_NE(why.find("does not expand"), std::string::npos) << why;
  // After a failure the stream is broken until a key chunk restarts it.
  header.key = false;
  EXPECT_FALSE(decompressor.decompress(header, bomb, raw, why));
  EXPECT_NE(why.find("no key chunk"), std::string::npos) << why;
}

}  // namespace
}  // namespace vramscope
