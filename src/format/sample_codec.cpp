// src/format/sample_codec.cpp -- SystemSample <-> bytes (layout described in sample_codec.hpp)
//
// Encoder and decoder are written field by field in the same order so they can be read side by
// side; any change here is a format change and bumps recording_version. The encoder writes the
// current version only; the decoder reads every version (a branch per field that changed).
#include "format/sample_codec.hpp"

#include <string>

#include "format/varint.hpp"

namespace vramscope::format {

namespace {

// String codes (see the header).
constexpr uint64_t string_empty = 0;
constexpr uint64_t string_literal_added = 1;
constexpr uint64_t string_literal = 2;
constexpr uint64_t string_table_base = 3;

// DeviceSample flag bits: presence of each optional, then the booleans.
enum DeviceFlag : uint32_t {
  DeviceHasTotal = 1U << 0U,
  DeviceHasReserved = 1U << 1U,
  DeviceHasUsed = 1U << 2U,
  DeviceHasFree = 1U << 3U,
  DeviceHasBar1Total = 1U << 4U,
  DeviceHasBar1Used = 1U << 5U,
  DeviceHasMigEnabled = 1U << 6U,
  DeviceMigEnabled = 1U << 7U,
  DeviceMemoryV2 = 1U << 8U,
  DeviceProcessesSupported = 1U << 9U,
  DeviceLost = 1U << 10U,
  DeviceKnownFlags = (1U << 11U) - 1,
};

// ProcessSample flags: the kinds bitmask in the low byte, then presence bits and `visible`.
enum ProcessFlag : uint32_t {
  ProcessKindsMask = 0xFFU,
  ProcessHasUsed = 1U << 8U,
  ProcessHasGpuInstance = 1U << 9U,
  ProcessHasComputeInstance = 1U << 10U,
  ProcessVisible = 1U << 11U,
  ProcessKnownFlags = (1U << 12U) - 1,
};

enum MigFlag : uint32_t {
  MigHasGpuInstance = 1U << 0U,
  MigHasComputeInstance = 1U << 1U,
  MigHasTotal = 1U << 2U,
  MigHasUsed = 1U << 3U,
  MigHasFree = 1U << 4U,
  MigKnownFlags = (1U << 5U) - 1,
};

enum AllocatorFlag : uint32_t {
  AllocatorPollingOnly = 1U << 0U,
  AllocatorKnownFlags = 1,
};

// StepRecord flags (version 2 on).
enum StepFlag : uint32_t {
  StepHasCategories = 1U << 0U,
  StepKnownFlags = 1,
};

/// The first version whose step records carry flags and per-category bytes.
constexpr uint16_t first_version_with_step_categories = 2;

// Allocator counters are stored in allocator_counters order, all of them in every version so
// far. A new row there is a format change: bump recording_version and read the new counter
// only from that version on (older files leave it 0).
// The same holds for step_byte_fields and oom_byte_fields.
static_assert(allocator_counter_count == 13 && step_byte_fields.size() == 5 &&
                  oom_byte_fields.size() == 5,
              "a new record field is a recording format change");

/// Wrapping difference, so that any pair of int64 timestamps round-trips without overflow.
int64_t wrapping_delta(int64_t value, int64_t base) {
  return static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(base));
}

int64_t wrapping_add(int64_t base, int64_t delta) {
  return static_cast<int64_t>(static_cast<uint64_t>(base) + static_cast<uint64_t>(delta));
}

void put_signed(std::string& out, int64_t value) { put_varint(out, zigzag(value)); }

void put_literal(std::string& out, std::string_view text) {
  put_varint(out, text.size());
  out.append(text);
}

}  // namespace

std::string_view clip_utf8(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  // Back off over continuation bytes (10xxxxxx) so the cut lands before a lead byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) --end;
  return text.substr(0, end);
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Writes one sample's fields through the encoder's string table.
class Emitter {
 public:
  Emitter(SampleEncoder& encoder, std::string& out) : m_encoder(encoder), m_out(out) {}

  void u(uint64_t value) { put_varint(m_out, value); }
  void s(int64_t value) { put_signed(m_out, value); }
  void str(std::string_view text) { m_encoder.put_string(text, m_out); }
  void opt(const std::optional<uint64_t>& value) {
    if (value) u(*value);
  }
  void opt(const std::optional<uint32_t>& value) {
    if (value) u(*value);
  }

  void device(const DeviceSample& d) {
    u(d.index);
    str(d.name);
    str(d.uuid);
    str(d.pci_bus_id);
    uint32_t flags = 0;
    if (d.total_bytes) flags |= DeviceHasTotal;
    if (d.reserved_bytes) flags |= DeviceHasReserved;
    if (d.used_bytes) flags |= DeviceHasUsed;
    if (d.free_bytes) flags |= DeviceHasFree;
    if (d.bar1_total_bytes) flags |= DeviceHasBar1Total;
    if (d.bar1_used_bytes) flags |= DeviceHasBar1Used;
    if (d.mig_enabled) flags |= DeviceHasMigEnabled;
    if (d.mig_enabled.value_or(false)) flags |= DeviceMigEnabled;
    if (d.memory_v2) flags |= DeviceMemoryV2;
    if (d.processes_supported) flags |= DeviceProcessesSupported;
    if (d.lost) flags |= DeviceLost;
    u(flags);
    opt(d.total_bytes);
    opt(d.reserved_bytes);
    opt(d.used_bytes);
    opt(d.free_bytes);
    opt(d.bar1_total_bytes);
    opt(d.bar1_used_bytes);
    u(d.mig_instances.size());
    for (const auto& mig : d.mig_instances) mig_instance(mig);
    u(d.processes.size());
    for (const auto& process : d.processes) this->process(process);
    str(d.error);
  }

  void mig_instance(const MigInstanceSample& m) {
    u(m.index);
    str(m.uuid);
    uint32_t flags = 0;
    if (m.gpu_instance_id) flags |= MigHasGpuInstance;
    if (m.compute_instance_id) flags |= MigHasComputeInstance;
    if (m.total_bytes) flags |= MigHasTotal;
    if (m.used_bytes) flags |= MigHasUsed;
    if (m.free_bytes) flags |= MigHasFree;
    u(flags);
    opt(m.gpu_instance_id);
    opt(m.compute_instance_id);
    opt(m.total_bytes);
    opt(m.used_bytes);
    opt(m.free_bytes);
  }

  void process(const ProcessSample& p) {
    u(p.pid);
    uint32_t flags = p.kinds;
    if (p.used_bytes) flags |= ProcessHasUsed;
    if (p.gpu_instance_id) flags |= ProcessHasGpuInstance;
    if (p.compute_instance_id) flags |= ProcessHasComputeInstance;
    if (p.visible) flags |= ProcessVisible;
    u(flags);
    opt(p.used_bytes);
    opt(p.gpu_instance_id);
    opt(p.compute_instance_id);
    str(p.user);
    str(p.command);
  }

  void allocator(const AllocatorSample& a, int64_t timestamp_ns) {
    u(a.pid);
    s(a.rank);
    s(a.world_size);
    s(a.cuda_device);
    str(a.device_uuid);
    for (const AllocatorCounter& counter : allocator_counters) u(a.*counter.member);
    u(a.polling_only ? AllocatorPollingOnly : 0U);
    s(wrapping_delta(a.updated_ns, timestamp_ns));
  }

  void step(const StepRecord& r, int64_t timestamp_ns) {
    u(r.pid);
    s(r.rank);
    s(r.cuda_device);
    str(r.device_uuid);
    u(r.step);
    s(wrapping_delta(r.end_ns, timestamp_ns));
    s(r.duration_ns);
    for (const auto& field : step_byte_fields) u(r.*field.member);
    u(r.category_bytes ? StepHasCategories : 0U);
    if (r.category_bytes) {
      for (uint64_t value : *r.category_bytes) u(value);
    }
  }

  void oom(const OomRecord& r, int64_t timestamp_ns) {
    u(r.pid);
    s(r.rank);
    s(r.cuda_device);
    str(r.device_uuid);
    s(wrapping_delta(r.timestamp_ns, timestamp_ns));
    for (const auto& field : oom_byte_fields) u(r.*field.member);
  }

  void sample(const SystemSample& sample, int64_t base_timestamp_ns) {
    s(wrapping_delta(sample.timestamp_ns, base_timestamp_ns));
    str(sample.hostname);
    str(sample.driver_version);
    u(sample.devices.size());
    for (const auto& d : sample.devices) device(d);
    u(sample.allocators.size());
    for (const auto& a : sample.allocators) allocator(a, sample.timestamp_ns);
    u(sample.steps.size());
    for (const auto& r : sample.steps) step(r, sample.timestamp_ns);
    u(sample.ooms.size());
    for (const auto& r : sample.ooms) oom(r, sample.timestamp_ns);
  }

 private:
  SampleEncoder& m_encoder;
  std::string& m_out;
};

void SampleEncoder::put_string(std::string_view text, std::string& out) {
  text = clip_utf8(text, max_string_bytes);
  if (text.empty()) {
    put_varint(out, string_empty);
    return;
  }
  if (auto found = m_table.find(text); found != m_table.end()) {
    put_varint(out, string_table_base + found->second);
    return;
  }
  if (m_table.size() < max_table_strings && m_table_bytes + text.size() <= max_table_bytes) {
    const auto index = static_cast<uint32_t>(m_table.size());
    m_order.push_back(m_table.emplace(std::string(text), index).first);
    m_table_bytes += text.size();
    put_varint(out, string_literal_added);
  } else {
    put_varint(out, string_literal);
  }
  put_literal(out, text);
}

void SampleEncoder::shrink_table(std::size_t size) {
  while (m_order.size() > size) {
    m_table_bytes -= m_order.back()->first.size();
    m_table.erase(m_order.back());
    m_order.pop_back();
  }
}

bool SampleEncoder::encode(const SystemSample& sample, int64_t base_timestamp_ns,
                           std::string& out) {
  const std::size_t table_mark = m_order.size();
  m_scratch.clear();
  Emitter(*this, m_scratch).sample(sample, base_timestamp_ns);
  if (m_scratch.size() > max_sample_bytes) {
    shrink_table(table_mark);
    return false;
  }
  put_varint(out, m_scratch.size());
  out.append(m_scratch);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Reads fields from a bounded byte range; every read checks what is left.
class Cursor {
 public:
  Cursor(SampleDecoder& decoder, std::string_view bytes) : m_decoder(decoder), m_bytes(bytes) {}

  std::size_t remaining() const { return m_bytes.size(); }

  uint64_t u() {
    uint64_t value = 0;
    std::size_t at = 0;
    switch (get_varint(m_bytes, at, value)) {
      case VarintRead::Ok: break;
      case VarintRead::Cut: throw FormatError("varint runs past the end");
      case VarintRead::Overflow: throw FormatError("varint overflows 64 bits");
      case VarintRead::TooLong: throw FormatError("varint longer than 10 bytes");
    }
    m_bytes.remove_prefix(at);
    return value;
  }

  uint32_t u32(const char* what) {
    const uint64_t value = u();
    if (value > UINT32_MAX) throw FormatError(std::string(what) + " exceeds 32 bits");
    return static_cast<uint32_t>(value);
  }

  int64_t s() { return unzigzag(u()); }

  int32_t s32(const char* what) {
    const int64_t value = s();
    if (value < INT32_MIN || value > INT32_MAX) {
      throw FormatError(std::string(what) + " exceeds 32 bits");
    }
    return static_cast<int32_t>(value);
  }

  /// A count of elements of type T that each take at least one byte, bounded by `maximum`.
  /// The memory the elements will take is charged to the decoder's expansion budget.
  template <typename T>
  std::size_t count(uint32_t maximum, const char* what) {
    const uint64_t value = u();
    if (value > maximum || value > remaining()) {
      throw FormatError(std::string("implausible ") + what + " count " + std::to_string(value));
    }
    m_decoder.m_expanded_bytes += value * sizeof(T);
    return static_cast<std::size_t>(value);
  }

  uint32_t flags(uint32_t known, const char* what) {
    const uint64_t value = u();
    if ((value & ~static_cast<uint64_t>(known)) != 0) {
      throw FormatError(std::string("unknown ") + what + " flag bits");
    }
    return static_cast<uint32_t>(value);
  }

  std::string_view take(std::size_t size) {
    if (size > remaining()) throw FormatError("field runs past the end");
    const std::string_view out = m_bytes.substr(0, size);
    m_bytes.remove_prefix(size);
    return out;
  }

  void str(std::string& out) {
    const uint64_t code = u();
    if (code == string_empty) {
      out.clear();
      return;
    }
    if (code == string_literal || code == string_literal_added) {
      const uint64_t size = u();
      if (size == 0 || size > max_string_bytes) throw FormatError("bad string length");
      out.assign(take(static_cast<std::size_t>(size)));
      if (code == string_literal_added) {
        auto& table = m_decoder.m_table;
        if (table.size() >= max_table_strings || m_decoder.m_table_bytes + size > max_table_bytes) {
          throw FormatError("string table overflow");
        }
        table.push_back(out);
        m_decoder.m_table_bytes += size;
      }
    } else {
      const uint64_t index = code - string_table_base;
      if (index >= m_decoder.m_table.size()) throw FormatError("string reference out of range");
      out = m_decoder.m_table[static_cast<std::size_t>(index)];
    }
    m_decoder.m_expanded_bytes += out.size();
  }

  template <typename T>
  void opt(std::optional<T>& out, bool present) {
    if (!present) {
      out.reset();
    } else if constexpr (sizeof(T) == 4) {
      out = u32("optional field");
    } else {
      out = u();
    }
  }

  void device(DeviceSample& d) {
    d.index = u32("device index");
    str(d.name);
    str(d.uuid);
    str(d.pci_bus_id);
    const uint32_t f = flags(DeviceKnownFlags, "device");
    opt(d.total_bytes, f & DeviceHasTotal);
    opt(d.reserved_bytes, f & DeviceHasReserved);
    opt(d.used_bytes, f & DeviceHasUsed);
    opt(d.free_bytes, f & DeviceHasFree);
    opt(d.bar1_total_bytes, f & DeviceHasBar1Total);
    opt(d.bar1_used_bytes, f & DeviceHasBar1Used);
    if ((f & DeviceMigEnabled) && !(f & DeviceHasMigEnabled)) {
      throw FormatError("MIG value without presence bit");
    }
    d.mig_enabled.reset();
    if (f & DeviceHasMigEnabled) d.mig_enabled = (f & DeviceMigEnabled) != 0;
    d.memory_v2 = (f & DeviceMemoryV2) != 0;
    d.processes_supported = (f & DeviceProcessesSupported) != 0;
    d.lost = (f & DeviceLost) != 0;
    d.mig_instances.resize(count<MigInstanceSample>(max_mig_instances, "MIG instance"));
    for (auto& mig : d.mig_instances) mig_instance(mig);
    d.processes.resize(count<ProcessSample>(max_processes, "process"));
    for (auto& process : d.processes) this->process(process);
    str(d.error);
  }

  void mig_instance(MigInstanceSample& m) {
    m.index = u32("MIG index");
    str(m.uuid);
    const uint32_t f = flags(MigKnownFlags, "MIG");
    opt(m.gpu_instance_id, f & MigHasGpuInstance);
    opt(m.compute_instance_id, f & MigHasComputeInstance);
    opt(m.total_bytes, f & MigHasTotal);
    opt(m.used_bytes, f & MigHasUsed);
    opt(m.free_bytes, f & MigHasFree);
  }

  void process(ProcessSample& p) {
    p.pid = u32("pid");
    const uint32_t f = flags(ProcessKnownFlags, "process");
    p.kinds = static_cast<uint8_t>(f & ProcessKindsMask);
    p.visible = (f & ProcessVisible) != 0;
    opt(p.used_bytes, f & ProcessHasUsed);
    opt(p.gpu_instance_id, f & ProcessHasGpuInstance);
    opt(p.compute_instance_id, f & ProcessHasComputeInstance);
    str(p.user);
    str(p.command);
  }

  void allocator(AllocatorSample& a, int64_t timestamp_ns) {
    a.pid = u32("pid");
    a.rank = s32("rank");
    a.world_size = s32("world size");
    a.cuda_device = s32("CUDA device");
    str(a.device_uuid);
    for (const AllocatorCounter& counter : allocator_counters) a.*counter.member = u();
    a.polling_only = (flags(AllocatorKnownFlags, "allocator") & AllocatorPollingOnly) != 0;
    a.updated_ns = wrapping_add(timestamp_ns, s());
  }

  void step(StepRecord& r, int64_t timestamp_ns) {
    r.pid = u32("pid");
    r.rank = s32("rank");
    r.cuda_device = s32("CUDA device");
    str(r.device_uuid);
    r.step = u();
    r.end_ns = wrapping_add(timestamp_ns, s());
    r.duration_ns = s();
    for (const auto& field : step_byte_fields) r.*field.member = u();
    r.category_bytes.reset();
    if (m_decoder.m_version < first_version_with_step_categories) return;
    if ((flags(StepKnownFlags, "step") & StepHasCategories) != 0) {
      CategoryBytes bytes{};
      for (uint64_t& value : bytes) value = u();
      r.category_bytes = bytes;
    }
  }

  void oom(OomRecord& r, int64_t timestamp_ns) {
    r.pid = u32("pid");
    r.rank = s32("rank");
    r.cuda_device = s32("CUDA device");
    str(r.device_uuid);
    r.timestamp_ns = wrapping_add(timestamp_ns, s());
    for (const auto& field : oom_byte_fields) r.*field.member = u();
  }

  void sample(SystemSample& out, int64_t base_timestamp_ns) {
    out.timestamp_ns = wrapping_add(base_timestamp_ns, s());
    str(out.hostname);
    str(out.driver_version);
    out.devices.resize(count<DeviceSample>(max_devices, "device"));
    for (auto& d : out.devices) device(d);
    out.allocators.resize(count<AllocatorSample>(max_allocators, "allocator"));
    for (auto& a : out.allocators) allocator(a, out.timestamp_ns);
    out.steps.resize(count<StepRecord>(max_records, "step"));
    for (auto& r : out.steps) step(r, out.timestamp_ns);
    out.ooms.resize(count<OomRecord>(max_records, "OOM"));
    for (auto& r : out.ooms) oom(r, out.timestamp_ns);
  }

 private:
  SampleDecoder& m_decoder;
  std::string_view m_bytes;
};

void SampleDecoder::decode(std::string_view& bytes, int64_t base_timestamp_ns,
                           SystemSample& out) {
  Cursor outer(*this, bytes);
  const uint64_t size = outer.u();
  if (size == 0 || size > outer.remaining()) throw FormatError("bad sample length");
  Cursor inner(*this, outer.take(static_cast<std::size_t>(size)));
  inner.sample(out, base_timestamp_ns);
  if (inner.remaining() != 0) throw FormatError("trailing bytes after a sample");
  bytes.remove_prefix(bytes.size() - outer.remaining());
}

uint64_t SampleDecoder::take_expanded_bytes() {
  const uint64_t out = m_expanded_bytes;
  m_expanded_bytes = 0;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Metadata

std::string encode_metadata(const RecordingMetadata& metadata) {
  std::string out;
  put_signed(out, metadata.created_ns);
  put_signed(out, metadata.interval_ns);
  for (const std::string* text : {&metadata.hostname, &metadata.driver_version, &metadata.command,
                                  &metadata.writer_version}) {
    put_literal(out, clip_utf8(*text, max_string_bytes));
  }
  return out;
}

RecordingMetadata decode_metadata(std::string_view bytes) {
  SampleDecoder unused;
  Cursor cursor(unused, bytes);
  RecordingMetadata metadata;
  metadata.created_ns = cursor.s();
  metadata.interval_ns = cursor.s();
  for (std::string* text : {&metadata.hostname, &metadata.driver_version, &metadata.command,
                            &metadata.writer_version}) {
    const uint64_t size = cursor.u();
    if (size > max_string_bytes) throw FormatError("metadata string too long");
    text->assign(cursor.take(static_cast<std::size_t>(size)));
  }
  return metadata;
}

}  // namespace vramscope::format
