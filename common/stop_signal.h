// The process-wide stop request: set by SIGINT and SIGTERM once install_stop_signal_handlers()
// has run. Long-running loops (the coordinator's, each worker agent's, a client following a
// campaign) poll it and stop cleanly. One flag per process, because a signal handler can reach no
// object of its own; `main` installs the handlers and passes the flag down, so the loops still take
// it as an argument (tests pass their own).
#pragma once

#include <atomic>

namespace ak {

// The flag the handlers set. Thread-safe; never reset.
std::atomic<bool>& stop_flag();
// SIGINT and SIGTERM set stop_flag(); SIGPIPE is ignored (a peer that went away is an error
// return, not a death). Call once, from main, before starting threads.
void install_stop_signal_handlers();

}  // namespace ak
