// tests/cpp/format/recording_bytes.cpp -- steady-state bytes, writer and reader CPU per sample
//
//   recording_bytes [--chunk-per-sample] IN.vsrec OUT.vsrec SAMPLES [JITTER [PARTS]]
//
// Replays the samples of IN (over and over, timestamps moved on by the recording's span until
// SAMPLES have been written) into OUT the way `vramscope record` does: a chunk is closed before
// a sample that would come record_chunk_window_ns (1 s) or more after its first, so at 100 ms
// ten samples make a chunk. --chunk-per-sample closes one after every sample, as `record` did
// before it packed them (and as it still does at intervals of a second or more). With JITTER=1
// every process's used bytes and
// every agent's allocated bytes take a pseudo-random walk in 2 MiB steps, so a static input (an
// NVML test-double script) does not compress better than a real job would. With PARTS=0 every
// agent's driver breakdown is dropped (an allocator record then takes what format 3 stored), so
// two runs on one input measure the breakdown's cost. Prints bytes per
// sample after the header and the writer's CPU time per sample (append + flush, no fdatasync;
// with the summary digest of `vramscope record`), then reads OUT back and prints the reader's
// CPU time per sample (RecordingReader::next, what every command pays) and with `show`'s
// summary folded in (RecordingSummary::add), each the best of three passes.
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

/// CPU seconds per sample of reading `path` whole, the best of three passes; with `summarise`,
/// each sample is also folded into a RecordingSummary as `vramscope show` does.
double read_cpu_per_sample(const char* path, bool summarise, uint64_t expected) {
  using namespace vramscope;
  double best_s = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double start_s = cpu_seconds();
    const auto reader = RecordingReader::open(path);
    report::RecordingSummary summary;
    uint64_t count = 0;
    for (SystemSample s; reader->next(s); ++count) {
      if (summarise) summary.add(s);
    }
    const double took_s = cpu_seconds() - start_s;
    if (count != expected || reader->tail_state() != TailState::Clean) {
      std::fprintf(stderr, "%s: read %llu of %llu samples (%s)\n", path,
                   static_cast<unsigned long long>(count),
                   static_cast<unsigned long long>(expected), reader->tail_message().c_str());
      std::exit(1);
    }
    if (pass == 0 || took_s < best_s) best_s = took_s;
  }
  return best_s / static_cast<double>(expected);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vramscope;
  std::vector<std::string> args;
  bool chunk_per_sample = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--chunk-per-sample") {
      chunk_per_sample = true;
    } else {
      args.emplace_back(argv[i]);
    }
  }
  if (args.size() < 3) {
    std::fprintf(stderr,
                 "usage: recording_bytes [--chunk-per-sample] IN.vsrec OUT.vsrec SAMPLES "
                 "[JITTER [PARTS]]\n");
    return 2;
  }
  const uint64_t samples = std::strtoull(args[2].c_str(), nullptr, 10);
  const bool jitter = args.size() > 3 && args[3] == "1";
  const bool parts = args.size() <= 4 || args[4] != "0";
  const auto reader = RecordingReader::open(args[0]);
  std::vector<SystemSample> input;
  for (SystemSample s; reader->next(s);) input.push_back(s);
  if (input.empty()) {
    std::fprintf(stderr, "%s: no samples\n", args[0].c_str());
    return 1;
  }
  const int64_t interval_ns =
      reader->metadata().interval_ns > 0 ? reader->metadata().interval_ns : 100'000'000;
  const int64_t span_ns = input.back().timestamp_ns - input.front().timestamp_ns + interval_ns;

  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.digest = std::make_shared<report::SummaryDigest>();  // as `vramscope record` does
  const auto writer = RecordingWriter::create(args[1], reader->metadata(), options);
  const uint64_t header_bytes = writer->file_bytes();
  constexpr uint64_t step_bytes = 2ULL << 20U;
  uint64_t random = 88172645463325252ULL;
  auto next_random = [&random] {
    random ^= random << 13U;
    random ^= random >> 7U;
    random ^= random << 17U;
    return random;
  };
  // Sample i's timestamp in OUT.
  const auto timestamp_ns = [&](uint64_t i) {
    return input[i % input.size()].timestamp_ns + static_cast<int64_t>(i / input.size()) * span_ns;
  };
  double cpu_s = 0;
  int64_t chunk_first_ns = 0;
  bool chunk_open = false;
  uint64_t chunks = 0;
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
    if (!chunk_open) chunk_first_ns = s.timestamp_ns;
    chunk_open = true;
    // `record`'s rule: closed before a sample a window or more after the chunk's first.
    const bool close_chunk = chunk_per_sample || i + 1 == samples ||
                             timestamp_ns(i + 1) - chunk_first_ns >= record_chunk_window_ns;
    const double start_s = cpu_seconds();
    writer->append(s);
    if (close_chunk) writer->flush();
    cpu_s += cpu_seconds() - start_s;
    if (close_chunk) {
      ++chunks;
      chunk_open = false;
    }
  }
  writer->close();
  const uint64_t body_bytes = writer->file_bytes() - header_bytes;
  std::printf(
      "%llu samples in %llu chunks, %llu bytes after the header: %.1f bytes/sample, writer %.2f "
      "us/sample\n",
      static_cast<unsigned long long>(samples), static_cast<unsigned long long>(chunks),
      static_cast<unsigned long long>(body_bytes),
      static_cast<double>(body_bytes) / static_cast<double>(samples),
      cpu_s * 1e6 / static_cast<double>(samples));
  std::fflush(stdout);
  const double reader_s = read_cpu_per_sample(args[1].c_str(), false, samples);
  const double summary_s = read_cpu_per_sample(args[1].c_str(), true, samples);
  std::printf("reader %.3f us/sample, reader + show's summary %.3f us/sample\n", reader_s * 1e6,
              summary_s * 1e6);
  return 0;
}
