// tests/cpp/format/test_byte_source.cpp -- a recording is read in blocks: right bytes, a growing file, few calls
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/format/byte_source.hpp"
#include "vramscope/format/recording.hpp"

namespace vramscope {
namespace {

using format::ByteSource;
using format::read_block_bytes;

std::unique_ptr<ByteSource> open_source(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  return ByteSource::file(path, fd);
}

/// Read system calls this process has made so far (/proc/self/io's syscr counts pread too).
uint64_t read_calls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "syscr:") return value;
  }
  return 0;
}

TEST(ByteSource, ViewsAnywhereInAndAcrossBlocksAreTheFilesBytes) {
  testing::TempDir dir;
  const std::string path = dir.file("bytes");
  std::string bytes(3 * read_block_bytes + 12345, '\0');
  std::mt19937_64 random(7);
  for (char& c : bytes) c = static_cast<char>(random());
  testing::write_file(path, bytes);
  const auto file = open_source(path);
  const auto memory = ByteSource::memory(bytes);
  ASSERT_EQ(file->size(), bytes.size());
  // Sequential small views (a reader's walk), then random ones, some across a block's end,
  // some larger than a block, some past the end of the file.
  std::vector<std::pair<uint64_t, std::size_t>> asks;
  for (uint64_t at = 0; at < bytes.size(); at += 37) asks.emplace_back(at, 41);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t at = random() % (bytes.size() + 100);
    const std::size_t size = i % 50 == 0 ? read_block_bytes + random() % read_block_bytes
                                         : static_cast<std::size_t>(random() % 5000);
    asks.emplace_back(at, size);
  }
  for (const auto& [at, size] : asks) {
    const std::string want =
        at >= bytes.size() ? std::string() : bytes.substr(static_cast<std::size_t>(at), size);
    ASSERT_EQ(file->view(at, size), want) << "at " << at << " size " << size;
    ASSERT_EQ(memory->view(at, size), want) << "at " << at << " size " << size;
  }
}

TEST(ByteSource, AFileThatGrowsIsSeenGrowing) {
  testing::TempDir dir;
  const std::string path = dir.file("growing");
  testing::write_file(path, "abc");
  const auto source = open_source(path);
  EXPECT_EQ(source->view(0, 6), "abc");
  EXPECT_EQ(source->view(3, 3), "");
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << "def";
  }
  // The window ended where the file did: bytes past it are read again, not taken as absent.
  EXPECT_EQ(source->view(1, 5), "bcdef");
  EXPECT_EQ(source->view(3, 3), "def");
}

TEST(ByteSource, ARecordingOfManySmallChunksIsReadInFewCalls) {
  testing::TempDir dir;
  const std::string path = dir.file("many.vsrec");
  constexpr uint64_t samples = 20000;
  {
    RecordingWriterOptions options;
    options.sync_each_chunk = false;
    auto writer = RecordingWriter::create(path, testing::make_metadata(), options);
    for (uint64_t i = 0; i < samples; ++i) {
      writer->append(testing::make_sample(i % 4, 1, 2));
      writer->flush();  // one chunk per sample: the recorder's way at a long interval
    }
    writer->close();
  }
  const uint64_t file_bytes = testing::read_file(path).size();
  const uint64_t before = read_calls();
  auto reader = RecordingReader::open(path);
  uint64_t count = 0;
  for (SystemSample sample; reader->next(sample);) ++count;
  const uint64_t calls = read_calls() - before;
  EXPECT_EQ(count, samples);
  EXPECT_EQ(reader->tail_state(), TailState::Clean);
  // A call per block (and a few for the header), where a call per chunk header and one per
  // payload made 2 per sample.
  EXPECT_LE(calls, file_bytes / read_block_bytes + 8) << file_bytes << " bytes";
}

}  // namespace
}  // namespace vramscope
