// cli/cmd_exporter.cpp -- `vramscope exporter`: Prometheus /metrics over HTTP
//
// One background thread samples NVML and the agents every --interval and renders the body;
// scrapes only copy that string (see vramscope/exporters/metrics_cache.hpp), so scrape cost is
// bounded and concurrent scrapers never multiply driver calls. SIGINT/SIGTERM are taken with
// sigwait() on the main thread (blocked everywhere else), which stops the server cleanly.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "commands.hpp"
#include "output.hpp"
#include "pacing.hpp"
#include "validators.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/exporters/http_server.hpp"
#include "vramscope/exporters/metrics_cache.hpp"
#include "vramscope/sampler.hpp"
#include "vramscope/status.hpp"
#include "vramscope/units.hpp"
#include "vramscope/version.hpp"

namespace vramscope::cli {

namespace {

/// Default port: outside the 9100-9999 exporter range, which the Prometheus wiki lists as fully
/// allocated (dcgm-exporter is 9400); 8726 spells VRAM on a phone keypad and is clear of
/// TensorBoard 6006, Ray 8265, Jupyter 8888 and torch.distributed 29500. See docs/prometheus.md.
constexpr int default_port = 8726;
constexpr int64_t minimum_exporter_interval_ns = 100'000'000;

struct ListenAddress {
  std::string host;
  int port = 0;
};

/// Parses "HOST:PORT", "[v6]:PORT" or a bare "PORT" (loopback). Port 0 picks a free port.
ListenAddress parse_listen(const std::string& text) {
  ListenAddress address{"127.0.0.1", default_port};
  std::string port_text = text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos)
      throw Error("--listen: expected [IPv6]:PORT, got '" + text + "'", ExitUsage);
    address.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    address.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (address.host.empty()) {
      throw Error(
          "--listen: give the address explicitly (127.0.0.1:PORT, or 0.0.0.0:PORT for every "
          "interface)",
          ExitUsage);
    }
  }
  // Digits only: std::stoi read " 80" and "+0" as ports.
  const std::optional<uint64_t> port = parse_strict_decimal(port_text, 65535);
  if (!port) {
    throw Error("--listen: bad port '" + port_text + "' in '" + text +
                    "' (expected HOST:PORT, port 0-65535)",
                ExitUsage);
  }
  address.port = static_cast<int>(*port);
  // A numeric address must be one (999.1.1.1 is not): said now, before the driver is opened,
  // instead of as a bind failure after it. Names (localhost) are left to the bind.
  const bool looks_numeric = address.host.find_first_not_of("0123456789.") == std::string::npos ||
                             address.host.find(':') != std::string::npos;
  unsigned char parsed[sizeof(struct in6_addr)];
  const int family = address.host.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  if (looks_numeric && inet_pton(family, address.host.c_str(), parsed) != 1) {
    throw Error("--listen: '" + address.host + "' is not an " +
                    (family == AF_INET ? "IPv4" : "IPv6") +
                    " address (expected HOST:PORT, e.g. 127.0.0.1:8726)",
                ExitUsage);
  }
  return address;
}

const char* landing_page =
    "<!DOCTYPE html>\n<html><head><title>vramscope exporter</title></head><body>\n"
    "<h1>vramscope exporter</h1>\n<p>GPU memory per device, per process and per PyTorch "
    "allocator.</p>\n"
    "<p><a href=\"/metrics\">Metrics</a></p>\n</body></html>\n";

struct ExporterOptions {
  std::string listen = "127.0.0.1:" + std::to_string(default_port);
  std::string interval = "1s";
  bool no_per_process = false;
  bool no_agents = false;
};

/// `vramscope exporter`: serves the cache until SIGINT or SIGTERM.
int run_exporter(const ExporterOptions& options) {
  const ListenAddress address = parse_listen(options.listen);
  const auto interval_ns = parse_duration_ns(options.interval);
  if (!interval_ns || *interval_ns < minimum_exporter_interval_ns ||
      *interval_ns > maximum_interval_ns) {
    throw Error("--interval: expected a duration of 100ms to 24h (e.g. 1s, 500ms), got '" +
                    options.interval + "'",
                ExitUsage);
  }

  SamplerOptions sampler_options;
  sampler_options.read_agents = !options.no_agents;
  sampler_options.on_warning = warn_stderr;
  std::shared_ptr<Sampler> sampler =
      open_sampler(sampler_options);  // throws: exit 3 without a driver

  // Block the stop signals before any thread starts: every thread inherits the mask, so only
  // sigwait() below ever sees them. SIGPIPE is ignored: a scraper hanging up is not our
  // death.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  exporters::PrometheusOptions render_options;
  render_options.per_process = !options.no_per_process;
  exporters::MetricsCache cache(
      [sampler](SystemSample& out) {
        sampler->sample(out);
        return true;
      },
      *interval_ns, render_options);

  const std::string metrics_type(exporters::prometheus_content_type);
  exporters::HttpServer server(address.host, address.port,
                               [&cache, &metrics_type](const std::string& path) {
                                 exporters::HttpResponse response;
                                 if (path == "/metrics") {
                                   response.content_type = metrics_type;
                                   response.body = *cache.body();
                                 } else if (path == "/") {
                                   response.content_type = "text/html; charset=utf-8";
                                   response.body = landing_page;
                                 } else {
                                   response.status = 404;
                                   response.body = "not found: try /metrics\n";
                                 }
                                 return response;
                               });

  cache.start();
  std::thread serving([&server] { server.serve(); });
  const std::string shown_host =
      address.host.find(':') != std::string::npos ? "[" + address.host + "]" : address.host;
  std::fprintf(stderr,
               "vramscope %s exporter: serving http://%s:%d/metrics (sampling every %s; "
               "Ctrl-C stops)\n",
               version, shown_host.c_str(), server.port(), options.interval.c_str());
  std::fflush(stderr);

  int received = 0;
  sigwait(&stop_signals, &received);
  server.stop();
  serving.join();
  cache.stop();
  std::fprintf(stderr, "vramscope exporter: stopped (%s)\n",
               received == SIGINT ? "SIGINT" : "SIGTERM");
  return ExitOk;
}

}  // namespace

Command add_exporter_command(CLI::App& app) {
  auto* sub =
      app.add_subcommand("exporter", "Serve Prometheus metrics (text format 0.0.4) on /metrics.");
  sub->footer(
      "The driver and agents are sampled once per --interval by one background thread; every "
      "scrape\n"
      "is served from that cache, so any number of scrapers cost no extra NVML calls.\n"
      "Binds loopback by default; use --listen 0.0.0.0:8726 to expose it to a Prometheus "
      "elsewhere.\n"
      "Families, labels and the dcgm-exporter mapping: docs/prometheus.md.\n"
      "Example scrape config:  - job_name: vramscope\n"
      "                          static_configs: [{targets: ['gpu-host:8726']}]");
  auto options = std::make_shared<ExporterOptions>();
  sub->add_option("--listen", options->listen,
                  "HOST:PORT to bind (port 0 picks a free one and prints it)")
      ->capture_default_str();
  sub->add_option("--interval", options->interval,
                  "How often to sample the driver and agents (100ms to 24h; e.g. 500ms, 2s)")
      ->capture_default_str();
  sub->add_flag("--no-per-process", options->no_per_process,
                "Leave out vramscope_process_gpu_memory_used_bytes (per-pid series churn as jobs "
                "come and go)");
  sub->add_flag("--no-agents", options->no_agents,
                "Driver view only: do not read PyTorch agents' segments");

  return Command{sub, [options] { return run_exporter(*options); }};
}

}  // namespace vramscope::cli
