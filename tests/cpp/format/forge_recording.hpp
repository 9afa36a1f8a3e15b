// tests/cpp/format/forge_recording.hpp -- hostile format-3 recordings, forged through the real
// writer: chosen digests, long table strings, pids that change every sample, thousands of
// processes, trailer magics, flipped bits, two files end to end
//
// Each forge_*() returns the bytes of a file that passes every checksum (except where damage is
// the point) and is small, yet asks a careless reader for gigabytes or hours. The reader tests,
// the CLI bounds test (tests/cpp/cli/test_cli_bounds.cpp) and fuzz seeds use them. Header-only,
// with no test framework in it, so that any test or tool can include it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/varint.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::forge {

/// A SegmentDigest that stores the same chosen bytes for every segment.
class FixedDigest final : public SegmentDigest {
 public:
  explicit FixedDigest(std::string bytes) : m_bytes(std::move(bytes)) {}
  void add(const SystemSample& /*sample*/) override {}
  std::string take() override { return m_bytes; }

 private:
  std::string m_bytes;
};

/// One GPU, no processes, at `timestamp_ns`.
inline SystemSample one_gpu(int64_t timestamp_ns) {
  SystemSample s;
  s.timestamp_ns = timestamp_ns;
  s.hostname = "forge";
  DeviceSample d;
  d.index = 0;
  d.name = "NVIDIA H200";
  d.uuid = "GPU-0f0f0f0f-1111-2222-3333-444444444444";
  d.total_bytes = 150'000'000'000ULL;
  d.used_bytes = 1'000'000'000ULL;
  d.processes_supported = true;
  s.devices.push_back(d);
  return s;
}

/// A process on the sample's GPU.
inline ProcessSample process(uint32_t pid, const std::string& command, uint64_t used_bytes) {
  ProcessSample p;
  p.pid = pid;
  p.kinds = ProcessKindCompute;
  p.used_bytes = used_bytes;
  p.visible = true;
  p.command = command;
  return p;
}

/// Timestamp of sample `i` of a forged recording (100 ms apart).
inline int64_t at_ns(uint64_t i) {
  return 1'800'000'000'000'000'000 + static_cast<int64_t>(i) * 100'000'000;
}

/// The bytes of a recording of `count` samples, sample `i` made by `make(i)` (one at a time, so
/// that forging a recording of large samples holds one of them), written with `options` (a
/// flush per sample, as `vramscope record` does) and closed cleanly with its index.
inline std::string write(uint64_t count, const std::function<SystemSample(uint64_t)>& make,
                         RecordingWriterOptions options = {}) {
  const char* base = std::getenv("TMPDIR");
  std::string path =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/vramscope-forge-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  options.overwrite = true;
  options.sync_each_chunk = false;
  RecordingMetadata metadata;
  metadata.hostname = "forge";
  metadata.interval_ns = 100'000'000;
  {
    const auto writer = RecordingWriter::create(path, metadata, options);
    for (uint64_t i = 0; i < count; ++i) {
      writer->append(make(i));
      writer->flush();
    }
    writer->close();
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ::unlink(path.c_str());
  return bytes;
}

/// The same for samples at hand.
inline std::string write(const std::vector<SystemSample>& samples,
                         RecordingWriterOptions options = {}) {
  return write(
      samples.size(), [&](uint64_t i) { return samples[i]; }, std::move(options));
}

/// Where the first chunk of a file from write() starts: the header is all that a recording
/// of no samples holds.
inline uint64_t first_chunk_offset() {
  return write(0, [](uint64_t) { return SystemSample{}; }).size();
}

/// `count` plain one-GPU samples.
inline std::vector<SystemSample> plain_samples(uint64_t count) {
  std::vector<SystemSample> out;
  for (uint64_t i = 0; i < count; ++i) {
    out.push_back(one_gpu(at_ns(i)));
    out.back().devices[0].used_bytes = (i % 7 + 1) << 30U;
  }
  return out;
}

/// CBOR arrays nested `depth` deep around a null.
inline std::string deep_cbor(std::size_t depth) { return std::string(depth, '\x81') + '\xf6'; }

/// A few samples whose index digest is CBOR nested 200,000 deep (a few hundred bytes).
inline std::string forge_deep_digest() {
  RecordingWriterOptions options;
  options.digest = std::make_shared<FixedDigest>(deep_cbor(200'000));
  return write(plain_samples(3), options);
}

/// `segments` one-sample segments, each index chunk holding a digest that declares and expands
/// to 16 MiB (zeros: a few hundred bytes compressed).
inline std::string forge_big_digests(uint64_t segments) {
  RecordingWriterOptions options;
  options.digest = std::make_shared<FixedDigest>(std::string(16U << 20U, '\0'));
  options.segment_bytes = 1;  // a segment per flush
  return write(plain_samples(segments), options);
}

/// The encoding (length-prefixed, as in a chunk payload) of one sample at `timestamp_ns` (coded
/// against base 0, as the first of a key chunk) with one GPU of `processes` processes that
/// each name the same `command_bytes` command: one literal that enters the string table, then
/// table references, so ~3 bytes per process encode `command_bytes` each. Built by hand: the
/// encoder would need the expanded sample in memory.
inline std::string table_bomb_sample(int64_t timestamp_ns, uint32_t processes,
                                     std::size_t command_bytes) {
  using format::put_varint;
  std::string body;
  put_varint(body, format::zigzag(timestamp_ns));
  put_varint(body, 0);  // hostname ""
  put_varint(body, 0);  // driver version ""
  put_varint(body, 1);  // one device
  put_varint(body, 0);  // index
  put_varint(body, 0);  // name ""
  const std::string uuid = "GPU-0f0f0f0f-1111-2222-3333-444444444444";
  put_varint(body, 1);  // uuid: a literal added to the table (entry 0)
  put_varint(body, uuid.size());
  body += uuid;
  put_varint(body, 0);  // pci bus id ""
  put_varint(body, 0);  // device flags: nothing present
  put_varint(body, 0);  // MIG instances
  put_varint(body, processes);
  for (uint32_t k = 0; k < processes; ++k) {
    put_varint(body, k + 1);                             // pid
    put_varint(body, ProcessKindCompute | (1U << 11U));  // kinds, visible
    put_varint(body, 0);                                 // user ""
    if (k == 0) {
      put_varint(body, 1);  // the command, added to the table (entry 1)
      put_varint(body, command_bytes);
      body.append(command_bytes, 'c');
    } else {
      put_varint(body, 3 + 1);  // table entry 1
    }
  }
  put_varint(body, 0);  // device error ""
  put_varint(body, 0);  // allocators
  put_varint(body, 0);  // steps
  put_varint(body, 0);  // OOMs
  std::string out;
  put_varint(out, body.size());
  return out + body;
}

/// A recording of one key chunk holding table_bomb_sample(65,536 processes, 64 KiB): a 68 KB
/// file asking for 4 GiB.
inline std::string forge_table_bomb() {
  std::string out = write(0, [](uint64_t) { return SystemSample{}; });  // the header alone
  const std::string raw = table_bomb_sample(at_ns(0), 65536, 64U << 10U);
  format::PackedChunkCompressor compressor;
  compressor.compress(raw, 1, true, out);
  return out;
}

/// `samples` samples of `pids` processes each, all new in every sample, each naming the same
/// `command_bytes` command: the summaries' cost of copying a command per (pid, GPU).
inline std::string forge_pid_churn(uint64_t samples, uint32_t pids, std::size_t command_bytes) {
  const std::string command(command_bytes, 'p');
  return write(samples, [&](uint64_t i) {
    SystemSample s = one_gpu(at_ns(i));
    for (uint32_t k = 0; k < pids; ++k) {
      s.devices[0].processes.push_back(
          process(100 + static_cast<uint32_t>(i) * pids + k, command, k));
    }
    return s;
  });
}

/// One sample of `gpus` GPUs with `processes` processes each (pids 1.., the same on every GPU,
/// no command): 9 x 65,536 sits within the decoder's 64 MiB bound in a 67 KB file, and asked
/// `export --jsonl` for 1.15 GiB (a JSON document of it all at once) and `top --replay --once`
/// for 0.98 GiB.
inline std::string forge_wide_sample(uint32_t gpus, uint32_t processes) {
  return write(1, [&](uint64_t i) {
    SystemSample s = one_gpu(at_ns(i));
    const DeviceSample first = s.devices[0];
    s.devices.clear();
    for (uint32_t g = 0; g < gpus; ++g) {
      DeviceSample d = first;
      d.index = g;
      d.uuid = "GPU-0f0f0f0f-1111-2222-3333-" + std::to_string(444444444444ULL + g);
      d.processes.reserve(processes);
      for (uint32_t pid = 1; pid <= processes; ++pid) d.processes.push_back(process(pid, "", pid));
      s.devices.push_back(std::move(d));
    }
    return s;
  });
}

/// `samples` samples of the same `processes` processes, 39.999 s apart: the report's processes
/// x bins, with 40,000 bins of 1 ms each at `--bins 20000`.
inline std::string forge_many_processes(uint32_t processes, uint64_t samples) {
  return write(samples, [&](uint64_t i) {
    SystemSample s = one_gpu(at_ns(0) + static_cast<int64_t>(i) * 39'999'000'000);
    for (uint32_t pid = 1; pid <= processes; ++pid) {
      s.devices[0].processes.push_back(process(pid, "", (pid + i) << 20U));
    }
    return s;
  });
}

/// A genuine recording followed by `bytes` of trailers that each claim an index chunk of half
/// that size ending there: every 8 bytes a "VSIX" for the search for the last index to try, half
/// of them far enough in to be read whole by a careless search (`bytes` / 16 reads of
/// `bytes` / 2).
inline std::string forge_trailer_flood(std::size_t bytes) {
  std::string out = write(plain_samples(10));
  const auto chunk_bytes = static_cast<uint32_t>(bytes / 2);
  std::string trailer(reinterpret_cast<const char*>(&chunk_bytes), sizeof chunk_bytes);
  trailer += "VSIX";
  while (out.size() % 8 != 0) out += '\0';
  for (std::size_t i = 0; i < bytes / trailer.size(); ++i) out += trailer;
  return out;
}

/// A genuine recording of `count` samples (with the summary digests `vramscope record` writes
/// when `digest` is set).
inline std::string genuine(uint64_t count, std::shared_ptr<SegmentDigest> digest = nullptr,
                           uint64_t segment_bytes = 64U << 20U) {
  RecordingWriterOptions options;
  options.digest = std::move(digest);
  options.segment_bytes = segment_bytes;
  return write(plain_samples(count), options);
}

/// `bytes` with bit `bit` of byte `offset` flipped.
inline std::string flip_bit(std::string bytes, std::size_t offset, unsigned bit = 0) {
  bytes.at(offset) = static_cast<char>(bytes.at(offset) ^ (1U << bit));
  return bytes;
}

}  // namespace vramscope::forge
