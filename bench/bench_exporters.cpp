// bench/bench_exporters.cpp -- exporter costs: Prometheus render and loopback scrape latency with
// 8 GPUs x 64 processes (goal <= 5 ms), exporter CPU at 1 scrape/s, TensorBoard records/s.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "http_client.hpp"
#include "temp_dir.hpp"
#include "vramscope/exporters/http_server.hpp"
#include "vramscope/exporters/metrics_cache.hpp"
#include "vramscope/exporters/prometheus.hpp"
#include "vramscope/exporters/tensorboard.hpp"

using namespace vramscope;

namespace {

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void BM_RenderPrometheus_8x64(benchmark::State& state) {
  const SystemSample sample = test::make_large_sample(8, 64);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string body = exporters::render_prometheus(sample, {}, {});
    bytes = body.size();
    benchmark::DoNotOptimize(body.data());
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderPrometheus_8x64);

// ~200 sequential scrapes per iteration over loopback (connect, GET, read, close), as Prometheus
// does them; reports median and p99 latency. The refresh thread runs at 1 s as in production.
void BM_ScrapeLoopback_8x64(benchmark::State& state) {
  exporters::MetricsCache cache(
      [](SystemSample& out) {
        out = test::make_large_sample(8, 64);
        return true;
      },
      1000000000, {});
  cache.start();
  exporters::HttpServer server("127.0.0.1", 0, [&cache](const std::string&) {
    exporters::HttpResponse response;
    response.content_type = std::string(exporters::prometheus_content_type);
    response.body = *cache.body();
    return response;
  });
  std::thread serving([&server] { server.serve(); });
  std::vector<double> latencies_us;
  for (auto _ : state) {
    for (int i = 0; i < 200; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const std::string answer = test::http_get(server.port(), "/metrics");
      latencies_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
      benchmark::DoNotOptimize(answer.data());
    }
  }
  server.stop();
  serving.join();
  cache.stop();
  std::sort(latencies_us.begin(), latencies_us.end());
  state.counters["median_us"] = latencies_us[latencies_us.size() / 2];
  state.counters["p99_us"] = latencies_us[latencies_us.size() * 99 / 100];
}
BENCHMARK(BM_ScrapeLoopback_8x64)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// CPU of one exporter second at 1 scrape/s: one refresh (sample + render; the NVML calls themselves
// are measured by bench_nvml) plus one scrape served, measured with getrusage over 100 rounds.
void BM_ExporterCpuAt1Hz_8x64(benchmark::State& state) {
  exporters::MetricsCache cache(
      [](SystemSample& out) {
        out = test::make_large_sample(8, 64);
        return true;
      },
      3600LL * 1000000000LL, {});
  cache.refresh();
  exporters::HttpServer server("127.0.0.1", 0, [&cache](const std::string&) {
    exporters::HttpResponse response;
    response.body = *cache.body();
    return response;
  });
  std::thread serving([&server] { server.serve(); });
  double cpu_per_round_s = 0;
  for (auto _ : state) {
    const double before = cpu_seconds();
    for (int i = 0; i < 100; ++i) {
      cache.refresh();
      benchmark::DoNotOptimize(test::http_get(server.port(), "/metrics").size());
    }
    cpu_per_round_s =
        (cpu_seconds() - before) / 100;  // includes the client's share: an upper bound
  }
  server.stop();
  serving.join();
  state.counters["cpu_percent_at_1hz"] = cpu_per_round_s * 100.0;
}
BENCHMARK(BM_ExporterCpuAt1Hz_8x64)->Iterations(1)->Unit(benchmark::kMillisecond);

// TensorBoard events per second: one sample of 8 GPUs (one driver event) per iteration.
void BM_TensorBoardWriteSample(benchmark::State& state) {
  test::TempDir dir;
  exporters::TensorBoardWriter writer(dir.path());
  SystemSample sample = test::make_rich_sample();
  sample.steps.clear();
  sample.ooms.clear();
  for (auto _ : state) {
    writer.write(sample);
    sample.timestamp_ns += 1000000;
  }
  writer.close();
  // One driver event plus one per allocator.
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(1 + sample.allocators.size()));
}
BENCHMARK(BM_TensorBoardWriteSample);

}  // namespace

BENCHMARK_MAIN();
