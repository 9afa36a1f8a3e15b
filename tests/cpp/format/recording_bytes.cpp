// tests/cpp/format/recording_bytes.cpp -- steady-state bytes and writer CPU per sample
//
//   recording_bytes IN.vsrec OUT.vsrec SAMPLES [JITTER [PARTS]]
//
// Replays the samples of IN (over and over, timestamps moved on by the recording's interval
// until SAMPLES have been written) into OUT the way `vramscope record` does at its default
// interval: one flush, so one chunk, per sample. With JITTER=1 every process's used bytes and
// every agent's allocated bytes take a pseudo-random walk in 2 MiB steps, so a static input (an
// NVML test-double script) does not compress better than a real job would. With PARTS=0 every
// agent's driver breakdown is dropped (an allocator record then takes what format 3 stored), so
// two runs on one input measure the breakdown's cost. Prints bytes per
// sample after the header and the writer's CPU time per sample (append + flush, no fdatasync;
// with the summary digest of `vramscope record`).
// For docs/benchmarks.md; not a test by itself.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"

namespace {

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vramscope;
  if (argc < 4) {
    std::fprintf(stderr, "usage: recording_bytes IN.vsrec OUT.vsrec SAMPLES [JITTER [PARTS]]\n");
    return 2;
  }
  const uint64_t samples = std::strtoull(argv[3], nullptr, 10);
  const bool jitter = argc > 4 && std::string(argv[4]) == "1";
  const bool parts = argc <= 5 || std::string(argv[5]) != "0";
  const auto reader = RecordingReader::open(argv[1]);
  std::vector<SystemSample> input;
  for (SystemSample s; reader->next(s);) input.push_back(s);
  if (input.empty()) {
    std::fprintf(stderr, "%s: no samples\n", argv[1]);
    return 1;
  }
  const int64_t interval_ns =
      reader->metadata().interval_ns > 0 ? reader->metadata().interval_ns : 100'000'000;
  const int64_t span_ns = input.back().timestamp_ns - input.front().timestamp_ns + interval_ns;

  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.digest = std::make_shared<report::SummaryDigest>();  // as `vramscope record` does
  const auto writer = RecordingWriter::create(argv[2], reader->metadata(), options);
  const uint64_t header_bytes = writer->file_bytes();
  constexpr uint64_t step_bytes = 2ULL << 20U;
  uint64_t random = 88172645463325252ULL;
  auto next_random = [&random] {
    random ^= random << 13U;
    random ^= random >> 7U;
    random ^= random << 17U;
    return random;
  };
  double cpu_s = 0;
  for (uint64_t i = 0; i < samples; ++i) {
    SystemSample s = input[i % input.size()];
    const int64_t shift_ns = static_cast<int64_t>(i / input.size()) * span_ns;
    s.timestamp_ns += shift_ns;
    for (AllocatorSample& a : s.allocators) {
      a.updated_ns += shift_ns;
      if (a.breakdown) a.breakdown->paired_ns += shift_ns;
      if (!parts) a.breakdown.reset();
      if (jitter) a.allocated_bytes += (next_random() % 5) * step_bytes;
    }
    for (StepRecord& r : s.steps) r.end_ns += shift_ns;
    for (OomRecord& r : s.ooms) r.timestamp_ns += shift_ns;
    if (jitter) {
      for (DeviceSample& d : s.devices) {
        for (ProcessSample& p : d.processes) {
          if (p.used_bytes) *p.used_bytes += (next_random() % 5) * step_bytes;
        }
        if (d.used_bytes) *d.used_bytes += (next_random() % 64) * step_bytes;
      }
    }
    const double start_s = cpu_seconds();
    writer->append(s);
    writer->flush();
    cpu_s += cpu_seconds() - start_s;
  }
  writer->close();
  const uint64_t body_bytes = writer->file_bytes() - header_bytes;
  std::printf(
      "%llu samples, %llu bytes after the header: %.1f bytes/sample, writer %.2f us/sample\n",
      static_cast<unsigned long long>(samples), static_cast<unsigned long long>(body_bytes),
      static_cast<double>(body_bytes) / static_cast<double>(samples),
      cpu_s * 1e6 / static_cast<double>(samples));
  return 0;
}
