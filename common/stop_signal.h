// The process-wide stop request: set by SIGINT and SIGTERM once install_stop_signal_handlers()
// has run. Long-running loops (the coordinator's, each worker agent's, a client following a
// campaign) poll it and stop cleanly. One flag per process, because a signal handler can reach no
// object of its own; `main` installs the handlers and passes the flag down, so the loops still take
// it as an argument (tests pass their own).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

namespace ak {

// The flag the handlers set. Thread-safe; never reset.
std::atomic<bool>& stop_flag();
// SIGINT and SIGTERM set stop_flag(); SIGPIPE is ignored (a peer that went away is an error
// return, not a death). Call once, from main, before starting threads.
void install_stop_signal_handlers();
// The signal that set stop_flag() first (SIGINT or SIGTERM), 0 while none came. Thread-safe.
int stop_signal_number();
// When that signal came (steady_clock is CLOCK_MONOTONIC, which the handler reads, to the
// millisecond); nullopt while none came. Thread-safe.
std::optional<std::chrono::steady_clock::time_point> stop_signal_time();
// From now on a second stop signal (the first one set stop_flag(), before or after this call)
// means "stop now": the handler ends the process at once with _exit(128 + signal), without
// running destructors. Children started with SpawnOptions::death_signal die with it. For a
// command whose orderly stop can take seconds (`autokernel run`), so that a user who presses
// Ctrl-C twice is not kept waiting. A sender that signals twice within a second (coreutils
// `timeout` signals its child, then its process group) counts once.
void exit_on_second_stop_signal();

}  // namespace ak
