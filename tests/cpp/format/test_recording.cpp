// tests/cpp/format/test_recording.cpp -- recording files: round trip, damaged tails, bad headers
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <functional>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using testing::dump;
using testing::make_metadata;
using testing::make_sample;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

/// Everything a reader yields, plus how it ended.
struct ReadResult {
  std::vector<SystemSample> samples;
  TailState tail = TailState::Clean;
  std::string message;
};

ReadResult read_all(RecordingReader& reader) {
  ReadResult result;
  SystemSample sample;
  while (reader.next(sample)) result.samples.push_back(sample);
  result.tail = reader.tail_state();
  result.message = reader.tail_message();
  return result;
}

ReadResult read_bytes(std::string bytes) { return read_all(*RecordingReader::open_bytes(bytes)); }

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

/// A recording of `chunks` chunks of `per_chunk` samples; `offsets` gets each chunk's start.
struct Recorded {
  std::string bytes;
  std::vector<SystemSample> samples;
  std::vector<uint64_t> chunk_offsets;
};

Recorded record(const TempDir& dir, int chunks, int per_chunk, int gpus = 2) {
  Recorded out;
  const std::string path = dir.file("rec.vsrec");
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  auto writer = RecordingWriter::create(path, make_metadata(), options);
  uint64_t seed = 0;
  for (int c = 0; c < chunks; ++c) {
    out.chunk_offsets.push_back(writer->file_bytes());
    for (int i = 0; i < per_chunk; ++i) {
      out.samples.push_back(make_sample(seed++, gpus, 5));
      writer->append(out.samples.back());
    }
    writer->flush();
  }
  const uint64_t samples_end = writer->file_bytes();
  writer->close();
  out.bytes = read_file(path);
  EXPECT_EQ(out.bytes.size(), writer->file_bytes());
  // close() ends the file with an index chunk (format 3); cut it off, as a recorder killed
  // before close() leaves the file, so that the last chunk is a sample chunk.
  // test_packed_chunk.cpp damages index chunks.
  out.bytes.resize(samples_end);
  return out;
}

void expect_prefix(const ReadResult& result, const std::vector<SystemSample>& samples,
                   std::size_t count) {
  ASSERT_EQ(result.samples.size(), count);
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(result.samples[i], samples[i]);
}

TEST(Recording, RoundTripsSamplesAndMetadata) {
  TempDir dir;
  const Recorded rec = record(dir, 4, 3);
  auto reader = RecordingReader::open(dir.file("rec.vsrec"));
  const RecordingMetadata& metadata = reader->metadata();
  EXPECT_EQ(metadata.format_version, format::recording_version);
  EXPECT_EQ(metadata.created_ns, make_metadata().created_ns);
  EXPECT_EQ(metadata.command, make_metadata().command);
  EXPECT_EQ(metadata.hostname, "node-07");
  const ReadResult result = read_all(*reader);
  EXPECT_EQ(result.tail, TailState::Clean);
  EXPECT_EQ(result.message, "");
  expect_prefix(result, rec.samples, rec.samples.size());
}

TEST(Recording, ManyProcessesAndLargeChunksRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("big.vsrec");
  auto writer = RecordingWriter::create(path, make_metadata());
  std::vector<SystemSample> samples;
  // Enough data to cross the writer's automatic chunk split without any explicit flush().
  for (uint64_t seed = 0; samples.size() < 20 || writer->file_bytes() == 0; ++seed) {
    samples.push_back(make_sample(seed, 8, 500));
    writer->append(samples.back());
  }
  writer->close();
  EXPECT_EQ(writer->sample_count(), samples.size());
  const ReadResult result = read_all(*RecordingReader::open(path));
  EXPECT_EQ(result.tail, TailState::Clean);
  expect_prefix(result, samples, samples.size());
}

TEST(Recording, HeaderOnlyFileIsCleanAndEmpty) {
  TempDir dir;
  const std::string path = dir.file("empty.vsrec");
  RecordingWriter::create(path, make_metadata())->close();
  const ReadResult result = read_all(*RecordingReader::open(path));
  EXPECT_TRUE(result.samples.empty());
  EXPECT_EQ(result.tail, TailState::Clean);
}

TEST(Recording, TruncationAtEveryByteOfTheLastChunkKeepsEarlierChunks) {
  TempDir dir;
  const Recorded rec = record(dir, 3, 2);
  const uint64_t last_chunk = rec.chunk_offsets.back();
  for (uint64_t size = last_chunk + 1; size < rec.bytes.size(); ++size) {
    const ReadResult result = read_bytes(rec.bytes.substr(0, size));
    ASSERT_EQ(result.tail, TailState::Truncated) << "cut at " << size;
    EXPECT_EQ(result.message, "torn chunk at byte " + std::to_string(last_chunk) +
                                  " (recorder killed while writing?)");
    expect_prefix(result, rec.samples, 4);
  }
  // Cut exactly at a chunk boundary: nothing is torn.
  const ReadResult at_boundary = read_bytes(rec.bytes.substr(0, last_chunk));
  EXPECT_EQ(at_boundary.tail, TailState::Clean);
  expect_prefix(at_boundary, rec.samples, 4);
}

TEST(Recording, FlippedByteInAnyChunkRegionIsCorruptAndEarlierChunksSurvive) {
  TempDir dir;
  const Recorded rec = record(dir, 3, 2);
  for (std::size_t chunk = 0; chunk < rec.chunk_offsets.size(); ++chunk) {
    const uint64_t begin = rec.chunk_offsets[chunk];
    const uint64_t end =
        chunk + 1 < rec.chunk_offsets.size() ? rec.chunk_offsets[chunk + 1] : rec.bytes.size();
    // Every header byte, then a stride through the payload, then its last byte.
    std::vector<uint64_t> positions;
    const uint64_t header_end = std::min<uint64_t>(end, begin + format::max_packed_header_bytes);
    for (uint64_t at = begin; at < header_end; ++at) positions.push_back(at);
    for (uint64_t at = header_end; at < end; at += 7) positions.push_back(at);
    positions.push_back(end - 1);
    for (uint64_t at : positions) {
      std::string damaged = rec.bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x40);
      const ReadResult result = read_bytes(damaged);
      ASSERT_EQ(result.tail, TailState::Corrupt) << "byte " << at;
      EXPECT_NE(result.message.find("corrupt chunk at byte " + std::to_string(begin)),
                std::string::npos)
          << result.message;
      expect_prefix(result, rec.samples, chunk * 2);
    }
  }
}

TEST(Recording, GarbageAfterTheLastChunkIsReported) {
  TempDir dir;
  const Recorded rec = record(dir, 2, 2);
  const ReadResult zeros = read_bytes(rec.bytes + std::string(100, '\0'));
  EXPECT_EQ(zeros.tail, TailState::Corrupt);
  expect_prefix(zeros, rec.samples, 4);
}

TEST(Recording, RejectsForeignFilesWithClearMessages) {
  TempDir dir;
  const std::string path = dir.file("x.vsrec");
  write_file(path, "");
  EXPECT_NE(error_of([&] { RecordingReader::open(path); }).find("empty file"), std::string::npos);
  write_file(path, "hello, this is a text file\n");
  EXPECT_EQ(error_of([&] { RecordingReader::open(path); }), path + ": not a vramscope recording");
  write_file(path, "VRAMSC");
  EXPECT_EQ(error_of([&] { RecordingReader::open(path); }), path + ": not a vramscope recording");
  EXPECT_NE(error_of([&] {
              RecordingReader::open(dir.file("missing"));
            }).find("cannot open recording: No such file or directory"),
            std::string::npos);
}

TEST(Recording, RejectsDamagedHeaders) {
  TempDir dir;
  const Recorded rec = record(dir, 1, 1);
  const auto header_bytes = rec.chunk_offsets.front();
  for (uint64_t size = 8; size < header_bytes; ++size) {
    EXPECT_NE(
        error_of([&] { RecordingReader::open_bytes(rec.bytes.substr(0, size)); }).find("cut short"),
        std::string::npos)
        << size;
  }
  std::string damaged = rec.bytes;
  damaged[20] ^= 1;  // inside the metadata
  EXPECT_EQ(error_of([&] { RecordingReader::open_bytes(damaged); }),
            "<memory>: corrupt recording header (checksum mismatch)");
}

TEST(Recording, RefusesNewerVersions) {
  TempDir dir;
  std::string bytes = record(dir, 1, 1).bytes;
  const uint16_t newer = format::recording_version + 1;
  std::memcpy(bytes.data() + offsetof(format::FileHeader, version), &newer, sizeof newer);
  EXPECT_EQ(error_of([&] { RecordingReader::open_bytes(bytes, "new.vsrec"); }),
            "new.vsrec: written by a newer vramscope (format v" + std::to_string(newer) +
                "); this one reads up to v" + std::to_string(format::recording_version));
}

TEST(Recording, CreatesPrivateFilesAndRefusesToOverwrite) {
  TempDir dir;
  const std::string path = dir.file("private.vsrec");
  const mode_t old_mask = ::umask(0);  // even a permissive umask must not widen the mode
  RecordingWriter::create(path, make_metadata())->close();
  ::umask(old_mask);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);

  const std::string before = read_file(path);
  EXPECT_NE(
      error_of([&] { RecordingWriter::create(path, make_metadata()); }).find("already exists"),
      std::string::npos);
  EXPECT_EQ(read_file(path), before);

  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto writer = RecordingWriter::create(path, make_metadata(), /*overwrite=*/true);
  writer->append(make_sample(1));
  writer->close();
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  EXPECT_EQ(read_all(*RecordingReader::open(path)).samples.size(), 1U);
}

TEST(Recording, WriterReportsUnwritablePaths) {
  TempDir dir;
  EXPECT_NE(error_of([&] {
              RecordingWriter::create(dir.file("no/such/dir.vsrec"), {});
            }).find("cannot create recording: No such file or directory"),
            std::string::npos);
}

TEST(Recording, RefusesToRecordIntoNonRegularFiles) {
  TempDir dir;
  const std::string path = dir.file("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // O_WRONLY on a FIFO without a reader would block; open a reader end first.
  const int reader_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader_fd, 0);
  EXPECT_EQ(error_of([&] { RecordingWriter::create(path, make_metadata(), /*overwrite=*/true); }),
            path + ": not a regular file, cannot record into it");
  ::close(reader_fd);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
}

/// Limits the size of files this process writes (write() then fails with EFBIG), restoring the
/// previous limit and SIGXFSZ disposition on destruction.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &m_previous);
    m_previous_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = m_previous;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &m_previous);
    std::signal(SIGXFSZ, m_previous_handler);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit m_previous{};
  void (*m_previous_handler)(int) = nullptr;
};

TEST(Recording, FailedWriteIsCutOffAndRetriedByTheNextFlush) {
  TempDir dir;
  const std::string path = dir.file("full.vsrec");
  auto writer = RecordingWriter::create(path, make_metadata());
  std::vector<SystemSample> samples{make_sample(0), make_sample(1)};
  writer->append(samples[0]);
  writer->flush();
  const uint64_t good_bytes = writer->file_bytes();
  writer->append(samples[1]);
  {
    // Room for a part of the next chunk only: the write is torn, as on a full disk.
    FileSizeLimit limit(good_bytes + 30);
    EXPECT_NE(
        error_of([&] { writer->flush(); }).find(path + ": cannot write recording: File too large"),
        std::string::npos);
  }
  EXPECT_EQ(read_file(path).size(), good_bytes);  // the torn part was cut off
  EXPECT_EQ(read_all(*RecordingReader::open(path)).tail, TailState::Clean);
  writer->close();  // retries the pending chunk, now that there is room
  const ReadResult result = read_all(*RecordingReader::open(path));
  EXPECT_EQ(result.tail, TailState::Clean);
  expect_prefix(result, samples, 2);
}

TEST(Recording, FlushWithoutSamplesWritesNothing) {
  TempDir dir;
  auto writer = RecordingWriter::create(dir.file("r.vsrec"), make_metadata());
  const uint64_t header_bytes = writer->file_bytes();
  writer->flush();
  writer->flush();
  EXPECT_EQ(writer->file_bytes(), header_bytes);
  writer->close();
  EXPECT_THROW(writer->append(make_sample(0)), Error);
}

}  // namespace
}  // namespace vramscope
