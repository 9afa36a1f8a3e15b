// agent/bindings/bind_tensorboard.cpp -- vramscope._agent.TensorBoardWriter over exporters::TensorBoardWriter
//
// Lets Monitor(tensorboard_dir=...) write event files without the tensorboard package (and
// without TensorFlow or protobuf). The methods mirror the part of SummaryWriter the Monitor's
// sink calls, so vramscope.tensorboard can take either. Every call holds the GIL: a writer call
// is a buffer append (a write(2) at most every 2 s), and the GIL serialises callers of the
// same writer, which the C++ class requires.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/exporters/tensorboard.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

namespace {

using exporters::TensorBoardOptions;
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

}  // namespace

void bind_tensorboard(nb::module_& m) {
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
