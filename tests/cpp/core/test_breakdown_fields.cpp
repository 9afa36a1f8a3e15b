// tests/cpp/core/test_breakdown_fields.cpp -- breakdown_fields names every field of DriverBreakdown once, in declaration order
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <variant>

#include "vramscope/sample.hpp"

namespace vramscope {
namespace {

/// Where `field`'s member lies in a DriverBreakdown.
std::ptrdiff_t offset_of(const BreakdownField& field) {
  static const DriverBreakdown b;
  const auto* base = reinterpret_cast<const char*>(&b);
  return std::visit([&](auto member) { return reinterpret_cast<const char*>(&(b.*member)) - base; },
                    field.member);
}

TEST(BreakdownFields, ListEveryMemberOnceInDeclarationOrder) {
  // The size static_assert in sample.hpp catches a member without a row; this catches a row
  // naming a member twice or out of order (the segment's words and the digest's array follow
  // the table's order, which must stay the order they were written in).
  std::ptrdiff_t previous = -1;
  for (const BreakdownField& field : breakdown_fields) {
    EXPECT_GT(offset_of(field), previous) << field.name;
    previous = offset_of(field);
  }
  EXPECT_EQ(offset_of(breakdown_fields.front()), 0);
}

TEST(BreakdownFields, NamesAreUniqueAndCarryTheirUnit) {
  std::set<std::string_view> names;
  for (const BreakdownField& field : breakdown_fields) {
    EXPECT_TRUE(names.insert(field.name).second) << field.name;
    const bool has_unit = field.name.ends_with("_bytes") || field.name.ends_with("_ns") ||
                          field.name.ends_with("_count") || field.name.ends_with("_version");
    EXPECT_TRUE(has_unit) << field.name;
    EXPECT_EQ(is_breakdown_bytes(field), field.name.ends_with("_bytes")) << field.name;
  }
}

TEST(BreakdownFields, NonPytorchIsContextOtherAndNccl) {
  // docs/agent-api.md: non_pytorch_bytes = context + other + NCCL, an unmeasured part counting
  // as nothing.
  std::set<std::string_view> parts;
  for (const BreakdownField& field : breakdown_fields) {
    if (field.non_pytorch) parts.insert(field.name);
  }
  EXPECT_EQ(parts, (std::set<std::string_view>{"context_bytes", "other_bytes", "nccl_bytes"}));
  DriverBreakdown b;
  b.context_bytes = 7;
  EXPECT_EQ(b.non_pytorch_bytes(), 7U);
  b.other_bytes = 100;
  b.nccl_bytes = 1000;
  b.private_pool_bytes = 10'000;  // of reserved: torch's
  b.first_context_bytes = 100'000;
  EXPECT_EQ(b.non_pytorch_bytes(), 1107U);
}

TEST(BreakdownFields, BytesAreReadOnlyFromByteFields) {
  DriverBreakdown b;
  b.paired_ns = 5;
  b.driver_bytes = 6;
  b.nccl_version = 7;
  for (const BreakdownField& field : breakdown_fields) {
    if (field.name == "driver_bytes") {
      EXPECT_EQ(breakdown_bytes(b, field), 6U);
    }
    if (field.name == "nccl_bytes" || !is_breakdown_bytes(field)) {
      EXPECT_FALSE(breakdown_bytes(b, field).has_value()) << field.name;
    }
  }
}

}  // namespace
}  // namespace vramscope
