// CoordinatorLink: whether a worker has a working connection to its coordinator, and when to say
// that it has none (issue 21, item 6: "a worker that cannot reach its coordinator says so within
// seconds").
//
// The worker protocol has no reply to READY or HEARTBEAT, so silence from the coordinator says
// nothing. The connection's own events do: the agent feeds this class its ZeroMQ socket's monitor
// events (a completed ZMTP handshake, which with CURVE means the coordinator accepted the key; a
// lost connection, which ZMTP heartbeats detect within the socket's heartbeat timeout even when
// the network drops packets silently; a failed connect or handshake, with its reason). It is a
// pure state machine over a clock the caller reads: no I/O, no threads.
//
// Thread safety: none; the agent's main thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ak {

class CoordinatorLink {
 public:
  struct Options {
    int64_t warn_after_ms = 3'000;  // without a connection this long: the first warning [ms]
    int64_t repeat_ms = 15'000;     // then again at this interval while it lasts [ms]
  };

  // Starts down (nothing connected yet) at now_ms.
  CoordinatorLink(std::string endpoint, Options options, int64_t now_ms);

  // The handshake with the coordinator completed.
  void connected(int64_t now_ms);
  // The connection ended (or a connect or handshake failed); `why` is kept for the warning. A
  // failure while already down only updates the reason, except that a handshake's reason (a
  // refused key: `handshake`) is not replaced by the disconnect that follows it.
  void failed(int64_t now_ms, std::string why, bool handshake = false);

  bool up() const { return up_; }

  // The warning due at now_ms, if any: the first once the link has been down warn_after_ms, then
  // one per repeat_ms while it stays down. It names the endpoint, how long, and the last reason.
  std::optional<std::string> due_warning(int64_t now_ms);
  // Once after connected() that followed a warning: the line saying the link is back.
  std::optional<std::string> take_recovery();
  // When due_warning() may next have something to say (for the caller's poll timeout); nothing
  // while up.
  std::optional<int64_t> next_warning_ms() const;

 private:
  std::string endpoint_;
  Options options_;
  bool up_ = false;
  int64_t down_since_ms_;
  int64_t next_warning_ms_;
  std::string why_ = "no connection yet";
  bool why_is_handshake_ = false;  // why_ came from a failed handshake since the last connection
  bool warned_ = false;
  std::optional<std::string> recovery_;
};

}  // namespace ak
