#include "common/stop_signal.h"

#include <signal.h>
#include <unistd.h>

namespace ak {

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_exit_on_second{false};
// Lock-free atomics only: they are all a handler may touch.
void on_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  if (g_stop.exchange(true) && g_exit_on_second.load()) _exit(128 + sig);
}
}  // namespace

std::atomic<bool>& stop_flag() { return g_stop; }

int stop_signal_number() { return g_signal.load(); }

void exit_on_second_stop_signal() { g_exit_on_second.store(true); }

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace ak
