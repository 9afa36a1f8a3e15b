// tests/fuzz/make_format_seeds.cpp -- seeds for fuzz_recording_format: recordings of many
// segments with digests, and the hostile files of issue 34, forged with valid checksums
//
// Usage: make_format_seeds SEED_DIR. Every seed is written by the real writer (with the
// SummaryDigest that `vramscope record` uses) and, for the forged ones, changed through
// recording_pieces.hpp, so that the checksums are right and the reader meets the content:
//   segments.vsrec       20 segments, a digest each (the structure every mutation starts from)
//   deep_cbor.vsrec      an index digest of arrays nested 200,000 deep (a stack overflow once)
//   huge_digests.vsrec   100 digests of 16 MiB each, all zeros (>1.5 GB held at once, once)
//   wide_strings.vsrec   1,024 processes naming one 64 KiB string (expands 1,000-fold)
//   pid_churn.vsrec      1,900 new pids per sample (summaries copied each command per pid)
//   many_processes.vsrec 5,000 processes in one sample (the report allocated processes x bins)
//   trailers.vsrec       64 KiB of index trailers ("VSIX") after the data (a quadratic search)
//   flipped_bit.vsrec    100 samples, one bit flipped in a chunk (show said "100, clean")
//   concatenated.vsrec   `cat a.vsrec b.vsrec` (show reported only b)
//   breakdowns.vsrec     20 samples of an agent whose driver breakdown fills the reading exactly
//                        (the breakdown mutation moves its parts either side of each sum)
//   impossible.vsrec     a 2^64-1 byte peak in a sample and its digest (show said 16 EiB)
// All are under 128 KiB, the target's -max_len.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>

#include "recording_pieces.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/status.hpp"

namespace {

using vramscope::SystemSample;
using vramscope::fuzz::Piece;

SystemSample base_sample(int index) {
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000 + index * 100'000'000LL;
  s.hostname = "host";
  s.driver_version = "550.1";
  vramscope::DeviceSample d;
  d.name = "GPU";
  d.uuid = "GPU-1";
  d.total_bytes = 1ULL << 34U;
  d.used_bytes = (1ULL << 30U) + (static_cast<uint64_t>(index % 7) << 20U);
  s.devices.push_back(d);
  return s;
}

vramscope::ProcessSample process(uint32_t pid, std::string command) {
  vramscope::ProcessSample p;
  p.pid = pid;
  p.used_bytes = 1ULL << 28U;
  p.kinds = vramscope::ProcessKindCompute;
  p.visible = true;
  p.user = "u";
  p.command = std::move(command);
  return p;
}

/// An agent on base_sample's GPU whose driver breakdown sits on the sums readers check: torch's
/// reserved and the non-PyTorch parts fill the driver's reading exactly (one sample in seven
/// overfills it by the excess the agent names); optional parts come and go with `index`.
vramscope::AllocatorSample agent_with_breakdown(int index) {
  vramscope::AllocatorSample a;
  a.pid = 4242;
  a.device_uuid = "GPU-1";
  a.reserved_bytes = 6ULL << 30U;
  vramscope::DriverBreakdown b;
  b.paired_ns = 1'700'000'000'000'000'000 + index * 100'000'000LL;
  b.reserved_bytes = a.reserved_bytes;
  b.context_bytes = 512ULL << 20U;
  if (index % 2 == 0) b.other_bytes = static_cast<uint64_t>(index) << 20U;
  if (index % 3 == 0) b.nccl_bytes = 64ULL << 20U;
  if (index % 4 == 0) b.private_pool_bytes = 32ULL << 20U;
  if (index % 5 == 0) b.first_context_bytes = 500ULL << 20U;
  b.driver_bytes = b.reserved_bytes + b.non_pytorch_bytes();
  if (index % 7 == 3) {
    b.excess_bytes = 2ULL << 20U;
    b.driver_bytes -= b.excess_bytes;
  }
  b.nccl_version = index % 3 == 0 ? 22'907U : 0U;
  a.breakdown = b;
  return a;
}

/// Writes `count` samples made by `make` through the real writer (segments of
/// `segment_bytes`, one chunk per `per_chunk` samples) and returns the file's bytes.
std::string record(int count, const std::function<SystemSample(int)>& make,
                   uint64_t segment_bytes = 64U << 20U, int per_chunk = 1) {
  std::string path = std::filesystem::temp_directory_path().string() + "/vramscope-seed-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw vramscope::Error("mkstemp failed");
  ::close(fd);
  {
    vramscope::RecordingMetadata metadata;
    metadata.hostname = "host";
    metadata.command = "python train.py";
    metadata.interval_ns = 100'000'000;
    vramscope::RecordingWriterOptions options;
    options.overwrite = true;
    options.sync_each_chunk = false;
    options.segment_bytes = segment_bytes;
    options.digest = std::make_shared<vramscope::report::SummaryDigest>();
    auto writer = vramscope::RecordingWriter::create(path, metadata, options);
    for (int i = 0; i < count; ++i) {
      writer->append(make(i));
      if ((i + 1) % per_chunk == 0) writer->flush();
    }
    writer->close();
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::filesystem::remove(path);
  return bytes;
}

/// Replaces the digest of every index chunk by `digest` and makes the index agree again.
std::string with_digests(const std::string& file, const std::string& digest) {
  std::vector<Piece> pieces = vramscope::fuzz::split_recording(file);
  for (Piece& piece : pieces) {
    if (piece.kind == Piece::Kind::Index) vramscope::fuzz::set_index_digest(piece, digest);
  }
  vramscope::fuzz::reindex(pieces);
  return vramscope::fuzz::join(pieces);
}

void write(const std::string& path, const std::string& bytes) {
  if (bytes.size() > (128U << 10U)) {
    throw vramscope::Error(path + ": seed of " + std::to_string(bytes.size()) +
                           " bytes is above the fuzzer's -max_len");
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The mutator's ground: a file split at its chunks joins back to itself, and rewriting the
/// index of an untouched file changes nothing (so reindex() writes what the writer writes).
void check_pieces(const std::string& file) {
  std::vector<Piece> pieces = vramscope::fuzz::split_recording(file);
  std::size_t indexes = 0;
  for (const Piece& piece : pieces) {
    if (piece.kind == Piece::Kind::Raw) throw vramscope::Error("a chunk did not parse");
    indexes += piece.kind == Piece::Kind::Index ? 1 : 0;
  }
  if (indexes < 2) throw vramscope::Error("expected several index chunks");
  if (vramscope::fuzz::join(pieces) != file) throw vramscope::Error("split/join changed the file");
  vramscope::fuzz::reindex(pieces);
  if (vramscope::fuzz::join(pieces) != file) throw vramscope::Error("reindex changed the file");
}

void write_seeds(const std::string& dir) {
  const std::string segments = record(40, base_sample, 64, 1);
  check_pieces(segments);
  write(dir + "/segments.vsrec", segments);
  write(dir + "/deep_cbor.vsrec",
        with_digests(record(1, base_sample), std::string(200000, '\x81')));
  // A CBOR byte string of 16 MiB - 9 bytes (its 9-byte head included: 16 MiB exactly).
  std::string huge = std::string("\x5A\x00\xFF\xFF\xF7", 5);
  huge.resize(16U << 20U, '\0');
  write(dir + "/huge_digests.vsrec", with_digests(record(100, base_sample, 16, 1), huge));
  const std::string wide(64U << 10U, 'w');
  write(dir + "/wide_strings.vsrec", record(1, [&](int i) {
          SystemSample s = base_sample(i);
          for (uint32_t p = 0; p < 1024; ++p)
            s.devices[0].processes.push_back(process(1000 + p, wide));
          return s;
        }));
  write(
      dir + "/pid_churn.vsrec", record(12, [](int i) {
        SystemSample s = base_sample(i);
        for (uint32_t p = 0; p < 1900; ++p) {
          const uint32_t pid = 10000 + static_cast<uint32_t>(i) * 1900 + p;
          s.devices[0].processes.push_back(process(pid, "python w.py --id " + std::to_string(pid)));
        }
        return s;
      }));
  write(dir + "/many_processes.vsrec", record(2, [](int i) {
          SystemSample s = base_sample(i);
          for (uint32_t p = 0; p < 5000; ++p) s.devices[0].processes.push_back(process(p + 1, "x"));
          return s;
        }));
  std::string trailers = record(3, base_sample);
  for (int i = 0; i < (64 << 10) / 8; ++i) trailers += std::string("\x08\0\0\0VSIX", 8);
  write(dir + "/trailers.vsrec", trailers);
  std::string flipped = record(100, base_sample, 64U << 20U, 10);
  flipped[flipped.size() / 2] ^= 0x10;
  write(dir + "/flipped_bit.vsrec", flipped);
  const std::string a = record(5, base_sample);
  const std::string b = record(7, [](int i) { return base_sample(i + 1000); });
  write(dir + "/concatenated.vsrec", a + b);
  write(dir + "/breakdowns.vsrec", record(
                                       20,
                                       [](int i) {
                                         SystemSample s = base_sample(i);
                                         s.allocators.push_back(agent_with_breakdown(i));
                                         return s;
                                       },
                                       1024, 2));
  write(dir + "/impossible.vsrec", record(3, [](int i) {
          SystemSample s = base_sample(i);
          if (i == 1) s.devices[0].used_bytes = ~0ULL;
          return s;
        }));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
    return vramscope::ExitUsage;
  }
  try {
    write_seeds(argv[1]);
  } catch (const vramscope::Error& error) {
    std::fprintf(stderr, "make_format_seeds: %s\n", error.what());
    return vramscope::ExitError;
  }
  return vramscope::ExitOk;
}
