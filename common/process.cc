#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "common/sigpipe.h"

namespace ak {

namespace {
int decode_wait_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}
}  // namespace

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv, const Options& options) {
  if (argv.empty()) return Status::invalid("spawn needs a program");
  int fds[2] = {-1, -1};
  if (options.capture_stdout && pipe2(fds, O_CLOEXEC) != 0)
    return Status::internal(std::string("pipe: ") + strerror(errno));
  int in[2] = {-1, -1};
  if (options.pipe_stdin && pipe2(in, O_CLOEXEC) != 0) {
    const Status st = Status::internal(std::string("pipe: ") + strerror(errno));
    if (fds[0] >= 0) {
      close(fds[0]);
      close(fds[1]);
    }
    return st;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const Status st = Status::internal(std::string("fork: ") + strerror(errno));
    for (int fd : {fds[0], fds[1], in[0], in[1]})
      if (fd >= 0) close(fd);
    return st;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (options.new_process_group) setpgid(0, 0);
    if (!options.output_path.empty()) {
      const int out = open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (out >= 0) {
        if (!options.capture_stdout) dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
      }
    }
    if (options.capture_stdout) dup2(fds[1], STDOUT_FILENO);
    if (options.pipe_stdin) dup2(in[0], STDIN_FILENO);
    for (const auto& e : options.env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fprintf(stderr, "exec %s failed: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  ChildProcess c;
  c.pid_ = pid;
  if (options.capture_stdout) {
    close(fds[1]);
    c.stdout_fd_ = fds[0];
  }
  if (options.pipe_stdin) {
    close(in[0]);
    c.stdin_fd_ = in[1];
  }
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
    if (stdin_fd_ >= 0) close(stdin_fd_);
    pid_ = o.pid_;
    stdout_fd_ = o.stdout_fd_;
    stdin_fd_ = o.stdin_fd_;
    o.stdin_fd_ = -1;
    buffer_ = std::move(o.buffer_);
    exit_code_ = o.exit_code_;
    o.pid_ = -1;
    o.stdout_fd_ = -1;
    o.exit_code_.reset();
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stdin_fd_ >= 0) close(stdin_fd_);
}

Status ChildProcess::write_line(const std::string& line) {
  if (stdin_fd_ < 0) return Status::invalid("stdin of the child is not a pipe");
  const std::string data = line + "\n";
  SigpipeBlock block;  // a child that has gone is an EPIPE error here, not the end of this process
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(stdin_fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::unavailable(std::string("write to the child: ") + strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok_status();
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  if (exit_code_) return *exit_code_;
  if (!running()) return *exit_code_;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd >= 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{pidfd, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    close(pidfd);
  } else {
    // No pidfd (kernel < 5.3): check every 10 ms until the deadline.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running() && std::chrono::steady_clock::now() < deadline) {
      const timespec ts{0, 10'000'000};
      nanosleep(&ts, nullptr);
    }
  }
  if (running()) return std::nullopt;
  return *exit_code_;
}

int ChildProcess::kill_group() {
  if (pid_ <= 0) return -1;
  if (exit_code_) return *exit_code_;
  if (getpgid(pid_) == pid_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  return wait();
}

bool ChildProcess::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exit_code_ = decode_wait_status(st);
    return false;
  }
  return true;
}

Result<std::optional<std::string>> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  if (stdout_fd_ < 0) return Status::invalid("stdout of the child is not captured");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return std::optional<std::string>(line);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<std::string>();
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::unavailable("child " + std::to_string(pid_) + " closed its stdout (exited?)");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> ChildProcess::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    // A line already read in comes back even when the time is up (read_line looks at it first).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto line = read_line(std::max(left, std::chrono::milliseconds(0)));
    if (!line.ok()) return line.status();
    if (!line->has_value()) break;
    if ((*line)->rfind(prefix, 0) == 0) return (*line)->substr(prefix.size());
  }
  return Status::timed_out("child " + std::to_string(pid_) + " did not print '" + prefix + "' within " +
                           std::to_string(timeout.count()) + " ms");
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, sig);
}

int ChildProcess::wait() {
  if (exit_code_) return *exit_code_;
  if (pid_ <= 0) return -1;
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  exit_code_ = decode_wait_status(st);
  return *exit_code_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_.value_or(-1);
  // A pidfd becomes readable when the child exits, so the grace period is one poll(), not a
  // polling loop; opened before SIGTERM so that the exit cannot be missed.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  ::kill(pid_, SIGTERM);
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + grace;
    int r;
    do {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      r = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    } while (r < 0 && errno == EINTR);
    close(pidfd);
    if (r > 0) return wait();
  } else {
    // No pidfd (kernel before 5.3): check at the end of the grace period only.
    std::this_thread::sleep_for(grace);
    if (!running()) return *exit_code_;
  }
  ::kill(pid_, SIGKILL);
  return wait();
}

int remove_leftovers_of_dead_processes(const std::string& root, const std::string& prefix) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    long pid = 0;
    const auto [end, err] = std::from_chars(first, last, pid);
    if (err != std::errc() || end == first || end == last || *end != '-' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    std::error_code rm;
    if (fs::remove_all(e.path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

int remove_leftovers_of_dead_processes_once(const std::string& root, const std::string& prefix) {
  static std::mutex mu;
  static std::set<std::pair<std::string, std::string>> swept;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!swept.emplace(root, prefix).second) return 0;
  }
  return remove_leftovers_of_dead_processes(root, prefix);
}

std::string self_exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return buf;
}

std::string self_exe_dir() {
  std::string p = self_exe_path();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

}  // namespace ak
