// src/report/run_profile.cpp -- reads a recording once into its summary and step peaks
#include "vramscope/report/run_profile.hpp"

#include <exception>
#include <memory>

#include "vramscope/status.hpp"

namespace vramscope::report {

RunProfile load_run_profile(
    const std::string& path,
    const std::function<void(const SystemSample&, const JoinResult&)>& also) {
  RunProfile profile;
  profile.path = path;
  StepPeakCollector steps;
  try {
    const std::unique_ptr<RecordingReader> reader = RecordingReader::open(path);
    profile.metadata = reader->metadata();
    SystemSample sample;
    // One join per sample for everything but the summary (which makes its own), into rows kept
    // from sample to sample.
    Joiner joiner;
    JoinResult joined;
    while (reader->next(sample)) {
      profile.summary.add(sample);
      join_processes(sample, joiner, joined);
      steps.add(sample, joined);
      if (also) also(sample, joined);
    }
    profile.tail.state = reader->tail_state();
    profile.tail.message = reader->tail_message();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The reader validates what it reads; anything else it throws is still a bad file to us
    // (the same wording as `show`).
    throw Error(path + ": cannot read recording: " + e.what());
  }
  profile.steps = steps.processes();
  return profile;
}

}  // namespace vramscope::report
