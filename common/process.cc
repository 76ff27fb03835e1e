#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "common/sigpipe.h"

extern char** environ;

namespace ak {

namespace {

int decode_wait_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

// The steps of SpawnOptions' "In the child" that can fail and are reported to the parent.
enum class ChildStep : int { kStdio = 1, kWorkingDir, kConfinement, kExec };

const char* describe(ChildStep step) {
  switch (step) {
    case ChildStep::kStdio:
      return "set up stdin, stdout and stderr";
    case ChildStep::kWorkingDir:
      return "change to the working directory";
    case ChildStep::kConfinement:
      return "confine the child";
    case ChildStep::kExec:
      return "execute";  // reported with the program's path instead
  }
  return "start";
}

// What a child that failed before exec writes to the error pipe.
struct ChildFailure {
  ChildStep step;
  int err;
};

// In the child: reports the failed step to the parent and exits.
[[noreturn]] void fail_in_child(int err_fd, ChildStep step, int err) {
  const ChildFailure f{step, err};
  (void)!write(err_fd, &f, sizeof f);
  _exit(127);
}

// In the child: makes `fd` the descriptor `target`, open across exec.
bool move_fd(int fd, int target) {
  if (fd != target) return dup2(fd, target) == target;  // dup2 clears FD_CLOEXEC on the copy
  const int flags = fcntl(fd, F_GETFD);
  return flags >= 0 && fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) == 0;
}

// In the child, step 7: applies `c` and returns 0, or the errno of what failed. Confinement has no
// fields yet; namespaces, the uid, the seccomp filter and cgroup membership go here, in that
// order (seccomp last: it may forbid the calls before it).
int apply_confinement(const Confinement& c) {
  (void)c;
  return 0;
}

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The child's environment (SpawnOptions: inherit_env, keep_env, env), built before fork.
std::vector<std::string> child_environment(const SpawnOptions& o) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    if (o.inherit_env || std::find(o.keep_env.begin(), o.keep_env.end(), name_of(entry)) != o.keep_env.end())
      out.push_back(std::move(entry));
  }
  for (const std::string& e : o.env) {
    const std::string name = name_of(e);
    auto it = std::find_if(out.begin(), out.end(), [&](const std::string& x) { return name_of(x) == name; });
    if (it != out.end()) {
      *it = e;
    } else {
      out.push_back(e);
    }
  }
  return out;
}

// A descriptor of the parent, closed when it goes out of scope unless released.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  int release() { return std::exchange(fd, -1); }
};

bool make_pipe(Fd& read_end, Fd& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  read_end.fd = p[0];
  write_end.fd = p[1];
  return true;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Status::invalid("spawn needs a program");
  const SpawnOptions& o = options;
  auto failed = [&](const std::string& what) {
    return Status::unavailable("cannot " + what + " for '" + argv[0] + "': " + strerror(errno));
  };
  Fd out_read, out_write, in_read, in_write, null_in, file, err_read, err_write;
  if (o.capture_stdout && !make_pipe(out_read, out_write)) return failed("make a stdout pipe");
  if (o.pipe_stdin) {
    if (!make_pipe(in_read, in_write)) return failed("make a stdin pipe");
  } else if (o.null_stdin) {
    null_in.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_in.fd < 0) return failed("open /dev/null");
  }
  if (!o.output_path.empty()) {
    file.fd = open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (o.append_output ? O_APPEND : O_TRUNC),
                   o.output_file_mode);
    if (file.fd < 0) return failed("open the output file " + o.output_path);
  }
  if (!make_pipe(err_read, err_write)) return failed("make a pipe");

  // Everything the child needs is built here: between fork and exec it may only make
  // async-signal-safe calls (this process has other threads).
  const bool search = argv[0].find('/') == std::string::npos;
  const std::string program = search ? find_executable(argv[0]) : argv[0];
  if (program.empty())
    return Status::unavailable("cannot execute '" + argv[0] + "': not found on PATH (" +
                               (getenv("PATH") ? getenv("PATH") : "unset") + ")");
  std::vector<std::string> env = child_environment(o);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // A script without a "#!" line runs under /bin/sh, as execvp does it.
  std::vector<char*> sh_args = {const_cast<char*>("sh"), const_cast<char*>(program.c_str())};
  sh_args.insert(sh_args.end(), args.begin() + 1, args.end());
  const pid_t parent = getpid();

  // All signals blocked across fork, so no handler of this process runs in the child before
  // step 1 resets them.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t pid = fork();
  if (pid == 0) {
    const int err_fd = err_write.fd;
    // 1. signals
    if (o.reset_signals) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // KILL, STOP and libc's own refuse
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
    } else {
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    }
    // 2. death signal
    if (o.death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, o.death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before the signal was armed
    }
    // 3. process group
    if (o.new_process_group) setpgid(0, 0);
    // 4. stdio
    bool stdio_ok = true;
    if (in_read.fd >= 0) stdio_ok = move_fd(in_read.fd, STDIN_FILENO);
    if (null_in.fd >= 0) stdio_ok = stdio_ok && move_fd(null_in.fd, STDIN_FILENO);
    if (out_write.fd >= 0) {
      stdio_ok = stdio_ok && move_fd(out_write.fd, STDOUT_FILENO);
    } else if (file.fd >= 0) {
      stdio_ok = stdio_ok && move_fd(file.fd, STDOUT_FILENO);
    }
    if (file.fd >= 0) stdio_ok = stdio_ok && move_fd(file.fd, STDERR_FILENO);
    if (!stdio_ok) fail_in_child(err_fd, ChildStep::kStdio, errno);
    // 5. working directory
    if (!o.working_dir.empty() && chdir(o.working_dir.c_str()) != 0)
      fail_in_child(err_fd, ChildStep::kWorkingDir, errno);
    // 6. descriptors (kernels before 5.11 refuse; what lacks O_CLOEXEC then stays open)
    if (o.close_other_fds) close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    // 7. confinement
    if (const int e = apply_confinement(o.confinement); e != 0) fail_in_child(err_fd, ChildStep::kConfinement, e);
    // 8. exec
    execve(program.c_str(), args.data(), envp.data());
    if (errno == ENOEXEC) {
      execve("/bin/sh", sh_args.data(), envp.data());
      errno = ENOEXEC;
    }
    fail_in_child(err_fd, ChildStep::kExec, errno);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    errno = fork_errno;
    return failed("fork");
  }
  // The write end closes in the child at exec: EOF here means the exec succeeded.
  err_write.reset();
  ChildFailure failure{};
  ssize_t n;
  do n = read(err_read.fd, &failure, sizeof failure);
  while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof failure)) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
    if (failure.step == ChildStep::kExec)
      return Status::unavailable("cannot execute '" + program + "': " + strerror(failure.err));
    return Status::unavailable(std::string("cannot ") + describe(failure.step) +
                               (failure.step == ChildStep::kWorkingDir ? " " + o.working_dir : "") + " for '" +
                               argv[0] + "': " + strerror(failure.err));
  }
  ChildProcess c;
  c.pid_ = pid;
  c.pidfd_ = open_pidfd(pid);
  c.group_ = o.new_process_group;
  c.stdout_fd_ = out_read.release();
  c.stdin_fd_ = in_write.release();
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

void ChildProcess::release() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  for (int* fd : {&stdout_fd_, &stdin_fd_, &pidfd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::exchange(o.pidfd_, -1);
    group_ = std::exchange(o.group_, false);
    stdout_fd_ = std::exchange(o.stdout_fd_, -1);
    stdin_fd_ = std::exchange(o.stdin_fd_, -1);
    buffer_ = std::move(o.buffer_);
    o.buffer_.clear();
    exit_code_ = std::exchange(o.exit_code_, std::nullopt);
    wait_status_ = std::exchange(o.wait_status_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() { release(); }

void ChildProcess::close_stdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
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
  return wait_until(std::chrono::steady_clock::now() + timeout);
}

std::optional<int> ChildProcess::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (pid_ <= 0) return -1;
  if (!running()) return *exit_code_;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (pidfd_ >= 0) {
      // Rounded up, so that poll() never returns just before the deadline.
      pollfd p{pidfd_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    // No pidfd (kernel before 5.3): check every 10 ms until the deadline.
    if (!running()) break;
    const timespec ts{0, 10'000'000};
    nanosleep(&ts, nullptr);
  }
  if (running()) return std::nullopt;
  return *exit_code_;
}

int ChildProcess::kill_group() {
  if (pid_ <= 0) return -1;
  // Once the child is reaped its group may still hold what it started: that goes too.
  if (group_ || (!exit_code_ && getpgid(pid_) == pid_)) kill_process_group(pid_, SIGKILL);
  if (exit_code_) return *exit_code_;
  ::kill(pid_, SIGKILL);
  return wait();
}

bool ChildProcess::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    wait_status_ = st;
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
  wait_status_ = st;
  exit_code_ = decode_wait_status(st);
  return *exit_code_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_.value_or(-1);
  ::kill(pid_, SIGTERM);
  if (auto code = wait_for(grace)) return *code;
  if (group_) kill_process_group(pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  return wait();
}

bool kill_process_group(pid_t pgid, int sig) {
  if (pgid <= 1) return false;
  return ::kill(-pgid, sig) == 0;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    std::error_code ec;
    if (access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate, ec)) return candidate;
  }
  return "";
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
