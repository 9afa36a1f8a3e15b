// tests/fuzz/make_seeds.cpp -- writes seed recordings for the fuzzer into a corpus folder
//
// Usage: make_seeds RECORDING_SEED_DIR PAYLOAD_SEED_DIR [SEGMENT_SEED_DIR [PACKED_SEED_DIR]].
// Seeds are small valid recordings (so the fuzzer starts from the real structure) plus a truncated
// and a header-only one, a bare packed stream (fuzz_packed_chunk.cpp), and agent segments written
// by the real writer with every machine-specific field (pid, uid, start time, namespace, clocks)
// fixed, so that the seeds are the same on every machine.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "vramscope/agent_segment.hpp"
#include "vramscope/format/agent_segment_layout.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/status.hpp"

namespace {

vramscope::SystemSample seed_sample(int index) {
  vramscope::SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000 + index * 100'000'000LL;
  s.hostname = "host";
  s.driver_version = "550.1";
  vramscope::DeviceSample d;
  d.index = 0;
  d.name = "GPU";
  d.uuid = "GPU-1";
  d.total_bytes = 1ULL << 34U;
  d.used_bytes = static_cast<uint64_t>(index) << 28U;
  d.mig_enabled = index % 2 == 0;
  if (index % 2 == 0) {
    vramscope::MigInstanceSample mig;
    mig.uuid = "MIG-1";
    mig.gpu_instance_id = 1;
    d.mig_instances.push_back(mig);
  }
  vramscope::ProcessSample p;
  p.pid = 42;
  p.used_bytes = 1ULL << 28U;
  p.kinds = vramscope::ProcessKindCompute;
  p.visible = true;
  p.user = "u";
  p.command = "python x.py";
  d.processes.push_back(p);
  s.devices.push_back(d);
  vramscope::AllocatorSample a;
  a.pid = 42;
  a.device_uuid = "GPU-1";
  a.allocated_bytes = 1000;
  // Format 4: a driver breakdown, with every optional part on odd samples and none on every
  // fourth.
  if (index % 2 == 1 || index % 4 == 2) {
    vramscope::DriverBreakdown parts;
    parts.paired_ns = s.timestamp_ns - 1;
    parts.driver_bytes = 1ULL << 29U;
    parts.reserved_bytes = 1ULL << 28U;
    parts.context_bytes = 1ULL << 27U;
    parts.excess_bytes = index % 4 == 2 ? 4096 : 0;
    if (index % 2 == 1) {
      parts.private_pool_bytes = 1ULL << 20U;
      parts.nccl_bytes = 1ULL << 21U;
      parts.other_bytes = 1ULL << 22U;
      parts.first_context_bytes = 1ULL << 26U;
      parts.nccl_version = 22907;
    }
    parts.unsettled_count = static_cast<uint32_t>(index);
    a.breakdown = parts;
  }
  // Format 5: a polling agent says why on every third sample (after a breakdown on some).
  if (index % 3 == 1) {
    a.polling_only = true;
    a.polling_reason = "no C++ compiler to build the agent for torch 2.16.0; install one";
  }
  s.allocators.push_back(a);
  if (index % 3 == 0) {
    vramscope::StepRecord step;
    step.device_uuid = "GPU-1";
    step.step = static_cast<uint64_t>(index);
    s.steps.push_back(step);
  }
  if (index == 4) {
    vramscope::OomRecord oom;
    oom.device_uuid = "GPU-1";
    s.ooms.push_back(oom);
  }
  return s;
}

void write_seed(const std::string& path, int chunks, int per_chunk) {
  vramscope::RecordingMetadata metadata;
  metadata.hostname = "host";
  metadata.command = "python x.py";
  vramscope::RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  auto writer = vramscope::RecordingWriter::create(path, metadata, options);
  int index = 0;
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < per_chunk; ++i) writer->append(seed_sample(index++));
    writer->flush();
  }
  writer->close();
}

/// A bare chunk payload (what the decoder target takes): a few encoded samples.
void write_payload_seed(const std::string& path) {
  vramscope::format::SampleEncoder encoder;
  std::string payload;
  int64_t base_ns = seed_sample(0).timestamp_ns;
  for (int i = 0; i < 5; ++i) {
    const auto sample = seed_sample(i);
    encoder.encode(sample, base_ns, payload);
    base_ns = sample.timestamp_ns;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(payload.data(), static_cast<std::streamsize>(payload.size()));
}

/// `bytes`, a segment file, with the header fields that differ from run to run fixed (the
/// harness patches its own pid and uid in): the seeds stay the same bytes at every run.
std::string seed_header(std::string bytes) {
  vramscope::format::SegmentHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  header.writer_pid = 1;
  header.writer_uid = 0;
  header.writer_start_ticks = 0;
  header.pid_namespace_inode = 0;
  header.created_ns = 1'700'000'000'000'000'000;
  header.heartbeat_ns = header.created_ns;
  std::memcpy(bytes.data(), &header, sizeof header);
  return bytes;
}

/// `bytes`, a format-4 segment, as format 3 laid it out: no note after the header.
std::string as_version_3(std::string bytes) {
  vramscope::format::SegmentHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  header.version = 3;
  header.note_bytes = 0;
  header.total_bytes -= sizeof(vramscope::format::NoteBlock);
  std::memcpy(bytes.data(), &header, sizeof header);
  bytes.erase(sizeof header, sizeof(vramscope::format::NoteBlock));
  return bytes;
}

/// Segment seeds for fuzz_agent_segment: two bytes of cut position, then the file.
void write_segment_seeds(const std::string& out_dir) {
  std::string pattern = std::filesystem::temp_directory_path().string() + "/vramscope-seeds-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw vramscope::Error("mkdtemp failed");
  const auto pid = static_cast<uint32_t>(::getpid());
  for (const int steps : {0, 3, 300}) {
    std::string bytes;
    {
      auto writer = vramscope::open_agent_segment_writer(pid, 2, pattern);
      vramscope::AllocatorSample a;
      a.rank = 0;
      a.world_size = 2;
      a.device_uuid = "GPU-1";
      a.allocated_bytes = 1000;
      a.reserved_bytes = 4096;
      a.updated_ns = 1'700'000'000'000'000'000;
      writer->publish(0, a);
      // Slot 1: a breakdown with every optional part (format 3's words and flags).
      vramscope::DriverBreakdown parts;
      parts.paired_ns = a.updated_ns - 1;
      parts.driver_bytes = 9000;
      parts.reserved_bytes = 4096;
      parts.private_pool_bytes = 512;
      parts.nccl_bytes = 100;
      parts.other_bytes = 300;
      parts.context_bytes = 4504;
      parts.first_context_bytes = 4400;
      parts.nccl_version = 22907;
      a.cuda_device = 1;
      a.breakdown = parts;
      writer->publish(1, a);
      for (int s = 1; s <= steps; ++s) {
        vramscope::StepRecord step;
        step.step = static_cast<uint64_t>(s);
        step.end_ns = a.updated_ns + s;
        step.category_bytes = vramscope::CategoryBytes{1, 2, 3, 4, 5, 6};
        writer->push_step(step);
      }
      vramscope::OomRecord oom;
      oom.requested_bytes = 1ULL << 40U;
      writer->push_oom(oom);
      std::ifstream in(writer->path(), std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    bytes = seed_header(bytes);
    const std::string cut(1, static_cast<char>(0x80));
    std::ofstream(out_dir + "/steps_" + std::to_string(steps) + ".seg",
                  std::ios::binary | std::ios::trunc)
        << cut << std::string(1, '\x00') << bytes;
    if (steps == 3) {
      // The same file as the previous release wrote it: format 3, no note.
      std::ofstream(out_dir + "/v3_steps_3.seg", std::ios::binary | std::ios::trunc)
          << cut << std::string(1, '\x00') << as_version_3(bytes);
    }
  }
  // A process that polls (format 4's note): both slots polled, the reason near its bound.
  {
    auto writer = vramscope::open_agent_segment_writer(pid, 2, pattern);
    vramscope::AllocatorSample a;
    a.device_uuid = "GPU-1";
    a.allocated_bytes = 1000;
    a.reserved_bytes = 4096;
    a.step = 7;
    a.step_peak_allocated_bytes = 2000;
    a.polling_only = true;
    a.updated_ns = 1'700'000'000'000'000'000;
    writer->publish(0, a);
    a.cuda_device = 1;
    writer->publish(1, a);
    writer->set_polling_reason(
        "compiling the agent for torch 2.11.0+cu130 failed (fatal error: crt/host_config.h: No "
        "such file or directory): pip install nvidia-cuda-crt of the same CUDA version, or set "
        "CUDA_HOME to a CUDA toolkit" +
        std::string(300, '.'));
    std::ifstream in(writer->path(), std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
    std::ofstream(out_dir + "/polling.seg", std::ios::binary | std::ios::trunc)
        << std::string(1, static_cast<char>(0x80)) << std::string(1, '\x00') << seed_header(bytes);
  }
  std::filesystem::remove_all(pattern);
}

/// A packed stream as fuzz_packed_chunk takes it: raw_bytes - 1 (u16), then a key chunk's zstd
/// data and a continuation's, each behind a u16 length, both expanding to raw_bytes.
void write_packed_seed(const std::string& path) {
  // The same encoded sample twice (the target gives every piece one raw size); the second piece
  // is then a few bytes that refer back into the first.
  vramscope::format::SampleEncoder encoder;
  std::string first;
  encoder.encode(seed_sample(0), 0, first);
  const std::string second = first;
  vramscope::format::PackedChunkCompressor compressor;
  std::string out;
  const auto raw_minus_one = static_cast<uint16_t>(first.size() - 1);
  out.append(reinterpret_cast<const char*>(&raw_minus_one), sizeof raw_minus_one);
  for (const std::string* raw : {static_cast<const std::string*>(&first), &second}) {
    std::string chunk;
    compressor.compress(*raw, 1, raw == &first, chunk);
    vramscope::format::PackedChunkHeader header;
    std::string why;
    vramscope::format::parse_packed_header(chunk, header, why);
    const auto length = static_cast<uint16_t>(header.stored_bytes);
    out.append(reinterpret_cast<const char*>(&length), sizeof length);
    out.append(chunk.substr(header.header_bytes));
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(out.data(), static_cast<std::streamsize>(out.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(
        stderr,
        "usage: %s RECORDING_SEED_DIR PAYLOAD_SEED_DIR [SEGMENT_SEED_DIR [PACKED_SEED_DIR]]\n",
        argv[0]);
    return vramscope::ExitUsage;
  }
  const std::string dir = argv[1];
  try {
    write_seed(dir + "/header_only.vsrec", 0, 0);
    write_seed(dir + "/one_chunk.vsrec", 1, 1);
    write_seed(dir + "/three_chunks.vsrec", 3, 2);
    write_seed(dir + "/truncated.vsrec", 2, 3);
    std::ifstream in(dir + "/truncated.vsrec", std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::ofstream(dir + "/truncated.vsrec", std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 5));
    write_payload_seed(std::string(argv[2]) + "/five_samples.bin");
    if (argc >= 4) write_segment_seeds(argv[3]);
    if (argc == 5) write_packed_seed(std::string(argv[4]) + "/two_chunks.bin");
  } catch (const vramscope::Error& error) {
    std::fprintf(stderr, "make_seeds: %s\n", error.what());
    return vramscope::ExitError;
  }
  return vramscope::ExitOk;
}
