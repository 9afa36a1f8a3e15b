// agent/bindings/bind_tensorboard.cpp -- vramscope._agent.TensorBoardWriter over exporters::TensorBoardWriter
//
// Lets Monitor(tensorboard_dir=...) write event files without the tensorboard package (and
// without TensorFlow or protobuf). The methods mirror the part of SummaryWriter the Monitor's
// sink calls, so vramscope.tensorboard can take either. Every call holds the GIL: a writer call
// is a buffer append (a write(2) at most every 2 s), and the GIL serialises callers of the
// same writer, which the C++ class requires. tensorboard_step_scalars gives the Monitor's sink
// the tags of a step from the exporter's own tables, for this writer and for a user's
// SummaryWriter alike: the tag scheme is written once, in vramscope/exporters/tensorboard.hpp.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/exporters/tensorboard.hpp"
#include "vramscope/sample.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

namespace {

using exporters::TensorBoardOptions;
using exporters::TensorBoardScalar;
using exporters::TensorBoardWriter;

TensorBoardOptions writer_options() {
  TensorBoardOptions options;
  // The Monitor writes one run per rank and puts only torch tags of its own process in it.
  options.qualify_process = false;
  options.driver_tags = false;
  return options;
}

void add_scalar(TensorBoardWriter& writer, const std::string& tag, double value,
                std::optional<int64_t> global_step, std::optional<double> walltime) {
  if (tag.empty()) throw nb::value_error("TensorBoardWriter.add_scalar: empty tag");
  if (global_step && *global_step < 0) {
    throw nb::value_error("TensorBoardWriter.add_scalar: global_step must be >= 0");
  }
  if (walltime && !std::isfinite(*walltime)) {
    throw nb::value_error("TensorBoardWriter.add_scalar: walltime must be finite");
  }
  const double wall_s = walltime ? *walltime : static_cast<double>(wall_time_ns()) / 1e9;
  writer.add_scalar(tag, value, global_step.value_or(0), wall_s);
}

uint64_t bytes_of(nb::handle record, const char* field) {
  return nb::cast<uint64_t>(record.attr(field));
}

/// [(tag, value), ...] of one step record (an object with the vramscope.StepRecord fields; the
/// optional ones, world_size, non_pytorch_bytes and categories, may be missing).
nb::list step_scalars(nb::handle record, bool qualify_rank) {
  StepRecord step;
  step.cuda_device = nb::cast<int32_t>(record.attr("device"));
  step.rank = nb::cast<int32_t>(record.attr("rank"));
  step.allocated_bytes = bytes_of(record, "allocated_bytes");
  step.reserved_bytes = bytes_of(record, "reserved_bytes");
  step.peak_allocated_bytes = bytes_of(record, "peak_allocated_bytes");
  step.peak_reserved_bytes = bytes_of(record, "peak_reserved_bytes");
  step.peak_requested_bytes = bytes_of(record, "peak_requested_bytes");
  const nb::object categories = nb::getattr(record, "categories", nb::none());
  if (!categories.is_none() && nb::len(categories) > 0) {
    CategoryBytes bytes{};
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      const nb::str name(memory_category_names[c].data(), memory_category_names[c].size());
      bytes[c] = nb::cast<uint64_t>(categories.attr("get")(name, 0));
    }
    step.category_bytes = bytes;
  }
  const auto optional_bytes = [&record](const char* field) -> std::optional<uint64_t> {
    const nb::object value = nb::getattr(record, field, nb::none());
    return value.is_none() ? std::nullopt : std::optional(nb::cast<uint64_t>(value));
  };
  const std::optional<uint64_t> non_pytorch_bytes = optional_bytes("non_pytorch_bytes");
  exporters::DriverPartValues parts;
  parts.context_bytes = optional_bytes("context_bytes");
  parts.other_bytes = optional_bytes("other_bytes");
  parts.nccl_bytes = optional_bytes("nccl_bytes");
  parts.private_pool_bytes = optional_bytes("private_pool_bytes");
  // One run per rank (qualify_rank false), or a user's run shared by the ranks.
  const bool qualify =
      qualify_rank && nb::cast<int64_t>(nb::getattr(record, "world_size", nb::int_(1))) > 1;
  const std::string prefix =
      exporters::tensorboard_torch_prefix(qualify, 0, step.rank, step.cuda_device);
  // A record of the agent's own polling or of the Python fallback says peaks_exact False.
  const bool sampled = !nb::cast<bool>(nb::getattr(record, "peaks_exact", nb::bool_(true)));
  nb::list out;
  for (const TensorBoardScalar& scalar : exporters::tensorboard_step_scalars(
           step, prefix, /*end_values=*/true, non_pytorch_bytes, parts, sampled)) {
    out.append(nb::make_tuple(scalar.tag, scalar.value));
  }
  return out;
}

}  // namespace

void bind_tensorboard(nb::module_& m) {
  m.def("tensorboard_step_scalars", &step_scalars, "record"_a, "qualify_rank"_a = false,
        "[(tag, value), ...] of one Monitor step record, from the exporter's tag tables: "
        "memory/[rank<R>/]cuda<D>/ (the rank only with qualify_rank and world_size > 1), the "
        "step-end and peak bytes, non_pytorch_bytes and its parts (non_pytorch/context_bytes, "
        "non_pytorch/other_bytes, non_pytorch/nccl_bytes, private_pool_bytes) when known, "
        "category/<name>_bytes; step_peaks_sampled 1 after the peaks when the record's "
        "peaks_exact is False (polled, not exact).");
  nb::class_<TensorBoardWriter>(
      m, "TensorBoardWriter",
      "Native TensorBoard event-file writer (no tensorboard package needed). Creates log_dir "
      "(0700) and one file events.out.tfevents.<secs>.<host>.<pid>.<n> (0600) in it.")
      .def(
          "__init__",
          [](TensorBoardWriter* self, const std::string& log_dir) {
            if (log_dir.empty()) throw nb::value_error("TensorBoardWriter: empty log_dir");
            new (self) TensorBoardWriter(log_dir, writer_options());
          },
          "log_dir"_a)
      .def("add_scalar", &add_scalar, "tag"_a, "scalar_value"_a, "global_step"_a = nb::none(),
           "walltime"_a = nb::none(),
           "Append one scalar event (float32 simple_value) at global_step (default 0) and "
           "walltime (seconds since the epoch, default now). Raises RuntimeError once closed.")
      .def("flush", &TensorBoardWriter::flush, "Write every buffered event to the file.")
      .def("close", &TensorBoardWriter::close, "Flush and close the file; idempotent.")
      .def_prop_ro("path", &TensorBoardWriter::path, "The event file's path.");
}

}  // namespace vramscope::agent
