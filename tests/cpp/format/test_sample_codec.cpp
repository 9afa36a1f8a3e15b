// tests/cpp/format/test_sample_codec.cpp -- SystemSample encoding: round trips and hostile input
#include <gtest/gtest.h>
#include <unistd.h>

#include <initializer_list>
#include <limits>

#include "format/fixtures.hpp"
#include "format/forge_recording.hpp"
#include "format/memory_limit.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/format/varint.hpp"

namespace vramscope::format {
namespace {

using testing::make_sample;
using namespace std::string_literals;  // "\x05\x00..."s: the hostile bytes keep their NULs

/// `bytes` as hex digits, for messages.
std::string hex(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    constexpr const char* digits = "0123456789abcdef";
    out += digits[(static_cast<unsigned char>(c) >> 4U) & 0xFU];
    out += digits[static_cast<unsigned char>(c) & 0xFU];
  }
  return out;
}

/// Encodes `samples` as one chunk would hold them and decodes them back.
std::vector<SystemSample> round_trip(const std::vector<SystemSample>& samples,
                                     std::string* encoded = nullptr) {
  SampleEncoder encoder;
  std::string bytes;
  int64_t base_ns = samples.empty() ? 0 : samples.front().timestamp_ns;
  for (const auto& sample : samples) {
    EXPECT_TRUE(encoder.encode(sample, base_ns, bytes));
    base_ns = sample.timestamp_ns;
  }
  if (encoded != nullptr) *encoded = bytes;
  SampleDecoder decoder;
  std::string_view cursor = bytes;
  std::vector<SystemSample> out(samples.size());
  base_ns = samples.empty() ? 0 : samples.front().timestamp_ns;
  for (auto& sample : out) {
    decoder.decode(cursor, base_ns, sample);
    base_ns = sample.timestamp_ns;
  }
  EXPECT_TRUE(cursor.empty());
  return out;
}

TEST(SampleCodec, RoundTripsRichSamples) {
  std::vector<SystemSample> samples;
  for (uint64_t seed = 0; seed < 40; ++seed) samples.push_back(make_sample(seed, 2, 6));
  const auto decoded = round_trip(samples);
  ASSERT_EQ(decoded.size(), samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(decoded[i], samples[i]);
}

TEST(SampleCodec, RoundTripsEmptyAndExtremeValues) {
  SystemSample empty;
  SystemSample extreme;
  extreme.timestamp_ns = std::numeric_limits<int64_t>::min();
  DeviceSample device;
  device.index = std::numeric_limits<uint32_t>::max();
  device.total_bytes = std::numeric_limits<uint64_t>::max();
  device.used_bytes = 0;  // present and zero is not absent
  device.mig_enabled = false;
  ProcessSample process;
  process.pid = std::numeric_limits<uint32_t>::max();
  process.kinds = 0xFF;
  process.used_bytes = 0;
  process.gpu_instance_id = std::numeric_limits<uint32_t>::max();
  device.processes.push_back(process);
  extreme.devices.push_back(device);
  AllocatorSample allocator;
  allocator.rank = std::numeric_limits<int32_t>::min();
  allocator.world_size = std::numeric_limits<int32_t>::max();
  allocator.updated_ns = std::numeric_limits<int64_t>::max();
  allocator.dropped_event_count = std::numeric_limits<uint64_t>::max();
  extreme.allocators.push_back(allocator);
  StepRecord step;
  step.duration_ns = std::numeric_limits<int64_t>::min();
  step.end_ns = std::numeric_limits<int64_t>::max();
  extreme.steps.push_back(step);
  SystemSample last;
  last.timestamp_ns = std::numeric_limits<int64_t>::max();
  const std::vector<SystemSample> samples{empty, extreme, last};
  const auto decoded = round_trip(samples);
  for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(decoded[i], samples[i]);
}

TEST(SampleCodec, RepeatedStringsAreStoredOnce) {
  std::string first;
  std::string both;
  round_trip({make_sample(1, 8, 8)}, &first);
  round_trip({make_sample(1, 8, 8), make_sample(2, 8, 8)}, &both);
  const auto occurrences = [](const std::string& haystack, const std::string& needle) {
    int count = 0;
    for (auto at = haystack.find(needle); at != std::string::npos;
         at = haystack.find(needle, at + 1)) {
      ++count;
    }
    return count;
  };
  EXPECT_EQ(occurrences(both, "NVIDIA H100 80GB HBM3"), 1);
  EXPECT_EQ(occurrences(both, "train.py --model=llama-3-8b --rank=3 "), 1);
  EXPECT_EQ(occurrences(both, "node-07"), 1);
  EXPECT_LT(both.size() - first.size(), first.size() * 2 / 3);
}

TEST(SampleCodec, StringsThatChangePlacesOrComeAfterARefusedSampleRoundTrip) {
  // The encoder tries, for the k-th string of a sample, the table entry of the k-th string of
  // the sample before; strings that swap places, vanish, come back, or were added by a sample
  // refused as too large (and taken out of the table again) must still code as themselves.
  SampleEncoder encoder;
  std::string bytes;
  std::vector<SystemSample> written;
  SystemSample a = make_sample(1, 2, 3);
  SystemSample b = a;
  std::swap(b.devices[0], b.devices[1]);
  std::swap(b.devices[0].processes[0].command, b.devices[0].processes[2].command);
  SystemSample c = a;
  c.devices.pop_back();
  c.hostname = "node-08";
  SystemSample huge = a;
  huge.devices[0].processes.resize(max_processes);
  for (std::size_t i = 0; i < huge.devices[0].processes.size(); ++i) {
    huge.devices[0].processes[i].command =
        "new command " + std::to_string(i) + std::string(400, 'x');
  }
  SystemSample d = a;
  d.devices[0].processes[0].command = "new command 0" + std::string(400, 'x');
  for (const SystemSample* s : {&a, &b, &c, &a, &huge, &d, &b, &a}) {
    if (s == &huge) {
      ASSERT_FALSE(encoder.encode(*s, 0, bytes));
      continue;
    }
    ASSERT_TRUE(encoder.encode(*s, 0, bytes));
    written.push_back(*s);
  }
  SampleDecoder decoder;
  std::string_view cursor = bytes;
  for (std::size_t i = 0; i < written.size(); ++i) {
    SystemSample out;
    decoder.decode(cursor, 0, out);
    ASSERT_EQ(out, written[i]) << "sample " << i;
  }
  EXPECT_TRUE(cursor.empty());
}

TEST(SampleCodec, ClipsOverlongStringsAtACharacterBoundary) {
  EXPECT_EQ(clip_utf8("abc", 10), "abc");
  EXPECT_EQ(clip_utf8("ab€", 4), "ab");  // € is 3 bytes; cutting inside it drops it whole
  EXPECT_EQ(clip_utf8("ab€", 5), "ab€");
  SystemSample sample;
  DeviceSample device;
  device.error = std::string(max_string_bytes - 1, 'x') + "😀";
  sample.devices.push_back(device);
  const auto decoded = round_trip({sample});
  EXPECT_EQ(decoded[0].devices[0].error, std::string(max_string_bytes - 1, 'x'));
}

TEST(SampleCodec, RejectsEveryTruncation) {
  std::string bytes;
  SampleEncoder encoder;
  const SystemSample sample = make_sample(3, 2, 4);
  ASSERT_TRUE(encoder.encode(sample, sample.timestamp_ns, bytes));
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    SampleDecoder decoder;
    std::string_view cursor(bytes.data(), size);
    SystemSample out;
    EXPECT_THROW(decoder.decode(cursor, sample.timestamp_ns, out), FormatError) << size;
  }
}

TEST(SampleCodec, RejectsHostileEncodings) {
  const auto decode = [](const std::string& bytes) {
    SampleDecoder decoder;
    std::string_view cursor = bytes;
    SystemSample out;
    decoder.decode(cursor, 0, out);
  };
  // Length, then: timestamp, hostname, driver, device count, ...
  EXPECT_THROW(decode(std::string("\x00", 1)), FormatError);       // empty sample
  EXPECT_THROW(decode("\x05\x00\x00\x00\x05\x00"s), FormatError);  // 5 devices, 1 byte
  EXPECT_THROW(decode("\x04\x00\x07\x00\x00"s), FormatError);      // string ref, no table
  EXPECT_THROW(decode("\x05\x00\x01\x7F\x00\x00"s), FormatError);  // literal past end
  EXPECT_THROW(decode(std::string("\x08\x00\x00\x00\x00\x00\x00\x00\x00", 9)),
               FormatError);  // trailing byte inside the sample
  EXPECT_THROW(decode("\x0C\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F\x00\x00"s),
               FormatError);  // varint past 64 bits
  // One device whose flags carry an unknown bit.
  const std::string device_prefix("\x00\x00\x00\x01\x00\x00\x00\x00", 8);
  EXPECT_THROW(decode(std::string(1, static_cast<char>(device_prefix.size() + 6)) + device_prefix +
                      "\x80\x10\x00\x00\x00\x00"s),
               FormatError);
}

TEST(SampleCodec, SampleVarintsReadExactlyWhatGetVarintReads) {
  // The decoder reads its varints with its own loop (the hot path of every reader); it must
  // accept, value and refuse exactly as get_varint() does. Each case is a sample's timestamp
  // (zigzag, against base 0) followed by empty strings and lists.
  std::vector<std::string> varints = {"\x00"s,     "\x7F"s, "\x80\x01"s, "\x80\x00"s,
                                      "\xFF\x7F"s, "\x80"s, "\xFF\xFF"s};
  for (int length = 1; length <= 11; ++length) {
    for (const char last : {'\x00', '\x01', '\x02', '\x7F', '\x80'}) {
      varints.push_back(std::string(static_cast<std::size_t>(length - 1), '\xFF') + last);
      varints.push_back(std::string(static_cast<std::size_t>(length - 1), '\x80') + last);
    }
  }
  uint64_t random = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes;
    const int length = 1 + static_cast<int>(random % 11);
    for (int b = 0; b < length; ++b) {
      random ^= random << 13U;
      random ^= random >> 7U;
      random ^= random << 17U;
      bytes.push_back(static_cast<char>(b + 1 < length ? (random | 0x80U) : (random & 0xFFU)));
    }
    varints.push_back(bytes);
  }
  // The rest of the sample: hostname, driver, devices, allocators, steps, OOMs; once all empty
  // (the varint is read near the end of the sample), once with a literal hostname (read with
  // ten bytes or more left, the decoder's other way).
  for (const std::string& rest : {std::string(6, '\0'),
                                  "\x02\x0a"
                                  "abcdefghij"s +
                                      std::string(5, '\0')}) {
    for (const std::string& varint : varints) {
      const std::string body = varint + rest;
      const std::string bytes = std::string(1, static_cast<char>(body.size())) + body;
      std::size_t at = 0;
      uint64_t expected = 0;
      const bool valid = get_varint(body, at, expected) == VarintRead::Ok && at == varint.size();
      SampleDecoder decoder;
      std::string_view cursor = bytes;
      SystemSample out;
      if (valid) {
        ASSERT_NO_THROW(decoder.decode(cursor, 0, out)) << hex(varint);
        EXPECT_EQ(out.timestamp_ns, unzigzag(expected)) << hex(varint);
        EXPECT_EQ(out.hostname, rest.size() > 6 ? "abcdefghij" : "") << hex(varint);
      } else {
        EXPECT_THROW(decoder.decode(cursor, 0, out), FormatError) << hex(varint);
      }
    }
  }
}

TEST(SampleCodec, RefusesASampleThatNamesALongStringTooOftenBeforeExpandingIt) {
  // 65,536 processes, each naming the same 64 KiB command: ~200 KB encoded (one literal, then
  // table references), 4 GiB once every reference is expanded.
  const std::string bytes = forge::table_bomb_sample(0, max_processes, max_string_bytes);
  ASSERT_LT(bytes.size(), 1U << 20U);
  // Under a 1 GiB address-space limit: expanding first and checking after cannot pass.
  EXPECT_EXIT(
      {
        testing::limit_address_space(1ULL << 30U);
        SampleDecoder decoder;
        std::string_view cursor = bytes;
        SystemSample out;
        try {
          decoder.decode(cursor, 0, out);
        } catch (const FormatError& error) {
          ::_exit(std::string(error.what()).find("expands") != std::string::npos ? 0 : 3);
        }
        ::_exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(SampleCodec, StepCategoriesRoundTripOnlyWhenPresent) {
  SystemSample sample;
  sample.timestamp_ns = 1'000;
  StepRecord with;
  with.step = 3;
  with.category_bytes = CategoryBytes{std::numeric_limits<uint64_t>::max(), 0, 1, 2, 3, 4};
  StepRecord without;
  without.step = 4;
  sample.steps = {with, without};
  const auto decoded = round_trip({sample});
  ASSERT_EQ(decoded[0].steps.size(), 2U);
  ASSERT_TRUE(decoded[0].steps[0].category_bytes.has_value());
  EXPECT_EQ(*decoded[0].steps[0].category_bytes, *with.category_bytes);
  EXPECT_FALSE(decoded[0].steps[1].category_bytes.has_value());
}

/// A sample holding one step without categories, encoded; its last two bytes are the step's
/// flags and the OOM count.
std::string one_step_sample() {
  SystemSample sample;
  sample.steps.emplace_back();
  SampleEncoder encoder;
  std::string bytes;
  EXPECT_TRUE(encoder.encode(sample, 0, bytes));
  EXPECT_EQ(bytes.substr(bytes.size() - 2), std::string("\x00\x00", 2));
  return bytes;
}

TEST(SampleCodec, RejectsUnknownStepFlagsAndMissingCategories) {
  const auto decode = [](const std::string& bytes, uint16_t version = recording_version) {
    SampleDecoder decoder(version);
    std::string_view cursor = bytes;
    SystemSample out;
    decoder.decode(cursor, 0, out);
    return out;
  };
  std::string bytes = one_step_sample();
  EXPECT_FALSE(decode(bytes).steps.at(0).category_bytes.has_value());
  bytes[bytes.size() - 2] = '\x02';  // an unknown flag bit
  EXPECT_THROW(decode(bytes), FormatError);
  bytes[bytes.size() - 2] = '\x01';  // categories announced, none follow
  EXPECT_THROW(decode(bytes), FormatError);
}

TEST(SampleCodec, VersionOneStepsHaveNoFlags) {
  // A version-1 decoder reads the step without the trailing flags byte: the v2 encoding of the
  // same sample is one byte too long for it, and dropping that byte makes it exact again.
  std::string bytes = one_step_sample();
  SampleDecoder v1(1);
  std::string_view cursor = bytes;
  SystemSample out;
  EXPECT_THROW(v1.decode(cursor, 0, out), FormatError);
  std::string v1_bytes = bytes.substr(1, bytes.size() - 3) + std::string("\x00", 1);
  v1_bytes.insert(v1_bytes.begin(), static_cast<char>(v1_bytes.size()));
  SampleDecoder again(1);
  cursor = v1_bytes;
  again.decode(cursor, 0, out);
  ASSERT_EQ(out.steps.size(), 1U);
  EXPECT_FALSE(out.steps[0].category_bytes.has_value());
  EXPECT_TRUE(cursor.empty());
}

/// A sample holding one allocator with (or without) a driver breakdown of no optional part.
SystemSample one_allocator_sample(bool with_breakdown) {
  SystemSample sample;
  sample.timestamp_ns = 5'000'000'000;
  AllocatorSample agent;
  agent.pid = 7;
  agent.reserved_bytes = 3U << 20U;
  if (with_breakdown) {
    DriverBreakdown parts;
    parts.paired_ns = 4'900'000'000;
    parts.driver_bytes = 600U << 20U;
    parts.reserved_bytes = 2U << 20U;
    parts.context_bytes = 598U << 20U;
    parts.unsettled_count = 9;
    agent.breakdown = parts;
  }
  sample.allocators = {agent};
  return sample;
}

std::string encode_one(const SystemSample& sample) {
  SampleEncoder encoder;
  std::string bytes;
  EXPECT_TRUE(encoder.encode(sample, sample.timestamp_ns, bytes));
  return bytes;
}

SystemSample decode_one(const std::string& bytes, uint16_t version = recording_version) {
  SampleDecoder decoder(version);
  std::string_view cursor = bytes;
  SystemSample out;
  decoder.decode(cursor, 5'000'000'000, out);
  EXPECT_TRUE(cursor.empty());
  return out;
}

TEST(SampleCodec, DriverBreakdownsRoundTripAndNeverLingerInAReusedSample) {
  SystemSample with = one_allocator_sample(true);
  with.allocators[0].breakdown->nccl_bytes = 0;  // reported as zero is not "not reported"
  with.allocators[0].breakdown->first_context_bytes = 590U << 20U;
  with.allocators[0].breakdown->paired_ns = std::numeric_limits<int64_t>::min();
  const SystemSample without = one_allocator_sample(false);
  const auto decoded = round_trip({with, without, with});
  ASSERT_EQ(decoded.size(), 3U);
  EXPECT_EQ(decoded[0], with);
  EXPECT_EQ(decoded[1], without);
  EXPECT_EQ(decoded[2], with);
  // The decoder fills a sample reused from the previous one, as the readers do.
  SampleDecoder decoder;
  SystemSample reused;
  for (const SystemSample* want : std::initializer_list<const SystemSample*>{&with, &without}) {
    const std::string bytes = encode_one(*want);
    std::string_view cursor = bytes;
    decoder.decode(cursor, 5'000'000'000, reused);
    EXPECT_EQ(reused, *want);
  }
}

// Through breakdown_fields: every field, each optional part absent in turn.
TEST(SampleCodec, EveryBreakdownFieldRoundTrips) {
  std::vector<SystemSample> samples;
  for (const std::string_view absent :
       {"", "private_pool_bytes", "nccl_bytes", "other_bytes", "first_context_bytes"}) {
    SystemSample s = one_allocator_sample(true);
    s.allocators[0].breakdown = testing::distinct_breakdown(absent);
    samples.push_back(s);
  }
  const auto decoded = round_trip(samples);
  ASSERT_EQ(decoded.size(), samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(decoded[i], samples[i]);
}

TEST(SampleCodec, BreakdownFlagsAreRefusedWhereTheirVersionHasNone) {
  const std::string without = encode_one(one_allocator_sample(false));
  const std::string with = encode_one(one_allocator_sample(true));
  // Version 3 reads the allocator without its breakdown, and refuses the breakdown's flag bit.
  EXPECT_FALSE(decode_one(without, 3).allocators.at(0).breakdown.has_value());
  EXPECT_THROW(decode_one(with, 3), FormatError);
  EXPECT_TRUE(decode_one(with, 4).allocators.at(0).breakdown.has_value());
  // The breakdown's own flags (after its four byte counts) know four parts. The sample ends
  // with them, NCCL version 0, unsettled count 9, and no steps and no OOMs.
  ASSERT_EQ(with.substr(with.size() - 5), "\x00\x00\x09\x00\x00"s);
  const std::size_t flags_at = with.size() - 5;
  for (const char unknown : {'\x10', '\x40'}) {
    std::string forged = with;
    forged[flags_at] = unknown;
    EXPECT_THROW(decode_one(forged), FormatError) << +unknown;
  }
  std::string announced = with;
  announced[flags_at] = '\x01';  // private pools announced; the bytes after run short
  EXPECT_THROW(decode_one(announced), FormatError);
}

/// one_allocator_sample() whose agent polls and says why (`reason`; "" for an older agent).
SystemSample polling_sample(bool with_breakdown, const std::string& reason) {
  SystemSample sample = one_allocator_sample(with_breakdown);
  sample.allocators[0].polling_only = true;
  sample.allocators[0].polling_reason = reason;
  return sample;
}

TEST(SampleCodec, PollingReasonsRoundTripAndNeverLingerInAReusedSample) {
  const SystemSample paired = polling_sample(true, "cudaMallocAsync allocator has no trace events");
  const SystemSample python = polling_sample(false, "no C++ compiler: apt install g++ \xC3\xA9");
  const SystemSample unsaid = polling_sample(false, "");
  const SystemSample exact = one_allocator_sample(false);
  const auto decoded = round_trip({paired, python, unsaid, python, exact});
  ASSERT_EQ(decoded.size(), 5U);
  EXPECT_EQ(decoded[0], paired);
  EXPECT_EQ(decoded[1], python);
  EXPECT_EQ(decoded[2], unsaid);
  EXPECT_EQ(decoded[3], python);
  EXPECT_EQ(decoded[4], exact);
  // The decoder fills a sample reused from the previous one, as the readers do.
  SampleDecoder decoder;
  SystemSample reused;
  for (const SystemSample* want :
       std::initializer_list<const SystemSample*>{&python, &exact, &paired, &unsaid}) {
    const std::string bytes = encode_one(*want);
    std::string_view cursor = bytes;
    decoder.decode(cursor, 5'000'000'000, reused);
    EXPECT_EQ(reused, *want);
  }
}

TEST(SampleCodec, PollingReasonFlagIsRefusedWhereItsVersionHasNone) {
  const std::string with = encode_one(polling_sample(false, "x"));
  EXPECT_EQ(decode_one(with).allocators.at(0).polling_reason, "x");
  EXPECT_THROW(decode_one(with, 4), FormatError) << "version 4 knows no reason";
  const SystemSample older = decode_one(encode_one(polling_sample(true, "")), 4);
  EXPECT_TRUE(older.allocators.at(0).polling_only);
  EXPECT_EQ(older.allocators.at(0).polling_reason, "");
  // A reason announced but empty is no record a writer makes. The sample ends with the reason
  // (a literal added to the table: code 1, length 1, "x"), then no steps and no OOMs.
  ASSERT_EQ(with.substr(with.size() - 5), "\x01\x01x\x00\x00"s);
  std::string empty = with.substr(0, with.size() - 5) + "\x00\x00\x00"s;
  ASSERT_LT(static_cast<unsigned char>(empty[0]), 0x80U) << "a one-byte sample length";
  empty[0] = static_cast<char>(empty[0] - 2);
  EXPECT_THROW(decode_one(empty), FormatError);
}

TEST(SampleCodec, ExactSampleDecodesCleanly) {
  // The same shape as the hostile cases above, well formed: guards against the hostile cases
  // throwing for the wrong reason.
  SampleDecoder decoder;
  const std::string bytes("\x07\x00\x00\x00\x00\x00\x00\x00", 8);
  std::string_view cursor = bytes;
  SystemSample out;
  decoder.decode(cursor, 42, out);
  EXPECT_EQ(out.timestamp_ns, 42);
  EXPECT_TRUE(cursor.empty());
}

TEST(SampleCodec, MetadataRoundTrips) {
  const RecordingMetadata metadata = testing::make_metadata();
  const RecordingMetadata decoded = decode_metadata(encode_metadata(metadata));
  EXPECT_EQ(decoded.created_ns, metadata.created_ns);
  EXPECT_EQ(decoded.interval_ns, metadata.interval_ns);
  EXPECT_EQ(decoded.hostname, metadata.hostname);
  EXPECT_EQ(decoded.driver_version, metadata.driver_version);
  EXPECT_EQ(decoded.command, metadata.command);
  EXPECT_EQ(decoded.writer_version, metadata.writer_version);
  EXPECT_THROW(decode_metadata(encode_metadata(metadata).substr(0, 10)), FormatError);
}

}  // namespace
}  // namespace vramscope::format
