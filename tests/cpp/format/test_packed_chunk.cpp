// tests/cpp/format/test_packed_chunk.cpp -- version 3 packed chunks: size, key chunks, hostile data
#include <zstd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "core/crc32c.hpp"
#include "format/fixtures.hpp"
#include "format/packed_chunk.hpp"
#include "format/recording_layout.hpp"
#include "format/sample_codec.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/recording.hpp"

namespace vramscope {
namespace {

using testing::dump;
using testing::make_metadata;
using testing::make_sample;
using testing::read_file;
using testing::TempDir;

RecordingWriterOptions quick() { return {.overwrite = true, .sync_each_chunk = false}; }

/// A steady job: one sample every ~100 ms (with jitter), memory moving now and then.
std::vector<SystemSample> steady_samples(std::size_t count, int gpus, int processes) {
  std::vector<SystemSample> out;
  SystemSample s = make_sample(0, gpus, processes);
  for (std::size_t i = 0; i < count; ++i) {
    s.timestamp_ns += 100'000'000 + static_cast<int64_t>((i * 7919) % 40'000);
    if (i % 10 == 0) *s.devices[0].used_bytes += 2ULL << 20U;
    for (AllocatorSample& a : s.allocators) a.updated_ns = s.timestamp_ns - 1'000'000;
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
    const double packed_per_sample = static_cast<double>(packed) / static_cast<double>(samples.size());
    EXPECT_GE(raw_per_sample / packed_per_sample, 10.0)
        << gpus << "x" << processes << ": " << raw_per_sample << " B raw, " << packed_per_sample
        << " B packed per sample";
    const std::vector<SystemSample> back = read_samples(read_file(dir.file("steady.vsrec")));
    ASSERT_EQ(back.size(), samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) ASSERT_EQ(dump(back[i]), dump(samples[i]));
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
  for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(back[i].timestamp_ns, samples[i].timestamp_ns);
}

/// Offsets of every chunk after `header_bytes`, and whether each is a key chunk.
std::vector<std::pair<uint64_t, bool>> walk_chunks(const std::string& bytes, uint64_t header_bytes) {
  std::vector<std::pair<uint64_t, bool>> out;
  for (uint64_t at = header_bytes; at < bytes.size();) {
    format::PackedChunkHeader header;
    std::string why;
    EXPECT_EQ(format::parse_packed_header(std::string_view(bytes).substr(at), header, why),
              format::PackedHeaderStatus::Ok)
        << why;
    out.emplace_back(at, header.key);
    at += header.header_bytes + header.stored_bytes;
  }
  return out;
}

TEST(PackedChunks, AKeyChunkReadsWithoutAnythingBeforeIt) {
  TempDir dir;
  const std::string path = dir.file("keys.vsrec");
  auto writer = RecordingWriter::create(path, make_metadata(), quick());
  const uint64_t header_bytes = writer->file_bytes();
  std::vector<SystemSample> samples;
  // Past writer_key_interval_bytes of encoded samples, in chunks of 10.
  for (uint64_t seed = 0; samples.size() < 30 || writer->file_bytes() < (1U << 20U) ||
                          samples.size() < 2200;
       ++seed) {
    samples.push_back(make_sample(seed, 4, 16));
    writer->append(samples.back());
    if (seed % 10 == 9) writer->flush();
  }
  writer->close();
  const std::string bytes = read_file(path);
  const auto chunks = walk_chunks(bytes, header_bytes);
  std::vector<std::size_t> keys;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].second) keys.push_back(i);
  }
  ASSERT_GE(keys.size(), 2U) << "expected a second key chunk after 4 MiB of samples";
  EXPECT_EQ(keys[0], 0U) << "the first chunk is a key chunk";
  // The file header followed by everything from the second key chunk on: a reader that starts
  // there (as an index lets it) decodes the same samples.
  const std::size_t key = keys[1];
  const std::string tail =
      bytes.substr(0, header_bytes) + bytes.substr(chunks[key].first);
  const std::vector<SystemSample> back = read_samples(tail);
  const std::size_t first = key * 10;
  ASSERT_EQ(back.size(), samples.size() - first);
  for (std::size_t i = 0; i < back.size(); ++i) ASSERT_EQ(dump(back[i]), dump(samples[first + i]));
  // A continuation chunk cannot be read that way.
  const std::string orphan = bytes.substr(0, header_bytes) + bytes.substr(chunks[key + 1].first);
  TailState tail_state{};
  std::string message;
  EXPECT_TRUE(read_samples(orphan, &tail_state, &message).empty());
  EXPECT_EQ(tail_state, TailState::Corrupt);
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
