// bench/bench_nvml.cpp -- cost of sampling every GPU through the NVML backend
//
// Default: against the scripted NVML double (VRAMSCOPE_NVML_DOUBLE_PATH), which answers in
// nanoseconds, so the numbers are vramscope's own overhead per sample (1, 2, 4, 8 GPUs with 8
// processes each).
//
// On a GPU machine, VRAMSCOPE_BENCH_REAL_NVML=1 opens the real libnvidia-ml.so.1 instead and adds
// per-call benchmarks (GetMemoryInfo_v2 and the compute process list, per device).
//
// Both modes add BM_Sustained: sample all GPUs at VRAMSCOPE_BENCH_SUSTAINED_HZ (default 1000)
// for VRAMSCOPE_BENCH_SUSTAINED_SECONDS (default 2) on an absolute-deadline loop, and report
// the CPU used as a percentage of one core (getrusage), the achieved rate and missed deadlines.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "vramscope/backend.hpp"
#include "vramscope/backends/nvml_loader.hpp"
#include "vramscope/backends/open_sampler.hpp"

namespace {

using vramscope::BackendOpenResult;
using vramscope::DeviceSample;
using vramscope::NvmlOptions;

bool real_nvml() {
  const char* value = std::getenv("VRAMSCOPE_BENCH_REAL_NVML");
  return value != nullptr && std::string(value) == "1";
}

double env_number(const char* name, double fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? std::atof(value) : fallback;
}

/// Writes a double script with `gpus` H200-like GPUs of 8 processes each into a private temp
/// file (0600, from mkstemps); returns its path.
std::string write_script(int gpus) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path =
      std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/vramscope_bench_XXXXXX.json";
  const int fd = mkstemps(path.data(), 5);
  if (fd < 0) return {};
  close(fd);
  std::ofstream out(path);
  out << R"({"driver_version": "580.159.03", "devices": [)";
  for (int g = 0; g < gpus; ++g) {
    out << (g > 0 ? "," : "") << R"({"name": "NVIDIA H200", "uuid": "GPU-bench-)" << g
        << R"(", "pci": {"bus": )" << 16 + g
        << R"(}, "memory": {"total": 150754820096, "reserved": 553648128, "used": 80000000000},
              "bar1": {"total": 274877906944, "used": 5242880}, "mig_mode": 0, "processes": [)";
    for (int p = 0; p < 8; ++p) {
      out << (p > 0 ? "," : "") << R"({"pid": )" << 5100000 + g * 8 + p
          << R"(, "used": 1073741824})";
    }
    out << "]}";
  }
  out << "]}";
  return path;
}

/// Opens the backend on the double with `gpus` GPUs, or on the real NVML.
BackendOpenResult open_backend(int gpus) {
  if (real_nvml()) return vramscope::open_nvml_backend({});
  const std::string script = write_script(gpus);
  setenv("VRAMSCOPE_NVML_DOUBLE_SCRIPT", script.c_str(), 1);
  NvmlOptions options;
  options.library_path = VRAMSCOPE_NVML_DOUBLE_PATH;
  BackendOpenResult result = vramscope::open_nvml_backend(options);
  std::remove(script.c_str());  // the double read it at nvmlInit
  return result;
}

void BM_SampleDevices(benchmark::State& state) {
  BackendOpenResult opened = open_backend(static_cast<int>(state.range(0)));
  if (!opened.backend) {
    state.SkipWithError(opened.message.c_str());
    return;
  }
  std::vector<DeviceSample> samples;
  opened.backend->sample_devices(samples);  // first sample reads identity: not steady state
  for (auto _ : state) {
    opened.backend->sample_devices(samples);
    benchmark::DoNotOptimize(samples.data());
  }
  const auto devices = static_cast<int64_t>(opened.backend->device_count());
  state.SetItemsProcessed(state.iterations() * devices);
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["ns_per_device"] = benchmark::Counter(
      static_cast<double>(devices),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

void BM_Sustained(benchmark::State& state) {
  BackendOpenResult opened = open_backend(static_cast<int>(state.range(0)));
  if (!opened.backend) {
    state.SkipWithError(opened.message.c_str());
    return;
  }
  const double hz = env_number("VRAMSCOPE_BENCH_SUSTAINED_HZ", 1000);
  const double seconds = env_number("VRAMSCOPE_BENCH_SUSTAINED_SECONDS", 2);
  const auto period_ns = static_cast<int64_t>(1e9 / hz);
  const auto samples_wanted = static_cast<int64_t>(hz * seconds);
  std::vector<DeviceSample> samples;
  opened.backend->sample_devices(samples);
  for (auto _ : state) {
    int64_t missed = 0;
    int64_t max_late_ns = 0;
    const double cpu_start = cpu_seconds();
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const timespec start = deadline;
    for (int64_t i = 0; i < samples_wanted; ++i) {
      opened.backend->sample_devices(samples);
      deadline.tv_nsec += period_ns;
      while (deadline.tv_nsec >= 1'000'000'000) {
        deadline.tv_nsec -= 1'000'000'000;
        ++deadline.tv_sec;
      }
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      const int64_t late_ns =
          (now.tv_sec - deadline.tv_sec) * 1'000'000'000 + (now.tv_nsec - deadline.tv_nsec);
      if (late_ns > 0) {
        // Overran the period: count it and restart the schedule from now (no burst to catch up).
        ++missed;
        max_late_ns = std::max(max_late_ns, late_ns);
        deadline = now;
        continue;
      }
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr);
    }
    timespec end{};
    clock_gettime(CLOCK_MONOTONIC, &end);
    const double wall = static_cast<double>(end.tv_sec - start.tv_sec) +
                        static_cast<double>(end.tv_nsec - start.tv_nsec) * 1e-9;
    state.counters["cpu_percent_of_one_core"] = 100.0 * (cpu_seconds() - cpu_start) / wall;
    state.counters["achieved_hz"] = static_cast<double>(samples_wanted) / wall;
    state.counters["missed_deadlines"] = static_cast<double>(missed);
    state.counters["max_late_us"] = static_cast<double>(max_late_ns) / 1e3;
    state.counters["devices"] = static_cast<double>(opened.backend->device_count());
  }
}

/// Per-call costs on the real driver, device `range(0)`.
void BM_RealCall(benchmark::State& state, bool processes) {
  vramscope::nvml::LoadResult loaded = vramscope::nvml::load_library("");
  if (!loaded.library) {
    state.SkipWithError(loaded.message.c_str());
    return;
  }
  const vramscope::nvml::Api& api = loaded.library->api();
  if (api.init() != vramscope::nvml::Success) {
    state.SkipWithError("nvmlInit failed");
    return;
  }
  vramscope::nvml::Device device = nullptr;
  if (api.device_get_handle_by_index(static_cast<unsigned>(state.range(0)), &device) !=
      vramscope::nvml::Success) {
    api.shutdown();
    state.SkipWithError("no such device");
    return;
  }
  std::vector<vramscope::nvml::ProcessInfo> infos(256);
  for (auto _ : state) {
    if (processes) {
      unsigned count = static_cast<unsigned>(infos.size());
      benchmark::DoNotOptimize(api.compute_processes.fn(device, &count, infos.data()));
    } else {
      vramscope::nvml::MemoryV2 memory{};
      memory.version = vramscope::nvml::memory_v2_version;
      benchmark::DoNotOptimize(api.device_get_memory_info_v2(device, &memory));
    }
  }
  api.shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (real_nvml()) {
    benchmark::RegisterBenchmark("BM_SampleDevices/real", BM_SampleDevices)->Arg(0);
    benchmark::RegisterBenchmark("BM_Sustained/real", BM_Sustained)
        ->Arg(0)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    BackendOpenResult probe = vramscope::open_nvml_backend({});
    const unsigned count = probe.backend ? probe.backend->device_count() : 0;
    probe.backend.reset();
    for (unsigned d = 0; d < count; ++d) {
      benchmark::RegisterBenchmark("BM_RealMemoryInfoV2", BM_RealCall, false)->Arg(d);
      benchmark::RegisterBenchmark("BM_RealComputeProcesses", BM_RealCall, true)->Arg(d);
    }
  } else {
    benchmark::RegisterBenchmark("BM_SampleDevices", BM_SampleDevices)
        ->Arg(1)
        ->Arg(2)
        ->Arg(4)
        ->Arg(8);
    benchmark::RegisterBenchmark("BM_Sustained", BM_Sustained)
        ->Arg(8)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
