// tests/cpp/tracking/test_device_stats.cpp -- device_stats_fields names every field of DeviceStatsView once
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <set>
#include <string_view>
#include <type_traits>

#include "vramscope/tracking/device_stats.hpp"

namespace vramscope::tracking {
namespace {

// The view is its numbers (EventPeaks are three each) and the flag last, padded to a word: so
// writing distinct numbers into its words reaches every numeric field, and the table must read
// each of them exactly once.
constexpr std::size_t number_count = device_stats_fields.size() - 1;
static_assert(std::is_standard_layout_v<DeviceStatsView>);
static_assert(sizeof(DeviceStatsView) == (number_count + 1) * sizeof(uint64_t),
              "a field was added to DeviceStatsView: add it to device_stats_fields too");

TEST(DeviceStatsFields, ReadEveryNumberOfTheViewOnce) {
  std::array<uint64_t, number_count> numbers{};
  for (std::size_t i = 0; i < numbers.size(); ++i) numbers[i] = 1000 + i;
  DeviceStatsView view;
  std::memcpy(static_cast<void*>(&view), numbers.data(), sizeof(numbers));
  view.polling_only = true;
  std::set<uint64_t> read;
  for (const DeviceStatsField& field : device_stats_fields) {
    if (field.is_flag) continue;
    read.insert(field.read(view));
  }
  EXPECT_EQ(read, std::set<uint64_t>(numbers.begin(), numbers.end()));
}

TEST(DeviceStatsFields, TheOneFlagIsPollingOnly) {
  DeviceStatsView view;
  for (const bool polling_only : {false, true}) {
    view.polling_only = polling_only;
    std::size_t flags = 0;
    for (const DeviceStatsField& field : device_stats_fields) {
      if (!field.is_flag) continue;
      ++flags;
      EXPECT_EQ(field.name, "polling_only");
      EXPECT_EQ(field.read(view), polling_only ? 1U : 0U);
    }
    EXPECT_EQ(flags, 1U);
  }
}

TEST(DeviceStatsFields, NamesAreUniqueAndCarryTheirUnit) {
  std::set<std::string_view> names;
  for (const DeviceStatsField& field : device_stats_fields) {
    EXPECT_TRUE(names.insert(field.name).second) << field.name;
    const bool has_unit = field.name.ends_with("_bytes") || field.name.ends_with("_count");
    EXPECT_TRUE(has_unit || field.name == "step" || field.is_flag) << field.name;
  }
}

}  // namespace
}  // namespace vramscope::tracking
