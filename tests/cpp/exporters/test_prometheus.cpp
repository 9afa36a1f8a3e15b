// tests/cpp/exporters/test_prometheus.cpp -- exposition golden, escaping, omission and uniqueness rules
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "fixtures.hpp"
#include "golden.hpp"
#include "vramscope/exporters/prometheus.hpp"

namespace vramscope::exporters {
namespace {

TEST(Prometheus, RichSampleMatchesGolden) {
  PrometheusStatus status;
  status.sample_duration_seconds = 0.00125;
  test::expect_golden("prometheus_rich.prom",
                      render_prometheus(test::make_rich_sample(), {}, status));
}

TEST(Prometheus, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help_text("x\\y\nz\"q"), "x\\\\y\\nz\"q");
  // The exposition format is UTF-8: a forged device uuid must not carry raw bytes to the scraper.
  EXPECT_EQ(escape_label_value("GPU-\xFF\"\xC3"), "GPU-\xEF\xBF\xBD\\\"\xEF\xBF\xBD");
  EXPECT_EQ(escape_help_text("h\x80"), "h\xEF\xBF\xBD");
}

TEST(Prometheus, UnsupportedValuesAreOmittedNeverZero) {
  SystemSample sample;
  DeviceSample device;
  device.index = 3;
  device.uuid = "GPU-x";
  device.used_bytes = 5;  // total, free, reserved unsupported
  sample.devices.push_back(device);
  const std::string body = render_prometheus(sample, {}, {});
  EXPECT_NE(body.find("vramscope_gpu_memory_used_bytes{gpu=\"3\",uuid=\"GPU-x\"} 5\n"),
            std::string::npos);
  EXPECT_EQ(body.find("vramscope_gpu_memory_total_bytes"), std::string::npos);
  EXPECT_EQ(body.find("vramscope_gpu_memory_free_bytes"), std::string::npos);
  // Processes not read: no count rather than a misleading 0.
  EXPECT_EQ(body.find("vramscope_gpu_processes"), std::string::npos);
  EXPECT_EQ(body.find("vramscope_scrape_duration_seconds"), std::string::npos);
}

TEST(Prometheus, DownBackendStillExposesAgents) {
  SystemSample sample = test::make_rich_sample();
  sample.devices.clear();
  PrometheusStatus status;
  status.up = false;
  const std::string body = render_prometheus(sample, {}, status);
  EXPECT_NE(body.find("vramscope_up 0\n"), std::string::npos);
  EXPECT_NE(body.find("vramscope_torch_allocated_bytes{uuid="), std::string::npos);
  EXPECT_EQ(body.find("vramscope_gpu_memory_used_bytes"), std::string::npos);
}

TEST(Prometheus, CategoryBytesOfTheLatestStepPerProcess) {
  SystemSample sample = test::make_rich_sample();
  // An older step of rank 0 with other numbers: the latest one (step 7) must win.
  StepRecord older = sample.steps[0];
  older.step = 6;
  older.category_bytes = CategoryBytes{1, 1, 1, 1, 1, 1};
  sample.steps.push_back(older);
  const std::string body = render_prometheus(sample, {}, {});
  const std::string labels =
      "gpu=\"0\",uuid=\"GPU-11111111-2222-3333-4444-555555555555\",hostname=\"node-01\",pid="
      "\"4242\","
      "cuda_device=\"0\",rank=\"0\"";
  EXPECT_NE(body.find("# TYPE vramscope_category_bytes gauge\n"), std::string::npos);
  EXPECT_NE(
      body.find("vramscope_category_bytes{" + labels + ",category=\"parameters\"} 3221225472\n"),
      std::string::npos)
      << body;
  EXPECT_NE(body.find("vramscope_category_bytes{" + labels +
                      ",category=\"optimizer_state\"} 6442450944\n"),
            std::string::npos);
  EXPECT_NE(body.find("vramscope_category_bytes{" + labels + ",category=\"other\"} 0\n"),
            std::string::npos)
      << "a tracked zero is a value";
  EXPECT_EQ(body.find("pid=\"4243\",cuda_device=\"0\",rank=\"1\",category="), std::string::npos)
      << "rank 1 tracks no categories: no series rather than zeros";
  std::size_t series = 0;
  for (std::size_t at = body.find("\nvramscope_category_bytes{"); at != std::string::npos;
       at = body.find("\nvramscope_category_bytes{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, memory_category_count);

  sample.steps.clear();
  EXPECT_EQ(render_prometheus(sample, {}, {}).find("vramscope_category_bytes"), std::string::npos)
      << "no family without a step that has categories";
}

TEST(Prometheus, PerProcessCanBeTurnedOff) {
  PrometheusOptions options;
  options.per_process = false;
  const std::string body = render_prometheus(test::make_rich_sample(), options, {});
  EXPECT_EQ(body.find("vramscope_process_gpu_memory_used_bytes"), std::string::npos);
  EXPECT_NE(body.find("vramscope_gpu_processes{"), std::string::npos);
}

// Every family has exactly one HELP and TYPE, before its samples, with samples contiguous; every
// series (name + labels) is unique, even with duplicate processes and agents in the input.
TEST(Prometheus, FamiliesContiguousAndSeriesUnique) {
  SystemSample sample = test::make_large_sample(8, 64);
  sample.devices[0].processes.push_back(sample.devices[0].processes[0]);
  AllocatorSample agent;
  agent.pid = 10000;
  agent.device_uuid = sample.devices[0].uuid;
  sample.allocators = {agent, agent};
  const std::string body = render_prometheus(sample, {}, {});
  ASSERT_EQ(body.back(), '\n');

  const std::regex sample_line(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([0-9.e+-]+|NaN|[+-]Inf)$)");
  std::set<std::string> closed_families;
  std::set<std::string> series;
  std::map<std::string, int> help_count;
  std::string current;
  for (const std::string& line : test::split_lines(body)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(++help_count[name], 1) << name;
      if (!current.empty()) closed_families.insert(current);
      current = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line.substr(7, current.size()), current);
      continue;
    }
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, sample_line)) << line;
    EXPECT_EQ(match[1].str(), current) << "sample outside its family: " << line;
    EXPECT_EQ(closed_families.count(match[1].str()), 0U);
    EXPECT_TRUE(series.insert(match[1].str() + match[2].str()).second)
        << "duplicate series " << line;
  }
  // 8 GPUs x 64 processes, the duplicate dropped.
  std::size_t process_series = 0;
  for (const std::string& s : series)
    process_series += s.rfind("vramscope_process_gpu_memory_used_bytes", 0) == 0;
  EXPECT_EQ(process_series, 8U * 64U);
}

}  // namespace
}  // namespace vramscope::exporters
