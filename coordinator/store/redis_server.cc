#include "coordinator/store/redis_server.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "coordinator/store/redis_store.h"

namespace ak {

namespace fs = std::filesystem;

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Waits for `pid` to exit for at most `timeout`; true when it was reaped. Polls because there is
// no portable way to wait on a child with a deadline.
bool reap_within(pid_t pid, std::chrono::milliseconds timeout, int* wstatus) {
  const auto deadline = SteadyClock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    pid_t r = waitpid(pid, wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

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
  if (options.data_dir.empty()) return Status::invalid("RedisServer needs a data directory; set RedisServerOptions::data_dir");
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
  server->url_ = "unix://" + server->socket_path_;
  if (server->socket_path_.size() >= sizeof(sockaddr_un::sun_path))
    return Status::invalid("unix socket path " + server->socket_path_ + " is " +
                           std::to_string(server->socket_path_.size()) + " bytes; the limit is " +
                           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + "; use a shorter data directory");
  if (auto s = server->launch(); !s.ok()) return s;
  return server;
}

Status RedisServer::launch() {
  unlink(socket_path_.c_str());  // a socket left by a killed server; Redis would replace it too
  const std::vector<std::string> args = {
      executable_path_,
      "--port", "0",
      "--unixsocket", socket_path_,
      "--unixsocketperm", "700",
      "--dir", options_.data_dir,
      "--logfile", log_path_,
      "--daemonize", "no",
      "--appendonly", "yes",
      "--appendfsync", "always",
      "--save", "",
  };
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // Output before Redis opens its log file (bad option, bad directory) goes to the same file.
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (log_fd < 0 || null_fd < 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    const std::string e = strerror(errno);
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return Status::internal("cannot prepare to start redis-server in " + options_.data_dir + ": " + e);
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);  // a Ctrl-C meant for the parent must not stop Redis before the parent is done
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // no inherited sockets of the parent
    execv(argv[0], argv.data());
    const int e = errno;
    (void)!write(err_pipe[1], &e, sizeof e);
    _exit(127);
  }
  const int fork_errno = errno;
  close(err_pipe[1]);
  close(log_fd);
  close(null_fd);
  if (pid < 0) {
    close(err_pipe[0]);
    return Status::internal(std::string("cannot fork to start redis-server: ") + strerror(fork_errno));
  }
  int exec_errno = 0;
  ssize_t n;
  do n = read(err_pipe[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n > 0) {
    waitpid(pid, nullptr, 0);
    return Status::unavailable("cannot execute " + executable_path_ + ": " + strerror(exec_errno));
  }
  pid_ = pid;
  return wait_ready();
}

Status RedisServer::wait_ready() {
  const auto deadline = SteadyClock::now() + options_.start_timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
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
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

Status RedisServer::stop() {
  if (pid_ <= 0) return {};
  int wstatus = 0;
  kill(pid_, SIGTERM);
  if (!reap_within(pid_, options_.stop_timeout, &wstatus)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &wstatus, 0);
    pid_ = -1;
    return Status::timed_out("redis-server in " + options_.data_dir + " ignored SIGTERM for " +
                             std::to_string(options_.stop_timeout.count()) + " ms and was killed");
  }
  pid_ = -1;
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return {};
  return Status::internal("redis-server in " + options_.data_dir + " " + describe_exit(wstatus) +
                          " on SIGTERM; its log ends with:\n" + log_tail());
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
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
