// bench/bench_top_cpu.cpp -- CPU time a command uses per second of wall time (for `top`)
//
// usage: bench_top_cpu SECONDS OUTPUT_FILE -- COMMAND [ARGS...]
// Runs COMMAND on the current terminal for SECONDS, stops it with SIGTERM and writes
// "user_s sys_s wall_s cpu_percent_of_one_core" from wait4()'s rusage to OUTPUT_FILE. A launcher
// rather than a google-benchmark case: the figure wanted is the whole process's cost, terminal
// I/O included, which only the parent of the real process can read exactly.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "vramscope/clock.hpp"

namespace {

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

double monotonic_s() { return static_cast<double>(vramscope::monotonic_ns()) / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "usage: %s SECONDS OUTPUT_FILE -- COMMAND [ARGS...]\n", argv[0]);
    return 2;
  }
  const double duration_s = std::atof(argv[1]);
  if (duration_s <= 0) {
    std::fprintf(stderr, "bench_top_cpu: SECONDS must be positive\n");
    return 2;
  }
  const double start_s = monotonic_s();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (child == 0) {
    execvp(argv[4], argv + 4);
    std::perror("execvp");
    _exit(127);
  }
  timespec wait_for{
      static_cast<time_t>(duration_s),
      static_cast<long>((duration_s - static_cast<double>(static_cast<time_t>(duration_s))) * 1e9)};
  while (nanosleep(&wait_for, &wait_for) != 0 && errno == EINTR) {
  }
  kill(child, SIGTERM);
  int status = 0;
  rusage usage{};
  while (wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  const double wall_s = monotonic_s() - start_s;
  const double cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  FILE* out = std::fopen(argv[2], "w");
  if (out == nullptr) {
    std::perror(argv[2]);
    return 1;
  }
  std::fprintf(out, "%.4f %.4f %.3f %.3f\n", seconds(usage.ru_utime), seconds(usage.ru_stime),
               wall_s, 100.0 * cpu_s / wall_s);
  std::fclose(out);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
