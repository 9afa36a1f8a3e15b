// tests/cpp/exporters/test_tensorboard.cpp -- byte-exact framing, file naming and permissions
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "temp_dir.hpp"
#include "vramscope/core/crc32c.hpp"
#include "vramscope/exporters/tensorboard.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {
namespace {

std::string to_hex(std::string_view bytes) {
  std::string hex;
  for (const unsigned char c : bytes) {
    static const char digits[] = "0123456789abcdef";
    hex += digits[c >> 4U];
    hex += digits[c & 0xFU];
  }
  return hex;
}

/// Splits a TFRecord stream, checking both CRCs of every record; stops at a truncated tail.
std::vector<std::string> read_records(const std::string& data, bool* truncated = nullptr) {
  std::vector<std::string> records;
  std::size_t pos = 0;
  if (truncated != nullptr) *truncated = false;
  while (pos < data.size()) {
    if (data.size() - pos < 12) break;
    uint64_t length = 0;
    std::memcpy(&length, data.data() + pos, 8);
    uint32_t length_crc = 0;
    std::memcpy(&length_crc, data.data() + pos + 8, 4);
    EXPECT_EQ(length_crc, crc32c_mask(crc32c(data.data() + pos, 8)));
    if (data.size() - pos - 12 < length + 4) break;
    const std::string payload = data.substr(pos + 12, length);
    uint32_t payload_crc = 0;
    std::memcpy(&payload_crc, data.data() + pos + 12 + length, 4);
    EXPECT_EQ(payload_crc, crc32c_mask(crc32c(payload)));
    records.push_back(payload);
    pos += 12 + length + 4;
  }
  if (truncated != nullptr) *truncated = pos != data.size();
  return records;
}

// The computed test vector from the reference note, byte for byte.
TEST(TensorBoard, FileVersionRecordMatchesTestVector) {
  const std::string record = frame_tfrecord(encode_file_version_event(1700000000.0));
  EXPECT_EQ(record.size(), 40U);
  EXPECT_EQ(to_hex(record),
            "1800000000000000a37f4b220900000040fc54d9411a0d627261696e2e4576656e743a32eced8f9d");
}

// Event{wall_time=1.5, step=300, summary{value{tag="a/b", simple_value=2.0}}}, encoded by hand:
// 09 <1.5 LE> 10 ac02 2a 0c (0a 0a (0a 03 "a/b" 15 <2.0f LE>)).
TEST(TensorBoard, ScalarEventEncoding) {
  const std::string event = encode_scalars_event({{"a/b", 2.0}}, 300, 1.5);
  EXPECT_EQ(to_hex(event), "09000000000000f83f10ac022a0c0a0a0a03612f621500000040");
  // Step 0 is the proto3 default and is left out.
  EXPECT_EQ(to_hex(encode_scalars_event({{"a/b", 2.0}}, 0, 1.5)).substr(18, 2), "2a");
}

TEST(TensorBoard, FileNameFollowsPythonWriters) {
  EXPECT_EQ(tensorboard_file_name(1700000000, "node-01", 4242, 3),
            "events.out.tfevents.1700000000.node-01.4242.3");
  EXPECT_EQ(tensorboard_file_name(42, "h", 1, 0), "events.out.tfevents.0000000042.h.1.0");
}

TEST(TensorBoard, WritesPrivateFilesInNewDirectoriesWithValidRecords) {
  test::TempDir dir;
  const std::string run = dir.file("runs/exp1");
  std::string path;
  {
    TensorBoardWriter writer(run);
    path = writer.path();
    writer.write(test::make_rich_sample());
    writer.add_scalar("custom/x", 1.0, 5, 1700000000.0);
  }
  struct stat info {};
  ASSERT_EQ(::stat(run.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777U, 0700U);
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777U, 0600U);
  EXPECT_NE(std::filesystem::path(path).filename().string().find("tfevents"), std::string::npos);

  bool truncated = true;
  const auto records = read_records(test::read_file(path), &truncated);
  EXPECT_FALSE(truncated);
  // version, driver scalars, 2 allocators, 2 steps, 1 OOM, custom.
  ASSERT_EQ(records.size(), 8U);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("driver/gpu0/used_bytes"), std::string::npos);
  EXPECT_NE(records[2].find("memory/rank0/cuda0/allocated_bytes"), std::string::npos);
  EXPECT_NE(records[4].find("memory/rank0/cuda0/step_peak_allocated_bytes"), std::string::npos);
  EXPECT_NE(records[6].find("memory/rank1/cuda0/oom_requested_bytes"), std::string::npos);
}

TEST(TensorBoard, UnqualifiedTagsForPerRankRuns) {
  test::TempDir dir;
  TensorBoardOptions options;
  options.qualify_process = false;
  options.driver_tags = false;
  TensorBoardWriter writer(dir.path(), options);
  writer.write_step(test::make_rich_sample().steps[1]);
  writer.close();
  const auto records = read_records(test::read_file(writer.path()));
  ASSERT_EQ(records.size(), 2U);
  EXPECT_NE(records[1].find("memory/cuda0/step_peak_reserved_bytes"), std::string::npos);
  EXPECT_THROW(writer.add_scalar("x", 1, 1, 1), Error);
}

/// The float32 simple_value right after `tag` in an event record, or nullopt without the tag.
std::optional<float> scalar_after(const std::string& record, const std::string& tag) {
  const std::size_t at = record.find(tag);
  if (at == std::string::npos || record.size() < at + tag.size() + 5) return std::nullopt;
  EXPECT_EQ(record[at + tag.size()], '\x15');  // simple_value, fixed32
  float value = 0;
  std::memcpy(&value, record.data() + at + tag.size() + 1, sizeof value);
  return value;
}

TEST(TensorBoard, StepCategoriesBecomeTagsOnlyWhenTracked) {
  test::TempDir dir;
  TensorBoardOptions options;
  options.driver_tags = false;
  TensorBoardWriter writer(dir.path(), options);
  const SystemSample sample = test::make_rich_sample();
  writer.write_step(sample.steps[0]);  // rank 0: categories
  writer.write_step(sample.steps[1]);  // rank 1: none
  writer.close();
  const auto records = read_records(test::read_file(writer.path()));
  ASSERT_EQ(records.size(), 3U);
  for (std::string_view name : memory_category_names) {
    EXPECT_NE(records[1].find("memory/rank0/cuda0/category/" + std::string(name) + "_bytes"),
              std::string::npos)
        << name;
  }
  // Value check: 3 GiB of parameters as the float32 simple_value right after its tag.
  EXPECT_EQ(scalar_after(records[1], "memory/rank0/cuda0/category/parameters_bytes"),
            3.0F * static_cast<float>(test::gib));
  EXPECT_EQ(records[2].find("category/"), std::string::npos);
}

// An export of a recording whose rank 1 polls: its step gets the sampled mark (1), rank 0's none.
TEST(TensorBoard, StepsOfAPollingAgentAreMarkedSampledInAnExport) {
  test::TempDir dir;
  TensorBoardOptions options;
  options.driver_tags = false;
  TensorBoardWriter writer(dir.path(), options);
  SystemSample sample = test::make_rich_sample();
  sample.ooms.clear();
  sample.allocators[1].polling_only = true;
  writer.write(sample);
  writer.close();
  const auto records = read_records(test::read_file(writer.path()));
  // The file version, two allocators' samples, two steps.
  ASSERT_EQ(records.size(), 5U);
  EXPECT_EQ(records[3].find("step_peaks_sampled"), std::string::npos);
  EXPECT_EQ(scalar_after(records[4], "memory/rank1/cuda0/step_peaks_sampled"), 1.0F);
}

// An export of a recording of format 4: per sample, the agent's settled non-PyTorch bytes and
// their measured parts beside the allocator's tags; nothing for an agent without a pairing.
TEST(TensorBoard, SettledDriverPartsOfARecordedAgentBecomeTags) {
  test::TempDir dir;
  TensorBoardOptions options;
  options.driver_tags = false;
  TensorBoardWriter writer(dir.path(), options);
  const SystemSample sample = test::make_rich_sample();
  ASSERT_TRUE(sample.allocators[0].breakdown.has_value());
  ASSERT_FALSE(sample.allocators[1].breakdown.has_value());
  writer.write(sample);
  writer.close();
  const auto records = read_records(test::read_file(writer.path()));
  std::string rank0;
  std::string rank1;
  for (const std::string& record : records) {
    if (record.find("memory/rank0/cuda0/allocated_bytes") != std::string::npos) rank0 = record;
    if (record.find("memory/rank1/cuda0/allocated_bytes") != std::string::npos) rank1 = record;
  }
  ASSERT_FALSE(rank0.empty());
  ASSERT_FALSE(rank1.empty());
  const auto mib = static_cast<float>(test::mib);
  EXPECT_EQ(scalar_after(rank0, "memory/rank0/cuda0/non_pytorch_bytes"), 764 * mib);
  EXPECT_EQ(scalar_after(rank0, "memory/rank0/cuda0/non_pytorch/context_bytes"), 700 * mib);
  EXPECT_EQ(scalar_after(rank0, "memory/rank0/cuda0/non_pytorch/other_bytes"), 64 * mib);
  EXPECT_EQ(scalar_after(rank0, "memory/rank0/cuda0/private_pool_bytes"), 0.0F);
  // NCCL 2.28.9 does not report its memory: no NCCL tag (its bytes are in other).
  EXPECT_EQ(rank0.find("non_pytorch/nccl_bytes"), std::string::npos);
  EXPECT_EQ(rank1.find("non_pytorch"), std::string::npos);
}

// The Monitor's step tags (through the agent's tensorboard_step_scalars) and the export's come
// from one function: the Monitor's add the step-end values and the non-PyTorch bytes.
TEST(TensorBoard, StepScalarsOfTheMonitorAndOfTheExport) {
  StepRecord step;
  step.rank = 1;
  step.cuda_device = 2;
  step.allocated_bytes = 10;
  step.reserved_bytes = 20;
  step.peak_allocated_bytes = 30;
  step.peak_reserved_bytes = 40;
  step.peak_requested_bytes = 50;
  const std::string prefix = tensorboard_torch_prefix(false, 7, step.rank, step.cuda_device);
  EXPECT_EQ(prefix, "memory/cuda2/");
  EXPECT_EQ(tensorboard_torch_prefix(true, 7, 1, 2), "memory/rank1/cuda2/");
  EXPECT_EQ(tensorboard_torch_prefix(true, 7, -1, 2), "memory/pid7/cuda2/");

  const auto tags = [](const std::vector<TensorBoardScalar>& scalars) {
    std::vector<std::pair<std::string, double>> out;
    for (const TensorBoardScalar& s : scalars) out.emplace_back(s.tag, s.value);
    return out;
  };
  using Tags = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(tags(tensorboard_step_scalars(step, prefix)),
            (Tags{{"memory/cuda2/step_peak_allocated_bytes", 30},
                  {"memory/cuda2/step_peak_reserved_bytes", 40},
                  {"memory/cuda2/step_peak_requested_bytes", 50}}));
  step.category_bytes = CategoryBytes{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(tags(tensorboard_step_scalars(step, prefix, true, 99)),
            (Tags{{"memory/cuda2/allocated_bytes", 10},
                  {"memory/cuda2/reserved_bytes", 20},
                  {"memory/cuda2/step_peak_allocated_bytes", 30},
                  {"memory/cuda2/step_peak_reserved_bytes", 40},
                  {"memory/cuda2/step_peak_requested_bytes", 50},
                  {"memory/cuda2/non_pytorch_bytes", 99},
                  {"memory/cuda2/category/parameters_bytes", 1},
                  {"memory/cuda2/category/gradients_bytes", 2},
                  {"memory/cuda2/category/optimizer_state_bytes", 3},
                  {"memory/cuda2/category/activations_bytes", 4},
                  {"memory/cuda2/category/temporaries_bytes", 5},
                  {"memory/cuda2/category/other_bytes", 6}}));
  // The export knows no non-PyTorch bytes: a value passed without end values is left out.
  EXPECT_EQ(tensorboard_step_scalars(step, prefix, false, 99).size(), 3U + memory_category_count);
  // The parts of non-PyTorch come after it, each only when measured (NCCL not reported here).
  step.category_bytes.reset();
  DriverPartValues parts;
  parts.context_bytes = 700;
  parts.other_bytes = 64;
  parts.private_pool_bytes = 0;
  const Tags with_parts = tags(tensorboard_step_scalars(step, prefix, true, 764, parts));
  EXPECT_EQ(Tags(with_parts.begin() + 5, with_parts.end()),
            (Tags{{"memory/cuda2/non_pytorch_bytes", 764},
                  {"memory/cuda2/non_pytorch/context_bytes", 700},
                  {"memory/cuda2/non_pytorch/other_bytes", 64},
                  {"memory/cuda2/private_pool_bytes", 0}}));
  EXPECT_EQ(tensorboard_step_scalars(step, prefix, false, 764, parts).size(), 3U);
  // A polling agent's peaks get their mark right after them, in the export and the Monitor.
  const Tags sampled = tags(tensorboard_step_scalars(step, prefix, false, std::nullopt, {}, true));
  EXPECT_EQ(sampled, (Tags{{"memory/cuda2/step_peak_allocated_bytes", 30},
                           {"memory/cuda2/step_peak_reserved_bytes", 40},
                           {"memory/cuda2/step_peak_requested_bytes", 50},
                           {"memory/cuda2/step_peaks_sampled", 1}}));
  EXPECT_EQ(tags(tensorboard_step_scalars(step, prefix, true, 764, parts, true))[5],
            (std::pair<std::string, double>{"memory/cuda2/step_peaks_sampled", 1}));
}

// Data is buffered until flush(); flush writes whole records only.
TEST(TensorBoard, ExplicitFlushWritesWholeRecords) {
  test::TempDir dir;
  TensorBoardOptions options;
  options.flush_interval_ns = 0;
  TensorBoardWriter writer(dir.path(), options);
  const std::size_t header_size = test::read_file(writer.path()).size();
  EXPECT_EQ(header_size, 40U);
  for (int i = 1; i <= 10; ++i) writer.add_scalar("loss/x", i, i, 1700000000.0 + i);
  EXPECT_EQ(test::read_file(writer.path()).size(), header_size);
  writer.flush();
  bool truncated = true;
  EXPECT_EQ(read_records(test::read_file(writer.path()), &truncated).size(), 11U);
  EXPECT_FALSE(truncated);
}

TEST(TensorBoard, UnwritableDirectoryIsAClearError) {
  test::TempDir dir;
  { std::ofstream(dir.file("file")) << "x"; }
  try {
    TensorBoardWriter writer(dir.file("file/run"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vramscope::exporters
