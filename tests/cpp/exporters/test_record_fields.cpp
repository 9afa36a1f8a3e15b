// tests/cpp/exporters/test_record_fields.cpp -- every record field reaches every representation
//
// allocator_counters, step_byte_fields and oom_byte_fields (include/vramscope/sample.hpp) are the
// one list of each record's numbers. Each field gets a value of its own here and must come back
// out of the agent segment, the recording codec, the JSON document and the Prometheus exposition
// or CSV header; and each table must cover its struct, so a field added without its row fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "vramscope/agent_segment.hpp"
#include "vramscope/exporters/prometheus.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/report/csv_report.hpp"
#include "vramscope/report/json_report.hpp"
#include "vramscope/sample.hpp"

namespace vramscope {
namespace {

/// The value counter `i` carries: distinct per counter and far from 0 and from each other.
uint64_t value_of(std::size_t i) { return (uint64_t{i} + 1) * 1'000'003; }

AllocatorSample numbered_sample() {
  AllocatorSample a;
  a.pid = static_cast<uint32_t>(::getpid());
  a.rank = 0;
  a.world_size = 1;
  a.cuda_device = 0;
  a.device_uuid = "GPU-counters";
  a.updated_ns = 1'700'000'000'000'000'000;
  for (std::size_t i = 0; i < allocator_counter_count; ++i)
    a.*allocator_counters[i].member = value_of(i);
  return a;
}

void expect_counters(const AllocatorSample& got, const char* where) {
  for (std::size_t i = 0; i < allocator_counter_count; ++i) {
    EXPECT_EQ(got.*allocator_counters[i].member, value_of(i))
        << where << " lost " << allocator_counters[i].name;
  }
}

template <typename Field>
std::ptrdiff_t offset_of(Field AllocatorSample::*member) {
  static const AllocatorSample probe;
  return reinterpret_cast<const char*>(&(probe.*member)) - reinterpret_cast<const char*>(&probe);
}

TEST(AllocatorCounters, TheTableCoversTheStructOnceInOrder) {
  // The counters are one run of uint64_t fields from allocated_bytes to dropped_event_count:
  // a field added inside that run without a row leaves a gap, a row out of order breaks the run.
  for (std::size_t i = 0; i < allocator_counter_count; ++i) {
    EXPECT_EQ(offset_of(allocator_counters[i].member),
              offset_of(&AllocatorSample::allocated_bytes) +
                  static_cast<std::ptrdiff_t>(i * sizeof(uint64_t)))
        << allocator_counters[i].name;
  }
  EXPECT_EQ(offset_of(&AllocatorSample::dropped_event_count) +
                static_cast<std::ptrdiff_t>(sizeof(uint64_t)),
            offset_of(&AllocatorSample::polling_only))
      << "a uint64_t field after dropped_event_count has no row in allocator_counters";
  std::set<std::string_view> names;
  std::set<std::string_view> metrics;
  for (const AllocatorCounter& counter : allocator_counters) {
    EXPECT_TRUE(names.insert(counter.name).second) << counter.name;
    EXPECT_TRUE(metrics.insert(counter.metric).second) << counter.metric;
    EXPECT_EQ(counter.metric.substr(0, 16), "vramscope_torch_") << counter.metric;
    EXPECT_FALSE(counter.help.empty()) << counter.name;
  }
}

TEST(AllocatorCounters, EveryCounterCrossesTheAgentSegment) {
  test::TempDir dir;
  auto writer = open_agent_segment_writer(static_cast<uint32_t>(::getpid()), 1, dir.path());
  writer->publish(0, numbered_sample());
  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  ASSERT_EQ(allocators.size(), 1U);
  expect_counters(allocators[0], "the agent segment");
}

TEST(AllocatorCounters, EveryCounterCrossesTheRecordingCodec) {
  SystemSample sample;
  sample.timestamp_ns = 1'700'000'000'000'000'000;
  sample.allocators.push_back(numbered_sample());
  format::SampleEncoder encoder;
  std::string bytes;
  ASSERT_TRUE(encoder.encode(sample, sample.timestamp_ns, bytes));
  format::SampleDecoder decoder;
  std::string_view rest = bytes;
  SystemSample decoded;
  decoder.decode(rest, sample.timestamp_ns, decoded);
  ASSERT_EQ(decoded.allocators.size(), 1U);
  expect_counters(decoded.allocators[0], "the recording codec");
}

TEST(AllocatorCounters, EveryCounterIsInTheJsonAndThePrometheusOutput) {
  SystemSample sample;
  sample.timestamp_ns = 1'700'000'000'000'000'000;
  sample.hostname = "host";
  sample.allocators.push_back(numbered_sample());
  const std::string json = report::format_sample_json(sample, /*pretty=*/false);
  const std::string prometheus = exporters::render_prometheus(sample, {}, {});
  for (std::size_t i = 0; i < allocator_counter_count; ++i) {
    const AllocatorCounter& counter = allocator_counters[i];
    const std::string value = std::to_string(value_of(i));
    EXPECT_NE(json.find("\"" + std::string(counter.name) + "\":" + value), std::string::npos)
        << counter.name << " is not in the JSON allocator object";
    const std::string type = counter.unit == CounterUnit::Total ? "counter" : "gauge";
    EXPECT_NE(prometheus.find("# TYPE " + std::string(counter.metric) + " " + type + "\n"),
              std::string::npos)
        << counter.metric;
    EXPECT_NE(prometheus.find("\n" + std::string(counter.metric) + "{"), std::string::npos)
        << counter.metric;
    EXPECT_NE(prometheus.find("} " + value + "\n"), std::string::npos) << counter.metric;
  }
}

template <typename Record, std::size_t count>
void number(const std::array<RecordField<Record>, count>& fields, Record& record) {
  for (std::size_t i = 0; i < count; ++i) record.*fields[i].member = value_of(i);
}

template <typename Record, std::size_t count>
void expect_numbered(const std::array<RecordField<Record>, count>& fields, const Record& record,
                     const char* where) {
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(record.*fields[i].member, value_of(i)) << where << " lost " << fields[i].name;
  }
}

/// Are the table's members one run of uint64_t fields, in order, from the first one?
template <typename Record, std::size_t count>
void expect_one_run(const std::array<RecordField<Record>, count>& fields) {
  static const Record probe{};
  const auto offset = [](uint64_t Record::*member) {
    return reinterpret_cast<const char*>(&(probe.*member)) - reinterpret_cast<const char*>(&probe);
  };
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(offset(fields[i].member),
              offset(fields[0].member) + static_cast<std::ptrdiff_t>(i * sizeof(uint64_t)))
        << fields[i].name;
  }
}

SystemSample step_and_oom_sample() {
  SystemSample sample;
  sample.timestamp_ns = 1'700'000'000'000'000'000;
  StepRecord step;
  step.pid = static_cast<uint32_t>(::getpid());
  step.step = 7;
  step.end_ns = sample.timestamp_ns;
  step.duration_ns = 1'000'000;
  step.device_uuid = "GPU-counters";
  number(step_byte_fields, step);
  sample.steps.push_back(step);
  OomRecord oom;
  oom.pid = step.pid;
  oom.timestamp_ns = sample.timestamp_ns;
  oom.device_uuid = "GPU-counters";
  number(oom_byte_fields, oom);
  sample.ooms.push_back(oom);
  return sample;
}

TEST(RecordFields, StepAndOomTablesCoverTheirStructs) {
  expect_one_run(step_byte_fields);
  expect_one_run(oom_byte_fields);
  // The run ends where the next field starts.
  static const StepRecord step{};
  EXPECT_EQ(reinterpret_cast<const char*>(&step.reserved_bytes) + sizeof(uint64_t),
            reinterpret_cast<const char*>(&step.category_bytes))
      << "a field after StepRecord::reserved_bytes has no row in step_byte_fields";
  static const OomRecord oom{};
  EXPECT_EQ(reinterpret_cast<const char*>(&oom.reserved_bytes) + sizeof(uint64_t),
            reinterpret_cast<const char*>(&oom) + sizeof(OomRecord))
      << "a field after OomRecord::reserved_bytes has no row in oom_byte_fields";
}

TEST(RecordFields, StepAndOomFieldsCrossTheSegmentAndTheCodec) {
  const SystemSample sample = step_and_oom_sample();
  test::TempDir dir;
  auto writer = open_agent_segment_writer(static_cast<uint32_t>(::getpid()), 1, dir.path());
  writer->push_step(sample.steps[0]);
  writer->push_oom(sample.ooms[0]);
  auto reader = open_agent_segment_reader(dir.path());
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  ASSERT_EQ(steps.size(), 1U);
  ASSERT_EQ(ooms.size(), 1U);
  expect_numbered(step_byte_fields, steps[0], "the segment's step ring");
  expect_numbered(oom_byte_fields, ooms[0], "the segment's OOM ring");

  format::SampleEncoder encoder;
  std::string bytes;
  ASSERT_TRUE(encoder.encode(sample, sample.timestamp_ns, bytes));
  format::SampleDecoder decoder;
  std::string_view rest = bytes;
  SystemSample decoded;
  decoder.decode(rest, sample.timestamp_ns, decoded);
  ASSERT_EQ(decoded.steps.size(), 1U);
  ASSERT_EQ(decoded.ooms.size(), 1U);
  expect_numbered(step_byte_fields, decoded.steps[0], "the recording codec");
  expect_numbered(oom_byte_fields, decoded.ooms[0], "the recording codec");
}

TEST(RecordFields, StepAndOomFieldsAreInTheJsonAndTheCsv) {
  const SystemSample sample = step_and_oom_sample();
  const std::string json = report::format_sample_json(sample, /*pretty=*/false);
  const std::string csv = report::csv_header(report::CsvRows::Steps);
  const std::string csv_row = report::csv_rows(sample, report::CsvRows::Steps);
  for (std::size_t i = 0; i < step_byte_fields.size(); ++i) {
    const std::string name(step_byte_fields[i].name);
    const std::string value = std::to_string(value_of(i));
    EXPECT_NE(json.find("\"" + name + "\":" + value), std::string::npos) << name;
    EXPECT_NE(csv.find("," + name + ","), std::string::npos) << name;
    EXPECT_NE(csv_row.find("," + value + ","), std::string::npos) << name;
  }
  for (std::size_t i = 0; i < oom_byte_fields.size(); ++i) {
    const std::string name(oom_byte_fields[i].name);
    EXPECT_NE(json.find("\"" + name + "\":" + std::to_string(value_of(i))), std::string::npos)
        << name;
  }
}

}  // namespace
}  // namespace vramscope
