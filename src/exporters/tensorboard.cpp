// src/exporters/tensorboard.cpp -- TFRecord framing and hand-encoded Event protobufs
#include "vramscope/exporters/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "vramscope/clock.hpp"
#include "vramscope/core/crc32c.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {

namespace {

// Protobuf tag bytes: (field number << 3) | wire type.
constexpr char event_wall_time = 0x09;     // 1, fixed64
constexpr char event_step = 0x10;          // 2, varint
constexpr char event_file_version = 0x1A;  // 3, length-delimited
constexpr char event_summary = 0x2A;       // 5, length-delimited
constexpr char summary_value = 0x0A;       // Summary.value 1, length-delimited
constexpr char value_tag = 0x0A;           // Value.tag 1, length-delimited
constexpr char value_simple_value = 0x15;  // Value.simple_value 2, fixed32

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80U) {
    out += static_cast<char>((value & 0x7FU) | 0x80U);
    value >>= 7U;
  }
  out += static_cast<char>(value);
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::is_unsigned_v<T>);
  for (std::size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((value >> (8U * i)) & 0xFFU);
}

void put_double(std::string& out, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_little_endian(out, bits);
}

void put_bytes_field(std::string& out, char tag, std::string_view bytes) {
  out += tag;
  put_varint(out, bytes.size());
  out.append(bytes);
}

std::string local_hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

/// Per-process counter of files created, the last part of the file name (as the Python writers do).
std::atomic<uint32_t> file_counter{0};

}  // namespace

std::string encode_file_version_event(double wall_time_s) {
  std::string event;
  event += event_wall_time;
  put_double(event, wall_time_s);
  put_bytes_field(event, event_file_version, "brain.Event:2");
  return event;
}

std::string encode_scalars_event(const std::vector<TensorBoardScalar>& scalars, int64_t step,
                                 double wall_time_s) {
  std::string summary;
  for (const TensorBoardScalar& scalar : scalars) {
    std::string value;
    put_bytes_field(value, value_tag, scalar.tag);
    value += value_simple_value;
    const auto narrow = static_cast<float>(scalar.value);
    uint32_t bits = 0;
    std::memcpy(&bits, &narrow, sizeof bits);
    put_little_endian(value, bits);
    put_bytes_field(summary, summary_value, value);
  }
  std::string event;
  event += event_wall_time;
  put_double(event, wall_time_s);
  // proto3 leaves default values out; readers take an absent step as 0.
  if (step != 0) {
    event += event_step;
    put_varint(event, static_cast<uint64_t>(step));
  }
  put_bytes_field(event, event_summary, summary);
  return event;
}

std::string frame_tfrecord(std::string_view payload) {
  std::string record;
  record.reserve(payload.size() + 16);
  put_little_endian(record, static_cast<uint64_t>(payload.size()));
  put_little_endian(record, crc32c_mask(crc32c(std::string_view(record.data(), 8))));
  record.append(payload);
  put_little_endian(record, crc32c_mask(crc32c(payload)));
  return record;
}

std::string tensorboard_file_name(int64_t unix_seconds, std::string_view hostname, uint32_t pid,
                                  uint32_t counter) {
  // No fmt here: this file is also linked into the agent extension, which stays small.
  std::array<char, 32> seconds{};
  std::snprintf(seconds.data(), seconds.size(), "%010lld", static_cast<long long>(unix_seconds));
  std::string name = "events.out.tfevents.";
  name += seconds.data();
  name += '.';
  name += hostname;
  return name + "." + std::to_string(pid) + "." + std::to_string(counter);
}

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir, const TensorBoardOptions& options)
    : m_options(options) {
  make_private_directories(log_dir);
  const int64_t now_ns = wall_time_ns();
  const std::string name = tensorboard_file_name(now_ns / 1000000000, local_hostname(),
                                                 static_cast<uint32_t>(::getpid()), file_counter++);
  m_path = log_dir + "/" + name;
  m_file = std::make_unique<BufferedFile>(m_path, false);
  append_event(encode_file_version_event(static_cast<double>(now_ns) / 1e9));
  // The header reaches disk at once, so TensorBoard lists the run even before the first flush.
  m_file->flush();
  m_last_flush_ns = monotonic_ns();
}

TensorBoardWriter::~TensorBoardWriter() {
  // Unwinding: BufferedFile removes the incomplete event file instead of keeping it.
  if (m_file && m_file->abandoned()) return;
  try {
    close();
  } catch (const Error&) {
    // Destructors cannot report; callers that care call close().
  }
}

const std::string& TensorBoardWriter::path() const { return m_path; }

void TensorBoardWriter::append_event(const std::string& payload) {
  if (!m_file) throw Error("TensorBoard writer is closed");
  m_file->append_record(frame_tfrecord(payload));
  if (m_options.flush_interval_ns > 0 && m_last_flush_ns != 0) {
    const int64_t now = monotonic_ns();
    if (now - m_last_flush_ns >= m_options.flush_interval_ns) {
      m_file->flush();
      m_last_flush_ns = now;
    }
  }
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step,
                                   double wall_time_s) {
  add_scalars({TensorBoardScalar{std::string(tag), value}}, step, wall_time_s);
}

void TensorBoardWriter::add_scalars(const std::vector<TensorBoardScalar>& scalars, int64_t step,
                                    double wall_time_s) {
  if (scalars.empty()) return;
  append_event(encode_scalars_event(scalars, step, wall_time_s));
}

std::string tensorboard_torch_prefix(bool qualify_process, uint32_t pid, int32_t rank,
                                     int32_t cuda_device) {
  std::string prefix = "memory/";
  if (qualify_process)
    prefix += rank >= 0 ? "rank" + std::to_string(rank) + "/" : "pid" + std::to_string(pid) + "/";
  return prefix + "cuda" + std::to_string(cuda_device) + "/";
}

std::vector<TensorBoardScalar> tensorboard_step_scalars(const StepRecord& step,
                                                        std::string_view prefix, bool end_values,
                                                        std::optional<uint64_t> non_pytorch_bytes,
                                                        const DriverPartValues& parts,
                                                        bool peaks_sampled) {
  std::vector<TensorBoardScalar> scalars;
  scalars.reserve(std::size(tensorboard_step_end_tags) + std::size(tensorboard_step_tags) + 2 +
                  std::size(tensorboard_driver_part_tags) + memory_category_count);
  const auto add = [&](std::string_view tag, uint64_t value) {
    scalars.push_back({std::string(prefix).append(tag), static_cast<double>(value)});
  };
  if (end_values) {
    for (const auto& [tag, member] : tensorboard_step_end_tags) add(tag, step.*member);
  }
  for (const auto& [tag, member] : tensorboard_step_tags) add(tag, step.*member);
  if (peaks_sampled) add(tensorboard_sampled_tag, 1);
  if (end_values && non_pytorch_bytes) add(tensorboard_non_pytorch_tag, *non_pytorch_bytes);
  if (end_values) {
    for (const auto& [tag, member] : tensorboard_driver_part_tags) {
      if (parts.*member) add(tag, *(parts.*member));
    }
  }
  if (step.category_bytes) {
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      add("category/" + std::string(memory_category_names[c]) + "_bytes",
          (*step.category_bytes)[c]);
    }
  }
  return scalars;
}

DriverPartValues driver_part_values(const DriverBreakdown& b) {
  return {b.context_bytes, b.other_bytes, b.nccl_bytes, b.private_pool_bytes};
}

void TensorBoardWriter::write(const SystemSample& sample) {
  const double wall_s = static_cast<double>(sample.timestamp_ns) / 1e9;
  if (m_options.driver_tags && !sample.devices.empty()) {
    std::vector<TensorBoardScalar> scalars;
    for (const DeviceSample& device : sample.devices) {
      const std::string prefix = "driver/gpu" + std::to_string(device.index) + "/";
      for (const auto& [tag, member] : tensorboard_driver_tags) {
        if (const auto& value = device.*member) {
          scalars.push_back({prefix + std::string(tag), static_cast<double>(*value)});
        }
      }
    }
    add_scalars(scalars, m_sample_index, wall_s);
  }
  ++m_sample_index;
  for (const AllocatorSample& allocator : sample.allocators) {
    const std::string prefix = tensorboard_torch_prefix(m_options.qualify_process, allocator.pid,
                                                        allocator.rank, allocator.cuda_device);
    std::vector<TensorBoardScalar> scalars;
    scalars.reserve(std::size(tensorboard_allocator_tags) + 1 +
                    std::size(tensorboard_driver_part_tags));
    for (const auto& [tag, member] : tensorboard_allocator_tags) {
      scalars.push_back({prefix + std::string(tag), static_cast<double>(allocator.*member)});
    }
    // A recording of format 4: what the agent's last settled pairing named, not the driver's
    // reading of this instant minus reserved.
    if (allocator.breakdown) {
      const DriverBreakdown& b = *allocator.breakdown;
      scalars.push_back({prefix + std::string(tensorboard_non_pytorch_tag),
                         static_cast<double>(b.non_pytorch_bytes())});
      const DriverPartValues parts = driver_part_values(b);
      for (const auto& [tag, member] : tensorboard_driver_part_tags) {
        if (parts.*member) {
          scalars.push_back({prefix + std::string(tag), static_cast<double>(*(parts.*member))});
        }
      }
    }
    add_scalars(scalars, static_cast<int64_t>(allocator.step), wall_s);
  }
  const PolledSteps polled(sample);
  for (const StepRecord& step : sample.steps) write_step(step, polled.sampled(step));
  for (const OomRecord& oom : sample.ooms) {
    const std::string prefix =
        tensorboard_torch_prefix(m_options.qualify_process, oom.pid, oom.rank, oom.cuda_device);
    const auto& [tag, member] = tensorboard_oom_tag;
    add_scalar(prefix + std::string(tag), static_cast<double>(oom.*member), m_sample_index,
               static_cast<double>(oom.timestamp_ns) / 1e9);
  }
}

void TensorBoardWriter::write_step(const StepRecord& step, bool peaks_sampled) {
  const std::string prefix =
      tensorboard_torch_prefix(m_options.qualify_process, step.pid, step.rank, step.cuda_device);
  add_scalars(tensorboard_step_scalars(step, prefix, false, std::nullopt, {}, peaks_sampled),
              static_cast<int64_t>(step.step), static_cast<double>(step.end_ns) / 1e9);
}

void TensorBoardWriter::flush() {
  if (!m_file) return;
  m_file->flush();
  m_last_flush_ns = monotonic_ns();
}

void TensorBoardWriter::close() {
  if (!m_file) return;
  m_file->close();
  m_file.reset();
}

}  // namespace vramscope::exporters
