// tests/cpp/format/forge_recordings.cpp -- writes the hostile recordings of forge_recording.hpp
// into a folder, to try a CLI on them by hand or to seed a fuzzer
//
//   forge_recordings DIR
//
// Writes DIR/<shape>.vsrec for every shape (deep_digest, big_digests, table_bomb, pid_churn,
// long_command_churn, wide_sample, many_processes, trailer_flood, small_segments, bit_flip,
// forged_digest, joined); each is small
// and passes the checks it is meant to pass. Not a test by itself
// (tests/cpp/cli/test_cli_bounds.cpp is).
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/forge_recording.hpp"
#include "vramscope/report/recording_summary.hpp"

namespace {

/// Writes every forged file into `dir`; 0, or 1 when one cannot be written.
int forge_into(const std::string& dir) {
  using namespace vramscope;
  const std::string genuine = forge::genuine(100, std::make_shared<report::SummaryDigest>(), 1024);
  report::RecordingSummary claim;
  SystemSample s = forge::one_gpu(forge::at_ns(0));
  s.devices[0].uuid = "GPU-not-in-any-sample";
  s.devices[0].used_bytes = UINT64_MAX;
  claim.add(s);
  std::vector<SystemSample> later = forge::plain_samples(40);
  for (SystemSample& sample : later) sample.devices[0].used_bytes = 77ULL << 30U;
  RecordingWriterOptions options;
  options.digest = std::make_shared<report::SummaryDigest>();
  const std::vector<std::pair<std::string, std::string>> files = {
      {"deep_digest", forge::forge_deep_digest()},
      {"big_digests", forge::forge_big_digests(100)},
      {"table_bomb", forge::forge_table_bomb()},
      {"pid_churn", forge::forge_pid_churn(200, 1900, 4096)},
      {"long_command_churn", forge::forge_pid_churn(40, 1900, 32U << 10U)},
      {"wide_sample", forge::forge_wide_sample(9, 65536)},
      {"many_processes", forge::forge_many_processes(5000, 3)},
      {"trailer_flood", forge::forge_trailer_flood(4U << 20U)},
      {"small_segments", forge::genuine(100'000, nullptr, 1)},
      {"bit_flip", forge::flip_bit(genuine, forge::first_chunk_offset() + 12, 2)},
      {"forged_digest",
       forge::genuine(20, std::make_shared<forge::FixedDigest>(claim.serialize()), 1)},
      {"joined", forge::genuine(40, std::make_shared<report::SummaryDigest>()) +
                     forge::write(later, options)},
  };
  for (const auto& [name, bytes] : files) {
    const std::string path = dir + "/" + name + ".vsrec";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "forge_recordings: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%s %zu bytes\n", path.c_str(), bytes.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: forge_recordings DIR\n");
    return 2;
  }
  try {
    return forge_into(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge_recordings: %s\n", e.what());
    return 1;
  }
}
