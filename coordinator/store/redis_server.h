// RedisServer: a private redis-server child process, for tests and for `autokernel run` when no
// Redis URL is given.
//
// The server listens only on a unix socket in its data directory (`--port 0`, so no TCP port to
// collide with), keeps an append-only file fsynced on every write (`--appendonly yes
// --appendfsync always`, no RDB snapshots), and so survives kill9() + restart() with every
// acknowledged write: the AOF is replayed on start. start() returns once the server answers PING
// (a readiness handshake polled up to a deadline, not a fixed sleep), so url() is usable at once.
//
// Ownership: the RedisServer owns the child; its destructor stops it (SIGTERM, then SIGKILL after
// stop_timeout). The child also gets SIGTERM if the thread that started it dies (SpawnOptions::death_signal),
// so start it from a thread that lives as long as the server (normally the main thread). The data
// directory is the caller's and is left in place.
//
// Not thread-safe: one thread starts, stops and restarts a server; url() may be read from any
// thread while the server runs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/process.h"
#include "common/status.h"

namespace ak {

struct RedisServerOptions {
  std::string data_dir;                             // required; created if missing; holds the socket, AOF, log
  std::string executable = "redis-server";          // a path, or a name looked up on PATH
  std::chrono::milliseconds start_timeout{10'000};  // until the first PONG (AOF replay included)
  std::chrono::milliseconds stop_timeout{10'000};   // SIGTERM grace before SIGKILL
};

class RedisServer {
 public:
  // Starts redis-server and waits until it answers PING. Fails with kNotFound when the executable
  // is missing, kInvalidArgument when the socket path is too long for a unix socket, kUnavailable
  // when the server exits or does not answer within start_timeout (the message quotes the tail
  // of its log).
  static Result<std::unique_ptr<RedisServer>> start(RedisServerOptions options);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // "unix:///<data_dir>/redis.sock", for RedisStore::connect.
  const std::string& url() const { return url_; }
  const std::string& socket_path() const { return socket_path_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return child_.pid(); }  // -1 when not running
  bool running() const { return child_.pid() > 0; }

  // SIGTERM and wait for exit (Redis fsyncs the AOF on the way out); SIGKILL after stop_timeout.
  // Ok if the server was not running.
  Status stop();
  // SIGKILL and reap: a crash, for fault tests. No-op if not running.
  void kill9();
  // Starts the server again on the same data directory (stopping it first if it runs) and waits
  // for PING; the AOF brings back what was written before.
  Status restart();

 private:
  explicit RedisServer(RedisServerOptions options);
  Status launch();
  Status wait_ready();
  Status wait_for_previous_server();
  std::string log_tail() const;

  RedisServerOptions options_;
  std::string executable_path_;
  std::string socket_path_;
  std::string log_path_;
  std::string pid_path_;  // Redis writes its pid there and removes the file when it exits
  std::string url_;
  ChildProcess child_;  // pid -1 once stopped or killed
};

}  // namespace ak
