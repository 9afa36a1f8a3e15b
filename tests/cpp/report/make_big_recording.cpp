// tests/cpp/report/make_big_recording.cpp -- writes a long synthetic training recording
//
//   make_big_recording OUT.vsrec SAMPLES [PROCESSES]
//
// One H200 with PROCESSES trainers (default 1), each with an agent: memory ramps and falls once
// per 50-sample "step" with a one-sample spike every 100 000 samples (peaks a downsampled view
// must keep), a step record per step and one OOM in the middle. For the report's size and time
// check (tests/e2e/report_chromium.sh) and docs/benchmarks.md; not a test by itself.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"

int main(int argc, char** argv) {
  using namespace vramscope;
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_big_recording OUT.vsrec SAMPLES [PROCESSES]\n");
    return 2;
  }
  const std::string path = argv[1];
  const uint64_t samples = std::strtoull(argv[2], nullptr, 10);
  const uint32_t processes =
      argc > 3 ? static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)) : 1;
  constexpr uint64_t mib = 1ULL << 20U;
  RecordingMetadata metadata;
  metadata.hostname = "synthetic";
  metadata.interval_ns = 100'000'000;
  metadata.command = "make_big_recording";
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.digest = std::make_shared<report::SummaryDigest>();  // as `vramscope record` does
  const auto writer = RecordingWriter::create(path, metadata, options);

  SystemSample s;
  s.timestamp_ns = 1'800'000'000'000'000'000;
  s.hostname = "synthetic";
  DeviceSample d;
  d.name = "NVIDIA H200";
  d.uuid = "GPU-5e000000-0000-0000-0000-000000000000";
  d.total_bytes = 143771 * mib;
  d.memory_v2 = true;
  d.processes_supported = true;
  for (uint32_t p = 0; p < processes; ++p) {
    ProcessSample ps;
    ps.pid = 1000 + p;
    ps.kinds = ProcessKindCompute;
    ps.visible = true;
    ps.command = "python train.py --rank " + std::to_string(p);
    d.processes.push_back(ps);
    AllocatorSample a;
    a.pid = ps.pid;
    a.rank = static_cast<int32_t>(p);
    a.world_size = static_cast<int32_t>(processes);
    a.device_uuid = d.uuid;
    s.allocators.push_back(a);
  }
  for (uint64_t i = 0; i < samples; ++i) {
    const uint64_t phase = i % 50;
    const bool spike = i % 100'000 == 77'777;
    uint64_t device_used = 0;
    s.steps.clear();
    s.ooms.clear();
    for (uint32_t p = 0; p < processes; ++p) {
      AllocatorSample& a = s.allocators[p];
      a.allocated_bytes = (2000 + phase * 100 + (spike ? 20000 : 0) + p * 10) * mib;
      a.reserved_bytes = std::max<uint64_t>(a.allocated_bytes, (7500 + (spike ? 20000 : 0)) * mib);
      a.peak_allocated_bytes = std::max(a.peak_allocated_bytes, a.allocated_bytes);
      a.peak_reserved_bytes = std::max(a.peak_reserved_bytes, a.reserved_bytes);
      a.step = i / 50;
      a.updated_ns = s.timestamp_ns;
      d.processes[p].used_bytes = a.reserved_bytes + 600 * mib;
      device_used += *d.processes[p].used_bytes;
      if (phase == 49) {
        StepRecord step;
        step.pid = a.pid;
        step.rank = a.rank;
        step.device_uuid = d.uuid;
        step.step = i / 50 + 1;
        step.end_ns = s.timestamp_ns;
        step.duration_ns = 5'000'000'000;
        step.peak_allocated_bytes = (6900 + p * 10 + (i / 50) % 7) * mib;
        step.peak_reserved_bytes = 7500 * mib;
        step.peak_requested_bytes = step.peak_allocated_bytes;
        step.category_bytes =
            CategoryBytes{1000 * mib, 1000 * mib, 2000 * mib,
                          2500 * mib, 300 * mib,  step.peak_allocated_bytes - 6800 * mib};
        s.steps.push_back(step);
      }
      if (i == samples / 2) {
        OomRecord oom;
        oom.pid = a.pid;
        oom.rank = a.rank;
        oom.device_uuid = d.uuid;
        oom.timestamp_ns = s.timestamp_ns;
        oom.requested_bytes = 4096 * mib;
        oom.device_total_bytes = *d.total_bytes;
        oom.allocated_bytes = a.allocated_bytes;
        oom.reserved_bytes = a.reserved_bytes;
        s.ooms.push_back(oom);
      }
    }
    d.used_bytes = device_used + 500 * mib;
    d.free_bytes = *d.total_bytes - *d.used_bytes;
    s.devices = {d};
    writer->append(s);
    s.timestamp_ns += 100'000'000;
  }
  writer->close();
  std::printf("%llu samples, %llu bytes\n", static_cast<unsigned long long>(writer->sample_count()),
              static_cast<unsigned long long>(writer->file_bytes()));
  return 0;
}
