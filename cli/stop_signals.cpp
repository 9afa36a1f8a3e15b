// cli/stop_signals.cpp -- async-signal-safe handlers that only record what arrived
#include "stop_signals.hpp"

#include <signal.h>

namespace vramscope::cli {

volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_stop_from_kill = 0;
volatile std::sig_atomic_t g_child_changed = 0;

namespace {

void on_stop(int signal_number, siginfo_t* info, void* /*context*/) {
  g_stop_from_kill = (info != nullptr && (info->si_code == SI_USER || info->si_code == SI_QUEUE));
  g_stop_signal = signal_number;
}

void on_child(int /*signal_number*/, siginfo_t* /*info*/, void* /*context*/) {
  g_child_changed = 1;
}

void install(int signal_number, void (*handler)(int, siginfo_t*, void*)) {
  struct sigaction action {};
  action.sa_sigaction = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO;  // no SA_RESTART: a signal must interrupt the sleep
  sigaction(signal_number, &action, nullptr);
}

}  // namespace

void install_stop_handlers() {
  install(SIGINT, on_stop);
  install(SIGTERM, on_stop);
  install(SIGCHLD, on_child);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace vramscope::cli
