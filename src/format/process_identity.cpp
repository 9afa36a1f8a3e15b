// src/format/process_identity.cpp -- reading start times and namespaces from /proc
#include "vramscope/format/process_identity.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <string>
#include <string_view>

namespace vramscope::format {

std::optional<uint64_t> process_start_ticks(uint32_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::array<char, 1024> buffer{};
  const ssize_t length = ::read(fd, buffer.data(), buffer.size() - 1);
  ::close(fd);
  if (length <= 0) return std::nullopt;
  // The command name (field 2) is in parentheses and may itself contain ") ", so the fields
  // after it are counted from the LAST closing parenthesis.
  std::string_view text(buffer.data(), static_cast<std::size_t>(length));
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos) return std::nullopt;
  text.remove_prefix(close_paren + 1);
  // After ")" come fields 3, 4, ...; the start time is field 22, the 20th of those.
  int field = 2;
  std::size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    const std::size_t end = text.find(' ', pos);
    const std::string_view token =
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    ++field;
    if (field == 22) {
      uint64_t ticks = 0;
      const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), ticks);
      if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
      return ticks;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

uint64_t pid_namespace_inode() {
  struct stat info {};
  if (::stat("/proc/self/ns/pid", &info) != 0) return 0;
  return static_cast<uint64_t>(info.st_ino);
}

uint32_t max_pid() {
  // PID_MAX_LIMIT on 64-bit Linux: no kernel hands out a larger pid, whatever pid_max says.
  constexpr uint32_t pid_max_limit = 4'194'304;
  const int fd = ::open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pid_max_limit;
  std::array<char, 32> buffer{};
  const ssize_t length = ::read(fd, buffer.data(), buffer.size() - 1);
  ::close(fd);
  uint32_t value = 0;
  const char* end = buffer.data() + (length > 0 ? length : 0);
  const auto [ptr, ec] = std::from_chars(buffer.data(), end, value);
  if (ec != std::errc() || value == 0 || value > pid_max_limit) return pid_max_limit;
  return value;
}

bool process_is_alive(uint32_t pid, uint64_t start_ticks) {
  // pid_max is the first pid never handed out. The bound matters beyond plausibility: a pid of
  // 2^32-1 is -1 as a pid_t, and kill(-1, 0) asks about every process we may signal.
  static const uint32_t pid_limit = max_pid();
  if (pid == 0 || pid >= pid_limit) return false;
  // EPERM means the pid exists but belongs to another user: it may have been reused, which the
  // start time below decides.
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  if (start_ticks == 0) return true;
  const std::optional<uint64_t> actual = process_start_ticks(pid);
  // A vanished /proc entry between kill() and open() is a dead process; an unreadable /proc
  // (hidepid) leaves us only the kill() answer.
  if (!actual) {
    const bool proc_mounted = ::access("/proc/self", F_OK) == 0;
    return !proc_mounted || ::access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0;
  }
  return *actual == start_ticks;
}

}  // namespace vramscope::format
