// tests/cpp/exporters/exporters_fixture.cpp -- drives the exporters with hand-built samples for the
// Python tests that check them with the real consumers (TensorBoard's reader, promtool,
// Prometheus).
//
//   exporters_fixture tensorboard DIR   writes an event file of known samples into DIR, prints its
//   path exporters_fixture serve             serves /metrics of 8 GPUs x 64 processes plus the rich
//   host's
//                                       agents and steps on 127.0.0.1, a free port; prints "port
//                                       N"; SIGTERM/SIGINT stop it
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "fixtures.hpp"
#include "vramscope/exporters/http_server.hpp"
#include "vramscope/exporters/metrics_cache.hpp"
#include "vramscope/exporters/tensorboard.hpp"

using namespace vramscope;

namespace {

int write_tensorboard(const std::string& dir) {
  exporters::TensorBoardWriter writer(dir);
  SystemSample sample = test::make_rich_sample();
  for (int i = 0; i < 5; ++i) {
    // Driver used grows by 1 GiB per sample; agents advance one step per sample.
    writer.write(sample);
    sample.timestamp_ns += 1000000000;
    *sample.devices[0].used_bytes += test::gib;
    for (auto& allocator : sample.allocators) {
      allocator.step += 1;
      allocator.allocated_bytes += test::mib;
    }
    for (auto& step : sample.steps) step.step += 1;
    sample.ooms.clear();
  }
  writer.add_scalar("custom/answer", 42.0, 3, 1700000100.0);
  writer.close();
  std::printf("%s\n", writer.path().c_str());
  return 0;
}

int serve() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  exporters::MetricsCache cache(
      [](SystemSample& out) {
        out = test::make_large_sample(8, 64);
        const SystemSample rich = test::make_rich_sample();
        out.allocators = rich.allocators;
        out.allocators[0].device_uuid = out.devices[0].uuid;
        out.allocators[1].device_uuid = out.devices[1].uuid;
        // Rank 0's step carries categories (vramscope_category_bytes), rank 1's does not.
        out.steps = rich.steps;
        out.steps[0].device_uuid = out.devices[0].uuid;
        out.steps[1].device_uuid = out.devices[1].uuid;
        return true;
      },
      1000000000, {});
  cache.start();
  exporters::HttpServer server("127.0.0.1", 0, [&cache](const std::string& path) {
    exporters::HttpResponse response;
    if (path != "/metrics") {
      response.status = 404;
      return response;
    }
    response.content_type = std::string(exporters::prometheus_content_type);
    response.body = *cache.body();
    return response;
  });
  std::thread serving([&server] { server.serve(); });
  std::printf("port %d\n", server.port());
  std::fflush(stdout);
  int received = 0;
  sigwait(&stop, &received);
  server.stop();
  serving.join();
  cache.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "tensorboard") == 0) return write_tensorboard(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "serve") == 0) return serve();
  std::fprintf(stderr, "usage: exporters_fixture tensorboard DIR | exporters_fixture serve\n");
  return 2;
}
