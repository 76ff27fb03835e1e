#include "common/stop_signal.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

namespace ak {

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_exit_on_second{false};
std::atomic<pid_t> g_first_sender{0};
std::atomic<long long> g_first_ms{0};

long long now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Lock-free atomics and async-signal-safe calls only: they are all a handler may touch.
// One sender that signals twice at once is one request: coreutils `timeout` sends its signal to
// the child and then to its own process group, which holds the child. A second signal counts as
// "stop now" only from another sender (a terminal's Ctrl-C comes from the kernel, pid 0) or
// a second or more after the first.
void on_signal(int sig, siginfo_t* info, void*) {
  const pid_t sender = info != nullptr && info->si_code <= 0 ? info->si_pid : 0;
  const long long t = now_ms();
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) {
    g_first_sender.store(sender);
    g_first_ms.store(t);
  }
  if (!g_stop.exchange(true) || !g_exit_on_second.load()) return;
  const bool duplicate = sender != 0 && sender == g_first_sender.load() && t - g_first_ms.load() < 1000;
  if (!duplicate) _exit(128 + sig);
}
}  // namespace

std::atomic<bool>& stop_flag() { return g_stop; }

int stop_signal_number() { return g_signal.load(); }

std::optional<std::chrono::steady_clock::time_point> stop_signal_time() {
  if (g_signal.load() == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(g_first_ms.load()));
}

void exit_on_second_stop_signal() { g_exit_on_second.store(true); }

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace ak
