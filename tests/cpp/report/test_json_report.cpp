// tests/cpp/report/test_json_report.cpp -- JSON schema: key order, integer bytes, nulls for unsupported
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/fixtures.hpp"
#include "golden.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/report/json_report.hpp"

namespace vramscope::report {
namespace {

using nlohmann::json;
using testing::make_two_gpu_sample;
using testing::mib;

/// Every key ending in `_bytes` anywhere in `node` holds an unsigned integer or null.
void expect_bytes_are_integers(const json& node, const std::string& where) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key.size() > 6 && key.ends_with("_bytes")) {
        EXPECT_TRUE(value.is_number_unsigned() || value.is_null()) << where << "." << key;
      }
      expect_bytes_are_integers(value, where + "." + key);
    }
  } else if (node.is_array()) {
    for (const json& item : node) expect_bytes_are_integers(item, where + "[]");
  }
}

TEST(Json, PrettyDocumentMatchesGolden) {
  testing::expect_golden("report/two_gpus.json",
                         format_sample_json(make_two_gpu_sample(), true) + "\n");
}

TEST(Json, InvalidUtf8FromOtherProcessesIsReplacedNotFatal) {
  // Any local user can start a GPU process whose argv holds any byte.
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].command = "python train.py --tag \xFF\xC3(";
  s.devices[0].processes[0].user = std::string("\x80") + "bob";
  s.allocators[0].device_uuid += "\xE2\x82";
  for (const bool pretty : {false, true}) {
    std::string text;
    ASSERT_NO_THROW(text = format_sample_json(s, pretty));
    const json doc = json::parse(text);  // throws on invalid UTF-8
    const json& row = doc["devices"][0]["processes"][0];
    EXPECT_EQ(row["command"], "python train.py --tag \xEF\xBF\xBD\xEF\xBF\xBD(");
    EXPECT_EQ(row["user"], std::string("\xEF\xBF\xBD") + "bob");
  }
}

TEST(Json, CompactFormIsOneLineAndSameDocument) {
  const SystemSample s = make_two_gpu_sample();
  const std::string line = format_sample_json(s, false);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(json::parse(line), json::parse(format_sample_json(s, true)));
}

TEST(Json, TypesAndValues) {
  const json doc = json::parse(format_sample_json(make_two_gpu_sample(), false));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_TRUE(doc["timestamp_ns"].is_number_integer());
  EXPECT_EQ(doc["hostname"], "node-7");
  ASSERT_EQ(doc["devices"].size(), 2U);
  const json& gpu0 = doc["devices"][0];
  EXPECT_EQ(gpu0["used_bytes"].get<uint64_t>(), 40960 * mib + 12345);
  EXPECT_EQ(gpu0["memory_info_version"], 2);
  EXPECT_EQ(gpu0["error"], nullptr);
  EXPECT_EQ(gpu0["lost"], false);
  const json& trainer = gpu0["processes"][0];
  EXPECT_EQ(trainer["pid"], 4021);
  EXPECT_EQ(trainer["type"], "C");
  EXPECT_EQ(trainer["user"], "alice");
  EXPECT_EQ(trainer["torch"]["allocated_bytes"].get<uint64_t>(), 20480 * mib);
  EXPECT_EQ(trainer["torch"]["non_pytorch_bytes"].get<uint64_t>(), (30000 - 24576) * mib);
  EXPECT_EQ(gpu0["processes"][1]["torch"], nullptr);
  ASSERT_EQ(doc["allocators"].size(), 1U);
  EXPECT_EQ(doc["allocators"][0]["joined_device"], true);
  expect_bytes_are_integers(doc, "$");
}

TEST(Json, UnsupportedIsNullNeverZero) {
  SystemSample s = make_two_gpu_sample();
  DeviceSample& d = s.devices[1];
  d.reserved_bytes.reset();
  d.bar1_total_bytes.reset();
  d.mig_enabled.reset();
  d.memory_v2 = false;
  s.devices[0].processes[1].used_bytes.reset();
  s.devices[0].processes[1].visible = false;
  s.devices[0].processes[1].user.clear();
  s.devices[0].processes[1].command.clear();
  s.driver_version.clear();
  const json doc = json::parse(format_sample_json(s, false));
  EXPECT_EQ(doc["driver_version"], nullptr);
  EXPECT_EQ(doc["devices"][1]["reserved_bytes"], nullptr);
  EXPECT_EQ(doc["devices"][1]["bar1_total_bytes"], nullptr);
  EXPECT_EQ(doc["devices"][1]["mig_enabled"], nullptr);
  EXPECT_EQ(doc["devices"][1]["memory_info_version"], 1);
  const json& hidden = doc["devices"][0]["processes"][1];
  EXPECT_EQ(hidden["used_bytes"], nullptr);
  EXPECT_EQ(hidden["user"], nullptr);
  EXPECT_EQ(hidden["command"], nullptr);
  EXPECT_EQ(hidden["visible"], false);
  expect_bytes_are_integers(doc, "$");
}

TEST(Json, InconsistentJoinIsReportedNotHidden) {
  SystemSample s = make_two_gpu_sample();
  s.allocators[0].breakdown.reset();  // no settled pairing: this frame's arithmetic alone
  s.allocators[0].reserved_bytes = 40000 * mib;  // more than the driver's 30000 MiB
  const json torch =
      json::parse(format_sample_json(s, false))["devices"][0]["processes"][0]["torch"];
  EXPECT_EQ(torch["non_pytorch_bytes"], nullptr);
  ASSERT_EQ(torch["issues"].size(), 1U);
  EXPECT_EQ(torch["issues"][0], "torch reserved > driver used");
}

// `export --jsonl` streams each line (write_sample_json) instead of building a document of the
// whole sample (1.15 GiB for 9 GPUs x 65,536 processes): the line is the document's compact
// text, byte for byte, for samples of every shape.
TEST(Json, TheStreamedLineIsTheDocument) {
  std::vector<SystemSample> samples = {make_two_gpu_sample(), SystemSample{}};
  for (uint64_t seed = 0; seed < 12; ++seed) samples.push_back(testing::make_sample(seed, 3, 5));
  SystemSample unmatched = make_two_gpu_sample();
  unmatched.allocators[0].device_uuid = "GPU-of-no-sample";  // an agent on no listed GPU
  unmatched.allocators.push_back(make_two_gpu_sample().allocators[0]);
  unmatched.devices[0].processes[0].command = "bad \xff utf-8";
  samples.push_back(unmatched);
  for (const SystemSample& s : samples) {
    const std::string line = format_sample_json(s, false);
    EXPECT_EQ(line, nlohmann::ordered_json::parse(format_sample_json(s, true)).dump());
    std::string pieces;
    std::size_t count = 0;
    write_sample_json(s, [&](std::string_view piece) {
      pieces += piece;
      ++count;
    });
    EXPECT_EQ(pieces, line);
    EXPECT_GE(count, 1U);
  }
}

// Through breakdown_fields: every field under its name, in the table's order, with the sum before
// the excess and what the version says of NCCL after it (docs/json-schema.md).
TEST(Json, DriverPartsCarryEveryBreakdownFieldInOrder) {
  const DriverBreakdown b = testing::distinct_breakdown("nccl_bytes");
  const nlohmann::ordered_json parts = driver_parts_json(b);
  std::vector<std::string> keys;
  for (const auto& [key, value] : parts.items()) keys.push_back(key);
  std::vector<std::string> want;
  for (const BreakdownField& field : breakdown_fields) {
    if (field.name == "excess_bytes") want.emplace_back("non_pytorch_bytes");
    want.emplace_back(field.name);
    if (field.name == "nccl_version") want.emplace_back("nccl");
  }
  EXPECT_EQ(keys, want);
  EXPECT_EQ(parts["paired_ns"], b.paired_ns);
  EXPECT_EQ(parts["driver_bytes"], b.driver_bytes);
  EXPECT_EQ(parts["first_context_bytes"], *b.first_context_bytes);
  EXPECT_EQ(parts["nccl_bytes"], nullptr) << "unmeasured is null, not 0";
  EXPECT_EQ(parts["non_pytorch_bytes"], b.non_pytorch_bytes());
  EXPECT_EQ(parts["nccl_version"], nccl_version_text(b.nccl_version));
  EXPECT_EQ(parts["unsettled_count"], b.unsettled_count);
  EXPECT_EQ(driver_parts_json(std::nullopt), nullptr);
}

TEST(Json, AFrameTakenWhileSegmentsMoveShowsTheSettledPartsAndSaysSo) {
  SystemSample s = make_two_gpu_sample();
  // The driver's reading caught 6 GiB of segments torch had not traced yet (the peak frame).
  s.devices[0].processes[0].used_bytes = (30000 + 6144) * mib;
  const json torch =
      json::parse(format_sample_json(s, false))["devices"][0]["processes"][0]["torch"];
  EXPECT_EQ(torch["non_pytorch_bytes"], (4810 + 614) * mib) << "the settled value, not 11.6 GiB";
  ASSERT_EQ(torch["issues"].size(), 1U);
  EXPECT_EQ(torch["issues"][0], "driver and torch read apart: non-PyTorch as last settled");
  const json& parts = torch["driver_parts"];
  EXPECT_EQ(parts["context_bytes"], 614 * mib);
  EXPECT_EQ(parts["other_bytes"], 4810 * mib);
  EXPECT_EQ(parts["nccl_bytes"], nullptr) << "not reported is null, not 0";
  EXPECT_EQ(parts["nccl"], "not reported by NCCL 2.28.9");
  EXPECT_EQ(parts["private_pool_bytes"], 34 * mib);
  // The frame within a page of the settled pairing: no issue.
  s.devices[0].processes[0].used_bytes = 30001 * mib;
  const json settled =
      json::parse(format_sample_json(s, false))["devices"][0]["processes"][0]["torch"];
  EXPECT_TRUE(settled["issues"].empty());
}

TEST(Json, LostDeviceCarriesItsError) {
  SystemSample s = make_two_gpu_sample();
  s.devices[1].lost = true;
  s.devices[1].error = "GPU is lost";
  const json doc = json::parse(format_sample_json(s, false));
  EXPECT_EQ(doc["devices"][1]["lost"], true);
  EXPECT_EQ(doc["devices"][1]["error"], "GPU is lost");
}

}  // namespace
}  // namespace vramscope::report
