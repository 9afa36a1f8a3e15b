// src/format/segment_dir.cpp -- locating, creating and vetting the segment directory
#include "vramscope/format/segment_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "vramscope/agent_segment.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/format/agent_segments.hpp"

namespace vramscope {

std::string agent_segment_dir() {
  if (const char* env = std::getenv("VRAMSCOPE_SHM_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  // /dev/shm is tmpfs almost everywhere; some minimal containers lack it.
  struct stat info {};
  const bool have_dev_shm = ::stat("/dev/shm", &info) == 0 && S_ISDIR(info.st_mode);
  return std::string(have_dev_shm ? "/dev/shm" : "/tmp") + "/vramscope-" +
         std::to_string(::geteuid());
}

}  // namespace vramscope

namespace vramscope::format {

namespace {

/// The way out, appended to every "unsafe directory" message: on a shared host another user can
/// create /dev/shm/vramscope-<uid> first and so keep every agent of ours from publishing.
constexpr const char* unsafe_dir_hint =
    "; agents cannot publish there (another user may have created it): set VRAMSCOPE_SHM_DIR to "
    "a directory of your own, e.g. $XDG_RUNTIME_DIR/vramscope, for the trained program and the "
    "vramscope CLI alike";

}  // namespace

int open_segment_dir(const std::string& dir, bool create, std::string& error, bool* missing) {
  if (missing != nullptr) *missing = false;
  if (dir.empty()) {
    error = "empty segment directory name";
    return -1;
  }
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    error = "cannot create " + dir + ": " + errno_text(errno);
    return -1;
  }
  // O_NOFOLLOW refuses a symlink planted in place of the directory; the checks below run on
  // the opened fd, so nothing can be swapped in between.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (missing != nullptr) *missing = errno == ENOENT;
    error = dir + ": " + (errno == ELOOP ? "is a symbolic link" : errno_text(errno)) +
            (errno == ENOENT ? "" : unsafe_dir_hint);
    return -1;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISDIR(info.st_mode)) {
    error = dir + ": not a directory" + unsafe_dir_hint;
  } else if (info.st_uid != ::geteuid()) {
    error = dir + ": owned by uid " + std::to_string(info.st_uid) + ", not by us" + unsafe_dir_hint;
  } else if ((info.st_mode & 022) != 0) {
    error = dir + ": writable by group or others (expected mode 0700)" + unsafe_dir_hint;
  } else {
    // Ours and nobody else can write it, but others may still list it (the pids of every
    // monitored process): a writer makes it owner-only.
    if (create && (info.st_mode & 077) != 0) ::fchmod(fd, 0700);
    return fd;
  }
  ::close(fd);
  return -1;
}

std::string segment_file_name(uint32_t pid) { return "agent-" + std::to_string(pid) + ".seg"; }

std::optional<uint32_t> parse_segment_file_name(std::string_view name) {
  constexpr std::string_view prefix = "agent-";
  constexpr std::string_view suffix = ".seg";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  uint32_t pid = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || pid == 0) return std::nullopt;
  return pid;
}

}  // namespace vramscope::format
