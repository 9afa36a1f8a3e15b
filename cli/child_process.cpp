// cli/child_process.cpp -- posix_spawnp, default signals in the child, exit-status mapping
#include "child_process.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "stop_signals.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

extern char** environ;

namespace vramscope::cli {

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("no command given after --", ExitUsage);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  // The recorder ignores SIGPIPE and catches SIGINT/SIGTERM/SIGCHLD; an ignored disposition
  // would survive exec, so the child gets every one of them back at its default.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) sigaddset(&defaults, s);
  sigset_t no_mask;
  sigemptyset(&no_mask);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &no_mask);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], nullptr, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    throw Error("cannot run '" + argv[0] + "': " + errno_text(rc), 127);
  }
  return ChildProcess(pid);
}

void ChildProcess::record_status(int wait_status) {
  if (WIFEXITED(wait_status)) {
    m_status = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    m_status = 128 + WTERMSIG(wait_status);
  }
}

bool ChildProcess::poll_exited() {
  if (m_status) return true;
  int wait_status = 0;
  const pid_t rc = waitpid(m_pid, &wait_status, WNOHANG);
  if (rc == m_pid) record_status(wait_status);
  if (rc < 0 && errno == ECHILD) m_status = 127;  // reaped elsewhere: cannot know more
  return m_status.has_value();
}

bool ChildProcess::wait() {
  while (!m_status) {
    int wait_status = 0;
    const pid_t rc = waitpid(m_pid, &wait_status, 0);
    if (rc == m_pid) {
      record_status(wait_status);
    } else if (rc < 0 && errno == EINTR) {
      if (g_stop_signal != 0) return false;
    } else if (rc < 0) {
      m_status = 127;
    }
  }
  return true;
}

void ChildProcess::send_signal(int signal_number) const {
  if (!m_status) kill(m_pid, signal_number);
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_-./=:,+@%") == std::string::npos;
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

}  // namespace vramscope::cli
