// src/backends/proc_info.cpp -- user and command of a pid from /proc, cached across samples
#include "vramscope/backends/proc_info.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace vramscope {
namespace {

/// Reads up to `capacity` bytes of `path` into `buffer`; returns the byte count or -1.
/// /proc files are generated on read, so one read() of a large enough buffer is one snapshot.
ssize_t read_small_file(const char* path, char* buffer, std::size_t capacity) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::size_t total = 0;
  while (total < capacity) {
    const ssize_t n = ::read(fd, buffer + total, capacity - total);
    if (n < 0) {
      ::close(fd);
      return -1;
    }
    if (n == 0) break;
    total += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return static_cast<ssize_t>(total);
}

/// "<root>/<pid>/<name>" into a fixed buffer (no allocation on the hot path).
void proc_path(std::array<char, 256>& out, const std::string& root, uint32_t pid,
               const char* name) {
  std::snprintf(out.data(), out.size(), "%s/%u/%s", root.c_str(), pid, name);
}

/// Parses the start time (field 22) and comm out of /proc/<pid>/stat text. comm may itself
/// hold spaces and parentheses, so fields are counted from the last ')'.
bool parse_stat(std::string_view stat, uint64_t& start_ticks, std::string* comm) {
  const std::size_t open = stat.find('(');
  const std::size_t close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return false;
  if (comm != nullptr) comm->assign(stat.substr(open + 1, close - open - 1));
  std::size_t pos = close + 1;
  // Field 3 (state) follows ") "; field 22 is the 20th field after the ')'.
  for (int field = 3; field < 22; ++field) {
    pos = stat.find(' ', pos + 1);
    if (pos == std::string_view::npos) return false;
  }
  const std::string_view rest = stat.substr(pos + 1);
  uint64_t value = 0;
  std::size_t digits = 0;
  for (const char c : rest) {
    if (c < '0' || c > '9') break;
    value = value * 10 + static_cast<uint64_t>(c - '0');
    ++digits;
  }
  if (digits == 0) return false;
  start_ticks = value;
  return true;
}

/// Real uid from the "Uid:" line of /proc/<pid>/status.
std::optional<uint32_t> parse_status_uid(std::string_view status) {
  const std::size_t line = status.find("\nUid:");
  if (line == std::string_view::npos) return std::nullopt;
  const char* begin = status.data() + line + 5;
  char* end = nullptr;
  const unsigned long uid = std::strtoul(begin, &end, 10);
  if (end == begin) return std::nullopt;
  return static_cast<uint32_t>(uid);
}

}  // namespace

std::optional<uint64_t> read_start_ticks(uint32_t pid, const std::string& proc_root) {
  std::array<char, 256> path{};
  std::array<char, 1024> buffer{};
  proc_path(path, proc_root, pid, "stat");
  const ssize_t n = read_small_file(path.data(), buffer.data(), buffer.size());
  uint64_t ticks = 0;
  if (n <= 0 || !parse_stat({buffer.data(), static_cast<std::size_t>(n)}, ticks, nullptr))
    return std::nullopt;
  return ticks;
}

ProcIdentity read_proc_identity(uint32_t pid, const std::string& proc_root) {
  ProcIdentity identity;
  std::array<char, 256> path{};
  std::array<char, 4096> buffer{};

  proc_path(path, proc_root, pid, "stat");
  ssize_t n = read_small_file(path.data(), buffer.data(), buffer.size());
  std::string comm;
  if (n <= 0 ||
      !parse_stat({buffer.data(), static_cast<std::size_t>(n)}, identity.start_ticks, &comm)) {
    return identity;  // not visible from this pid namespace (or already gone)
  }
  identity.visible = true;

  proc_path(path, proc_root, pid, "status");
  n = read_small_file(path.data(), buffer.data(), buffer.size());
  if (n > 0) identity.uid = parse_status_uid({buffer.data(), static_cast<std::size_t>(n)});

  proc_path(path, proc_root, pid, "cmdline");
  std::vector<char> cmdline(max_command_bytes);
  n = read_small_file(path.data(), cmdline.data(), cmdline.size());
  std::size_t length = n > 0 ? static_cast<std::size_t>(n) : 0;
  while (length > 0 && cmdline[length - 1] == '\0') --length;
  if (length == 0) {
    identity.command = "[" + comm + "]";
    return identity;
  }
  for (std::size_t i = 0; i < length; ++i) {
    if (cmdline[i] == '\0') cmdline[i] = ' ';
  }
  identity.command.assign(cmdline.data(), length);
  return identity;
}

std::string user_name_of(uint32_t uid) {
  passwd entry{};
  passwd* result = nullptr;
  std::array<char, 4096> buffer{};
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &result) == 0 && result != nullptr &&
      result->pw_name != nullptr) {
    return result->pw_name;
  }
  return std::to_string(uid);
}

ProcCache::ProcCache(int64_t revalidate_ns, std::string proc_root)
    : m_proc_root(std::move(proc_root)), m_revalidate_ns(revalidate_ns) {}

void ProcCache::begin_sample(int64_t now_ns) {
  m_now_ns = now_ns;
  ++m_sample;
}

void ProcCache::read_entry(uint32_t pid, Entry& entry) {
  ++m_full_reads;
  entry.identity = read_proc_identity(pid, m_proc_root);
  entry.user.clear();
  if (entry.identity.uid) {
    auto [it, inserted] = m_user_names.try_emplace(*entry.identity.uid);
    if (inserted) it->second = user_name_of(*entry.identity.uid);
    entry.user = it->second;
  }
  entry.checked_ns = m_now_ns;
}

void ProcCache::resolve(ProcessSample& process) {
  auto [it, inserted] = m_entries.try_emplace(process.pid);
  Entry& entry = it->second;
  if (inserted) {
    read_entry(process.pid, entry);
  } else if (entry.seen_sample != m_sample && m_now_ns - entry.checked_ns >= m_revalidate_ns) {
    // Known pid: cheap check that it is still the same process (pids are reused).
    const std::optional<uint64_t> ticks = read_start_ticks(process.pid, m_proc_root);
    const bool same = ticks ? entry.identity.visible && *ticks == entry.identity.start_ticks
                            : !entry.identity.visible;
    if (same) {
      entry.checked_ns = m_now_ns;
    } else {
      read_entry(process.pid, entry);
    }
  }
  entry.seen_sample = m_sample;
  process.visible = entry.identity.visible;
  process.user = entry.user;
  process.command = entry.identity.command;
}

void ProcCache::end_sample() {
  std::erase_if(m_entries,
                [this](const auto& item) { return item.second.seen_sample != m_sample; });
}

}  // namespace vramscope
