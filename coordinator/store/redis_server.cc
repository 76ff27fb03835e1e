#include "coordinator/store/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "coordinator/store/redis_store.h"

namespace ak {

namespace fs = std::filesystem;

namespace {

using SteadyClock = std::chrono::steady_clock;

// One readiness probe: connect to the socket and PING. True on PONG; a server that is still
// replaying its AOF answers -LOADING, which is not ready.
bool answers_ping(const std::string& socket_path) {
  SigpipeBlock no_sigpipe;
  const timeval tv{0, 200'000};
  redisContext* c = redisConnectUnixWithTimeout(socket_path.c_str(), tv);
  if (!c) return false;
  bool ok = false;
  if (!c->err && redisSetTimeout(c, tv) == REDIS_OK) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG";
    if (r) freeReplyObject(r);
  }
  redisFree(c);
  return ok;
}

std::string describe_exit(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return std::string("was killed by signal ") + strsignal(WTERMSIG(wstatus));
  return "stopped";
}

}  // namespace

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {}

RedisServer::~RedisServer() { (void)stop(); }

Result<std::unique_ptr<RedisServer>> RedisServer::start(RedisServerOptions options) {
  if (options.data_dir.empty())
    return Status::invalid("RedisServer needs a data directory; set RedisServerOptions::data_dir");
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) return Status::invalid("cannot create Redis data directory " + options.data_dir + ": " + ec.message());
  options.data_dir = fs::absolute(options.data_dir).lexically_normal().string();

  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options)));
  server->executable_path_ = find_executable(server->options_.executable);
  if (server->executable_path_.empty())
    return Status::not_found("cannot find '" + server->options_.executable +
                             "' (looked on PATH); install redis-server (Debian: apt-get install redis-server) "
                             "or pass the path to its binary");
  server->socket_path_ = (fs::path(server->options_.data_dir) / "redis.sock").string();
  server->log_path_ = (fs::path(server->options_.data_dir) / "redis.log").string();
  server->pid_path_ = (fs::path(server->options_.data_dir) / "redis.pid").string();
  server->url_ = "unix://" + server->socket_path_;
  if (server->socket_path_.size() >= sizeof(sockaddr_un::sun_path))
    return Status::invalid("unix socket path " + server->socket_path_ + " is " +
                           std::to_string(server->socket_path_.size()) + " bytes; the limit is " +
                           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + "; use a shorter data directory");
  if (auto s = server->launch(); !s.ok()) return s;
  return server;
}

namespace {

// Whether pid is a live (not zombie) redis-server.
bool live_redis_server(pid_t pid) {
  const auto s = proc_stat(pid);
  return s && s->comm == "redis-server" && s->state != 'Z';
}

}  // namespace

// A redis-server left by an earlier owner of this data directory may still be on its way out: its
// owner was killed (a `run` past its stop grace kills its coordinator), and it exits on the SIGTERM
// of its death signal. Until it has, it holds the AOF and, leaving, removes the socket file, the
// new server's included. So wait for it (its pid file names it; Redis removes that file when it
// exits), at most stop_timeout, and refuse to share the directory with one that stays.
Status RedisServer::wait_for_previous_server() {
  std::ifstream in(pid_path_);
  long pid = 0;
  if (!in || !(in >> pid) || pid <= 1) return {};
  if (!live_redis_server(pid_t(pid))) return {};  // gone, or the pid is another program's now
  if (wait_for_exit(pid_t(pid), SteadyClock::now() + options_.stop_timeout)) return {};
  // Its pid may have gone to another program between the check above and the wait (no pidfd, or
  // one opened on the newcomer): only a redis-server that stays is refused.
  if (!live_redis_server(pid_t(pid))) return {};
  return Status::unavailable("a redis-server (pid " + std::to_string(pid) + ") still runs on " + options_.data_dir +
                             " after " + std::to_string(options_.stop_timeout.count()) +
                             " ms; stop it, or give this coordinator another data directory");
}

Status RedisServer::launch() {
  if (Status s = wait_for_previous_server(); !s.ok()) return s;
  unlink(socket_path_.c_str());  // a socket left by a killed server; Redis would replace it too
  const std::vector<std::string> args = {
      executable_path_,
      "--port",
      "0",
      "--unixsocket",
      socket_path_,
      "--unixsocketperm",
      "700",
      "--dir",
      options_.data_dir,
      "--logfile",
      log_path_,
      "--pidfile",
      pid_path_,
      "--daemonize",
      "no",
      "--appendonly",
      "yes",
      "--appendfsync",
      "always",
      "--save",
      "",
  };
  SpawnOptions o;
  o.null_stdin = true;
  // Output before Redis opens its log file (bad option, bad directory) goes to the same file.
  o.output_path = log_path_;
  o.append_output = true;
  o.output_file_mode = 0600;
  o.new_process_group = true;  // a Ctrl-C meant for the parent must not stop Redis before the parent is done
  o.death_signal = SIGTERM;    // Redis fsyncs its AOF on the way out
  auto child = ChildProcess::spawn(args, o);
  if (!child.ok())
    return Status::unavailable("cannot start redis-server in " + options_.data_dir + ": " + child.status().message());
  child_ = std::move(*child);
  return wait_ready();
}

Status RedisServer::wait_ready() {
  const auto deadline = SteadyClock::now() + options_.start_timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (!child_.running()) {
      const int wstatus = child_.wait_status().value_or(0);
      child_ = ChildProcess();
      return Status::unavailable("redis-server in " + options_.data_dir + " " + describe_exit(wstatus) +
                                 " before answering PING; its log " + log_path_ + " ends with:\n" + log_tail());
    }
    if (answers_ping(socket_path_)) return {};
    if (SteadyClock::now() >= deadline) {
      kill9();
      return Status::unavailable("redis-server in " + options_.data_dir + " did not answer PING within " +
                                 std::to_string(options_.start_timeout.count()) + " ms; its log " + log_path_ +
                                 " ends with:\n" + log_tail());
    }
    // Redis says nothing when it is ready; answering PING is the handshake. Between probes an exit
    // ends the wait at once.
    (void)child_.wait_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

Status RedisServer::stop() {
  if (!running()) return {};
  child_.signal(SIGTERM);
  if (!child_.wait_for(options_.stop_timeout)) {
    kill9();
    return Status::timed_out("redis-server in " + options_.data_dir + " ignored SIGTERM for " +
                             std::to_string(options_.stop_timeout.count()) + " ms and was killed");
  }
  const int wstatus = child_.wait_status().value_or(0);
  child_ = ChildProcess();
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return {};
  return Status::internal("redis-server in " + options_.data_dir + " " + describe_exit(wstatus) +
                          " on SIGTERM; its log ends with:\n" + log_tail());
}

void RedisServer::kill9() {
  if (!running()) return;
  child_.signal(SIGKILL);
  child_.wait();
  child_ = ChildProcess();
}

Status RedisServer::restart() {
  if (auto s = stop(); !s.ok()) return s;
  return launch();
}

std::string RedisServer::log_tail() const {
  std::ifstream in(log_path_);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > 10) lines.erase(lines.begin());
  }
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out.empty() ? "  (empty)\n" : out;
}

}  // namespace ak
