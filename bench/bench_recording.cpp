// bench/bench_recording.cpp -- recording writer and reader throughput, and bytes per sample
//
// Writer: one sample per chunk (the recorder's chunks at intervals of a second or more), for 1 and
// 8 GPUs with 8 processes each, with and without fdatasync per chunk. Reader: a file of such
// chunks. Counters: samples/s and bytes_per_sample (file growth per sample once strings are in the
// table).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "vramscope/format/recording.hpp"

namespace {

using vramscope::RecordingReader;
using vramscope::RecordingWriter;
using vramscope::RecordingWriterOptions;
using vramscope::SystemSample;

/// A realistic sample: `gpus` devices with 8 processes each and one agent per device; numbers
/// move with `tick` as a training job's would.
SystemSample make_sample(int gpus, uint64_t tick) {
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(tick) * 100'000'000;
  s.hostname = "node-07";
  s.driver_version = "570.86.15";
  for (int g = 0; g < gpus; ++g) {
    vramscope::DeviceSample d;
    d.index = static_cast<uint32_t>(g);
    d.name = "NVIDIA H100 80GB HBM3";
    d.uuid = "GPU-" + std::to_string(g) + "a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d";
    d.pci_bus_id = "00000000:" + std::to_string(18 + g) + ":00.0";
    d.total_bytes = 85'520'809'984ULL;
    d.reserved_bytes = 548'405'248ULL;
    d.used_bytes = 60'000'000'000ULL + (tick % 1000) * 2'097'152ULL;
    d.free_bytes = *d.total_bytes - *d.reserved_bytes - *d.used_bytes;
    d.memory_v2 = true;
    d.bar1_total_bytes = 1ULL << 37U;
    d.bar1_used_bytes = 50ULL << 20U;
    d.mig_enabled = false;
    d.processes_supported = true;
    for (int p = 0; p < 8; ++p) {
      vramscope::ProcessSample proc;
      proc.pid = static_cast<uint32_t>(20000 + g * 8 + p);
      proc.used_bytes = 7'000'000'000ULL + (tick % 100) * 2'097'152ULL;
      proc.kinds = vramscope::ProcessKindCompute;
      proc.visible = true;
      proc.user = "alice";
      proc.command = "python -m torch.distributed.run --nproc-per-node=8 train.py --rank " +
                     std::to_string(g * 8 + p);
      d.processes.push_back(proc);
    }
    s.devices.push_back(d);
    vramscope::AllocatorSample a;
    a.pid = static_cast<uint32_t>(20000 + g * 8);
    a.rank = g;
    a.world_size = gpus;
    a.cuda_device = 0;
    a.device_uuid = d.uuid;
    a.allocated_bytes = 50'000'000'000ULL + tick * 4096;
    a.reserved_bytes = 58'000'000'000ULL;
    a.requested_bytes = a.allocated_bytes - 100'000;
    a.active_bytes = a.allocated_bytes;
    a.peak_allocated_bytes = 55'000'000'000ULL;
    a.peak_reserved_bytes = 58'000'000'000ULL;
    a.step = tick / 10;
    a.event_count = tick * 500;
    a.updated_ns = s.timestamp_ns - 1'000'000;
    s.allocators.push_back(a);
  }
  return s;
}

std::string temp_path(const char* name) {
  const char* base = std::getenv("TMPDIR");
  return std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/vramscope-bench-" +
         std::to_string(::getpid()) + "-" + name;
}

void BM_WriteSamplePerChunk(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = state.range(1) != 0;
  const std::string path = temp_path("write.vsrec");
  auto writer = RecordingWriter::create(path, {}, options);
  // Warm the string table so bytes_per_sample is the steady state, not the first sample.
  writer->append(make_sample(gpus, 0));
  writer->flush();
  const uint64_t start_bytes = writer->file_bytes();
  uint64_t tick = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const SystemSample sample = make_sample(gpus, tick++);
    state.ResumeTiming();
    writer->append(sample);
    writer->flush();
  }
  state.counters["bytes_per_sample"] =
      static_cast<double>(writer->file_bytes() - start_bytes) / static_cast<double>(tick - 1);
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(tick - 1), benchmark::Counter::kIsRate);
  writer->close();
  ::unlink(path.c_str());
}
BENCHMARK(BM_WriteSamplePerChunk)
    ->ArgNames({"gpus", "fdatasync"})
    ->Args({1, 0})
    ->Args({8, 0})
    ->Args({1, 1})
    ->Args({8, 1})
    ->UseRealTime();

void BM_ReadRecording(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  constexpr uint64_t samples = 2000;
  const std::string path = temp_path("read.vsrec");
  {
    RecordingWriterOptions options;
    options.overwrite = true;
    options.sync_each_chunk = false;
    auto writer = RecordingWriter::create(path, {}, options);
    for (uint64_t tick = 0; tick < samples; ++tick) {
      writer->append(make_sample(gpus, tick));
      writer->flush();
    }
    writer->close();
  }
  SystemSample sample;
  for (auto _ : state) {
    auto reader = RecordingReader::open(path);
    uint64_t count = 0;
    while (reader->next(sample)) ++count;
    if (count != samples) state.SkipWithError("short read");
  }
  state.counters["samples_per_s"] = benchmark::Counter(
      static_cast<double>(samples * state.iterations()), benchmark::Counter::kIsRate);
  ::unlink(path.c_str());
}
BENCHMARK(BM_ReadRecording)->ArgNames({"gpus"})->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
