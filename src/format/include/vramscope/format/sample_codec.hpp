// src/format/include/vramscope/format/sample_codec.hpp -- compact binary encoding of SystemSample and RecordingMetadata
//
// Encoding, per sample (all integers LEB128 varints; "s" = zigzag signed; "str" = string code):
//   timestamp: s delta from the previous sample of the chunk (the first: from first_ts_ns)
//   hostname str, driver_version str
//   devices: count, then per device
//     index, name str, uuid str, pci_bus_id str, flags (presence and booleans), the present
//     optionals, MIG instances (count, each: index, uuid str, flags, optionals), processes
//     (count, each: pid, flags = kinds | presence | visible, optionals, user str, command str),
//     error str
//   allocators, steps, ooms: count, then their fields in declaration order; their timestamps are
//     s deltas from the sample's timestamp. From version 2 a step ends with flags (bit 0: the
//     6 category byte counts follow, in MemoryCategory order). From version 4 an allocator's
//     flags have bit 1 when the agent's settled driver breakdown follows its fields: paired_ns
//     (s, whole: it changes at the agent's pairings, not per sample), driver, reserved,
//     context, excess bytes, flags (presence of private pools, NCCL, other, first context),
//     the present ones, NCCL version, unsettled count. From version 5 bit 2 says that the
//     polling reason follows (after the breakdown, when there is one), a non-empty str.
//
// String code: 0 = "", 1 = literal (varint length, bytes) added to the string table, 2 = literal
// not added (the table is full), n >= 3 = table[n - 3]. The table lives for the whole file, so a
// GPU name or command line is stored once per recording, not once per sample; that is safe because
// a reader stops at the first damaged chunk anyway.
//
// Decoding trusts nothing: every count and length is checked against the bytes left and against
// the maxima below, unknown flag bits are rejected, and a sample must use exactly its bytes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::format {

/// Longest string stored; the writer truncates longer ones at a UTF-8 character boundary.
inline constexpr uint32_t max_string_bytes = 64U * 1024U;
/// String table limits (entries and bytes); past them the writer stores literals.
inline constexpr uint32_t max_table_strings = 65536;
inline constexpr uint64_t max_table_bytes = 16U << 20U;
/// Sane maxima per sample: a decoder rejects anything larger as corrupt.
inline constexpr uint32_t max_devices = 1024;
inline constexpr uint32_t max_mig_instances = 1024;
inline constexpr uint32_t max_processes = 65536;
inline constexpr uint32_t max_allocators = 65536;
inline constexpr uint32_t max_records = 1U << 20U;
/// Most memory one decoded sample may take (its strings, table references included, and the
/// storage of its lists). Charged while decoding, before each string or list is made, so that a
/// few bytes naming a 64 KiB table string 65,536 times are refused before they are expanded. An
/// honest sample is far smaller: the writer encodes at most 16 MiB per sample.
inline constexpr uint64_t max_decoded_sample_bytes = 64U << 20U;

/// A malformed encoding; the message says what was wrong.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Transparent hash so the table can be probed with a string_view without allocating.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};

/// Encodes samples, keeping the string table and the previous timestamp between calls.
class SampleEncoder {
 public:
  /// Appends one length-prefixed sample to `out`. `base_timestamp_ns` is the previous sample's
  /// timestamp in the chunk, or this sample's own timestamp when it opens the chunk.
  /// Returns false, leaving `out` and the string table as they were, when the encoded sample
  /// would exceed `max_sample_bytes`.
  bool encode(const SystemSample& sample, int64_t base_timestamp_ns, std::string& out);

  /// Largest encoded sample accepted: a quarter of the largest chunk a reader takes.
  static constexpr std::size_t max_sample_bytes = max_chunk_payload_bytes / 4;

 private:
  friend class Emitter;
  /// Writes the string code for `text`, adding it to the table when there is room.
  void put_string(std::string_view text, std::string& out);
  /// Removes table entries added after the first `size` ones.
  void shrink_table(std::size_t size);

  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> m_table;
  /// Insertion order, so that a rejected sample's new strings can be removed again.
  std::vector<std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>::iterator>
      m_order;
  uint64_t m_table_bytes = 0;
  /// Scratch buffer for one sample, reused to avoid allocating per sample.
  std::string m_scratch;
  /// The table entry the k-th string of the last samples had (UINT32_MAX: none), tried first
  /// for the k-th string of the next; strings put so far in this sample.
  std::vector<uint32_t> m_recent;
  std::size_t m_string_calls = 0;
  /// Strings of a sample whose entries are remembered (a forged sample may hold 131,072).
  static constexpr std::size_t max_recent_strings = 4096;
};

/// Decodes samples written by SampleEncoder, mirroring its string table.
class SampleDecoder {
 public:
  /// Decodes the encoding of format `version` (1..recording_version; the file header's).
  explicit SampleDecoder(uint16_t version = recording_version) : m_version(version) {}

  /// Decodes one length-prefixed sample from the front of `bytes` and advances past it.
  /// Throws FormatError on malformed input, and on a sample that would expand beyond
  /// max_decoded_sample_bytes (checked before each string or list is made).
  void decode(std::string_view& bytes, int64_t base_timestamp_ns, SystemSample& out);

 private:
  friend class Cursor;
  uint16_t m_version;
  std::vector<std::string> m_table;
  uint64_t m_table_bytes = 0;
  /// Memory the sample being decoded takes so far (bounded by max_decoded_sample_bytes).
  uint64_t m_expanded_bytes = 0;
};

/// Encodes the metadata block of the file header (all strings literal, bounded).
std::string encode_metadata(const RecordingMetadata& metadata);
/// Decodes the metadata block; trailing bytes (from a later compatible writer) are ignored.
RecordingMetadata decode_metadata(std::string_view bytes);

/// Truncates `text` to at most `max_bytes` without splitting a UTF-8 character.
std::string_view clip_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace vramscope::format
