// cli/stop_signals.hpp -- Ctrl-C, SIGTERM, SIGCHLD and SIGPIPE handling for the long-running commands
//
// Handlers only set sig_atomic_t flags; the loops look at them after every sleep. They are
// installed without SA_RESTART so that a signal also cuts a clock_nanosleep short.
#pragma once

#include <csignal>

namespace vramscope::cli {

/// Set by SIGINT / SIGTERM (0 = none); the number of the last one.
extern volatile std::sig_atomic_t g_stop_signal;
/// Did the last SIGINT / SIGTERM come from kill(2) (a person or a supervisor), rather than from
/// the terminal? A terminal's Ctrl-C already reached the whole foreground group, a child included.
extern volatile std::sig_atomic_t g_stop_from_kill;
/// Set by SIGCHLD: a child may have exited.
extern volatile std::sig_atomic_t g_child_changed;

/// Installs flag-setting handlers for SIGINT, SIGTERM and SIGCHLD, and ignores SIGPIPE so that
/// a closed pipe shows up as EPIPE on write (and ends the command quietly).
void install_stop_handlers();

/// Should a loop stop now?
inline bool stop_requested() { return g_stop_signal != 0; }

}  // namespace vramscope::cli
